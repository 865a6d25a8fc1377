#!/usr/bin/env python3
"""`lab report --json` against a bare Python `json.load` of the same document, in one run.

Usage (from the repository root, after `cargo build --release --bin lab`):

    python3 scripts/bench_report_json.py [--lab target/release/lab] [--rounds 7]

Writes a measurement document of 100,000 warm-forward repetitions (the most `lab measure`
writes, `--repeats 100000`), built from examples/h200/rust-small-float32.json with the times
varied row by row, into a temporary folder; then alternates the two commands, each in its own
process, output to /dev/null:

    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' DOC
    lab report --json DOC

and prints, for each, the median over the rounds of the wall time and of the CPU time
(user + system, from the children's resource usage), and lab's share of Python's.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def document(path):
    with open("examples/h200/rust-small-float32.json", encoding="utf-8") as handle:
        doc = json.load(handle)
    warm = [r for r in doc["phases"] if r["phase"] == "warm_forward"][0]
    rows = [r for r in doc["phases"] if r["phase"] != "warm_forward"]
    for i in range(100_000):
        row = dict(warm)
        row["repetition"] = i + 1
        row["wall_seconds"] = round(warm["wall_seconds"] * (1 + (i % 997) / 1e4), 9)
        row["gpu_seconds"] = warm["gpu_seconds"] * (1 + (i % 991) / 1e4)
        rows.append(row)
    doc["phases"] = rows
    doc["configuration"]["repeats"] = 100_000
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(doc, indent=2) + "\n")


def timed(command):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run(command, stdout=sink, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default=os.path.join("target", "release", "lab"))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "repeats-100000.json")
        document(path)
        size = os.path.getsize(path)
        commands = {
            "python json.load": [sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1]))", path],
            "lab report --json": [args.lab, "report", "--json", path],
        }
        results = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, command in commands.items():
                results[name].append(timed(command))
    print(f"document: 100000 warm_forward rows, {size} bytes; {args.rounds} rounds, medians")
    medians = {}
    for name, samples in results.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        medians[name] = (wall, cpu)
        print(f"  {name:<18}  wall {wall:.3f} s  cpu {cpu:.3f} s")
    (pw, pc), (lw, lc) = medians["python json.load"], medians["lab report --json"]
    print(f"  lab / python: wall {lw / pw:.2f}, cpu {lc / pc:.2f}")


if __name__ == "__main__":
    sys.exit(main())
