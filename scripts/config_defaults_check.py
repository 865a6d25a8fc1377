#!/usr/bin/env python3
"""Compares the defaults `lab plan` resolves with those transformers resolves, per family.

For every family lab plan knows and every field below, a small config is written with the
field present, absent and null; `lab plan --json` reads it and `AutoConfig.for_model`
builds it. The plan's key/value heads, head width, tying, sliding layers and window, and
experts must be what the configuration class resolves, or lab plan must refuse the config
naming the field (never another architecture). Prints one line per disagreement and exits 1
if any.

Usage: config_defaults_check.py LAB_BINARY
Needs torch and transformers (the version scripts/module_order.py names; CPU is enough).
"""

import json
import subprocess
import sys
import tempfile
import os

from transformers import AutoConfig

BASE = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
            num_attention_heads=32, vocab_size=100)
EXTRA = {
    "mixtral": {},
    "deepseek_v2": dict(n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                        q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=8),
    "deepseek_v3": dict(n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                        q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=8),
}
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3",
            "mixtral", "deepseek_v2", "deepseek_v3", "qwen3_moe", "qwen2_moe", "granite",
            "olmo2", "gpt_oss", "llama4_text"]
FIELDS = {
    "num_key_value_heads": 8,
    "sliding_window": 2,
    "tie_word_embeddings": True,
    "use_sliding_window": True,
}


def resolved(cfg, model_type, stated):
    """What transformers builds, in lab plan's terms."""
    kv = cfg.num_key_value_heads
    window = getattr(cfg, "sliding_window", None)
    types = getattr(cfg, "layer_types", None)
    if model_type.startswith("deepseek") or model_type in ("llama", "gemma", "granite", "olmo2"):
        window = None  # these attentions keep no window
    if window:
        if types is not None:
            sliding = sum(t == "sliding_attention" for t in types)
        elif model_type == "gemma3_text":
            sliding = sum(1 for i in range(cfg.num_hidden_layers) if (i + 1) % 6)
        else:
            sliding = cfg.num_hidden_layers
    else:
        sliding = 0
    if model_type.startswith("deepseek"):
        # Latent attention caches one latent per token: the count is not an architecture
        # fact there, and lab plan shows the stated count, else the attention heads.
        kv = stated.get("num_key_value_heads") or cfg.num_attention_heads
    return {"key_value_heads": kv, "tied_embeddings": bool(cfg.tie_word_embeddings),
            "sliding_window_layers": sliding,
            "sliding_window": window if sliding else None}


def planned(lab, fields):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(fields, f)
        out = subprocess.run([lab, "plan", "--model", d, "--json", "--weights-dtype", "bf16"],
                             capture_output=True, text=True)
    if out.returncode != 0:
        return out.stderr.strip()
    a = json.loads(out.stdout)["architecture"]
    return {k: a[k] for k in ("key_value_heads", "tied_embeddings", "sliding_window_layers",
                              "sliding_window")}


def main():
    lab = sys.argv[1]
    bad = 0
    for model_type in FAMILIES:
        for field, value in FIELDS.items():
            for state in ("present", "absent", "null"):
                fields = dict(BASE, **EXTRA.get(model_type, {}), model_type=model_type)
                if state == "present":
                    fields[field] = value
                elif state == "null":
                    fields[field] = None
                kwargs = {k: v for k, v in fields.items() if k != "model_type"}
                try:
                    want = resolved(AutoConfig.for_model(model_type, **kwargs), model_type, kwargs)
                except Exception as e:  # the class refuses it: lab must refuse too
                    want = f"refused ({type(e).__name__})"
                got = planned(lab, fields)
                if isinstance(got, str):
                    # A refusal is right when it names the field or transformers refuses too.
                    if field in got or isinstance(want, str):
                        continue
                if got != want:
                    bad += 1
                    print(f"{model_type} {field} {state}: lab plan {got}, transformers {want}")
    print(f"{bad} disagreements")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
