#!/usr/bin/env python3
"""Measurement runs and benchmark of `lab measure` (Rust) against `mesure_memoire.py measure`
(Python) on one GPU, in one go (made for one call on the H200 machine; see BENCHMARKS.md).

What it does, in order:

1. `lab environment` (text and --json) and `mesure_memoire.py environment --json`;
2. the reference configurations (docs/PROTOCOL.md §4), small (1x16x64, warm-up 1, repeats 2) and large (2x128x1024,
   warm-up 3, repeats 5), for float32, float16 and bfloat16, once with each implementation:
   the documents committed under examples/h200/;
3. the benchmark: each configuration, dtype and implementation again in PROCESSES fresh
   processes with --repeats 50, timing each process from start to file written;
4. the launch-free floor per configuration and dtype: the same model captured in a CUDA graph
   (torch.cuda.CUDAGraph) and replayed back to back, timed with CUDA events; also one
   synchronised replay per iteration (host clock), and eager back-to-back forwards;
5. checks: six rows for the small configuration, no row with allocated > reserved, allocated
   counters of Rust and Python identical per configuration.

Writes under OUT: results.tar.gz (every JSON document and environment answer, named as in
examples/h200/), bench-summary.json (the figures of BENCHMARKS.md) and bench-log.txt. Standard
library only until step 4, which imports torch after all measurement processes have ended.
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
BENCH_REPEATS = 50
PROCESSES = 3
LOG = []


def log(line=""):
    """Prints and keeps a line for bench-log.txt."""
    print(line, flush=True)
    LOG.append(line)


def measure_command(implementation, args, config, dtype, repeats, output):
    """The command line of one measurement."""
    flags = [
        "--device", "cuda:0",
        "--batch", str(config["batch"]), "--context", str(config["context"]),
        "--width", str(config["width"]), "--dtype", dtype,
        "--warmup", str(config["warmup"]), "--repeats", str(repeats),
        "--output", output,
    ]
    if implementation == "rust":
        return [args.lab, "measure", *flags]
    return [args.python, args.script, "measure", *flags]


def timed(command):
    """Runs a command; returns (completed process, seconds from start to exit)."""
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    return done, time.perf_counter() - began


def quantiles(values):
    """Median, 10th and 90th percentile, min, max, count of a list of numbers."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    def pick(q):
        return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]
    return {
        "median": statistics.median(values), "p10": pick(0.10), "p90": pick(0.90),
        "min": values[0], "max": values[-1], "n": len(values),
    }


def counters(document):
    """The allocated counters of each row, for Rust/Python comparison."""
    keys = ("baseline_allocated_bytes", "end_allocated_bytes", "peak_allocated_bytes")
    return [(r["phase"], r["repetition"], *(r[k] for k in keys)) for r in document["phases"]]


def reserved_counters(document):
    """The reserved counters of each row."""
    keys = ("baseline_reserved_bytes", "end_reserved_bytes", "peak_reserved_bytes")
    return [(r["phase"], r["repetition"], *(r[k] for k in keys)) for r in document["phases"]]


def check_document(name, document, config_name):
    """Protocol checks on one document; returns a list of problems."""
    problems = []
    rows = document["phases"]
    expected = 4 + document["configuration"]["repeats"]
    if len(rows) != expected:
        problems.append(f"{name}: {len(rows)} rows, expected {expected}")
    if config_name == "small" and document["configuration"]["repeats"] == 2 and len(rows) != 6:
        problems.append(f"{name}: small configuration has {len(rows)} rows, not 6")
    for row in rows:
        for a, r in (("baseline_allocated_bytes", "baseline_reserved_bytes"),
                     ("end_allocated_bytes", "end_reserved_bytes"),
                     ("peak_allocated_bytes", "peak_reserved_bytes")):
            if row[a] > row[r]:
                problems.append(f"{name}: {row['phase']} {a} {row[a]} > {r} {row[r]}")
    return problems


def run_examples(args, out):
    """Step 2: the reference configurations once per implementation."""
    documents, problems, runs = {}, [], []
    for config_name, config in CONFIGS.items():
        for dtype in DTYPES:
            for implementation in ("rust", "python"):
                name = f"{implementation}-{config_name}-{dtype}.json"
                path = os.path.join(out, name)
                command = measure_command(implementation, args, config, dtype, config["repeats"], path)
                done, seconds = timed(command)
                runs.append({"file": name, "exit": done.returncode, "process_seconds": seconds,
                             "command": " ".join(command)})
                if done.returncode != 0:
                    problems.append(f"{name}: exit {done.returncode}: {done.stderr.strip()[-600:]}")
                    log(f"FAILED {name}: {done.stderr.strip()[-600:]}")
                    continue
                with open(path, encoding="utf-8") as stream:
                    documents[name] = json.load(stream)
                problems += check_document(name, documents[name], config_name)
                log(f"== {' '.join(command)}  ({seconds:.2f} s)")
                log(done.stdout.rstrip())
    return documents, problems, runs


def compare_implementations(documents):
    """Allocated (and reserved) counters, Rust vs Python, per configuration and dtype."""
    comparison = {}
    for config_name in CONFIGS:
        for dtype in DTYPES:
            rust = documents.get(f"rust-{config_name}-{dtype}.json")
            python = documents.get(f"python-{config_name}-{dtype}.json")
            if rust is None or python is None:
                continue
            differences = [
                {"rust": r, "python": p} for r, p in zip(counters(rust), counters(python)) if r != p
            ]
            reserved = [
                {"rust": r, "python": p}
                for r, p in zip(reserved_counters(rust), reserved_counters(python)) if r != p
            ]
            comparison[f"{config_name}-{dtype}"] = {
                "allocated_identical": not differences, "allocated_differences": differences,
                "reserved_identical": not reserved, "reserved_differences": reserved,
            }
    return comparison


def run_bench(args, out):
    """Step 3: PROCESSES fresh processes per case with --repeats BENCH_REPEATS."""
    cases = {}
    for config_name, config in CONFIGS.items():
        for dtype in DTYPES:
            for implementation in ("rust", "python"):
                key = f"{implementation}-{config_name}-{dtype}"
                process_seconds, documents = [], []
                for index in range(PROCESSES):
                    path = os.path.join(out, f"bench-{key}-{index}.json")
                    command = measure_command(implementation, args, config, dtype, BENCH_REPEATS, path)
                    done, seconds = timed(command)
                    if done.returncode != 0:
                        log(f"FAILED bench {key}: {done.stderr.strip()[-400:]}")
                        continue
                    process_seconds.append(seconds)
                    with open(path, encoding="utf-8") as stream:
                        documents.append(json.load(stream))
                cases[key] = summarise(documents, process_seconds)
                cases[key]["command"] = " ".join(
                    measure_command(implementation, args, config, dtype, BENCH_REPEATS, "FILE.json"))
    return cases


def summarise(documents, process_seconds):
    """Per-phase wall and GPU figures over several documents of one case."""
    phases = {}
    for phase in ("model_load", "inputs", "cold_forward", "warmup", "warm_forward"):
        rows = [r for d in documents for r in d["phases"] if r["phase"] == phase]
        walls = [r["wall_seconds"] for r in rows]
        gpus = [r["gpu_seconds"] for r in rows]
        host = [r["wall_seconds"] - r["gpu_seconds"] for r in rows if r["gpu_seconds"] is not None]
        phases[phase] = {"wall": quantiles(walls), "gpu": quantiles(gpus), "host_overhead": quantiles(host)}
    return {"processes": len(documents), "process_seconds": quantiles(process_seconds), "phases": phases}


def graph_floor(config, dtype, torch):
    """Step 4: per-forward time of a CUDA-graph replay, of a synchronised replay, and of eager
    back-to-back forwards, for the model of `config` in `dtype`."""
    torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    gpu = torch.device("cuda", 0)
    width, hidden = config["width"], 4 * config["width"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, hidden, dtype=torch_dtype),
        torch.nn.GELU(approximate="none"),
        torch.nn.Linear(hidden, width, dtype=torch_dtype),
    ).to(gpu).eval()
    x = torch.randn((config["batch"], config["context"], width), dtype=torch_dtype, device=gpu)
    result = {}
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(5):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = model(x)
        del y
        for _ in range(50):
            graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(5):
            count = 2000
            start.record()
            for _ in range(count):
                graph.replay()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / 1000.0 / count)
        result["graph_replay_gpu_seconds"] = quantiles(samples)
        walls = []
        for _ in range(500):
            began = time.perf_counter()
            graph.replay()
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - began)
        result["graph_replay_synchronised_wall_seconds"] = quantiles(walls)
        samples = []
        for _ in range(5):
            count = 500
            start.record()
            for _ in range(count):
                model(x)
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / 1000.0 / count)
        result["eager_back_to_back_seconds"] = quantiles(samples)
        walls = []
        for _ in range(500):
            began = time.perf_counter()
            model(x)
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - began)
        result["eager_synchronised_wall_seconds"] = quantiles(walls)
    return result


def main():
    """Runs every step; returns 0 (problems are reported in the summary, not as a failure)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", required=True, help="the lab binary (worker next to it)")
    parser.add_argument("--python", default=sys.executable, help="python with torch")
    parser.add_argument("--script", default="dist/mesure_memoire.py")
    parser.add_argument("--out", required=True, help="folder for the three result files")
    parser.add_argument("--work", default="/tmp/lab-bench", help="folder for the documents")
    args = parser.parse_args()
    work = args.work
    os.makedirs(work, exist_ok=True)
    summary = {"bench_repeats": BENCH_REPEATS, "processes_per_case": PROCESSES, "configs": CONFIGS}

    for name, command in (
        ("environment-rust.txt", [args.lab, "environment", "--device", "cuda:0"]),
        ("environment-rust.json", [args.lab, "environment", "--device", "cuda:0", "--json"]),
        ("environment-python.json", [args.python, args.script, "environment", "--device", "cuda:0", "--json"]),
        ("nvidia-smi.txt", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,persistence_mode", "--format=csv"]),
    ):
        done, seconds = timed(command)
        with open(os.path.join(work, name), "w", encoding="utf-8") as stream:
            stream.write(done.stdout)
        log(f"== {' '.join(command)} (exit {done.returncode}, {seconds:.2f} s)")
        log(done.stdout.rstrip() + done.stderr.rstrip())

    documents, problems, runs = run_examples(args, work)
    summary["example_runs"] = runs
    summary["comparison"] = compare_implementations(documents)
    summary["cases"] = run_bench(args, work)
    for key, case in summary["cases"].items():
        problems += [] if case["processes"] == PROCESSES else [f"bench {key}: {case['processes']} processes"]

    import torch  # noqa: PLC0415 (only after every measurement process has ended)
    summary["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda,
                        "device": torch.cuda.get_device_name(0)}
    summary["floors"] = {}
    for config_name, config in CONFIGS.items():
        for dtype in DTYPES:
            summary["floors"][f"{config_name}-{dtype}"] = graph_floor(config, dtype, torch)

    targets = {}
    for dtype in DTYPES:
        rust = summary["cases"].get(f"rust-small-{dtype}", {}).get("phases", {}).get("warm_forward", {})
        python = summary["cases"].get(f"python-small-{dtype}", {}).get("phases", {}).get("warm_forward", {})
        floor = summary["floors"][f"small-{dtype}"]["graph_replay_gpu_seconds"]["median"]
        if rust.get("wall") and python.get("wall"):
            ratio = rust["wall"]["median"] / python["wall"]["median"]
            over_floor = rust["wall"]["median"] / floor
            targets[dtype] = {"rust_over_python": ratio, "rust_over_graph_floor": over_floor,
                              "met_0_4x_python": ratio <= 0.4, "met_3x_floor": over_floor <= 3.0}
    summary["targets_small"] = targets
    summary["problems"] = problems

    log("")
    log(f"{'case':<26}{'warm wall med us':>18}{'p10':>8}{'p90':>8}{'gpu med us':>12}{'host med us':>12}{'process s':>11}")
    for key, case in summary["cases"].items():
        warm = case["phases"]["warm_forward"]
        if not warm["wall"]:
            continue
        log(f"{key:<26}{warm['wall']['median'] * 1e6:>18.1f}{warm['wall']['p10'] * 1e6:>8.1f}"
            f"{warm['wall']['p90'] * 1e6:>8.1f}{warm['gpu']['median'] * 1e6:>12.1f}"
            f"{warm['host_overhead']['median'] * 1e6:>12.1f}{case['process_seconds']['median']:>11.2f}")
    for key, floor in summary["floors"].items():
        log(f"floor {key:<20} graph {floor['graph_replay_gpu_seconds']['median'] * 1e6:8.2f} us, "
            f"graph+sync wall {floor['graph_replay_synchronised_wall_seconds']['median'] * 1e6:8.2f} us, "
            f"eager b2b {floor['eager_back_to_back_seconds']['median'] * 1e6:8.2f} us, "
            f"eager+sync wall {floor['eager_synchronised_wall_seconds']['median'] * 1e6:8.2f} us")
    log(f"targets (small): {json.dumps(targets)}")
    log(f"comparison: " + json.dumps({k: v['allocated_identical'] for k, v in summary['comparison'].items()}))
    log(f"problems: {problems}")

    with open(os.path.join(args.out, "bench-summary.json"), "w", encoding="utf-8") as stream:
        json.dump(summary, stream, indent=2)
    with open(os.path.join(args.out, "bench-log.txt"), "w", encoding="utf-8") as stream:
        stream.write("\n".join(LOG) + "\n")
    with tarfile.open(os.path.join(args.out, "results.tar.gz"), "w:gz") as archive:
        archive.add(work, arcname="h200")
    return 0


if __name__ == "__main__":
    sys.exit(main())
