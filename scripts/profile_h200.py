#!/usr/bin/env python3
"""Where the time of one eager forward goes on the GPU machine (companion of bench_h200.py;
see BENCHMARKS.md, "Why the small configuration is launch-bound").

1. torch.profiler over 200 eager forwards of the synthetic MLP (CPU and CUDA activity), per
   configuration: host time per operator and CUDA runtime call, kernel time per kernel.
2. The cuBLASLt experiment: `lab measure` and `mesure_memoire.py measure` with
   DISABLE_ADDMM_CUDA_LT=1 (PyTorch then runs addmm through plain cuBLAS instead of cuBLASLt,
   skipping the per-call heuristic query), small configuration, --repeats 50, two processes
   each; warm-forward medians and whether the allocated counters still match.

Writes OUT/profile-summary.json and OUT/profile-log.txt.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

LOG = []


def log(line=""):
    """Prints and keeps a line."""
    print(line, flush=True)
    LOG.append(line)


def profile(torch, batch, context, width, dtype, count=200):
    """Profiles `count` eager forwards; returns the table rows (host and kernel times, us)."""
    from torch.profiler import ProfilerActivity, profile as run_profile  # noqa: PLC0415

    torch_dtype = getattr(torch, dtype)
    gpu = torch.device("cuda", 0)
    hidden = 4 * width
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, hidden, dtype=torch_dtype),
        torch.nn.GELU(approximate="none"),
        torch.nn.Linear(hidden, width, dtype=torch_dtype),
    ).to(gpu).eval()
    x = torch.randn((batch, context, width), dtype=torch_dtype, device=gpu)
    with torch.no_grad():
        for _ in range(20):
            model(x)
        torch.cuda.synchronize()
        with run_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(count):
                model(x)
            torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        rows.append({
            "name": event.key,
            "calls_per_forward": event.count / count,
            "self_cpu_us_per_forward": event.self_cpu_time_total / count,
            "cpu_total_us_per_forward": event.cpu_time_total / count,
            "device_us_per_forward": getattr(event, "self_device_time_total", 0) / count,
        })
    rows.sort(key=lambda r: -r["self_cpu_us_per_forward"])
    log(f"-- profile {batch}x{context}x{width} {dtype}: per forward (us)")
    log(f"{'name':<58}{'calls':>7}{'self cpu':>10}{'cpu total':>11}{'device':>9}")
    for row in rows[:18]:
        log(f"{row['name'][:57]:<58}{row['calls_per_forward']:>7.2f}{row['self_cpu_us_per_forward']:>10.2f}"
            f"{row['cpu_total_us_per_forward']:>11.2f}{row['device_us_per_forward']:>9.2f}")
    return rows


def measure(command, env):
    """Runs one measurement; returns the document or None."""
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    if done.returncode != 0:
        log(f"FAILED {' '.join(command)}: {done.stderr.strip()[-400:]}")
        return None
    with open(command[command.index("--output") + 1], encoding="utf-8") as stream:
        return json.load(stream)


def lt_experiment(args, work):
    """Warm-forward medians with and without DISABLE_ADDMM_CUDA_LT=1, small configuration."""
    results = {}
    flags = ["--device", "cuda:0", "--batch", "1", "--context", "16", "--width", "64",
             "--dtype", "float32", "--warmup", "1", "--repeats", "50"]
    for label, extra in (("default", {}), ("DISABLE_ADDMM_CUDA_LT=1", {"DISABLE_ADDMM_CUDA_LT": "1"})):
        env = dict(os.environ, **extra)
        for implementation in ("rust", "python"):
            walls, gpus, allocated = [], [], []
            for index in range(2):
                output = os.path.join(work, f"lt-{label[:7]}-{implementation}-{index}.json")
                if implementation == "rust":
                    command = [args.lab, "measure", *flags, "--output", output]
                else:
                    command = [args.python, args.script, "measure", *flags, "--output", output]
                document = measure(command, env)
                if document is None:
                    continue
                rows = [r for r in document["phases"] if r["phase"] == "warm_forward"]
                walls += [r["wall_seconds"] for r in rows]
                gpus += [r["gpu_seconds"] for r in rows]
                allocated.append([(r["phase"], r["baseline_allocated_bytes"], r["end_allocated_bytes"],
                                   r["peak_allocated_bytes"]) for r in document["phases"]])
            results[f"{label} {implementation}"] = {
                "warm_wall_median_us": statistics.median(walls) * 1e6 if walls else None,
                "warm_gpu_median_us": statistics.median(gpus) * 1e6 if gpus else None,
                "allocated": allocated[0] if allocated else None,
            }
            log(f"{label:<26}{implementation:<8} warm wall {results[f'{label} {implementation}']['warm_wall_median_us']:.1f} us,"
                f" gpu {results[f'{label} {implementation}']['warm_gpu_median_us']:.1f} us")
    for label in ("default", "DISABLE_ADDMM_CUDA_LT=1"):
        same = results[f"{label} rust"]["allocated"] == results[f"{label} python"]["allocated"]
        results[f"{label} allocated_rust_equals_python"] = same
        log(f"{label}: allocated counters Rust == Python: {same}")
    same = results["default rust"]["allocated"] == results["DISABLE_ADDMM_CUDA_LT=1 rust"]["allocated"]
    results["allocated_default_equals_disabled_lt"] = same
    log(f"allocated counters default == DISABLE_ADDMM_CUDA_LT=1: {same}")
    return results


def main():
    """Runs both parts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--script", default="dist/mesure_memoire.py")
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="/tmp/lab-profile")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    summary = {"lt_experiment": lt_experiment(args, args.work)}
    import torch  # noqa: PLC0415 (after the measurement processes)
    summary["profiles"] = {
        "small-float32": profile(torch, 1, 16, 64, "float32"),
        "large-bfloat16": profile(torch, 2, 128, 1024, "bfloat16"),
    }
    with open(os.path.join(args.out, "profile-summary.json"), "w", encoding="utf-8") as stream:
        json.dump(summary, stream, indent=2)
    with open(os.path.join(args.out, "profile-log.txt"), "w", encoding="utf-8") as stream:
        stream.write("\n".join(LOG) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
