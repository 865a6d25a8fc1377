#!/usr/bin/env python3
"""Checks `lab plan` against the CUDA allocator on a real GPU (docs/PLANNING.md, "Validation").

For each shipped config under examples/models/ (some with fewer layers, in a copy this script
writes; named in the output), the architecture is built with random weights by transformers
(no download: `from_config` on the meta device, `to_empty` on the GPU, bf16), then for several batch x context
points:

- weights: bytes allocated by the built model, against `memory.weights_allocated_bytes`
  (the caching allocator's blocks, not only the tensors' bytes), and the segments still
  reserved after `empty_cache()`, against `memory.weights_reserved_bytes`;
- KV cache: bytes held by the cache's tensors (distinct storages) after the prefill of
  `context` tokens and after DECODE_STEPS decode steps; the prediction for the latter is
  `lab plan` at context + DECODE_STEPS;
- peak: `torch.cuda.max_memory_allocated()` during the prefill (logits of the last position
  only, as generation does), against `lab plan`'s `memory.total_bytes`.

Training: one AdamW step with bf16 weights and gradients, fp32 master weights and fp32
moments (the ZeRO paper's mixed-precision accounting), with and without activation
checkpointing; the step's peak against `lab plan --mode training`.

Usage: plan_h200.py LAB_BINARY MODELS_DIR OUT_DIR
Writes OUT_DIR/plan-h200.csv (inference rows), OUT_DIR/plan-h200-training.csv and
OUT_DIR/plan-h200.json (every row with the extra measurements, versions, device).
"""

import csv
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

DECODE_STEPS = 16

# (model folder, layers kept or None for all, [(batch, context), ...])
CASES = [
    ("llama-3.2-1b", None, [(1, 2048), (4, 4096), (2, 16384)]),
    ("llama-3.1-8b", None, [(1, 8192), (4, 4096)]),
    ("mistral-7b-v0.1", None, [(1, 2048), (2, 8192)]),
    ("qwen2.5-0.5b", None, [(1, 2048), (8, 4096)]),
    ("qwen3-0.6b", None, [(1, 2048), (8, 4096)]),
    ("gemma-2-2b", None, [(1, 2048), (2, 8192)]),
    ("gemma-3-1b", None, [(1, 2048), (4, 8192)]),
    ("phi-3-mini-4k", None, [(1, 1024), (4, 4096)]),
    ("mixtral-8x7b", 4, [(1, 2048), (4, 4096)]),
]
TRAINING = [("qwen3-0.6b", None, [(4, 1024)]), ("llama-3.2-1b", None, [(2, 2048)])]


def plan(lab, folder, batch, context, extra=()):
    cmd = [lab, "plan", "--model", folder, "--batch", str(batch), "--context", str(context),
           "--weights-dtype", "bf16", "--json", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def config_copy(models, name, layers, tmp):
    src = os.path.join(models, name, "config.json")
    if layers is None:
        return os.path.join(models, name), name
    with open(src) as f:
        cfg = json.load(f)
    cfg["num_hidden_layers"] = layers
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = cfg["layer_types"][:layers]
    folder = os.path.join(tmp, f"{name}-{layers}-layers")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return folder, f"{name} ({layers} layers)"


def build(folder):
    cfg = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    gc.collect()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    reserved_before = torch.cuda.memory_reserved()
    # As from_pretrained does: build on the meta device, give every tensor its GPU memory once
    # (to_empty), tie shared weights again, then initialise in place (buffers included).
    with torch.device("meta"):
        if cfg.model_type == "gemma3":  # multimodal: vision tower, projector, decoder
            model = transformers.Gemma3ForConditionalGeneration._from_config(
                cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
        else:
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.to_empty(device="cuda")
    model.tie_weights()
    model.initialize_weights()
    torch.cuda.synchronize()
    gc.collect()
    weights = torch.cuda.memory_allocated() - before
    # Segments that hold no live block (initialisation temporaries) go back to the driver;
    # what stays reserved is the weights' segments.
    torch.cuda.empty_cache()
    reserved = torch.cuda.memory_reserved() - reserved_before
    params = sum(p.numel() for p in model.parameters())
    return model, weights, params, reserved


def cache_bytes(cache):
    seen = {}
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if t is None or not isinstance(t, torch.Tensor) or t.numel() == 0:
                continue
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


@torch.no_grad()
def inference_case(model, vocab, batch, context):
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    ids = torch.randint(0, vocab, (batch, context), device="cuda")
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    kv_prefill = cache_bytes(cache)
    nxt = out.logits[:, -1:].argmax(-1)
    del out, ids
    for _ in range(DECODE_STEPS):
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        del out
    torch.cuda.synchronize()
    kv_decode = cache_bytes(cache)
    del cache, nxt
    return base, peak, kv_prefill, kv_decode


def training_case(model, vocab, batch, context, checkpointing):
    params = [p for p in model.parameters() if p.requires_grad]
    gc.collect()
    torch.cuda.empty_cache()
    if checkpointing:
        model.gradient_checkpointing_enable()
    else:
        model.gradient_checkpointing_disable()
    model.train()
    master = [p.detach().float() for p in params]
    m = [torch.zeros_like(x) for x in master]
    v = [torch.zeros_like(x) for x in master]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    state = torch.cuda.memory_allocated()
    ids = torch.randint(0, vocab, (batch, context), device="cuda")
    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    del loss
    lr, b1, b2, eps, wd = 1e-4, 0.9, 0.999, 1e-8, 0.01
    with torch.no_grad():
        for p, w, mm, vv in zip(params, master, m, v):
            g = p.grad.float()
            p.grad = None
            mm.mul_(b1).add_(g, alpha=1 - b1)
            vv.mul_(b2).addcmul_(g, g, value=1 - b2)
            del g
            w.mul_(1 - lr * wd)
            denom = (vv / (1 - b2)).sqrt_().add_(eps)
            w.addcdiv_(mm, denom, value=-lr / (1 - b1))
            del denom
            p.copy_(w)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del master, m, v, ids
    model.eval()
    gc.collect()
    torch.cuda.empty_cache()
    return state, peak


def pct(pred, meas):
    return None if not meas else round(100.0 * (pred - meas) / meas, 3)


def main():
    lab, models, out_dir = sys.argv[1:4]
    rows, trows, details = [], [], []
    tmp = tempfile.mkdtemp()
    for name, layers, points in CASES:
        folder, label = config_copy(models, name, layers, tmp)
        t0 = time.time()
        model, weights, params, reserved = build(folder)
        vocab = model.config.get_text_config().vocab_size
        for batch, context in points:
            p = plan(lab, folder, batch, context)
            p_dec = plan(lab, folder, batch, context + DECODE_STEPS)
            try:
                base, peak, kv_pre, kv_dec = inference_case(model, vocab, batch, context)
            except torch.OutOfMemoryError as e:
                print(f"{label} {batch}x{context}: out of memory: {e}", flush=True)
                continue
            row = {
                "model": label, "batch": batch, "context": context,
                "predicted_weights_bytes": p["memory"]["weights_allocated_bytes"],
                "measured_weights_bytes": weights,
                "predicted_kv_cache_bytes": p_dec["memory"]["kv_cache_bytes"],
                "measured_kv_cache_bytes": kv_dec,
                "predicted_peak_bytes": p["memory"]["total_bytes"],
                "measured_peak_allocated_bytes": peak,
            }
            rows.append(row)
            detail = dict(row)
            detail.update({
                "decode_steps": DECODE_STEPS,
                "parameters_predicted": p["parameters"], "parameters_built": params,
                "predicted_tensor_bytes": p["memory"]["weights_bytes"],
                "predicted_weights_reserved_bytes": p["memory"]["weights_reserved_bytes"],
                "measured_weights_reserved_bytes": reserved,
                "predicted_prefill_kv_bytes": p["memory"]["prefill_kv_cache_bytes"],
                "measured_kv_after_prefill_bytes": kv_pre,
                "predicted_workspace_bytes": p["memory"]["activation_bytes"],
                "measured_workspace_bytes": peak - base - kv_pre,
                "allocated_before_prefill_bytes": base,
                "attn_implementation": model.config._attn_implementation,
                "weights_error_pct": pct(row["predicted_weights_bytes"], weights),
                "kv_error_pct": pct(row["predicted_kv_cache_bytes"], kv_dec),
                "peak_error_pct": pct(row["predicted_peak_bytes"], peak),
            })
            details.append(detail)
            print(json.dumps(detail), flush=True)
        print(f"{label}: {time.time() - t0:.1f} s", flush=True)
        del model
        gc.collect()
        torch.cuda.empty_cache()
    for name, layers, points in TRAINING:
        folder, label = config_copy(models, name, layers, tmp)
        model, weights, params, _ = build(folder)
        vocab = model.config.get_text_config().vocab_size
        for batch, context in points:
            for ckpt in (False, True):
                extra = ["--mode", "training"] + (["--checkpointing"] if ckpt else [])
                p = plan(lab, folder, batch, context, extra)
                state, peak = training_case(model, vocab, batch, context, ckpt)
                row = {
                    "model": label, "batch": batch, "context": context, "checkpointing": ckpt,
                    "predicted_state_bytes": p["memory"]["weights_allocated_bytes"] + p["memory"]["master_weights_bytes"] + p["memory"]["optimizer_bytes"],
                    "measured_state_bytes": state,
                    "predicted_activation_bytes": p["memory"]["activation_bytes"],
                    "predicted_peak_bytes": p["memory"]["total_bytes"],
                    "measured_peak_allocated_bytes": peak,
                    "peak_error_pct": pct(p["memory"]["total_bytes"], peak),
                }
                trows.append(row)
                print(json.dumps(row), flush=True)
        del model
        gc.collect()
        torch.cuda.empty_cache()
    fields = list(rows[0].keys()) if rows else []
    with open(os.path.join(out_dir, "plan-h200.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    if trows:
        with open(os.path.join(out_dir, "plan-h200-training.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(trows[0].keys()), lineterminator="\n")
            w.writeheader()
            w.writerows(trows)
    with open(os.path.join(out_dir, "plan-h200.json"), "w") as f:
        json.dump({
            "device": torch.cuda.get_device_name(0),
            "total_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "decode_steps": DECODE_STEPS, "inference": details, "training": trows,
        }, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
