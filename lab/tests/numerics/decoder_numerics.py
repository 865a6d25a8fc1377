#!/usr/bin/env python3
"""The worker's decoder forward against transformers', on the CPU, for tiny random configs
of every family `lab measure --model` runs (Llama, Mistral, Qwen2, Qwen3, Phi-3, Mixtral,
Gemma 2).

For each case: build the transformers model (eager attention) from a tiny config, give every
parameter a seeded random value (norm weights around 1, biases non-zero, so that every term
of the forward shows), save it with `save_pretrained` (config.json + model.safetensors), ask
`lab-torch-worker` for its logits on that folder through the test-only `cpu_logits` request
(prefill of a prompt, then decode steps one token at a time through the static KV cache),
and compare with transformers' logits of the whole sequence in one forward. Negative
controls (a feature removed from the saved config after transformers ran) must fail by a wide
margin, so that a comparison blind to that feature would be noticed.

Tolerance, per dtype, on max|ours - theirs| / max|theirs| over all logits:
float32 1e-4 (reordered float32 sums); bfloat16 3e-2 (8-bit mantissa: both sides round every
intermediate to bfloat16, at different places).

With `--gpu CONFIG_DIR...` (the GPU proof, run on the GPU machine only): the same comparison
on cuda:0 for each shipped config at its real widths (see `run_gpu`).

Usage: decoder_numerics.py WORKER [--gpu CONFIG_DIR...]   (in a venv with torch 2.11.0 and transformers 5.17.0;
LD_LIBRARY_PATH must reach torch's lib folder). Exit 0 when every case is within tolerance.
Run by `cargo xtask verify` (step "worker numerics").
"""

import json
import os
import subprocess
import sys
import tempfile

import torch
from transformers import AutoConfig, AutoModelForCausalLM

TOLERANCE = {"float32": 1e-4, "bfloat16": 3e-2}

BASE = dict(
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=101,
    rms_norm_eps=1e-6,
    max_position_embeddings=64,
    hidden_act="silu",
)

CASES = {
    # Llama 3.1 rope scaling (short original context so every band of the scaling shows),
    # biases everywhere, untied head.
    "llama-llama3-rope-biases": dict(
        model_type="llama",
        rope_theta=500000.0,
        rope_scaling=dict(
            rope_type="llama3",
            factor=8.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=16,
        ),
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=False,
    ),
    # Linear scaling, tied embeddings, multi-head (no grouping).
    "llama-linear-rope-tied": dict(
        model_type="llama",
        rope_theta=10000.0,
        rope_scaling=dict(rope_type="linear", factor=2.0),
        num_key_value_heads=4,
        tie_word_embeddings=True,
    ),
    # Sliding window shorter than the prompt.
    "mistral-sliding-window": dict(
        model_type="mistral",
        rope_theta=10000.0,
        sliding_window=4,
        head_dim=16,
        tie_word_embeddings=False,
    ),
    # q/k/v biases, tied embeddings.
    "qwen2-qkv-bias": dict(
        model_type="qwen2",
        rope_theta=1000000.0,
        use_sliding_window=False,
        tie_word_embeddings=True,
    ),
    # Phi-3: q/k/v and gate/up fused in the checkpoint, o_proj assigned first, every layer
    # sliding (window shorter than the prompt), no biases whatever attention_bias says.
    "phi3-fused-sliding": dict(
        model_type="phi3",
        rope_theta=10000.0,
        sliding_window=4,
        attention_bias=True,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    ),
    # Per-head q/k norms, head_dim unrelated to hidden / heads, one kv head.
    "qwen3-qk-norm": dict(
        model_type="qwen3",
        rope_theta=1000000.0,
        head_dim=32,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    ),
    # Mixtral: 4 experts, 2 per token (router softmax, top-k renormalised), Mistral's window
    # shorter than the prompt, untied head.
    "mixtral-top2-sliding": dict(
        model_type="mixtral",
        rope_theta=1000000.0,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=4,
        tie_word_embeddings=False,
    ),
    # Mixtral, 3 experts, 1 per token (weight 1 after renormalising), tied, no window, and
    # the checkpoint in the other expert layout than save_pretrained writes (see
    # `OTHER_LAYOUT`): both the released checkpoints' per-expert w1/w3/w2 and transformers
    # 5's stacked gate_up_proj/down_proj are read.
    "mixtral-top1-tied-relayout": dict(
        model_type="mixtral",
        rope_theta=10000.0,
        num_local_experts=3,
        num_experts_per_tok=1,
        num_key_value_heads=4,
        tie_word_embeddings=True,
    ),
    # Gemma 2: (1 + weight) norms (weights near 1, so 1 + w near 2), sandwich norms, GeGLU,
    # embedding times sqrt(48) rounded to the dtype, attention scale query_pre_attn_scalar^-0.5
    # unrelated to head_dim, soft caps small enough to bite (scores and logits are of order
    # 1), every other layer sliding from the first with a window shorter than the prompt.
    "gemma2-softcaps-sliding": dict(
        model_type="gemma2",
        hidden_size=48,
        head_dim=24,
        rope_theta=10000.0,
        query_pre_attn_scalar=20,
        attn_logit_softcapping=1.0,
        final_logit_softcapping=4.0,
        sliding_window=4,
        hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True,
    ),
    # Gemma 2 without caps (null), layer_types listing the windows (full first), untied head.
    "gemma2-no-caps-layer-types": dict(
        model_type="gemma2",
        head_dim=16,
        rope_theta=10000.0,
        query_pre_attn_scalar=16,
        attn_logit_softcapping=None,
        final_logit_softcapping=None,
        sliding_window=3,
        layer_types=["full_attention", "sliding_attention"],
        hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=False,
    ),
}

# Cases whose saved safetensors are rewritten into the other Mixtral expert layout.
OTHER_LAYOUT = {"mixtral-top1-tied-relayout"}

# Routing is a discrete choice: where a token's k-th and (k+1)-th router logits are closer
# than bfloat16's rounding (its spacing is 2^-7 = 0.0078 for logits in [1, 2)), both sides
# are right and still pick different experts (seen with the default seed of
# mixtral-top2-sliding: a gap of 7.4e-4 in probability at one decode token, a relative
# error of 0.36). So a bfloat16 case with experts first checks that every token's margin in
# transformers' own router logits is at least MIN_ROUTER_MARGIN (about three spacings), and
# fails naming the margin otherwise; the seeds below were chosen so that it holds (min
# margin 0.0238 with seed 301). float32 compares every case at its default seed.
MIN_ROUTER_MARGIN = 0.02
SEEDS = {"mixtral-top2-sliding": 301}


def router_margin(model, tokens, per_token):
    """The smallest gap between a token's k-th and (k+1)-th router logits, over every token
    and layer of transformers' forward of `tokens`."""
    logits = []
    hooks = [
        layer.mlp.gate.register_forward_hook(lambda m, i, o: logits.append(o[0].float()))
        for layer in model.model.layers
    ]
    with torch.no_grad():
        model(tokens)
    for h in hooks:
        h.remove()
    top = [l.topk(per_token + 1, dim=-1).values for l in logits]
    return min((t[:, per_token - 1] - t[:, per_token]).min().item() for t in top)

BATCH, PROMPT, STEPS = 2, 7, 4
# Greedy tokens chosen by the worker's own in-place decode step (float32), against
# transformers' greedy `generate` from the same sequence.
GREEDY = 6

# Negative controls (float32): the saved config.json is changed after transformers computed
# its logits, so the worker runs another architecture; each must then be far outside the
# tolerance, which shows the comparison sees that feature.
CONTROLS = {
    "mistral-sliding-window": ("sliding window removed", lambda c: c.update(sliding_window=None)),
    "llama-llama3-rope-biases": (
        "llama3 rope scaling dropped",
        lambda c: c.update(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
    ),
    "qwen3-qk-norm": ("rms_norm_eps x 1e5", lambda c: c.update(rms_norm_eps=0.1)),
    "phi3-fused-sliding": ("sliding window removed", lambda c: c.update(sliding_window=None)),
    "mixtral-top2-sliding": ("1 expert per token, not 2", lambda c: c.update(num_experts_per_tok=1)),
    "gemma2-softcaps-sliding": (
        "attention soft cap removed",
        lambda c: c.update(attn_logit_softcapping=None),
    ),
    "gemma2-no-caps-layer-types": (
        "query_pre_attn_scalar 16 -> 64",
        lambda c: c.update(query_pre_attn_scalar=64),
    ),
}


def other_expert_layout(folder):
    """Rewrites a saved Mixtral's model.safetensors into the other expert layout: the
    released checkpoints' `block_sparse_moe.gate` and per-expert `experts.{e}.w1/w3/w2`
    (gate rows, up rows, down) from transformers 5's `mlp.gate`, `mlp.experts.gate_up_proj`
    `[E, 2I, H]` and `down_proj` `[E, H, I]`, or the other way round (conversion_mapping.py).
    Returns the layout written."""
    from safetensors.torch import load_file, save_file

    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    out = {}
    fused = any(k.endswith("mlp.experts.gate_up_proj") for k in tensors)
    if fused:
        for k, v in tensors.items():
            if k.endswith("mlp.experts.gate_up_proj"):
                p = k[: -len("mlp.experts.gate_up_proj")]
                half = v.shape[1] // 2
                for e in range(v.shape[0]):
                    out[f"{p}block_sparse_moe.experts.{e}.w1.weight"] = v[e, :half].contiguous()
                    out[f"{p}block_sparse_moe.experts.{e}.w3.weight"] = v[e, half:].contiguous()
            elif k.endswith("mlp.experts.down_proj"):
                p = k[: -len("mlp.experts.down_proj")]
                for e in range(v.shape[0]):
                    out[f"{p}block_sparse_moe.experts.{e}.w2.weight"] = v[e].contiguous()
            elif k.endswith("mlp.gate.weight"):
                out[k.replace("mlp.gate.weight", "block_sparse_moe.gate.weight")] = v
            else:
                out[k] = v
    else:
        experts = {}
        for k, v in tensors.items():
            if ".block_sparse_moe.experts." in k:
                p, rest = k.split(".block_sparse_moe.experts.")
                e, w, _ = rest.split(".")
                experts.setdefault(p, {}).setdefault(int(e), {})[w] = v
            elif k.endswith("block_sparse_moe.gate.weight"):
                out[k.replace("block_sparse_moe.gate.weight", "mlp.gate.weight")] = v
            else:
                out[k] = v
        for p, by in experts.items():
            order = sorted(by)
            out[f"{p}.mlp.experts.gate_up_proj"] = torch.stack(
                [torch.cat([by[e]["w1"], by[e]["w3"]], dim=0) for e in order]
            ).contiguous()
            out[f"{p}.mlp.experts.down_proj"] = torch.stack([by[e]["w2"] for e in order]).contiguous()
    save_file(out, path, metadata={"format": "pt"})
    return "per-expert w1/w3/w2" if fused else "stacked gate_up_proj/down_proj"


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32) * 0.1
            if "norm" in name:
                noise = noise + 1.0
            p.copy_(noise)


def run_case(worker, name, overrides, dtype, seed, control=None):
    fields = dict(BASE)
    fields.update(overrides)
    model_type = fields.pop("model_type")
    config = AutoConfig.for_model(model_type, **fields)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.eval()
    randomise(model, seed)
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    model = model.to(torch_dtype)
    g = torch.Generator().manual_seed(seed + 1)
    tokens = torch.randint(0, fields["vocab_size"], (BATCH, PROMPT + STEPS), generator=g)
    if dtype == "bfloat16" and "num_experts_per_tok" in fields:
        margin = router_margin(model, tokens, fields["num_experts_per_tok"])
        if margin < MIN_ROUTER_MARGIN:
            print(
                f"FAIL {name:<28} {dtype:<9} router margin {margin:.4f} < {MIN_ROUTER_MARGIN}: "
                f"a near-tie would flip an expert; choose another seed (SEEDS)"
            )
            return False
    with torch.no_grad():
        theirs = model(tokens).logits.float()
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = 0
        generated = model.generate(
            tokens, max_new_tokens=GREEDY, do_sample=False, attention_mask=torch.ones_like(tokens)
        )[:, PROMPT + STEPS :].tolist()
    with tempfile.TemporaryDirectory(prefix="lab-numerics-") as folder:
        model.save_pretrained(folder, safe_serialization=True)
        layout = None
        if name in OTHER_LAYOUT:
            layout = other_expert_layout(folder)
        if control is not None:
            path = os.path.join(folder, "config.json")
            saved = json.load(open(path))
            control[1](saved)
            json.dump(saved, open(path, "w"))
        probe = {
            "model": folder,
            "dtype": dtype,
            "prompt": tokens[:, :PROMPT].tolist(),
            "steps": [tokens[:, PROMPT + s].tolist() for s in range(STEPS)],
            "greedy": GREEDY if dtype == "float32" and control is None else 0,
        }
        request = json.dumps({"command": "cpu_logits", "probe": probe})
        done = subprocess.run(
            [worker], input=request, capture_output=True, text=True, check=False
        )
    line = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not line:
        raise SystemExit(f"{name}: worker exit {done.returncode}: {done.stderr.strip()[-2000:]}")
    reply = json.loads(line[-1])
    if "logits" not in reply:
        raise SystemExit(f"{name}: worker answered {line[-1][:2000]}")
    logits = reply["logits"]
    vocab = logits["vocab"]
    prefill = torch.tensor(logits["prefill"]).view(BATCH, PROMPT, vocab)
    steps = torch.stack([torch.tensor(s).view(BATCH, vocab) for s in logits["steps"]], dim=1)
    ours = torch.cat([prefill, steps], dim=1)
    scale = theirs.abs().max().item()
    error = (ours - theirs).abs().max().item() / scale
    if control is not None:
        ok = error > 10 * TOLERANCE[dtype]
        print(
            f"{'ok  ' if ok else 'FAIL'} {name:<28} control ({control[0]}): max relative "
            f"error {error:.2e}, must exceed {10 * TOLERANCE[dtype]:.0e}"
        )
        return ok
    ok = error <= TOLERANCE[dtype]
    if dtype == "float32":
        same = logits["greedy_tokens"] == generated
        ok = ok and same
        print(
            f"{'ok  ' if same else 'FAIL'} {name:<28} {dtype:<9} greedy decode: {GREEDY} tokens "
            f"per sequence {'equal' if same else 'differ'} (ours {logits['greedy_tokens']}, "
            f"transformers {generated})"
        )
    print(
        f"{'ok  ' if ok else 'FAIL'} {name:<28} {dtype:<9} max relative error {error:.2e} "
        f"(tolerance {TOLERANCE[dtype]:.0e}; logits up to {scale:.3f}; "
        f"{PROMPT} prompt + {STEPS} decode positions, batch {BATCH}"
        f"{'; checkpoint rewritten as ' + layout if layout else ''})"
    )
    return ok


# The GPU proof (examples/h200/measure-model/run3): the shipped configs at their real widths,
# two layers and a 32768-token vocabulary (files stay small), weights drawn N(0, 0.02) on the
# GPU, transformers' SDPA forward on the same GPU against the worker's (`device_index`).
GPU_TOLERANCE = {"float32": 1e-4, "bfloat16": 3e-2}


def run_gpu(worker, config_dir, dtype, seed, batch=BATCH):
    config = AutoConfig.from_pretrained(config_dir)
    config.num_hidden_layers = 2
    config.vocab_size = 32768
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:2]
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch_dtype)
    model.eval()
    g = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, device="cuda", dtype=torch.float32) * 0.02
            if "norm" in name:
                noise = noise + 1.0
            p.copy_(noise)
    tokens = torch.randint(0, config.vocab_size, (batch, PROMPT + STEPS), generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        theirs = model(tokens.cuda()).logits.float().cpu()
    name = os.path.basename(os.path.normpath(config_dir))
    with tempfile.TemporaryDirectory(prefix="lab-numerics-gpu-") as folder:
        model.save_pretrained(folder, safe_serialization=True)
        del model
        torch.cuda.empty_cache()
        probe = {
            "model": folder,
            "dtype": dtype,
            "prompt": tokens[:, :PROMPT].tolist(),
            "steps": [tokens[:, PROMPT + s].tolist() for s in range(STEPS)],
            "greedy": 0,
            "device_index": 0,
        }
        request = json.dumps({"command": "cpu_logits", "probe": probe})
        done = subprocess.run([worker], input=request, capture_output=True, text=True, check=False)
    line = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not line or "logits" not in json.loads(line[-1]):
        raise SystemExit(f"{name}: worker exit {done.returncode}: {(line[-1] if line else done.stderr)[-2000:]}")
    logits = json.loads(line[-1])["logits"]
    vocab = logits["vocab"]
    prefill = torch.tensor(logits["prefill"]).view(batch, PROMPT, vocab)
    steps = torch.stack([torch.tensor(x).view(batch, vocab) for x in logits["steps"]], dim=1)
    ours = torch.cat([prefill, steps], dim=1)
    scale = theirs.abs().max().item()
    error = (ours - theirs).abs().max().item() / scale
    # The decode positions alone: on the GPU they run the worker's fused decode kernels.
    decode_error = (steps - theirs[:, PROMPT:]).abs().max().item() / scale
    same_argmax = (ours.argmax(-1) == theirs.argmax(-1)).float().mean().item()
    ok = error <= GPU_TOLERANCE[dtype]
    print(
        f"{'ok  ' if ok else 'FAIL'} gpu {name:<18} {dtype:<9} batch {batch} max relative error "
        f"{error:.2e} (decode positions {decode_error:.2e}; tolerance {GPU_TOLERANCE[dtype]:.0e}; "
        f"logits up to {scale:.3f}; argmax equal at {same_argmax * 100:.1f} % of "
        f"{batch * (PROMPT + STEPS)} positions; 2 layers, vocab 32768)"
    )
    return ok


def main():
    if len(sys.argv) >= 3 and sys.argv[2] == "--gpu":
        worker = os.path.abspath(sys.argv[1])
        results = []
        for i, folder in enumerate(sys.argv[3:]):
            for dtype in ("bfloat16", "float32"):
                # Batch 1 too: the worker's own matrix-vector products run at batch 1 only.
                batches = os.environ.get("LAB_NUMERICS_BATCHES", f"{BATCH},1")
                for batch in (int(b) for b in batches.split(",")):
                    results.append(run_gpu(worker, folder, dtype, seed=200 + i, batch=batch))
        if not all(results):
            raise SystemExit(f"{results.count(False)} GPU case(s) outside tolerance")
        return
    if len(sys.argv) != 2:
        raise SystemExit("usage: decoder_numerics.py WORKER [--gpu CONFIG_DIR...]")
    worker = os.path.abspath(sys.argv[1])
    torch.set_num_threads(1)
    results = []
    for i, (name, overrides) in enumerate(CASES.items()):
        for dtype in ("float32", "bfloat16"):
            seed = SEEDS.get(name, 100 + i) if dtype == "bfloat16" else 100 + i
            results.append(run_case(worker, name, overrides, dtype, seed=seed))
        if name in CONTROLS:
            results.append(
                run_case(worker, name, overrides, "float32", 100 + i, control=CONTROLS[name])
            )
    if not all(results):
        raise SystemExit(f"{results.count(False)} case(s) outside tolerance")


if __name__ == "__main__":
    main()
