#!/usr/bin/env python3
"""Where a batch-1 CUDA-graph decode step of Llama-3.1-8B goes, op sequence by op sequence.

A design probe for the libtorch forward of `lab measure --model` (issue 19's performance
target): the same ops the worker issues, written here in PyTorch so that several variants can
be timed and profiled in one GPU call. Random bf16 weights of the config's shapes, a static
KV cache of CONTEXT positions, one decode step captured in a CUDA graph and replayed.

Prints, per variant: median replay time (CUDA events, REPS replays), the bytes read (weights +
the KV cache), the bandwidth and its fraction of the copy bandwidth measured first; then a
kernel table (torch.profiler over a few replays: per-step time per kernel name) for the
chosen variant, and the products alone at each shape by three call forms.

Usage: decode_variants_h200.py [--layers N] [--context C] [--reps R] [--out DIR]
"""

import argparse
import json
import math
import os
import statistics

import torch
import torch.nn.functional as F

H, KVH, D, HID, INTER, VOCAB, EPS = 32, 8, 128, 4096, 14336, 128256, 1e-5


def copy_bandwidth():
    n = 4 * 1024**3 // 2  # 4 GiB of bf16 per side
    a = torch.empty(n, dtype=torch.bfloat16, device="cuda").normal_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n * 2 / statistics.median(times)


def build(layers):
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.empty(*s, dtype=torch.bfloat16, device="cuda").normal_(0, 0.02, generator=g)
    m = dict(embed=r(VOCAB, HID), norm=torch.ones(HID, dtype=torch.bfloat16, device="cuda"), head=r(VOCAB, HID))
    m["layers"] = [
        dict(
            qkv=r((H + 2 * KVH) * D, HID),
            o=r(HID, H * D),
            gu=r(2 * INTER, HID),
            down=r(HID, INTER),
            n1=torch.ones(HID, dtype=torch.bfloat16, device="cuda"),
            n2=torch.ones(HID, dtype=torch.bfloat16, device="cuda"),
        )
        for _ in range(layers)
    ]
    return m


def rope_tables(context):
    inv = 1.0 / (500000.0 ** (torch.arange(0, D, 2, device="cuda").float() / D))
    f = torch.arange(context, device="cuda").float()[:, None] * inv[None]
    emb = torch.cat([f, f], -1)
    sign = torch.cat([-torch.ones(D // 2), torch.ones(D // 2)]).cuda()
    return emb.cos().bfloat16(), (emb.sin() * sign).bfloat16()


def rms(x, w, fused):
    if fused:
        return F.rms_norm(x, (x.shape[-1],), w, EPS)
    f = x.float()
    return w * (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype)


def step_fn(m, cache, state, tables, context, v):
    """One decode step at batch 1; `v` selects the variant's choices."""
    cos_t, sin_t = tables
    ids, pos = state["ids"], state["pos"]
    x = F.embedding(ids, m["embed"]).view(1, HID)  # [1, hid]
    cos = cos_t.index_select(0, pos)  # [1, D]
    sin = sin_t.index_select(0, pos)
    kv_index = state["kv_index"]
    bias = torch.where(kv_index[None, :] <= pos[:, None], 0.0, float("-inf")).to(torch.bfloat16)
    bias = bias.view(1, 1, 1, context).expand(1, KVH, H // KVH, context)
    for i, L in enumerate(m["layers"]):
        h = rms(x, L["n1"], v["fused_norm"])
        qkv = F.linear(h, L["qkv"]).view(1, H + 2 * KVH, D)
        qk = qkv[:, : H + KVH]
        rot = qk * cos + qk.roll(D // 2, -1) * sin if not v["addcmul"] else torch.addcmul(qk * cos, qk.roll(D // 2, -1), sin)
        q = rot[:, :H]
        k = rot[:, H:]
        vv = qkv[:, H + KVH :]
        kc, vc = cache[i]
        kc.index_copy_(2, pos, k.view(1, KVH, 1, D))
        vc.index_copy_(2, pos, vv.reshape(1, KVH, 1, D))
        qg = q.view(1, KVH, H // KVH, D)
        a = F.scaled_dot_product_attention(qg, kc, vc, attn_mask=bias, scale=1 / math.sqrt(D))
        a = a.reshape(1, H * D)
        if v["addmm"]:
            x = torch.addmm(x, a, L["o"].t())
        else:
            x = x + F.linear(a, L["o"])
        h = rms(x, L["n2"], v["fused_norm"])
        gu = F.linear(h, L["gu"])
        act = F.silu(gu[:, :INTER]) * gu[:, INTER:]
        if v["addmm"]:
            x = torch.addmm(x, act, L["down"].t())
        else:
            x = x + F.linear(act, L["down"])
    x = rms(x, m["norm"], v["fused_norm"])
    logits = F.linear(x, m["head"])
    state["ids"].copy_(logits.argmax(-1).view(1, 1))
    state["pos"].add_(1)
    return logits


def time_graph(fn, reps):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    for _ in range(5):
        g.replay()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return g, out, statistics.median(times)


def kernel_table(g, n=5):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(n):
            g.replay()
        torch.cuda.synchronize()
    rows = []
    for e in p.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            rows.append((t / n, e.count / n, e.key[:110]))
    rows.sort(reverse=True)
    return rows


def micro(context):
    """The small ops of one layer alone: per-call time inside a graph of 20 calls."""
    x = torch.randn(1, HID, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(HID, dtype=torch.bfloat16, device="cuda")
    q = torch.randn(1, KVH, H // KVH, D, dtype=torch.bfloat16, device="cuda")
    kc = torch.randn(1, KVH, context, D, dtype=torch.bfloat16, device="cuda")
    vc = torch.randn(1, KVH, context, D, dtype=torch.bfloat16, device="cuda")
    pos = torch.full((1,), context // 2, device="cuda", dtype=torch.long)
    kvi = torch.arange(context, device="cuda")
    bias = torch.where(kvi[None, :] <= pos[:, None], 0.0, float("-inf")).to(torch.bfloat16).view(1, 1, 1, context).expand(1, KVH, H // KVH, context)
    boolmask = (kvi[None, :] <= pos[:, None]).view(1, 1, 1, context).expand(1, KVH, H // KVH, context)
    scale = 1 / math.sqrt(D)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def manual(mask):
        s = torch.matmul(q, kc.transpose(-1, -2)).mul_(scale) if False else torch.baddbmm(
            mask.reshape(KVH, H // KVH, context), q.view(KVH, H // KVH, D), kc.view(KVH, context, D).transpose(1, 2), alpha=scale)
        p = torch.softmax(s, -1, dtype=torch.float32).to(torch.bfloat16)
        return torch.bmm(p, vc.view(KVH, context, D))

    def manual_bf16(mask):
        s = torch.baddbmm(mask.reshape(KVH, H // KVH, context), q.view(KVH, H // KVH, D), kc.view(KVH, context, D).transpose(1, 2), alpha=scale)
        return torch.bmm(torch.softmax(s, -1), vc.view(KVH, context, D))

    cases = {
        "rms_norm fused": lambda: F.rms_norm(x, (HID,), w, EPS),
        "rms_norm fused [1,1,4096]": lambda: F.rms_norm(x.view(1, 1, HID), (HID,), w, EPS),
        "rms manual (8 ops)": lambda: rms(x, w, False),
        "sdpa default float mask": lambda: F.scaled_dot_product_attention(q, kc, vc, attn_mask=bias, scale=scale),
        "sdpa default bool mask": lambda: F.scaled_dot_product_attention(q, kc, vc, attn_mask=boolmask, scale=scale),
        "baddbmm+softmax f32+bmm": lambda: manual(bias),
        "baddbmm+softmax bf16+bmm": lambda: manual_bf16(bias),
        "silu*mul": lambda: F.silu(x) * x,
        "add": lambda: x + x,
        "index_copy_": lambda: kc.index_copy_(2, pos, q[:, :, :1]),
    }
    for be in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
        def f(be=be):
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(q, kc, vc, attn_mask=bias, scale=scale)
        cases[f"sdpa {be.name}"] = f
    print(f"small ops alone (per call, graph of 20, context {context}):")
    for name, f in cases.items():
        try:
            def chain(f=f):
                o = None
                for _ in range(20):
                    o = f()
                return o
            _, _, t = time_graph(chain, 20)
            print(f"  {name:<28} {t / 20 * 1e6:7.2f} us")
        except Exception as e:  # a backend that refuses these inputs
            print(f"  {name:<28} refused: {str(e).splitlines()[0][:100]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    bw = copy_bandwidth()
    print(f"copy bandwidth {bw / 1e12:.4f} TB/s (4 GiB per side, read + write)")
    m = build(a.layers)
    wbytes = sum(t.numel() * 2 for t in [m["embed"], m["norm"], m["head"]]) + sum(
        t.numel() * 2 for L in m["layers"] for t in L.values()
    )
    cache = [
        (torch.zeros(1, KVH, a.context, D, dtype=torch.bfloat16, device="cuda"),
         torch.zeros(1, KVH, a.context, D, dtype=torch.bfloat16, device="cuda"))
        for _ in m["layers"]
    ]
    kvbytes = sum(k.numel() * 2 * 2 for k, _ in cache)
    # Bytes a step must read: every weight except the embedding table (one row), + the cache.
    read = wbytes - m["embed"].numel() * 2 + HID * 2 + kvbytes
    tables = rope_tables(a.context)
    results = {}
    variants = {
        "fused-norm+addmm+addcmul": dict(fused_norm=True, addmm=True, addcmul=True),
        "fused-norm+addmm": dict(fused_norm=True, addmm=True, addcmul=False),
        "fused-norm": dict(fused_norm=True, addmm=False, addcmul=False),
        "unfused-norm+addmm+addcmul": dict(fused_norm=False, addmm=True, addcmul=True),
    }
    graphs = {}
    with torch.inference_mode():
        for name, v in variants.items():
            state = dict(
                ids=torch.randint(0, VOCAB, (1, 1), device="cuda"),
                pos=torch.full((1,), a.context // 2, device="cuda", dtype=torch.long),
                kv_index=torch.arange(a.context, device="cuda"),
            )
            start_pos = state["pos"].clone()

            def fn():
                state["pos"].copy_(start_pos)
                return step_fn(m, cache, state, tables, a.context, v)

            g, out, t = time_graph(fn, a.reps)
            graphs[name] = g
            results[name] = t
            print(f"{name:<30} {t * 1e3:8.4f} ms  {read / t / 1e12:.4f} TB/s  {read / t / bw * 100:5.1f} % of copy")
        best = min(results, key=results.get)
        rows = kernel_table(graphs[best])
        print(f"kernels per step, variant {best} (us per step, launches per step):")
        total = 0
        for t, c, k in rows[:30]:
            total += t
            print(f"  {t:9.1f} us  {c:5.0f}x  {k}")
        print(f"  sum of listed {total:.1f} us; all {sum(r[0] for r in rows):.1f} us")
        # The products alone, three call forms, each captured in a graph of 20 launches.
        shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336), "head": (VOCAB, 4096)}
        print("products alone (m=1, bf16; 8 weight copies rotated so L2 never holds them):")
        for sname, (n, k) in shapes.items():
            ws = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(8 if n < 100000 else 2)]
            x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
            x1 = x.view(k)
            forms = {
                "linear": lambda w: F.linear(x, w),
                "mv": lambda w: torch.mv(w, x1),
                "mm(w,xT)": lambda w: torch.mm(w, x.t()),
            }
            line = []
            for fname, f in forms.items():
                def chain():
                    o = None
                    for i in range(20):
                        o = f(ws[i % len(ws)])
                    return o
                _, _, t = time_graph(chain, 20)
                per = t / 20
                line.append(f"{fname} {per * 1e6:7.2f} us {n * k * 2 / per / bw * 100:5.1f} %")
            print(f"  {sname:<8} {n}x{k}: " + " | ".join(line))
            del ws
    micro(a.context)
    json.dump(dict(copy_bw=bw, read_bytes=read, results=results), open(os.path.join(a.out, "variants.json"), "w"))


if __name__ == "__main__":
    main()
