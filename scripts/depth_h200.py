#!/usr/bin/env python3
"""Measurement-depth runs on the H200 machines (see BENCHMARKS.md, "Graph floor", "Several
GPUs" and "Sweep speed"): made for few calls of the GPU device tool.

Steps (``--steps``, comma-separated, in this order):

* ``graph``: the small (1x16x64, warm-up 1, repeats 2) and large (2x128x1024, warm-up 3,
  repeats 5) configurations in float32, float16 and bfloat16, with ``--graph-replays
  REPLAYS``, once with ``lab measure`` and once with ``mesure_memoire.py measure``: the
  documents of examples/h200/graph/; checks that the graph counters agree between the twins;
* ``ratio``: the small configurations again, PROCESSES fresh processes per implementation with
  ``--repeats 50``: Rust / Python warm-forward wall (medians over all warm rows);
* ``profile``: where a sweep point's time goes (process start and CUDA initialisation, a tiny
  point, a large fitted point, an out-of-memory point);
* ``sweep``: ``lab sweep --vary batch`` at width 4096, context 2048, float32 on cuda:0 with the
  previous search (``--lab-before``) and this one (and, with ``--sweep-devices``, on several
  GPUs), timed from start to summary;
* ``fleet``: ``lab environment --device all`` and ``lab measure --device all`` (small float32).

Everything lands under OUT/depth/ and is packed into OUT/depth.tar.gz (the device tool brings
back at most eight files); a summary goes to OUT/depth-summary.json and the log to
OUT/depth-log.txt. Standard library only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time

CONFIGS = {
    "small": {"batch": 1, "context": 16, "width": 64, "warmup": 1, "repeats": 2},
    "large": {"batch": 2, "context": 128, "width": 1024, "warmup": 3, "repeats": 5},
}
DTYPES = ("float32", "float16", "bfloat16")
LOG = []


def log(line=""):
    """Prints and keeps a line for the log."""
    print(line, flush=True)
    LOG.append(line)


def timed(command, timeout=600):
    """Runs a command; returns (completed process, seconds from start to exit)."""
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    return done, time.perf_counter() - began


def flags(config, dtype, repeats, output, device="cuda:0"):
    """The measurement flags of one run."""
    return [
        "--device", device, "--batch", str(config["batch"]), "--context", str(config["context"]),
        "--width", str(config["width"]), "--dtype", dtype, "--warmup", str(config["warmup"]),
        "--repeats", str(repeats), "--output", output,
    ]


def run_one(args, implementation, config, dtype, repeats, output, graph=None):
    """One measurement process; returns (document or None, seconds)."""
    extra = ["--graph-replays", str(graph)] if graph else []
    if implementation == "rust":
        command = [args.lab, "measure", *flags(config, dtype, repeats, output), *extra]
    else:
        command = [args.python, args.script, "measure", *flags(config, dtype, repeats, output), *extra]
    done, seconds = timed(command)
    if done.returncode != 0:
        log(f"FAILED ({done.returncode}) {' '.join(command)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return None, seconds
    if implementation == "rust" and graph:
        log(done.stdout.strip().splitlines()[-5] if done.stdout.strip() else "")
    with open(output, encoding="utf-8") as stream:
        return json.load(stream), seconds


def step_graph(args, out, summary):
    """The twelve graph documents and the twins' agreement."""
    folder = os.path.join(out, "graph")
    os.makedirs(folder, exist_ok=True)
    rows = {}
    for name, config in CONFIGS.items():
        for dtype in DTYPES:
            docs = {}
            for implementation in ("rust", "python"):
                path = os.path.join(folder, f"{implementation}-{name}-{dtype}.json")
                docs[implementation], seconds = run_one(
                    args, implementation, config, dtype, config["repeats"], path, graph=args.replays
                )
            if not all(docs.values()):
                continue
            rust, python = docs["rust"]["graph"], docs["python"]["graph"]
            same = all(rust[k] == python[k] for k in ("capture", "replay", "replays", "batches"))
            phases_same = all(
                {k: v for k, v in a.items() if k.endswith("_bytes")} == {k: v for k, v in b.items() if k.endswith("_bytes")}
                for a, b in zip(docs["rust"]["phases"], docs["python"]["phases"])
            )
            eager = {
                impl: statistics.median(r["gpu_seconds"] for r in d["phases"] if r["phase"] == "warm_forward")
                for impl, d in docs.items()
            }
            rows[f"{name}-{dtype}"] = {
                "graph_counters_agree": same,
                "phase_counters_agree": phases_same,
                "rust_graph_us": rust["median_gpu_seconds_per_forward"] * 1e6,
                "python_graph_us": python["median_gpu_seconds_per_forward"] * 1e6,
                "rust_sync_replay_wall_us": rust["synchronised_wall_seconds_median"] * 1e6,
                "python_sync_replay_wall_us": python["synchronised_wall_seconds_median"] * 1e6,
                "rust_eager_gpu_us": eager["rust"] * 1e6,
                "python_eager_gpu_us": eager["python"] * 1e6,
                "capture": rust["capture"],
                "python_capture": python["capture"],
            }
            log(f"graph {name} {dtype}: {json.dumps(rows[f'{name}-{dtype}'])}")
    summary["graph"] = rows


def step_ratio(args, out, summary):
    """Rust vs Python warm wall on the small configurations, PROCESSES processes each."""
    folder = os.path.join(out, "ratio")
    os.makedirs(folder, exist_ok=True)
    result = {}
    for dtype in DTYPES:
        walls = {"rust": [], "python": []}
        seconds = {"rust": [], "python": []}
        for index in range(args.processes):
            for implementation in ("rust", "python"):
                path = os.path.join(folder, f"{implementation}-small-{dtype}-{index}.json")
                document, took = run_one(args, implementation, CONFIGS["small"], dtype, 50, path)
                seconds[implementation].append(took)
                if document:
                    walls[implementation].extend(
                        r["wall_seconds"] for r in document["phases"] if r["phase"] == "warm_forward"
                    )
        medians = {k: statistics.median(v) * 1e6 for k, v in walls.items() if v}
        result[dtype] = {
            "rust_warm_wall_median_us": medians.get("rust"),
            "python_warm_wall_median_us": medians.get("python"),
            "rust_over_python": medians["rust"] / medians["python"] if len(medians) == 2 else None,
            "rows": {k: len(v) for k, v in walls.items()},
            "process_seconds_median": {k: statistics.median(v) for k, v in seconds.items() if v},
        }
        log(f"ratio small {dtype}: {json.dumps(result[dtype])}")
    summary["ratio"] = result


def step_sweep(args, out, summary):
    """The batch sweep at width 4096, context 2048, float32, timed: with the previous search
    (``--lab-before``, doubling and bisection), then with this one on cuda:0, then on the GPUs
    of ``--sweep-devices``."""
    result = {}
    runs = [("before", args.lab_before, "cuda:0"), ("after", args.lab, "cuda:0")]
    if args.sweep_devices:
        runs.append(("after-several", args.lab, args.sweep_devices))
    for label, lab, devices in runs:
        if not lab:
            continue
        folder = os.path.join(out, f"sweep-{label}")
        command = [
            lab, "sweep", "--device", devices, "--vary", "batch", "--from", "1", "--to", "1024",
            "--width", "4096", "--context", "2048", "--dtype", "float32", "--output-dir", folder,
        ]
        done, seconds = timed(command, timeout=900)
        log(f"sweep {label} ({' '.join(command[1:])}): exit {done.returncode}, {seconds:.1f} s")
        log(done.stdout[-3000:])
        if done.returncode != 0:
            log(done.stderr[-2000:])
        points = sorted(
            name for name in os.listdir(folder) if name.endswith(".json")
        ) if os.path.isdir(folder) else []
        phase_seconds = {}
        for name in points:
            with open(os.path.join(folder, name), encoding="utf-8") as stream:
                document = json.load(stream)
            phase_seconds[name] = {
                row["phase"]: phase_seconds.get(name, {}).get(row["phase"], 0) + row["wall_seconds"]
                for row in document["phases"]
            }
        result[label] = {"seconds": seconds, "exit": done.returncode, "devices": devices,
                         "fitted_point_phase_wall_seconds": phase_seconds}
    summary["sweep"] = result


def step_profile(args, out, summary):
    """Where one sweep point's time goes: process start and CUDA initialisation (lab
    environment), a tiny measurement, a large fitted point and an out-of-memory point."""
    folder = os.path.join(out, "profile")
    os.makedirs(folder, exist_ok=True)
    result = {}
    done, seconds = timed([args.lab, "environment", "--device", "cuda:0"])
    result["environment_process_seconds"] = seconds
    for label, batch in (("batch-1", 1), ("batch-480", 480), ("batch-600-oom", 600)):
        path = os.path.join(folder, f"{label}.json")
        command = [args.lab, "measure", "--device", "cuda:0", "--batch", str(batch), "--context", "2048",
                   "--width", "4096", "--dtype", "float32", "--output", path]
        done, seconds = timed(command)
        entry = {"process_seconds": seconds, "exit": done.returncode}
        if done.returncode == 0:
            with open(path, encoding="utf-8") as stream:
                document = json.load(stream)
            entry["phase_wall_seconds"] = [[r["phase"], r["wall_seconds"], r["gpu_seconds"]] for r in document["phases"]]
        else:
            entry["stderr"] = done.stderr[-500:]
        result[label] = entry
        log(f"profile {label}: {json.dumps(entry)}")
    summary["profile"] = result


def step_fleet(args, out, summary):
    """Every GPU of the machine: environment and a small measurement on each, at once."""
    done, seconds = timed([args.lab, "environment", "--device", "all"])
    log(f"environment --device all: exit {done.returncode}, {seconds:.1f} s\n{done.stdout}{done.stderr}")
    with open(os.path.join(out, "environment-all.txt"), "w", encoding="utf-8") as stream:
        stream.write(done.stdout)
    folder = os.path.join(out, "fleet")
    command = [args.lab, "measure", "--device", "all", "--batch", "2", "--context", "128", "--width", "1024",
               "--dtype", "float32", "--warmup", "3", "--repeats", "20", "--graph-replays", str(args.replays),
               "--output-dir", folder]
    done, seconds = timed(command)
    log(f"measure --device all: exit {done.returncode}, {seconds:.1f} s\n{done.stdout}{done.stderr}")
    summary["fleet"] = {"exit": done.returncode, "seconds": seconds}


def main():
    """Runs the asked steps and packs the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--script", required=True, help="mesure_memoire.py")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", default="graph,ratio,sweep")
    parser.add_argument("--replays", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--sweep-devices", default="")
    parser.add_argument("--lab-before", default="", help="a lab with the previous sweep search")
    args = parser.parse_args()
    out = os.path.join(args.out, "depth")
    os.makedirs(out, exist_ok=True)
    summary = {}
    steps = {"graph": step_graph, "ratio": step_ratio, "sweep": step_sweep, "fleet": step_fleet,
             "profile": step_profile}
    for name in args.steps.split(","):
        began = time.perf_counter()
        try:
            steps[name](args, out, summary)
        except Exception as error:  # keep what the other steps found
            log(f"step {name} failed: {type(error).__name__}: {error}")
        log(f"step {name}: {time.perf_counter() - began:.1f} s")
    with open(os.path.join(args.out, "depth-summary.json"), "w", encoding="utf-8") as stream:
        json.dump(summary, stream, indent=2)
    with open(os.path.join(args.out, "depth-log.txt"), "w", encoding="utf-8") as stream:
        stream.write("\n".join(LOG) + "\n")
    with tarfile.open(os.path.join(args.out, "depth.tar.gz"), "w:gz") as archive:
        archive.add(out, arcname="depth")
    return 0


if __name__ == "__main__":
    sys.exit(main())
