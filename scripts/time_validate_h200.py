#!/usr/bin/env python3
"""Measured step times of real architectures on one GPU, for the time model's validation
(issue 21, step 2; docs/PLANNING.md).

Each model is built by transformers from a config under examples/models/ with seeded random
weights (meta device, `to_empty` on the GPU, `initialize_weights`, bf16, SDPA attention), as
scripts/plan_h200.py builds them; no checkpoint is read. Then:

- decode: one step (one new token per sequence) with a `StaticCache` whose length is the
  context, i.e. the step reads `context` keys and values per layer (the last slot is the
  token being written: cache position `context - 1`); the cache is filled with random values
  and its write position reset before every step, outside the timed region. Timed eagerly
  (CUDA events around each forward, the host launching as it goes) and by CUDA-graph replay
  (the same forward captured once with `torch.cuda.graph`, replays timed with events).
  Batch x context in BATCHES x CONTEXTS, skipped where weights + cache + a margin exceed the
  card (the skip is logged, with the bytes);
- prefill: one forward of a prompt at batch 1 with a `DynamicCache`, logits of the last
  position only (`logits_to_keep=1`, as generation does), eager;
- training (--training): one step of AdamW on Llama-3.2-1B in the mixed-precision set-up of
  plan_h200.py: bf16 weights and gradients, fp32 master weights and moments
  (`torch.optim.AdamW(fused=True)` over the fp32 masters), forward + backward + step +
  copy back, no activation checkpointing.

For mixtures of experts, transformers 5's default experts implementation is `grouped_mm`
(`torch._grouped_mm`, token counts by `torch.histc`, made so that a CUDA graph can hold it);
the rows name the implementation that ran, and MoE models are also timed eagerly with the
per-expert loop (`experts_implementation="eager"`) at batch 1 for comparison.

Each row: model, engine (eager | cuda-graphs), phase, batch, context (KV length read by the
step), prompt tokens, median seconds (decimal string, to the nanosecond), repetitions,
min and max, peak allocated bytes during the point, the cache's bytes, and a note.

Usage: time_validate_h200.py OUT_DIR --models-dir DIR --only NAME[,NAME...] [--training]
       [--tag TAG] [--batches B,..] [--contexts C,..] [--no-prefill] [--no-graphs] [--no-moe-loop]
       [--eager-reps N (10)] [--prefill-reps N (5)] [--dry-run]
       (--dry-run: CPU, 2-layer tiny copies of the configs)
Writes OUT_DIR/measured-TAG.csv, OUT_DIR/measured-TAG.json, OUT_DIR/measured-TAG-log.txt.
"""

import argparse
import contextlib
import csv
import gc
import json
import os
import statistics
import subprocess
import tempfile
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, StaticCache

BATCHES = [1, 4, 16, 64, 256]
CONTEXTS = [512, 4096, 16384]
PROMPTS = [128, 512, 1024, 2048, 4096, 8192, 16384]
TRAINING = [("llama-3.2-1b", 4, 1024), ("llama-3.2-1b", 4, 4096)]
MOE = ("mixtral", "qwen3_moe", "deepseek_v2")
MARGIN = 6 * 2**30  # bytes kept free beyond weights + cache (activations, graph pool, logits)

ARGS = None
DEV = "cuda"
LOG = []
ROWS = []
SKIPS = []


def log(line=""):
    print(line, flush=True)
    LOG.append(line)


def dec(x):
    return f"{x:.9f}"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def peak_reset():
    if DEV == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak():
    return torch.cuda.max_memory_allocated() if DEV == "cuda" else 0


class Timer:
    """Events on the GPU, host clock (after a sync) on the CPU."""

    def __init__(self):
        if DEV == "cuda":
            self.a = torch.cuda.Event(enable_timing=True)
            self.b = torch.cuda.Event(enable_timing=True)

    def start(self):
        if DEV == "cuda":
            self.a.record()
        else:
            self.t = time.perf_counter()

    def stop(self):
        if DEV == "cuda":
            self.b.record()
        else:
            self.e = time.perf_counter()

    def seconds(self):
        if DEV == "cuda":
            return self.a.elapsed_time(self.b) / 1e3
        return self.e - self.t


def row(model, engine, phase, batch, context, prompt, samples, peak_bytes, cache_bytes, experts, note=""):
    r = {"model": model, "engine": engine, "phase": phase, "batch": batch, "context": context,
         "prompt_tokens": prompt, "experts_implementation": experts,
         "median_s": dec(statistics.median(samples)) if samples else "",
         "reps": len(samples),
         "min_s": dec(min(samples)) if samples else "", "max_s": dec(max(samples)) if samples else "",
         "spread": f"{(max(samples) - min(samples)) / statistics.median(samples):.4f}" if samples else "",
         "peak_allocated_bytes": peak_bytes, "cache_bytes": cache_bytes, "note": note}
    ROWS.append(r)
    log(f"  {model:22s} {engine:11s} {phase:8s} b={batch:<4d} ctx={context:<6d} p={prompt:<6d} "
        f"{r['median_s'] or '-':>12s} s x{len(samples)} spread {r['spread'] or '-'} {note}")
    return r


# ---------------------------------------------------------------- building ---

def config_folder(name, tmp):
    src = os.path.join(ARGS.models_dir, name)
    if not ARGS.dry_run:
        return src
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config", cfg)
    text["num_hidden_layers"] = 2
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
    if isinstance(text.get("layer_types"), list):
        text["layer_types"] = text["layer_types"][:2]
    folder = os.path.join(tmp, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return folder


def build(folder, experts=None):
    cfg = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    gc.collect()
    if DEV == "cuda":
        torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated() if DEV == "cuda" else 0
    kw = {"dtype": torch.bfloat16, "attn_implementation": "sdpa"}
    if experts:
        kw["experts_implementation"] = experts
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, **kw)
    model.to_empty(device=DEV)
    model.tie_weights()
    model.initialize_weights()
    model.eval()
    sync()
    weights = (torch.cuda.memory_allocated() - before) if DEV == "cuda" else sum(
        p.numel() * p.element_size() for p in model.parameters())
    return model, weights


def text_config(model):
    return model.config.get_text_config()


def kv_estimate(model, batch, context):
    """Bytes the static cache will hold: per layer, its length (the sliding window where the
    layer slides) x (key + value width) x kv heads x 2 bytes x batch."""
    c = text_config(model)
    cache = StaticCache(config=model.config, max_cache_len=context)
    if c.model_type == "deepseek_v2":
        heads, width = c.num_attention_heads, c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim
    else:
        heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
        width = 2 * (getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)
    return sum(layer.max_cache_len for layer in cache.layers) * heads * width * 2 * batch


def cache_bytes(cache):
    seen = {}
    for layer in cache.layers:
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor) and t.numel():
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def set_position(cache, n):
    """Puts every layer's write position at token n (n tokens already cached)."""
    for layer in cache.layers:
        if getattr(layer, "is_initialized", False) and isinstance(getattr(layer, "cumulative_length", None), torch.Tensor):
            layer.cumulative_length.fill_(n)
        if hasattr(layer, "cumulative_length_int"):
            layer.cumulative_length_int = n


# ---------------------------------------------------------------- decode ---

@contextlib.contextmanager
def pinned_host_tensors(keep):
    """During a capture, `torch.tensor(list, device='cuda')` goes through pinned host memory.

    transformers' StaticSlidingWindowLayer.update, once the window is full, builds its write
    index with `torch.tensor([-1], device=...)` inside the forward; a capture refuses that
    pageable copy. The same values through a pinned buffer (kept alive in `keep` as long as
    the graph) make the same kernels capturable; rows where it was used say so."""
    orig = torch.tensor

    def tensor(data, *args, device=None, **kw):
        if device is not None and torch.device(device).type == "cuda" and torch.cuda.is_current_stream_capturing():
            host = orig(data, *args, **kw).pin_memory()
            keep.append(host)
            return host.to(device, non_blocking=True)
        return orig(data, *args, device=device, **kw)

    torch.tensor = tensor
    try:
        yield
    finally:
        torch.tensor = orig


@torch.no_grad()
def decode_points(model, label, weights, experts, batches, contexts, graphs=True):
    c = text_config(model)
    total = torch.cuda.get_device_properties(0).total_memory if DEV == "cuda" else 1 << 40
    for context in contexts:
        for batch in batches:
            est = kv_estimate(model, batch, context)
            if weights + est + MARGIN + batch * c.vocab_size * 4 > total:
                SKIPS.append({"model": label, "batch": batch, "context": context, "cache_bytes_estimate": est,
                              "weights_bytes": weights, "reason": "does not fit"})
                log(f"  {label} b={batch} ctx={context}: skipped, cache {est / 2**30:.1f} GiB does not fit")
                continue
            try:
                decode_one(model, label, experts, batch, context, c.vocab_size, graphs)
            except torch.OutOfMemoryError as e:
                log(f"  {label} b={batch} ctx={context}: out of memory: {str(e)[:100]}")
                SKIPS.append({"model": label, "batch": batch, "context": context, "cache_bytes_estimate": est,
                              "weights_bytes": weights, "reason": "out of memory"})
            gc.collect()
            if DEV == "cuda":
                torch.cuda.empty_cache()


def decode_one(model, label, experts, batch, context, vocab, graphs):
    peak_reset()
    cache = StaticCache(config=model.config, max_cache_len=context)
    ids = torch.randint(0, vocab, (batch, 1), device=DEV)
    pos = torch.full((batch, 1), context - 1, device=DEV, dtype=torch.long)
    cpos = torch.tensor([context - 1], device=DEV, dtype=torch.long)

    def step():
        return model(input_ids=ids, position_ids=pos, cache_position=cpos, past_key_values=cache,
                     use_cache=True)

    set_position(cache, context - 1)
    step()  # allocates the cache's tensors
    for layer in cache.layers:
        for t in (layer.keys, layer.values):
            t.normal_()  # random, never zeros
    kv = cache_bytes(cache)
    # Eager: sync, then events around one forward; the host launches kernels as it goes.
    for _ in range(2):
        set_position(cache, context - 1)
        step()
    sync()
    samples = []
    budget = time.perf_counter() + (0.05 if ARGS.dry_run else 2.0 * ARGS.eager_reps / 10)
    while len(samples) < ARGS.eager_reps and (len(samples) < 3 or time.perf_counter() < budget):
        set_position(cache, context - 1)
        sync()
        t = Timer()
        t.start()
        step()
        t.stop()
        sync()
        samples.append(t.seconds())
    row(label, "eager", "decode", batch, context, 0, samples, peak(), kv, experts)
    if not graphs or ARGS.no_graphs or DEV != "cuda":
        return
    note = ""
    samples = []
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                set_position(cache, context - 1)
                step()
        torch.cuda.current_stream().wait_stream(s)
        set_position(cache, context - 1)
        g = torch.cuda.CUDAGraph()
        keep = []
        with pinned_host_tensors(keep), torch.cuda.graph(g):
            out = step()
        if keep:
            note = f"{len(keep)} host-built index tensors captured through pinned memory"
        for _ in range(3):
            set_position(cache, context - 1)
            g.replay()
        sync()
        timers = [Timer() for _ in range(20)]
        for t in timers:
            set_position(cache, context - 1)  # outside the timed region
            t.start()
            g.replay()
            t.stop()
        sync()
        samples = [t.seconds() for t in timers]
        del g, out, keep
    except Exception as e:
        note = f"capture failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
        torch.cuda.synchronize()
    row(label, "cuda-graphs", "decode", batch, context, 0, samples, peak(), kv, experts, note)


# ---------------------------------------------------------------- prefill ---

@torch.no_grad()
def prefill_points(model, label, experts, prompts):
    vocab = text_config(model).vocab_size
    for p in prompts:
        try:
            ids = torch.randint(0, vocab, (1, p), device=DEV)
            run = lambda: model(input_ids=ids, past_key_values=DynamicCache(config=model.config),
                                use_cache=True, logits_to_keep=1)
            run()
            sync()
            peak_reset()
            samples = []
            reps = (5 if p <= 4096 else 3) * ARGS.prefill_reps // 5
            for _ in range(reps):
                t = Timer()
                sync()
                t.start()
                out = run()
                t.stop()
                sync()
                samples.append(t.seconds())
                del out
            row(label, "eager", "prefill", 1, p, p, samples, peak(), 0, experts)
        except torch.OutOfMemoryError as e:
            log(f"  {label} prefill {p}: out of memory {str(e)[:100]}")
        gc.collect()
        if DEV == "cuda":
            torch.cuda.empty_cache()


# ---------------------------------------------------------------- training ---

def training_point(model, label, batch, seq):
    vocab = text_config(model).vocab_size
    params = [p for p in model.parameters() if p.requires_grad]
    master = [p.detach().float().requires_grad_(False) for p in params]
    opt = torch.optim.AdamW(master, lr=1e-4, weight_decay=0.01, fused=DEV == "cuda")
    model.train()
    ids = torch.randint(0, vocab, (batch, seq), device=DEV)

    def step():
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        for p, w in zip(params, master):
            w.grad = p.grad.float()
            p.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for p, w in zip(params, master):
                p.copy_(w)

    for _ in range(2):
        step()
    sync()
    peak_reset()
    samples = []
    for _ in range(5 if not ARGS.dry_run else 2):
        t = Timer()
        sync()
        t.start()
        step()
        t.stop()
        sync()
        samples.append(t.seconds())
    row(label, "eager", "train", batch, seq, seq, samples, peak(), 0, "",
        "AdamW fused over fp32 masters, bf16 weights/grads, no checkpointing")
    model.eval()
    del master, opt, ids
    gc.collect()


# ---------------------------------------------------------------- main ---

def versions():
    v = {"torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda}
    if DEV == "cuda":
        v["device"] = torch.cuda.get_device_name(0)
        v["total_memory_bytes"] = torch.cuda.get_device_properties(0).total_memory
        try:
            v["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,"
                 "clocks.max.mem,power.draw,temperature.gpu", "--format=csv"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as e:
            v["nvidia_smi"] = f"unavailable: {e}"
    return v


def save():
    tag = ARGS.tag
    fields = ["model", "engine", "phase", "batch", "context", "prompt_tokens", "experts_implementation",
              "median_s", "reps", "min_s", "max_s", "spread", "peak_allocated_bytes", "cache_bytes", "note"]
    with open(os.path.join(ARGS.out_dir, f"measured-{tag}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(ROWS)
    with open(os.path.join(ARGS.out_dir, f"measured-{tag}.json"), "w") as f:
        json.dump({"versions": META, "models": MODELS, "skipped": SKIPS, "rows": len(ROWS)}, f, indent=1)
        f.write("\n")
    with open(os.path.join(ARGS.out_dir, f"measured-{tag}-log.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")


META = {}
MODELS = []


def main():
    global ARGS, DEV, META
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--models-dir", required=True)
    p.add_argument("--only", default="")
    p.add_argument("--training", action="store_true")
    p.add_argument("--tag", default="run")
    p.add_argument("--batches", default="", help="comma list replacing BATCHES")
    p.add_argument("--contexts", default="", help="comma list replacing CONTEXTS")
    p.add_argument("--no-prefill", action="store_true")
    p.add_argument("--no-graphs", action="store_true", help="eager decode only")
    p.add_argument("--no-moe-loop", action="store_true", help="skip the per-expert-loop comparison rows")
    p.add_argument("--eager-reps", type=int, default=10, help="eager decode repetitions (time budget scales)")
    p.add_argument("--prefill-reps", type=int, default=5, help="prefill repetitions up to 4K (3/5 of it above)")
    p.add_argument("--dry-run", action="store_true")
    ARGS = p.parse_args()
    DEV = "cpu" if ARGS.dry_run else "cuda"
    os.makedirs(ARGS.out_dir, exist_ok=True)
    META = versions()
    log(json.dumps(META))
    tmp = tempfile.mkdtemp()
    batches = BATCHES if not ARGS.dry_run else [1, 2]
    contexts = CONTEXTS if not ARGS.dry_run else [32, 64]
    prompts = PROMPTS if not ARGS.dry_run else [16, 32]
    if ARGS.batches:
        batches = [int(x) for x in ARGS.batches.split(",")]
    if ARGS.contexts:
        contexts = [int(x) for x in ARGS.contexts.split(",")]
    if ARGS.no_prefill:
        prompts = []
    for name in [n for n in ARGS.only.split(",") if n]:
        t0 = time.time()
        folder = config_folder(name, tmp)
        try:
            model, weights = build(folder)
        except Exception as e:
            log(f"{name}: build failed: {type(e).__name__}: {e}")
            continue
        c = text_config(model)
        experts = c._experts_implementation if c.model_type in MOE else ""
        info = {"model": name, "model_type": c.model_type, "layers": c.num_hidden_layers,
                "weights_allocated_bytes": weights, "parameters": sum(x.numel() for x in model.parameters()),
                "experts_implementation": experts, "attn_implementation": model.config._attn_implementation,
                "build_seconds": round(time.time() - t0, 1),
                # evidence that the weights are random, not zeros or left-over memory
                "weight_std_sample": {n: float(w.float().std()) for n, w in list(model.named_parameters())[:3]}}
        MODELS.append(info)
        log(f"== {name}: {json.dumps(info)}")
        decode_points(model, name, weights, experts, batches, contexts)
        save()
        prefill_points(model, name, experts, prompts)
        save()
        if c.model_type in MOE and prompts and not ARGS.no_moe_loop:
            # The per-expert loop, eager, batch 1: for comparison with grouped_mm.
            try:
                model.set_experts_implementation("eager")
                decode_points(model, name, weights, "eager", [1], contexts[:1], graphs=False)
                prefill_points(model, name, "eager", prompts[1:2])
                model.set_experts_implementation(experts)
            except Exception as e:
                log(f"  {name}: eager experts failed: {type(e).__name__}: {str(e)[:160]}")
        info["seconds"] = round(time.time() - t0, 1)
        log(f"== {name}: {info['seconds']} s")
        save()
        del model
        gc.collect()
        if DEV == "cuda":
            torch.cuda.empty_cache()
    if ARGS.training:
        for name, batch, seq in (TRAINING if not ARGS.dry_run else [("llama-3.2-1b", 2, 32)]):
            folder = config_folder(name, tmp)
            model, _ = build(folder)
            try:
                training_point(model, name, batch, seq)
            except torch.OutOfMemoryError as e:
                log(f"  {name} train {batch}x{seq}: out of memory {str(e)[:100]}")
            del model
            gc.collect()
            if DEV == "cuda":
                torch.cuda.empty_cache()
            save()
    save()
    log("")
    log("model                  engine      phase    batch context prompt median_s")
    for r in ROWS:
        if r["phase"] != "decode" or r["batch"] in (1, 64):
            log(f"{r['model']:22s} {r['engine']:11s} {r['phase']:8s} {r['batch']:5d} {r['context']:7d} "
                f"{r['prompt_tokens']:6d} {r['median_s']} {r['note'][:40]}")
    save()


if __name__ == "__main__":
    main()
