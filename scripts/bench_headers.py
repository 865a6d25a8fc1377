#!/usr/bin/env python3
"""Safetensors headers at scale: `lab plan` against hf-mem (its own code, local transport)
and a plain json+struct script, in one run, on the folders scripts/gen_headers.py writes.

Usage (from the repository root, after `cargo build --release --bin lab` and
`python3 -m venv target/hf-mem-venv && target/hf-mem-venv/bin/pip install hf-mem==0.5.6`):

    python3 scripts/bench_headers.py [--rounds 5] [--dir /tmp/lab-headers]

Writes the two folders if they are missing (`deepseek`: 163 shards, 91,990 tensors;
`million`: one header of 1,000,000 tensors), then for each folder runs the peers in turn,
round after round, each in its own process, output to /dev/null:

    target/release/lab plan --model FOLDER
    python3 scripts/headers_plain.py FOLDER
    target/hf-mem-venv/bin/python scripts/hf_mem_local.py FOLDER

and prints for each the median wall time, CPU time (user + system) and peak resident
memory of the process (`wait4`), the spread (min-max wall), and lab's share of each peer.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def timed(command):
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen(command, stdout=sink)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{' '.join(command)}: exit status {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default="/tmp/lab-headers")
    parser.add_argument("--lab", default="target/release/lab")
    parser.add_argument("--hf-mem-python", default="target/hf-mem-venv/bin/python")
    args = parser.parse_args()
    for kind in ("deepseek", "million"):
        folder = os.path.join(args.dir, kind)
        if not os.path.isdir(folder):
            subprocess.run([sys.executable, "scripts/gen_headers.py", kind, folder], check=True)
        peers = {
            "lab plan": [args.lab, "plan", "--model", folder],
            "plain python": [sys.executable, "scripts/headers_plain.py", folder],
            "hf-mem": [args.hf_mem_python, "scripts/hf_mem_local.py", folder],
        }
        runs = {name: [] for name in peers}
        for _ in range(args.rounds):
            for name, command in peers.items():
                runs[name].append(timed(command))
        print(f"{kind}: {folder}, {args.rounds} rounds, medians (wall min-max)")
        med = {}
        for name, samples in runs.items():
            walls = [s[0] for s in samples]
            med[name] = [statistics.median(s[i] for s in samples) for i in range(3)]
            wall, cpu, rss = med[name]
            print(f"  {name:<13} wall {wall:7.3f} s ({min(walls):.3f}-{max(walls):.3f})"
                  f"  cpu {cpu:7.3f} s  peak {rss / 2**20:7.1f} MiB")
        for peer in ("plain python", "hf-mem"):
            print(f"  lab / {peer}: wall {med['lab plan'][0] / med[peer][0]:.3f},"
                  f" cpu {med['lab plan'][1] / med[peer][1]:.3f},"
                  f" memory {med['lab plan'][2] / med[peer][2]:.3f}")


if __name__ == "__main__":
    main()
