#!/usr/bin/env python3
"""Memory of the configs added for the time validation, each in a fresh process (issue 21,
step 3), measured the way scripts/plan_weights_fresh.py and scripts/plan_h200.py measure the
shipped ones; measured values only (`lab plan` is compared with them by the tests that
replay committed rows).

Per model, one fresh process builds the model (meta device, `to_empty` on the GPU, tied
weights, `initialize_weights`, bf16, SDPA) and reports `memory_allocated()` (weights as
allocated) and, after `empty_cache()`, `memory_reserved()` (weights as reserved). Then one
fresh process per (batch, context) point builds it again and runs plan_h200.py's inference
case: prefill of `context` tokens into a `DynamicCache` (last position's logits only), the
peak allocated bytes during it, the cache's bytes after the prefill and after 16 decode steps.

Usage: time_new_family_h200.py OUT_DIR MODELS_DIR NAME[,NAME...] [--dry-run]
Writes OUT_DIR/new-family-weights.csv and OUT_DIR/new-family-memory.csv.
"""

import csv
import gc
import json
import os
import subprocess
import sys

POINTS = [(1, 2048), (4, 4096)]
DECODE_STEPS = 16


def build(folder, dev):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    before = torch.cuda.memory_allocated() if dev == "cuda" else 0
    reserved_before = torch.cuda.memory_reserved() if dev == "cuda" else 0
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.to_empty(device=dev)
    model.tie_weights()
    model.initialize_weights()
    model.eval()
    if dev == "cuda":
        torch.cuda.synchronize()
    gc.collect()
    if dev != "cuda":
        return model, sum(p.numel() * p.element_size() for p in model.parameters()), 0
    weights = torch.cuda.memory_allocated() - before
    torch.cuda.empty_cache()
    return model, weights, torch.cuda.memory_reserved() - reserved_before


def cache_bytes(cache):
    import torch

    seen = {}
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor) and t.numel():
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def one(folder, dev, batch, context):
    import torch
    from transformers import DynamicCache

    model, weights, reserved = build(folder, dev)
    out = {"allocated": weights, "reserved": reserved,
           "parameters": sum(p.numel() for p in model.parameters())}
    if batch:
        vocab = model.config.get_text_config().vocab_size
        with torch.no_grad():
            gc.collect()
            if dev == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated() if dev == "cuda" else 0
            ids = torch.randint(0, vocab, (batch, context), device=dev)
            cache = DynamicCache(config=model.config)
            o = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            if dev == "cuda":
                torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() if dev == "cuda" else 0
            kv_prefill = cache_bytes(cache)
            nxt = o.logits[:, -1:].argmax(-1)
            del o, ids
            for _ in range(DECODE_STEPS):
                o = model(input_ids=nxt, past_key_values=cache, use_cache=True)
                nxt = o.logits[:, -1:].argmax(-1)
                del o
            out.update({"base": base, "peak": peak, "kv_prefill": kv_prefill, "kv_decode": cache_bytes(cache)})
    print(json.dumps(out), flush=True)


def main():
    if sys.argv[1] == "--one":
        folder, dev, batch, context = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        one(folder, dev, batch, context)
        return
    out_dir, models, names = sys.argv[1:4]
    dry = "--dry-run" in sys.argv
    dev = "cpu" if dry else "cuda"
    points = POINTS if not dry else [(1, 16)]
    wrows, mrows = [], []
    for name in names.split(","):
        folder = os.path.join(models, name)

        def run(batch, context):
            r = subprocess.run([sys.executable, __file__, "--one", folder, dev, str(batch), str(context)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name} {batch}x{context}: failed: {r.stderr[-400:]}", flush=True)
                return None
            return json.loads(r.stdout.strip().splitlines()[-1])

        m = run(0, 0)
        if m:
            wrows.append({"model": name, "parameters": m["parameters"], "measured_allocated_bytes": m["allocated"],
                          "measured_reserved_bytes": m["reserved"]})
            print(json.dumps(wrows[-1]), flush=True)
        for batch, context in points:
            m = run(batch, context)
            if m:
                mrows.append({"model": name, "batch": batch, "context": context, "decode_steps": DECODE_STEPS,
                              "measured_weights_bytes": m["allocated"],
                              "measured_kv_after_prefill_bytes": m["kv_prefill"],
                              "measured_kv_cache_bytes": m["kv_decode"],
                              "allocated_before_prefill_bytes": m["base"],
                              "measured_peak_allocated_bytes": m["peak"]})
                print(json.dumps(mrows[-1]), flush=True)
    for fname, rows in (("new-family-weights.csv", wrows), ("new-family-memory.csv", mrows)):
        if rows:
            with open(os.path.join(out_dir, fname), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
                w.writeheader()
                w.writerows(rows)


if __name__ == "__main__":
    main()
