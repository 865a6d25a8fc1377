#!/usr/bin/env python3
"""Weights on the GPU, each model built in a fresh process, against `lab plan`.

`plan_h200.py` builds every model in one process, so a small-pool segment left reserved by
an earlier model's run can serve a later model's small tensors; here each model is built in
its own process (as a user loads one model), and `memory_allocated()` / `memory_reserved()`
after `empty_cache()` are compared with `memory.weights_allocated_bytes` /
`memory.weights_reserved_bytes`.

Usage: plan_weights_fresh.py LAB_BINARY MODELS_DIR OUT_DIR (beside plan_h200.py)
Writes OUT_DIR/plan-h200-weights-fresh.csv.
"""

import csv
import json
import os
import subprocess
import sys
import tempfile

from plan_h200 import CASES, config_copy, plan


def build_only(folder):
    import torch
    from plan_h200 import build

    _, weights, params, reserved = build(folder)
    print(json.dumps({"allocated": weights, "reserved": reserved, "parameters": params,
                      "base_reserved": torch.cuda.memory_reserved() - reserved}))


def main():
    if sys.argv[1] == "--build-one":
        build_only(sys.argv[2])
        return
    lab, models, out_dir = sys.argv[1:4]
    tmp = tempfile.mkdtemp()
    rows = []
    # Beyond plan_h200.py's cases: the multimodal Gemma 3 (public config, most text fields
    # left to their defaults) and DeepSeek-V2-Lite (latent attention, 64 experts), whose
    # forward pass plan_h200.py does not compare (transformers caches decompressed keys).
    extra = [("gemma-3-4b-it", None, []), ("deepseek-v2-lite", None, [])]
    for name, layers, _ in CASES + extra:
        folder, label = config_copy(models, name, layers, tmp)
        p = plan(lab, folder, 1, 1)["memory"]
        run = subprocess.run([sys.executable, __file__, "--build-one", folder],
                             check=True, capture_output=True, text=True)
        m = json.loads(run.stdout.strip().splitlines()[-1])
        row = {"model": label,
               "predicted_allocated_bytes": p["weights_allocated_bytes"],
               "measured_allocated_bytes": m["allocated"],
               "predicted_reserved_bytes": p["weights_reserved_bytes"],
               "measured_reserved_bytes": m["reserved"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(os.path.join(out_dir, "plan-h200-weights-fresh.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
