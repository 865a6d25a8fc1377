#!/usr/bin/env python3
"""Calibration points for the time model on one GPU (issue 21, step 1; docs/PLANNING.md).

Measures, in one process, and writes one CSV per kind of point under OUT_DIR:

- calibration-copy.csv: device-to-device copy of 2, 4 and 8 GB (`dst.copy_(src)`); the
  bandwidth counts bytes read plus bytes written (2 x size), as KINDS.md and METHOD.md do;
  also a read-only pass (`torch.sum` over the buffer) for comparison;
- calibration-matmul.csv: bf16 `torch.matmul(a[m, k], w[k, n])`, i.e. `F.linear`'s shape
  with the weight transposed as nn.Linear stores it, for every distinct (n, k) of the layers
  of the configs under examples/models/ (q, k, v, o or fused qkv; gate, up, down or fused
  gate_up; experts; latent-attention projections; router; lm_head), m = 1, 2, 4, ..., 16384;
  fp8 (e4m3) `torch._scaled_mm` with per-tensor scales on the Llama-3.1-8B shapes;
- calibration-attention.csv: `F.scaled_dot_product_attention` with Llama-3.1-8B's shapes
  (32 query heads, 8 key/value heads, head_dim 128): causal prefill at 512..32768 tokens,
  decode (one query) over 1K..32K keys at several batches, with GQA inside SDPA
  (`enable_gqa=True`), with keys repeated to 32 heads (as transformers' `repeat_kv`
  does), and with a boolean mask over a static cache (as transformers passes one); the
  backend that ran is read from the profiler's kernel names;
- calibration-launch.csv: host cost per kernel of a chain of N tiny kernels launched eagerly
  against the same chain captured once in a CUDA graph and replayed;
- calibration-grouped.csv: `grouped_mm` (transformers 5's default experts path) at the expert
  shapes of Qwen3-30B-A3B, DeepSeek-V2-Lite and Mixtral-8x7B, tokens 1..16384 routed
  uniformly to top_k distinct experts;
- calibration.json: versions, GPU, clocks (nvidia-smi before and after), and per-class
  summaries (median achieved TFLOP/s, GB/s, efficiency against the H200 datasheet).

Timing: each point is warmed up, then the stream is held by `torch.cuda._sleep` while all
timed launches are queued, each between two CUDA events, so the events time the GPU work and
not the host's launch gaps; the median of the repetitions is reported, with min and max.
Inputs are random (never zeros) and rotate among enough copies that one pass exceeds the
60 MB L2 several times over.

Datasheet figures used for the efficiency columns (NVIDIA H200 datasheet, SXM): 4.8 TB/s
HBM3e, 989 dense bf16 TFLOP/s (1979 with sparsity), 1979 dense fp8 TFLOP/s.

Usage: time_calibrate_h200.py OUT_DIR [--models DIR] [--only copy,matmul,attention,launch,grouped]
       [--tag=-SUFFIX] [--dry-run]   (--dry-run: CPU, tiny sizes, same files; --tag names the
       JSON and log of a partial re-run calibrationSUFFIX.json / calibrationSUFFIX-log.txt)
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

DATASHEET_BW = 4.8e12  # bytes/s, NVIDIA H200 datasheet
DATASHEET_BF16 = 989e12  # dense FLOP/s
DATASHEET_FP8 = 1979e12  # dense FLOP/s
ROTATE_BYTES = 512 * 2**20  # one pass over the rotating inputs: > 8 x the 60 MB L2

ARGS = None
DEV = "cuda"
LOG = []


def log(line=""):
    print(line, flush=True)
    LOG.append(line)


def dec(x, places=9):
    """A float as a fixed-point decimal string (seconds to the nanosecond by default)."""
    return f"{x:.{places}f}"


def smi():
    try:
        q = ("name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,"
             "power.draw,power.limit,temperature.gpu,pstate")
        return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # no nvidia-smi on the CPU dry run
        return f"unavailable: {e}"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def time_calls(fn, reps, warmup=3):
    """Median/min/max seconds of `fn(i)` (i = repetition index, to rotate inputs)."""
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
    torch.cuda._sleep(20_000_000)  # ~10 ms at ~2 GHz: the queue fills before the GPU starts
    for i in range(reps):
        starts[i].record()
        fn(i)
        ends[i].record()
    torch.cuda.synchronize()
    return stats([s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)])


def stats(samples):
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "n": len(samples)}


def rnd(shape, dtype=torch.bfloat16):
    return torch.randn(shape, device=DEV, dtype=torch.float32).to(dtype)


def copies(nbytes_one):
    return max(2, min(16, -(-ROTATE_BYTES // max(1, nbytes_one))))


# ---------------------------------------------------------------- copy bandwidth ---

def copy_points():
    rows = []
    sizes = [2e9, 4e9, 8e9] if not ARGS.dry_run else [2e6, 4e6]
    for size in sizes:
        n = int(size) // 2
        src = rnd((n,))
        dst = torch.empty_like(src)
        s = time_calls(lambda i: dst.copy_(src), reps=10)
        moved = 2 * n * 2
        rows.append({"op": "copy", "bytes_buffer": n * 2, "bytes_moved": moved,
                     "median_s": dec(s["median"]), "min_s": dec(s["min"]), "max_s": dec(s["max"]),
                     "reps": s["n"], "achieved_GBps": dec(moved / s["median"] / 1e9, 1),
                     "efficiency_vs_datasheet": dec(moved / s["median"] / DATASHEET_BW, 4)})
        s = time_calls(lambda i: torch.sum(src), reps=10)
        moved = n * 2
        rows.append({"op": "read_sum", "bytes_buffer": n * 2, "bytes_moved": moved,
                     "median_s": dec(s["median"]), "min_s": dec(s["min"]), "max_s": dec(s["max"]),
                     "reps": s["n"], "achieved_GBps": dec(moved / s["median"] / 1e9, 1),
                     "efficiency_vs_datasheet": dec(moved / s["median"] / DATASHEET_BW, 4)})
        log(f"copy {n * 2 / 1e9:.1f} GB: {rows[-2]['achieved_GBps']} GB/s copy, "
            f"{rows[-1]['achieved_GBps']} GB/s read")
        del src, dst
        if DEV == "cuda":
            torch.cuda.empty_cache()
    return rows


# ---------------------------------------------------------------- matmul shapes ---

def layer_shapes(models_dir):
    """{(n, k): set of 'model:layer'} over the configs, read through transformers' config
    classes so that omitted fields take the library's defaults."""
    from transformers import AutoConfig

    shapes = {}

    def add(n, k, label):
        if n and k:
            shapes.setdefault((int(n), int(k)), set()).add(label)

    for name in sorted(os.listdir(models_dir)):
        path = os.path.join(models_dir, name)
        if not os.path.isfile(os.path.join(path, "config.json")):
            continue
        c = AutoConfig.from_pretrained(path).get_text_config()
        h = c.hidden_size
        nh = c.num_attention_heads
        nkv = getattr(c, "num_key_value_heads", None) or nh
        hd = getattr(c, "head_dim", None) or h // nh
        mt = c.model_type
        if mt == "deepseek_v2":
            qk = c.qk_nope_head_dim + c.qk_rope_head_dim
            if c.q_lora_rank:
                add(c.q_lora_rank, h, f"{name}:q_a")
                add(nh * qk, c.q_lora_rank, f"{name}:q_b")
            else:
                add(nh * qk, h, f"{name}:q")
            add(c.kv_lora_rank + c.qk_rope_head_dim, h, f"{name}:kv_a")
            add(nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, f"{name}:kv_b")
            add(h, nh * c.v_head_dim, f"{name}:o")
        elif mt == "phi3":
            add((nh + 2 * nkv) * hd, h, f"{name}:qkv")
            add(h, nh * hd, f"{name}:o")
        else:
            add(nh * hd, h, f"{name}:q")
            add(nkv * hd, h, f"{name}:k,v")
            add(h, nh * hd, f"{name}:o")
        inter = c.intermediate_size
        if mt == "phi3":
            add(2 * inter, h, f"{name}:gate_up")
            add(h, inter, f"{name}:down")
        elif mt == "mixtral":
            add(inter, h, f"{name}:expert_gate,up")
            add(h, inter, f"{name}:expert_down")
            add(c.num_local_experts, h, f"{name}:router")
        else:
            add(inter, h, f"{name}:gate,up")
            add(h, inter, f"{name}:down")
        if mt in ("qwen3_moe", "deepseek_v2"):
            mi = c.moe_intermediate_size
            add(mi, h, f"{name}:expert_gate,up")
            add(h, mi, f"{name}:expert_down")
            ne = getattr(c, "num_experts", None) or getattr(c, "n_routed_experts", None)
            add(ne, h, f"{name}:router")
            if getattr(c, "n_shared_experts", None):
                add(mi * c.n_shared_experts, h, f"{name}:shared_gate,up")
                add(h, mi * c.n_shared_experts, f"{name}:shared_down")
        add(c.vocab_size, h, f"{name}:lm_head")
    return shapes


def matmul_points(models_dir):
    rows = []
    shapes = layer_shapes(models_dir)
    log(f"{len(shapes)} distinct (n, k) shapes")
    ms = [2**i for i in range(15)] if not ARGS.dry_run else [1, 2, 8]
    items = sorted(shapes.items())
    if ARGS.dry_run:
        items = [((min(n, 256), min(k, 128)), v) for (n, k), v in items[:3]]
    fp8_ok = DEV == "cuda" and hasattr(torch, "float8_e4m3fn")
    llama = {key for key, v in shapes.items() if any(x.startswith("llama-3.1-8b:") for x in v)}
    for (n, k), labels in items:
        wbytes = n * k * 2
        nw = copies(wbytes)
        ws = [rnd((n, k)) for _ in range(nw)]  # stored as nn.Linear does: [out, in]
        first = len(rows)
        for m in ms:
            if m * n * 2 > 8 * 2**30:  # output over 8 GiB: skip (no such layer in use)
                continue
            abytes = m * k * 2
            na = copies(abytes)
            xs = [rnd((m, k)) for _ in range(na)]
            out = torch.empty((m, n), device=DEV, dtype=torch.bfloat16)
            flop = 2 * m * n * k
            reps = 20 if flop < 1e12 else 8
            s = time_calls(lambda i: torch.matmul(xs[i % na], ws[i % nw].t(), out=out), reps)
            moved = wbytes + abytes + m * n * 2
            rows.append(mm_row("bf16", n, k, m, labels, flop, moved, s, DATASHEET_BF16))
            if fp8_ok and (n, k) in llama:
                rows.append(fp8_point(n, k, m, labels, xs, ws))
            del xs, out
        bf = [r for r in rows[first:] if r["dtype"] == "bf16"]
        log(f"mm n={n:6d} k={k:6d} {','.join(sorted(labels))[:60]}: m=1 {bf[0]['achieved_GBps']} GB/s, "
            f"m={bf[-1]['m']} {bf[-1]['achieved_TFLOPs']} TFLOP/s")
        del ws
        if DEV == "cuda":
            torch.cuda.empty_cache()
    return rows


def mm_row(dtype, n, k, m, labels, flop, moved, s, peak):
    t = s["median"]
    return {"dtype": dtype, "n": n, "k": k, "m": m, "layers": ";".join(sorted(labels)),
            "flop": flop, "bytes_min": moved,
            "median_s": dec(t), "min_s": dec(s["min"]), "max_s": dec(s["max"]), "reps": s["n"],
            "achieved_TFLOPs": dec(flop / t / 1e12, 3), "achieved_GBps": dec(moved / t / 1e9, 1),
            "flop_efficiency": dec(flop / t / peak, 4),
            "bw_efficiency": dec(moved / t / DATASHEET_BW, 4), "note": ""}


def fp8_point(n, k, m, labels, xs, ws):
    flop = 2 * m * n * k
    try:
        a8 = [x.to(torch.float8_e4m3fn) for x in xs[:4]]
        # _scaled_mm wants the second operand column-major: w[n, k] row-major, transposed.
        b8 = [w.to(torch.float8_e4m3fn) for w in ws[:4]]
        one = torch.ones((), device=DEV, dtype=torch.float32)
        na, nb = len(a8), len(b8)
        s = time_calls(lambda i: torch._scaled_mm(a8[i % na], b8[i % nb].t(), scale_a=one,
                                                  scale_b=one, out_dtype=torch.bfloat16), 20)
        moved = n * k + m * k + m * n * 2
        return mm_row("fp8_e4m3", n, k, m, labels, flop, moved, s, DATASHEET_FP8)
    except Exception as e:
        row = mm_row("fp8_e4m3", n, k, m, labels, flop, 0, {"median": float("nan"), "min": float("nan"),
                                                           "max": float("nan"), "n": 0}, DATASHEET_FP8)
        row["note"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        return row


# ---------------------------------------------------------------- attention ---

def backend_of(fn):
    """Kernel names of one call, read by the profiler; mapped to the SDPA backend."""
    if DEV != "cuda":
        return "cpu"
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(0)
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]
    joined = " ".join(names).lower()
    # cuDNN's kernels carry 'flash' in their names too: test for cuDNN first.
    if "cudnn" in joined:
        b = "cudnn"
    elif "flash" in joined:
        b = "flash"
    elif "fmha" in joined or "mem_eff" in joined or "efficient" in joined:
        b = "efficient"
    else:
        b = "math?"
    kernels = sorted(set(n[:90] for n in names))[:4]
    return f"{b} [{' | '.join(kernels)}]"


def attention_points():
    rows = []
    nh, nkv, hd = 32, 8, 128  # Llama-3.1-8B
    scale = hd ** -0.5
    prefill = [512, 1024, 2048, 4096, 8192, 16384, 32768] if not ARGS.dry_run else [64, 128]
    for s_len in prefill:
        q_bytes = nh * s_len * hd * 2
        kv_bytes = 2 * nkv * s_len * hd * 2
        nset = copies(q_bytes + kv_bytes)
        qs = [rnd((1, nh, s_len, hd)) for _ in range(nset)]
        ks = [rnd((1, nkv, s_len, hd)) for _ in range(nset)]
        vs = [rnd((1, nkv, s_len, hd)) for _ in range(nset)]
        flop = 4 * nh * hd * s_len * (s_len + 1) // 2  # causal: QK^T and PV over the lower triangle
        moved = 2 * q_bytes + kv_bytes
        for variant in ("gqa", "repeat_kv"):
            if variant == "gqa":
                fn = lambda i: F.scaled_dot_product_attention(
                    qs[i % nset], ks[i % nset], vs[i % nset], is_causal=True, scale=scale, enable_gqa=True)
            else:
                kr = [k.repeat_interleave(nh // nkv, dim=1) for k in ks]
                vr = [v.repeat_interleave(nh // nkv, dim=1) for v in vs]
                fn = lambda i: F.scaled_dot_product_attention(
                    qs[i % nset], kr[i % nset], vr[i % nset], is_causal=True, scale=scale)
            rows.append(attn_row("prefill_causal", variant, 1, s_len, s_len, flop, moved, fn))
        del qs, ks, vs
        kr = vr = None
        log(f"attn prefill {s_len:6d}: {rows[-2]['achieved_TFLOPs']} TFLOP/s gqa "
            f"({rows[-2]['backend'][:40]}), {rows[-1]['achieved_TFLOPs']} repeat_kv")
    decode = [1024, 2048, 4096, 8192, 16384, 32768] if not ARGS.dry_run else [64]
    for batch in ((1, 8, 64) if not ARGS.dry_run else (1, 2)):
        for kv_len in decode:
            kv_bytes = 2 * batch * nkv * kv_len * hd * 2
            nset = copies(kv_bytes)
            qs = [rnd((batch, nh, 1, hd)) for _ in range(nset)]
            ks = [rnd((batch, nkv, kv_len, hd)) for _ in range(nset)]
            vs = [rnd((batch, nkv, kv_len, hd)) for _ in range(nset)]
            mask = torch.ones((batch, 1, 1, kv_len), device=DEV, dtype=torch.bool)
            mask[:, :, :, -8:] = False  # a static cache's unfilled tail
            flop = 4 * batch * nh * hd * kv_len
            moved = kv_bytes + 2 * batch * nh * hd * 2
            fns = {
                "gqa": lambda i: F.scaled_dot_product_attention(
                    qs[i % nset], ks[i % nset], vs[i % nset], scale=scale, enable_gqa=True),
                "gqa_mask": lambda i: F.scaled_dot_product_attention(
                    qs[i % nset], ks[i % nset], vs[i % nset], attn_mask=mask, scale=scale, enable_gqa=True),
            }
            if kv_bytes * (nh // nkv) * nset < 40 * 2**30:
                kr = [k.repeat_interleave(nh // nkv, dim=1) for k in ks]
                vr = [v.repeat_interleave(nh // nkv, dim=1) for v in vs]
                fns["repeat_kv_mask"] = lambda i: F.scaled_dot_product_attention(
                    qs[i % nset], kr[i % nset], vr[i % nset], attn_mask=mask, scale=scale)
            for variant, fn in fns.items():
                rows.append(attn_row("decode", variant, batch, 1, kv_len, flop, moved, fn))
            log(f"attn decode b={batch:3d} kv={kv_len:6d}: " + ", ".join(
                f"{r['variant']} {r['achieved_GBps']} GB/s" for r in rows[-len(fns):]))
            del qs, ks, vs, fns
            kr = vr = None
            if DEV == "cuda":
                torch.cuda.empty_cache()
    return rows


def attn_row(phase, variant, batch, q_len, kv_len, flop, moved, fn):
    try:
        s = time_calls(fn, reps=10)
        profiled = phase != "decode" or kv_len in (1024, 32768) or ARGS.dry_run
        backend = backend_of(fn) if profiled else "not profiled"
        note = ""
    except Exception as e:
        s = {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
        backend, note = "", f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    t = s["median"]
    return {"phase": phase, "variant": variant, "batch": batch, "heads": 32, "kv_heads": 8,
            "head_dim": 128, "q_len": q_len, "kv_len": kv_len, "flop": flop, "bytes_min": moved,
            "median_s": dec(t), "min_s": dec(s["min"]), "max_s": dec(s["max"]), "reps": s["n"],
            "achieved_TFLOPs": dec(flop / t / 1e12, 3), "achieved_GBps": dec(moved / t / 1e9, 1),
            "flop_efficiency": dec(flop / t / DATASHEET_BF16, 4),
            "bw_efficiency": dec(moved / t / DATASHEET_BW, 4), "backend": backend, "note": note}


# ---------------------------------------------------------------- grouped experts ---

def grouped_points():
    """`grouped_mm` (transformers 5's default experts path) at the MoE configs' expert shapes:
    T tokens, each routed to top_k distinct experts drawn uniformly (as random weights route),
    rows sorted by expert, offsets by histc + cumsum; weights stored (E, out, in) and passed
    transposed, as transformers' `_grouped_linear` does. bytes_min counts the weights of the
    experts that got rows, the input and the output."""
    rows = []
    gmm = getattr(F, "grouped_mm", None) or torch._grouped_mm
    cases = [("qwen3-30b-a3b", 128, 8, 2048, 768), ("deepseek-v2-lite", 64, 6, 2048, 1408),
             ("mixtral-8x7b", 8, 2, 4096, 14336)]
    tokens = [1, 4, 16, 64, 256, 1024, 4096, 16384] if not ARGS.dry_run else [1, 4]
    if ARGS.dry_run:
        cases = [("tiny", 4, 2, 64, 32)]
    for name, experts, top_k, h, inter in cases:
        for proj, (out_f, in_f) in (("gate_up", (2 * inter, h)), ("down", (h, inter))):
            nw = copies(experts * out_f * in_f * 2)
            ws = [rnd((experts, out_f, in_f)) for _ in range(nw)]
            for t in tokens:
                ids = torch.rand((t, experts), device=DEV).topk(top_k, dim=-1).indices.reshape(-1)
                ids, _ = torch.sort(ids)
                counts = torch.histc(ids.float(), bins=experts, min=0, max=experts - 1)
                offs = torch.cumsum(counts, dim=0).to(torch.int32)
                used = int((counts > 0).sum())
                srows = t * top_k
                xs = [rnd((srows, in_f)) for _ in range(copies(srows * in_f * 2))]
                nx = len(xs)
                flop = 2 * srows * out_f * in_f
                moved = used * out_f * in_f * 2 + srows * in_f * 2 + srows * out_f * 2
                note = ""
                try:
                    s = time_calls(lambda i: gmm(xs[i % nx], ws[i % nw].transpose(-2, -1), offs=offs), reps=20)
                except Exception as e:
                    s = {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
                    note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                tm = s["median"]
                rows.append({"model": name, "proj": proj, "experts": experts, "top_k": top_k, "tokens": t,
                             "rows": srows, "experts_used": used, "n": out_f, "k": in_f, "flop": flop,
                             "bytes_min": moved, "median_s": dec(tm), "min_s": dec(s["min"]),
                             "max_s": dec(s["max"]), "reps": s["n"],
                             "achieved_TFLOPs": dec(flop / tm / 1e12, 3), "achieved_GBps": dec(moved / tm / 1e9, 1),
                             "flop_efficiency": dec(flop / tm / DATASHEET_BF16, 4),
                             "bw_efficiency": dec(moved / tm / DATASHEET_BW, 4), "note": note})
                del xs
            log(f"grouped {name} {proj}: " + ", ".join(
                f"T={r['tokens']} {r['achieved_GBps']} GB/s" for r in rows[-len(tokens):][:4]))
            del ws
            if DEV == "cuda":
                torch.cuda.empty_cache()
    return rows


# ---------------------------------------------------------------- launch cost ---

def launch_points():
    """Per-kernel cost of N tiny kernels: eager (host clock over N launches, then one sync)
    against one CUDA graph holding the same N kernels (host clock over replays)."""
    rows = []
    x = rnd((64,))
    a = rnd((1, 64))
    w = rnd((64, 64))
    kinds = {"add_": lambda: x.add_(1.0), "linear_1x64x64": lambda: F.linear(a, w)}
    for kind, op in kinds.items():
        for n in (100, 1000):
            for _ in range(3):
                for _ in range(n):
                    op()
            sync()
            walls = []
            for _ in range(7):
                t = time.perf_counter()
                for _ in range(n):
                    op()
                sync()
                walls.append(time.perf_counter() - t)
            eager = statistics.median(walls) / n
            row = {"kernel": kind, "chain_length": n, "eager_s_per_kernel": dec(eager),
                   "graph_s_per_kernel": "", "graph_gpu_s_per_kernel": "", "graph_replay_s": "",
                   "eager_over_graph": "", "note": ""}
            if DEV == "cuda":
                try:
                    g = torch.cuda.CUDAGraph()
                    st = torch.cuda.Stream()
                    st.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(st):
                        for _ in range(3):
                            op()
                    torch.cuda.current_stream().wait_stream(st)
                    with torch.cuda.graph(g):
                        for _ in range(n):
                            op()
                    for _ in range(3):
                        g.replay()
                    sync()
                    walls = []
                    for _ in range(9):
                        t = time.perf_counter()
                        g.replay()
                        sync()
                        walls.append(time.perf_counter() - t)
                    s = time_calls(lambda i: g.replay(), reps=9)
                    gw = statistics.median(walls)
                    row.update({"graph_s_per_kernel": dec(gw / n), "graph_gpu_s_per_kernel": dec(s["median"] / n),
                                "graph_replay_s": dec(gw), "eager_over_graph": dec(eager / (gw / n), 2)})
                except Exception as e:
                    row["note"] = f"graph failed: {type(e).__name__}: {str(e)[:100]}"
            rows.append(row)
            log(f"launch {kind:16s} N={n:5d}: eager {eager * 1e6:7.2f} us/kernel, graph "
                f"{row['graph_s_per_kernel'] and float(row['graph_s_per_kernel']) * 1e6 or float('nan'):7.2f} us/kernel")
    # One empty-ish graph: the fixed cost of a replay (launch + sync) with one kernel.
    return rows


# ---------------------------------------------------------------- main ---

def write_csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def med(values):
    values = [v for v in values if v == v]
    return statistics.median(values) if values else None


def summarize(copy, mm, attn, launch):
    s = {}
    s["copy_GBps"] = {r["bytes_buffer"]: float(r["achieved_GBps"]) for r in copy if r["op"] == "copy"}
    s["read_GBps"] = {r["bytes_buffer"]: float(r["achieved_GBps"]) for r in copy if r["op"] == "read_sum"}
    cls = {}
    for r in mm:
        if r["dtype"] != "bf16":
            continue
        kind = "lm_head" if "lm_head" in r["layers"] else ("expert" if "expert" in r["layers"] else "dense")
        band = "m<=16" if r["m"] <= 16 else ("m<=256" if r["m"] <= 256 else ("m<=2048" if r["m"] <= 2048 else "m>2048"))
        cls.setdefault(f"{kind} {band}", []).append(r)
    s["bf16_matmul_by_class"] = {
        k: {"points": len(v),
            "median_TFLOPs": med([float(r["achieved_TFLOPs"]) for r in v]),
            "median_GBps": med([float(r["achieved_GBps"]) for r in v]),
            "median_flop_efficiency": med([float(r["flop_efficiency"]) for r in v]),
            "median_bw_efficiency": med([float(r["bw_efficiency"]) for r in v])}
        for k, v in sorted(cls.items())}
    s["launch"] = launch
    return s


def main():
    global ARGS, DEV
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--models", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "models"))
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes: checks the script")
    p.add_argument("--only", default="copy,matmul,attention,launch,grouped")
    p.add_argument("--tag", default="", help="suffix of the JSON and log names (a partial re-run)")
    ARGS = p.parse_args()
    DEV = "cpu" if ARGS.dry_run else "cuda"
    os.makedirs(ARGS.out_dir, exist_ok=True)
    torch.manual_seed(0)
    t0 = time.time()
    import transformers
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0) if DEV == "cuda" else "cpu",
            "nvidia_smi_before": smi(), "datasheet": {"bandwidth_Bps": DATASHEET_BW,
                                                      "bf16_dense_FLOPs": DATASHEET_BF16,
                                                      "fp8_dense_FLOPs": DATASHEET_FP8,
                                                      "source": "NVIDIA H200 Tensor Core GPU datasheet (SXM)"}}
    if DEV == "cuda":
        pr = torch.cuda.get_device_properties(0)
        meta.update({"sm_count": pr.multi_processor_count, "total_memory_bytes": pr.total_memory,
                     "l2_bytes": getattr(pr, "L2_cache_size", None)})
    log(json.dumps({k: v for k, v in meta.items() if k != "nvidia_smi_before"}))
    log(meta["nvidia_smi_before"])
    only = ARGS.only.split(",")
    out = ARGS.out_dir
    copy = mm = attn = launch = []
    sections = [("launch", launch_points, "calibration-launch.csv"),
                ("copy", copy_points, "calibration-copy.csv"),
                ("attention", attention_points, "calibration-attention.csv"),
                ("matmul", lambda: matmul_points(ARGS.models), "calibration-matmul.csv"),
                ("grouped", grouped_points, "calibration-grouped.csv")]
    got = {}
    for name, fn, fname in sections:
        if name not in only:
            continue
        t = time.time()
        try:
            got[name] = fn()
        except Exception as e:
            log(f"{name} failed: {type(e).__name__}: {e}")
            got[name] = []
        write_csv(os.path.join(out, fname), got[name])
        meta[f"{name}_seconds"] = round(time.time() - t, 1)
        log(f"== {name}: {meta[f'{name}_seconds']} s, {len(got[name])} rows")
        meta["nvidia_smi_after_" + name] = smi()
        with open(os.path.join(out, f"calibration{ARGS.tag}.json"), "w") as f:
            json.dump(meta, f, indent=1)
    copy, mm, attn, launch = (got.get(k, []) for k in ("copy", "matmul", "attention", "launch"))
    meta["summary"] = summarize(copy, mm, attn, launch)
    meta["total_seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(out, f"calibration{ARGS.tag}.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    log("")
    log("summary: copy GB/s " + json.dumps(meta["summary"]["copy_GBps"]))
    for k, v in meta["summary"]["bf16_matmul_by_class"].items():
        log(f"  bf16 {k:18s} n={v['points']:4d} median {v['median_TFLOPs']:8.2f} TFLOP/s "
            f"{v['median_GBps']:8.1f} GB/s")
    for r in launch:
        log(f"  launch {r['kernel']:16s} N={r['chain_length']:5d} eager {r['eager_s_per_kernel']} s graph {r['graph_s_per_kernel']} s")
    log(f"total {meta['total_seconds']} s")
    with open(os.path.join(out, f"calibration{ARGS.tag}-log.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")


if __name__ == "__main__":
    main()
