#!/usr/bin/env python3
"""Differential test: what `lab plan` resolves from a config against what transformers builds.

For every family lab plan knows and every field it reads there, a small valid config is
changed one field at a time: the field present with another value, absent, null, zero,
negative, huge, of the wrong JSON type, and spelled as the other names public configs use
(`num_local_experts` / `num_experts` / `n_routed_experts`, `rope_parameters` /
`rope_scaling`). Each config is given to `lab plan --json` and to transformers
(`AutoConfig.for_model`, then the model built on the meta device: no memory, no download).

Agreement, per case:
- transformers refuses it (the configuration class or the model build raises): lab plan
  must refuse too;
- transformers builds it, lab plan refuses: the refusal must name the field changed (a field
  whose absence changes the architecture may be refused by name, never read otherwise);
- both build: the parameter count, the key/value heads, the head width, tying, and the
  layers the KV cache keeps windowed (`get_layer_types_and_kwargs`, as DynamicCache reads
  the config) with their window must be equal.
Every disagreement is printed, one line each; exit 1 if any.

Usage: config_defaults_check.py LAB_BINARY
Needs torch and transformers (the pinned version of xtask/torch-venv-requirements.txt; CPU).
"""

import concurrent.futures
import copy
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers as T
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.cache_utils import get_layer_types_and_kwargs

BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=128, tie_word_embeddings=False,
            pad_token_id=0)
EXPERTS = dict(num_experts_per_tok=2, moe_intermediate_size=32)
LATENT = dict(kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8,
              v_head_dim=8, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1,
              **EXPERTS)
# Per family: the fields it reads beyond BASE, as a valid small config states them.
EXTRA = {
    "llama": dict(attention_bias=False, mlp_bias=False),
    "mistral": dict(sliding_window=8),
    "qwen2": dict(sliding_window=8, use_sliding_window=True, max_window_layers=2),
    "qwen3": dict(sliding_window=8, use_sliding_window=True, max_window_layers=2,
                  attention_bias=False),
    "gemma": dict(attention_bias=False),
    "gemma2": dict(sliding_window=8, attention_bias=False),
    "gemma3_text": dict(sliding_window=8, sliding_window_pattern=2, attention_bias=False),
    "phi3": dict(sliding_window=8),
    "mixtral": dict(sliding_window=8, num_local_experts=4, num_experts_per_tok=2),
    "deepseek_v2": dict(LATENT, attention_bias=False, mlp_bias=False, moe_layer_freq=1),
    "deepseek_v3": dict(LATENT, attention_bias=False),
    "qwen3_moe": dict(EXPERTS, num_experts=4, decoder_sparse_step=1, mlp_only_layers=[3],
                      sliding_window=8, use_sliding_window=True, attention_bias=False),
    "qwen2_moe": dict(EXPERTS, num_experts=4, decoder_sparse_step=1, mlp_only_layers=[3],
                      shared_expert_intermediate_size=48, qkv_bias=True, sliding_window=8,
                      use_sliding_window=True, max_window_layers=2),
    "granite": dict(attention_bias=False, mlp_bias=False),
    "olmo2": dict(attention_bias=False),
    "cohere": dict(attention_bias=False, use_qk_norm=True),
    "cohere2": dict(attention_bias=False, sliding_window=8, sliding_window_pattern=2),
    "phimoe": dict(num_local_experts=4, num_experts_per_tok=2, attention_bias=True,
                   lm_head_bias=True, sliding_window=8),
    "glm4_moe": dict(EXPERTS, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=1,
                     use_qk_norm=True, attention_bias=True, partial_rotary_factor=0.5),
    "mistral3": dict(sliding_window=8),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
                    attention_bias=True),
    "llama4_text": dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size_mlp=96,
                        interleave_moe_layer_step=2, attention_chunk_size=8,
                        attention_bias=False),
}
# Fields that are read as a list or a string: their "present" value and their wrong type.
LISTS = {"mlp_only_layers": [1], "layer_types": None}
# Other spellings public configs use for one field.
ALIASES = [
    ("num_local_experts", "num_experts", "n_routed_experts"),
    ("rope_parameters", "rope_scaling"),
]
# Families whose attention keeps no window: a stated one changes nothing they build.
NO_WINDOW = {"llama", "gemma", "granite", "olmo2", "deepseek_v2", "deepseek_v3", "cohere",
             "glm4_moe"}
# Nested multimodal families: the decoder's fields live under text_config.
NESTED = {
    "gemma3": dict(vision_config=dict(hidden_size=32, num_hidden_layers=1, intermediate_size=64,
                                      num_attention_heads=2, image_size=32, patch_size=16,
                                      vision_use_head=False)),
    "mistral3": dict(tie_word_embeddings=False,
                     vision_config=dict(model_type="pixtral", hidden_size=32,
                                        num_hidden_layers=1, intermediate_size=64,
                                        num_attention_heads=2, head_dim=16, patch_size=16)),
}
EXTRA["gemma3"] = dict(EXTRA["gemma3_text"])
NO_LAYER_COUNT = {"num_hidden_layers", "first_k_dense_replace", "decoder_sparse_step",
                  "max_window_layers", "sliding_window_pattern", "moe_layer_freq"}
HUGE = 2 ** 41
# Stated so that every class can build the small vocabulary (Phi-3 defaults it to 32000);
# lab plan does not read it.
NOT_READ = {"pad_token_id"}


def config_of(model_type, fields):
    """The config.json lab plan reads, and the keyword arguments transformers gets."""
    if model_type in NESTED:
        text = dict(fields)
        if model_type == "mistral3":
            text.setdefault("model_type", "mistral")
        elif model_type == "gemma3":
            text["model_type"] = "gemma3_text"
        top = dict(copy.deepcopy(NESTED[model_type]), text_config=text)
        return dict(top, model_type=model_type), top
    return dict(fields, model_type=model_type), dict(fields)


def built(model_type, kwargs):
    """What transformers builds, in lab plan's terms, or the refusal's exception name."""
    try:
        cfg = AutoConfig.for_model(model_type, **copy.deepcopy(kwargs))
        text = cfg.get_text_config()
        if text.num_hidden_layers > 64:
            return "refused (too many layers to build here)"
        with torch.device("meta"):
            if model_type == "gemma3":
                model = T.Gemma3ForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16)
            elif model_type == "mistral3":
                model = T.Mistral3ForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16)
            else:
                model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    except Exception as e:  # the class or the model refuses the config
        return f"refused ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})"
    params = sum(p.numel() for p in model.parameters())
    if model_type == "deepseek_v3":
        # A persistent buffer stored in the checkpoint, which lab counts as a parameter.
        params += sum(b.numel() for n, b in model.named_buffers()
                      if n.endswith("e_score_correction_bias"))
    attn = next((m for n, m in model.named_modules()
                 if n.endswith("layers.0.self_attn") and "vision" not in n), None)
    latent = model_type.startswith("deepseek")
    try:
        types, kw = get_layer_types_and_kwargs(text)
        window = kw.get("sliding_window")
    except AttributeError:  # layer_types listed, no sliding_window attribute: no window kept
        types, window = [], None
    sliding = sum(t == "sliding_attention" for t in types) if window else 0
    if model_type in NO_WINDOW:
        sliding = 0
    return {
        "parameters": params,
        "key_value_heads": None if latent else text.num_key_value_heads,
        "head_dim": None if latent or attn is None else attn.head_dim,
        "tied_embeddings": bool(cfg.tie_word_embeddings),
        "sliding_window_layers": sliding,
        "sliding_window": window if sliding else None,
    }


def planned(lab, config):
    """What lab plan resolves, or its refusal's message."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
        out = subprocess.run([lab, "plan", "--model", d, "--json", "--weights-dtype", "bf16"],
                             capture_output=True, text=True)
    if out.returncode != 0:
        return out.stderr.strip() or f"exit {out.returncode}"
    p = json.loads(out.stdout)
    a = p["architecture"]
    latent = a.get("latent_kv_width") is not None
    return {
        "parameters": p["parameters"],
        "key_value_heads": None if latent else a["key_value_heads"],
        "head_dim": None if latent else a["head_dim"],
        "tied_embeddings": a["tied_embeddings"],
        "sliding_window_layers": a["sliding_window_layers"],
        "sliding_window": a["sliding_window"],
    }


def variants(fields, field):
    """(label, fields) for each way of stating `field`."""
    value = fields.get(field)
    out = [("absent", {k: v for k, v in fields.items() if k != field}),
           ("null", dict(fields, **{field: None}))]
    if isinstance(value, bool):
        out += [("present", dict(fields, **{field: not value})),
                ("wrong type", dict(fields, **{field: "yes"})),
                ("zero", dict(fields, **{field: 0}))]
    elif isinstance(value, int):
        present = value * 2 if field not in ("num_hidden_layers",) else value + 2
        out += [("present", dict(fields, **{field: present})),
                ("zero", dict(fields, **{field: 0})),
                ("negative", dict(fields, **{field: -1})),
                ("wrong type", dict(fields, **{field: "yes"})),
                ("fraction", dict(fields, **{field: value + 0.5}))]
        if field not in NO_LAYER_COUNT:
            out.append(("huge", dict(fields, **{field: HUGE})))
    elif isinstance(value, float):
        out += [("present", dict(fields, **{field: 0.25})),
                ("zero", dict(fields, **{field: 0})),
                ("negative", dict(fields, **{field: -1})),
                ("wrong type", dict(fields, **{field: "half"}))]
    elif isinstance(value, list):
        out += [("present", dict(fields, **{field: []})),
                ("wrong type", dict(fields, **{field: 7})),
                ("out of range", dict(fields, **{field: [99]}))]
    for group in ALIASES:
        if field in group:
            for other in group:
                if other != field:
                    spelled = {k: v for k, v in fields.items() if k != field}
                    spelled[other] = value
                    out.append((f"spelled {other}", spelled))
                    out.append((f"also {other} (other value)",
                                dict(fields, **{other: value * 2 if isinstance(value, int)
                                                else value})))
    return out


def cases():
    for model_type, extra in EXTRA.items():
        fields = dict(BASE, **extra)
        for field in [k for k in fields if k not in NOT_READ]:
            for label, changed in variants(fields, field):
                yield model_type, field, label, changed
        # layer_types, present for the families that read it and absent from BASE.
        layers = fields["num_hidden_layers"]
        listed = ["sliding_attention", "full_attention"] * (layers // 2)
        for label, value in (("layer_types listed", listed), ("layer_types wrong type", "x"),
                             ("layer_types too short", listed[:1])):
            yield model_type, "layer_types", label, dict(fields, layer_types=value)
        # The partial rotary factor nested in rope_parameters (GLM-4.5).
        if "partial_rotary_factor" in fields:
            for key in ("rope_parameters", "rope_scaling"):
                rope = {"rope_type": "default", "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.75}
                yield model_type, "partial_rotary_factor", f"in {key}", dict(fields, **{key: rope})


def main():
    lab = sys.argv[1]
    all_cases = list(cases())
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        labbed = list(pool.map(lambda c: planned(lab, config_of(c[0], c[3])[0]), all_cases))
    bad = 0
    for case, got in zip(all_cases, labbed):
        line = check_with(case, got)
        if line:
            bad += 1
            print(line)
    print(f"{len(all_cases)} cases, {bad} disagreements")
    sys.exit(1 if bad else 0)


def check_with(case, got):
    """`check` with lab plan's answer already known (lab runs in parallel, transformers not)."""
    model_type, field, label, fields = case
    _, kwargs = config_of(model_type, fields)
    want = built(model_type, kwargs)
    names = {field} | {a for g in ALIASES if field in g for a in g}
    if isinstance(want, str):
        if isinstance(got, str):
            return None
        return f"{model_type} {field} {label}: lab plan {got}, transformers {want}"
    if isinstance(got, str):
        if any(n in got for n in names):
            return None
        return f"{model_type} {field} {label}: lab plan refused ({got[:160]}), transformers built {want}"
    if got != want:
        diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        return f"{model_type} {field} {label}: lab plan vs transformers {diff}"
    return None


if __name__ == "__main__":
    main()
