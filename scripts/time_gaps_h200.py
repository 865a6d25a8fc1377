#!/usr/bin/env python3
"""What the time model lacks, measured on one GPU (issue 21 item 2; docs/PLANNING.md,
"Validation on the H200: transformers measured", "Where a class still misses").

Sections (all in one process, each writes one CSV under OUT_DIR; times are medians of CUDA
events unless a column says host):

- sdpa-mla: `F.scaled_dot_product_attention` with DeepSeek-V2-Lite's widths (16 heads,
  d_qk 192, d_v 128: transformers caches the decompressed keys and values), decode (one
  query over 512..16384 keys, batch 1..64, with the boolean mask transformers passes under a
  capture and without) and causal prefill 512..16384; the same with equal widths 128/128 for
  comparison; the backend read from the profiler's kernel names;
- sdpa-window: causal prefill against an explicit sliding-window boolean mask (what
  transformers passes once the prompt reaches the window: Mistral 32/8 heads of 128, window
  4096, keys repeated because a mask is given; Phi-3 32/32 heads of 96, window 2047) and an
  explicit full causal mask, against `is_causal`;
- sustained: a real layer's bf16 products (`F.linear`, weights as nn.Linear stores them) at
  prefill shapes, each timed alone (the stream held by `_sleep`, as the calibration does) and
  as the model runs them: the layer's products back to back for all its layers, on rotating
  weight copies (> L2), timed as one chain after a 1 s warm-up; `nvidia-smi` clocks and power
  sampled during the chains (`gaps-clocks.txt`);
- profile: one real transformers prefill (batch 1, DynamicCache, logits_to_keep=1, eager) at
  1024/4096/16384 tokens and one eager decode step (batch 1, static cache 512) per model
  under torch.profiler: GPU time and count per kernel name (`gaps-profile.csv`, names cut to
  120 characters) and the host's `cudaLaunchKernel`-like runtime calls per step;
- eager-host: transformers' eager decode (batch 1, static cache 512) of the same config cut
  to 2 and 8 layers: the host seconds until `forward` returns (no sync), the event-timed step
  (as time_validate_h200.py times it), 60 repetitions each, and the kernels per step from the
  profiler: the slope gives the host cost per layer and per kernel.

Usage: time_gaps_h200.py OUT_DIR --models-dir DIR [--only SECTION,...] [--dry-run]
       [--profile-models M,..] [--prompts N,..] [--decode-batch B] [--decode-context C] [--tag T]
       (--dry-run: CPU, tiny sizes and 2-layer tiny configs, same files)
"""

import argparse
import csv
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

DATASHEET_BW = 4.8e12
DATASHEET_BF16 = 989e12
ROTATE_BYTES = 512 * 2**20
ARGS = None
DEV = "cuda"
LOG = []


def log(line=""):
    print(line, flush=True)
    LOG.append(line)


def dec(x, places=9):
    return f"{x:.{places}f}"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def free():
    gc.collect()
    if DEV == "cuda":
        torch.cuda.empty_cache()


def stats(samples):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def time_calls(fn, reps, warmup=3):
    """Median seconds of fn(i), launches queued behind a _sleep so events time GPU work."""
    for i in range(warmup):
        fn(i)
    sync()
    if DEV != "cuda":
        out = []
        for i in range(reps):
            t = time.perf_counter()
            fn(i)
            out.append(time.perf_counter() - t)
        return stats(out)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda._sleep(20_000_000)
    for i in range(reps):
        starts[i].record()
        fn(i)
        ends[i].record()
    torch.cuda.synchronize()
    return stats([s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)])


def rnd(shape, dtype=torch.bfloat16):
    return torch.randn(shape, device=DEV, dtype=torch.float32).to(dtype)


def copies(nbytes_one):
    return max(2, min(16, -(-ROTATE_BYTES // max(1, nbytes_one))))


def kernel_names(fn):
    if DEV != "cuda":
        return []
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(0)
        torch.cuda.synchronize()
    return [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]


def backend_of(fn):
    if DEV != "cuda":
        return "cpu"
    names = kernel_names(fn)
    joined = " ".join(names).lower()
    if "cudnn" in joined:
        b = "cudnn"
    elif "flash" in joined:
        b = "flash"
    elif "fmha" in joined or "mem_eff" in joined or "efficient" in joined:
        b = "efficient"
    else:
        b = "math?"
    return f"{b} [{' | '.join(sorted(set(n[:80] for n in names))[:4])}]"


def write_csv(name, rows):
    if not rows:
        return
    with open(os.path.join(ARGS.out_dir, name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def attn_row(section, phase, variant, batch, heads, kv_heads, d_qk, d_v, q_len, kv_len, flop, moved, fn,
             profiled=True):
    try:
        s = time_calls(fn, reps=10)
        backend = backend_of(fn) if profiled else "not profiled"
        note = ""
    except Exception as e:
        s = {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
        backend, note = "", f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    t = s["median"]
    r = {"section": section, "phase": phase, "variant": variant, "batch": batch, "heads": heads,
         "kv_heads": kv_heads, "d_qk": d_qk, "d_v": d_v, "q_len": q_len, "kv_len": kv_len, "flop": flop,
         "bytes_min": moved, "median_s": dec(t), "min_s": dec(s["min"]), "max_s": dec(s["max"]), "reps": s["n"],
         "achieved_TFLOPs": dec(flop / t / 1e12, 3), "achieved_GBps": dec(moved / t / 1e9, 1),
         "flop_efficiency": dec(flop / t / DATASHEET_BF16, 4), "bw_efficiency": dec(moved / t / DATASHEET_BW, 4),
         "backend": backend, "note": note}
    log(f"  {section} {phase:7s} {variant:12s} b={batch:<3d} q={q_len:<6d} kv={kv_len:<6d} {r['median_s']} s "
        f"{r['achieved_TFLOPs']} TFLOP/s {r['achieved_GBps']} GB/s {backend[:30]} {note}")
    return r


# ---------------------------------------------------------------- sdpa-mla ---

def sdpa_mla():
    rows = []
    nh = 16
    widths = [(192, 128, "mla"), (128, 128, "equal128")]
    dry = ARGS.dry_run
    for d_qk, d_v, name in widths:
        scale = d_qk ** -0.5
        for batch in ((1, 4, 16, 64) if not dry else (1, 2)):
            for kv in ((512, 4096, 16384) if not dry else (64,)):
                kv_bytes = batch * nh * kv * (d_qk + d_v) * 2
                nset = copies(kv_bytes)
                qs = [rnd((batch, nh, 1, d_qk)) for _ in range(nset)]
                ks = [rnd((batch, nh, kv, d_qk)) for _ in range(nset)]
                vs = [rnd((batch, nh, kv, d_v)) for _ in range(nset)]
                mask = torch.ones((batch, 1, 1, kv), device=DEV, dtype=torch.bool)
                mask[:, :, :, -8:] = False
                flop = 2 * batch * nh * kv * (d_qk + d_v)
                moved = kv_bytes + batch * nh * (d_qk + d_v) * 2
                for variant, m in (("mask", mask), ("nomask", None)):
                    fn = lambda i, m=m: F.scaled_dot_product_attention(
                        qs[i % nset], ks[i % nset], vs[i % nset], attn_mask=m, scale=scale)
                    rows.append(attn_row("sdpa-mla", "decode", f"{name}_{variant}", batch, nh, nh, d_qk, d_v, 1, kv,
                                         flop, moved, fn, profiled=batch in (1, 64)))
                del qs, ks, vs
                free()
        for t_len in ((512, 1024, 2048, 4096, 8192, 16384) if not dry else (64, 128)):
            q = [rnd((1, nh, t_len, d_qk)) for _ in range(2)]
            k = [rnd((1, nh, t_len, d_qk)) for _ in range(2)]
            v = [rnd((1, nh, t_len, d_v)) for _ in range(2)]
            flop = 2 * nh * (d_qk + d_v) * t_len * (t_len + 1) // 2
            moved = nh * t_len * (2 * d_qk + 2 * d_v) * 2
            fn = lambda i: F.scaled_dot_product_attention(q[i % 2], k[i % 2], v[i % 2], is_causal=True, scale=scale)
            rows.append(attn_row("sdpa-mla", "prefill", f"{name}_causal", 1, nh, nh, d_qk, d_v, t_len, t_len,
                                 flop, moved, fn))
            del q, k, v
            free()
    write_csv("gaps-sdpa-mla.csv", rows)


# ---------------------------------------------------------------- sdpa-window ---

def window_mask(t_len, window):
    i = torch.arange(t_len, device=DEV)
    d = i[:, None] - i[None, :]
    return ((d >= 0) & (d < window))[None, None]


def sdpa_window():
    rows = []
    dry = ARGS.dry_run
    cases = [("mistral", 32, 8, 128, 4096 if not dry else 48), ("phi3", 32, 32, 96, 2047 if not dry else 40)]
    for name, nh, nkv, hd, window in cases:
        scale = hd ** -0.5
        lens = (2048, 4096, 8192, 16384) if not dry else (64, 128)
        if name == "phi3" and not dry:
            lens = (1024, 2048, 4096, 8192, 16384)
        for t_len in lens:
            q = [rnd((1, nh, t_len, hd)) for _ in range(2)]
            k = [rnd((1, nkv, t_len, hd)) for _ in range(2)]
            v = [rnd((1, nkv, t_len, hd)) for _ in range(2)]
            kr = [x.repeat_interleave(nh // nkv, dim=1) for x in k]
            vr = [x.repeat_interleave(nh // nkv, dim=1) for x in v]
            wm = window_mask(t_len, window)
            cm = window_mask(t_len, t_len + 1)
            causal_pairs = t_len * (t_len + 1) // 2
            win_pairs = sum(min(i + 1, window) for i in range(t_len))
            per_pair = 2 * nh * 2 * hd
            moved = (2 * nh + 2 * nkv) * t_len * hd * 2
            fns = {
                "is_causal_gqa": (lambda i: F.scaled_dot_product_attention(
                    q[i % 2], k[i % 2], v[i % 2], is_causal=True, scale=scale, enable_gqa=nkv < nh), causal_pairs),
                "window_mask_repeated": (lambda i: F.scaled_dot_product_attention(
                    q[i % 2], kr[i % 2], vr[i % 2], attn_mask=wm, scale=scale), win_pairs),
                "causal_mask_repeated": (lambda i: F.scaled_dot_product_attention(
                    q[i % 2], kr[i % 2], vr[i % 2], attn_mask=cm, scale=scale), causal_pairs),
            }
            for variant, (fn, pairs) in fns.items():
                r = attn_row("sdpa-window", "prefill", variant, 1, nh, nkv, hd, hd, t_len, t_len, per_pair * pairs,
                             moved + t_len * t_len, fn)
                r["window"] = window
                r["pairs"] = pairs
                r["full_square_flop"] = per_pair * t_len * t_len
                rows.append(r)
            del q, k, v, kr, vr, wm, cm
            free()
    write_csv("gaps-sdpa-window.csv", rows)


# ---------------------------------------------------------------- sustained ---

LAYERS = {
    # name: (hidden, [(label, n, k)], layers)
    "llama-3.1-8b": (4096, [("q", 4096, 4096), ("k", 1024, 4096), ("v", 1024, 4096), ("o", 4096, 4096),
                            ("gate", 14336, 4096), ("up", 14336, 4096), ("down", 4096, 14336)], 32),
    "qwen2.5-32b": (5120, [("q", 5120, 5120), ("k", 1024, 5120), ("v", 1024, 5120), ("o", 5120, 5120),
                           ("gate", 27648, 5120), ("up", 27648, 5120), ("down", 5120, 27648)], 64),
    "phi-3-mini-4k": (3072, [("qkv", 9216, 3072), ("o", 3072, 3072), ("gate_up", 16384, 3072),
                             ("down", 3072, 8192)], 32),
}


class Clocks:
    """nvidia-smi sampled every 100 ms in the background while a section runs."""

    def __init__(self, label):
        self.label = label
        self.p = None
        if DEV == "cuda":
            try:
                self.f = open(os.path.join(ARGS.out_dir, "gaps-clocks.txt"), "a")
                self.f.write(f"# {label}\n")
                self.f.flush()
                self.p = subprocess.Popen(
                    ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                     "clocks_event_reasons.active", "--format=csv,noheader", "-lms", "100"],
                    stdout=self.f, stderr=subprocess.STDOUT)
            except Exception as e:
                log(f"  clocks unavailable: {e}")

    def stop(self):
        if self.p:
            self.p.terminate()
            self.p.wait(timeout=10)
            self.f.close()


def sustained():
    rows = []
    dry = ARGS.dry_run
    ms = (512, 1024, 2048, 4096, 8192, 16384) if not dry else (16, 32)
    for model, (h, mats, layers) in LAYERS.items():
        if dry:
            mats = [(l, max(8, n // 64), max(8, k // 64)) for l, n, k in mats]
            layers = 2
        layer_bytes = sum(n * k * 2 for _, n, k in mats)
        nset = copies(layer_bytes)
        ws = [[rnd((n, k)) for _, n, k in mats] for _ in range(nset)]
        for m in ms:
            xs = {k: rnd((m, k)) for _, _, k in mats}
            flop_layer = sum(2 * m * n * k for _, n, k in mats)
            # Each product alone, as the calibration times them.
            alone = 0.0
            for j, (label, n, k) in enumerate(mats):
                s = time_calls(lambda i, j=j, k=k: F.linear(xs[k], ws[i % nset][j]), reps=10)
                alone += s["median"]
                rows.append({"model": model, "m": m, "what": f"alone:{label}", "products": 1, "flop": 2 * m * n * k,
                             "median_s": dec(s["median"]), "tflops": dec(2 * m * n * k / s["median"] / 1e12, 1),
                             "note": ""})

            def chain(i=0):
                for layer in range(layers):
                    w = ws[(i + layer) % nset]
                    for j, (_, n, k) in enumerate(mats):
                        F.linear(xs[k], w[j])

            # Warm up for about a second so the clocks settle as in a long prefill.
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < (1.0 if not dry else 0.01):
                chain()
                sync()
            clocks = Clocks(f"{model} m={m} chain of {layers} layers")
            s = time_calls(lambda i: chain(i), reps=5 if m >= 8192 else 10, warmup=1)
            clocks.stop()
            flop = flop_layer * layers
            rows.append({"model": model, "m": m, "what": "chain", "products": layers * len(mats), "flop": flop,
                         "median_s": dec(s["median"]), "tflops": dec(flop / s["median"] / 1e12, 1),
                         "note": f"alone sum x layers {dec(alone * layers)} s; chain/alone "
                                 f"{s['median'] / (alone * layers):.4f}"})
            log(f"  sustained {model:14s} m={m:<6d} chain {flop / s['median'] / 1e12:7.1f} TFLOP/s, alone "
                f"{flop_layer / alone / 1e12:7.1f}; chain/alone {s['median'] / (alone * layers):.3f}")
            del xs
            free()
        del ws
        free()
    write_csv("gaps-sustained.csv", rows)


# ---------------------------------------------------------------- transformers ---

def config_folder(name, tmp, layers=None):
    src = os.path.join(ARGS.models_dir, name)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config", cfg)
    if ARGS.dry_run:
        for key in ("hidden_size", "intermediate_size", "moe_intermediate_size"):
            if key in text:
                text[key] = 64
        text["num_attention_heads"] = 4
        text["num_key_value_heads"] = 2 if text.get("num_key_value_heads", 4) < text.get("num_attention_heads", 4) else 4
        text["head_dim"] = 16
        text["vocab_size"] = 512
        text["pad_token_id"] = None
        for key in ("num_local_experts", "num_experts", "n_routed_experts"):
            if key in text:
                text[key] = 4
        if "num_experts_per_tok" in text:
            text["num_experts_per_tok"] = 2
        if "kv_lora_rank" in text:
            text.update(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)
            text.pop("head_dim", None)
        if isinstance(text.get("sliding_window"), int):
            text["sliding_window"] = 48
        layers = layers or 2
    if layers:
        text["num_hidden_layers"] = layers
        if isinstance(text.get("layer_types"), list):
            text["layer_types"] = text["layer_types"][:layers]
        if "first_k_dense_replace" in text:
            text["first_k_dense_replace"] = min(text["first_k_dense_replace"], 1)
    folder = os.path.join(tmp, f"{name}-{layers}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return folder


def build(folder):
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    free()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.to_empty(device=DEV)
    model.tie_weights()
    model.initialize_weights()
    model.eval()
    sync()
    return model


def decode_setup(model, context=512, batch=1):
    from transformers import StaticCache
    c = model.config.get_text_config()
    cache = StaticCache(config=model.config, max_cache_len=context)
    ids = torch.randint(0, c.vocab_size, (batch, 1), device=DEV)
    pos = torch.full((batch, 1), context - 1, device=DEV, dtype=torch.long)
    cpos = torch.tensor([context - 1], device=DEV, dtype=torch.long)

    def reset():
        for layer in cache.layers:
            if getattr(layer, "is_initialized", False) and isinstance(getattr(layer, "cumulative_length", None),
                                                                        torch.Tensor):
                layer.cumulative_length.fill_(context - 1)
            if hasattr(layer, "cumulative_length_int"):
                layer.cumulative_length_int = context - 1

    def step():
        return model(input_ids=ids, position_ids=pos, cache_position=cpos, past_key_values=cache, use_cache=True)

    reset()
    step()
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                t.normal_()
    return reset, step


def profile_counts(fn):
    """(kernels by name: [count, gpu seconds], runtime launch calls) of one call of fn."""
    if DEV != "cuda":
        return {}, 0
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = {}
    launches = 0
    for e in prof.events():
        if e.device_type.name == "CUDA":
            k = kernels.setdefault(e.name[:120], [0, 0.0])
            k[0] += 1
            k[1] += e.time_range.elapsed_us() / 1e6
        elif e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                        "cudaMemcpyAsync", "cudaMemsetAsync"):
            launches += 1
    return kernels, launches


PROFILE_MODELS = ["llama-3.1-8b", "mistral-7b-v0.1", "phi-3-mini-4k", "qwen2.5-32b", "deepseek-v2-lite",
                  "qwen3-30b-a3b", "mixtral-8x7b"]


@torch.no_grad()
def profile_section():
    from transformers import DynamicCache
    rows = []
    tmp = tempfile.mkdtemp()
    prompts = (1024, 4096, 16384) if not ARGS.dry_run else (32,)
    if ARGS.prompts is not None:
        prompts = [int(x) for x in ARGS.prompts.split(",") if x]
    for name in (ARGS.profile_models.split(",") if ARGS.profile_models else PROFILE_MODELS):
        t0 = time.time()
        try:
            model = build(config_folder(name, tmp) if ARGS.dry_run else os.path.join(ARGS.models_dir, name))
        except Exception as e:
            log(f"  profile {name}: build failed {type(e).__name__}: {str(e)[:120]}")
            continue
        vocab = model.config.get_text_config().vocab_size
        for p in prompts:
            try:
                ids = torch.randint(0, vocab, (1, p), device=DEV)
                run = lambda: model(input_ids=ids, past_key_values=DynamicCache(config=model.config), use_cache=True,
                                    logits_to_keep=1)
                run()
                sync()
                t = time.perf_counter()
                run()
                sync()
                wall = time.perf_counter() - t
                kernels, launches = profile_counts(run)
                add_profile_rows(rows, name, "prefill", p, wall, kernels, launches)
            except torch.OutOfMemoryError as e:
                log(f"  profile {name} prefill {p}: out of memory")
            free()
        try:
            reset, step = decode_setup(model, ARGS.decode_context, ARGS.decode_batch)
            for _ in range(3):
                reset()
                step()
            sync()
            reset()
            t = time.perf_counter()
            step()
            sync()
            wall = time.perf_counter() - t
            reset()
            kernels, launches = profile_counts(step)
            add_profile_rows(rows, name, f"decode-b{ARGS.decode_batch}", ARGS.decode_context, wall, kernels,
                             launches)
            del reset, step
        except Exception as e:
            log(f"  profile {name} decode failed {type(e).__name__}: {str(e)[:120]}")
        del model
        free()
        log(f"  profile {name}: {time.time() - t0:.1f} s")
        write_csv(f"gaps-profile{ARGS.tag}.csv", rows)
    write_csv(f"gaps-profile{ARGS.tag}.csv", rows)


def category(name):
    n = name.lower()
    if any(s in n for s in ("fmha", "flash", "cudnn", "attention", "efficient_attention", "sdpa")):
        return "attention"
    if any(s in n for s in ("gemm", "nvjet", "cutlass", "xmma", "gemv", "splitk", "grouped")):
        return "product"
    return "other"


def add_profile_rows(rows, model, phase, tokens, wall, kernels, launches):
    total = sum(v[1] for v in kernels.values())
    count = sum(v[0] for v in kernels.values())
    by = {}
    for k, (c, s) in kernels.items():
        b = by.setdefault(category(k), [0, 0.0])
        b[0] += c
        b[1] += s
    base = {"model": model, "phase": phase, "tokens": tokens, "wall_s": dec(wall)}
    rows.append({**base, "what": "total", "kernel": "", "count": count, "gpu_s": dec(total),
                 "note": f"runtime launch calls {launches}"})
    for cat, (c, s) in sorted(by.items()):
        rows.append({**base, "what": f"category:{cat}", "kernel": "", "count": c, "gpu_s": dec(s), "note": ""})
    for k, (c, s) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:25]:
        rows.append({**base, "what": f"kernel:{category(k)}", "kernel": k.replace(",", ";"), "count": c,
                     "gpu_s": dec(s), "note": ""})
    log(f"  profile {model:18s} {phase:7s} {tokens:6d}: wall {wall * 1e3:8.2f} ms, GPU {total * 1e3:8.2f} ms in "
        f"{count} kernels ({launches} launch calls); " +
        ", ".join(f"{c} {s * 1e3:.2f} ms/{n}" for c, (n, s) in sorted(by.items())))


HOST_MODELS = ["llama-3.1-8b", "qwen2.5-32b", "phi-3-mini-4k", "mistral-7b-v0.1", "qwen3-30b-a3b",
               "deepseek-v2-lite", "mixtral-8x7b"]


@torch.no_grad()
def eager_host():
    rows = []
    tmp = tempfile.mkdtemp()
    reps = 60 if not ARGS.dry_run else 5
    for name in HOST_MODELS:
        for layers in (2, 8):
            try:
                model = build(config_folder(name, tmp, layers))
                reset, step = decode_setup(model)
                for _ in range(5):
                    reset()
                    step()
                sync()
                host, event, wall = [], [], []
                for _ in range(reps):
                    reset()
                    sync()
                    if DEV == "cuda":
                        a = torch.cuda.Event(enable_timing=True)
                        b = torch.cuda.Event(enable_timing=True)
                        a.record()
                    t = time.perf_counter()
                    step()
                    h = time.perf_counter() - t
                    if DEV == "cuda":
                        b.record()
                    sync()
                    w = time.perf_counter() - t
                    host.append(h)
                    wall.append(w)
                    event.append(a.elapsed_time(b) / 1e3 if DEV == "cuda" else w)
                reset()
                kernels, launches = profile_counts(step)
                count = sum(v[0] for v in kernels.values())
                gpu = sum(v[1] for v in kernels.values())
                r = {"model": name, "layers": layers, "reps": reps, "host_s": dec(statistics.median(host)),
                     "host_min_s": dec(min(host)), "event_s": dec(statistics.median(event)),
                     "wall_s": dec(statistics.median(wall)), "kernels": count, "launch_calls": launches,
                     "gpu_s": dec(gpu)}
                rows.append(r)
                log(f"  eager-host {name:18s} L={layers}: host {r['host_s']} event {r['event_s']} s, {count} kernels "
                    f"({launches} launch calls), GPU {gpu * 1e3:.2f} ms")
                del model, reset, step
                free()
            except Exception as e:
                log(f"  eager-host {name} L={layers}: failed {type(e).__name__}: {str(e)[:160]}")
                free()
        write_csv("gaps-eager-host.csv", rows)
    write_csv("gaps-eager-host.csv", rows)


SECTIONS = {"sdpa-mla": sdpa_mla, "sdpa-window": sdpa_window, "sustained": sustained, "profile": profile_section,
            "eager-host": eager_host}


def main():
    global ARGS, DEV
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--models-dir", required=True)
    p.add_argument("--only", default=",".join(SECTIONS))
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--profile-models", default="", help="profile: these models instead of PROFILE_MODELS")
    p.add_argument("--prompts", default=None, help="profile: prefill lengths (comma list; empty: none)")
    p.add_argument("--decode-batch", type=int, default=1, help="profile: the decode step's batch")
    p.add_argument("--decode-context", type=int, default=512, help="profile: the decode step's static cache")
    p.add_argument("--tag", default="", help="suffix of the profile CSV and the log")
    ARGS = p.parse_args()
    DEV = "cpu" if ARGS.dry_run else "cuda"
    os.makedirs(ARGS.out_dir, exist_ok=True)
    meta = {"torch": torch.__version__, "argv": sys.argv}
    try:
        import transformers
        meta["transformers"] = transformers.__version__
    except ImportError:
        pass
    if DEV == "cuda":
        meta["device"] = torch.cuda.get_device_name(0)
        meta["cudnn"] = torch.backends.cudnn.version()
    log(json.dumps(meta))
    for name in ARGS.only.split(","):
        t0 = time.time()
        log(f"== {name}")
        try:
            SECTIONS[name]()
        except Exception as e:
            log(f"== {name} failed: {type(e).__name__}: {str(e)[:300]}")
        log(f"== {name}: {time.time() - t0:.1f} s")
        with open(os.path.join(ARGS.out_dir, f"gaps{ARGS.tag}-log.txt"), "w") as f:
            f.write("\n".join(LOG) + "\n")


if __name__ == "__main__":
    main()
