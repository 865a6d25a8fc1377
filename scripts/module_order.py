#!/usr/bin/env python3
"""Writes the tensors of each model in the order transformers materialises them on a GPU.

`to_empty` and `from_pretrained` give tensors their memory through `torch.nn.Module._apply`:
a module's children first (in the order `__init__` assigned them), then its own parameters,
then its buffers. This walks the same order on the meta device (no memory, no download) and
writes one line per tensor, skipping a parameter already listed (tied weights):

    name <TAB> elements <TAB> bytes per element (bfloat16 build) <TAB> p (parameter) or b (buffer)

Usage: module_order.py MODELS_DIR OUT_DIR
For every MODELS_DIR/<name>/config.json: OUT_DIR/<name>/tensors.tsv. Also a few synthetic
configs for layouts no shipped model has (written with their config.json). `lab plan`'s
layout (each family file under lab/src/plan/family/) is tested against these files. Needs torch and transformers
(written with transformers 5.17.0; CPU is enough).
"""

import os
import sys

import torch
import transformers as T
from transformers import AutoConfig, AutoModelForCausalLM


def walk(module, prefix, out, seen):
    for name, child in module.named_children():
        walk(child, prefix + name + ".", out, seen)
    for kind, tensors in (("p", module._parameters), ("b", module._buffers)):
        for name, t in tensors.items():
            if t is None or id(t) in seen:
                continue
            seen.add(id(t))
            out.append(f"{prefix}{name}\t{t.numel()}\t{t.element_size()}\t{kind}")


def dump(cfg, folder):
    with torch.device("meta"):
        if isinstance(cfg, T.Gemma3Config):
            model = T.Gemma3ForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16)
        elif isinstance(cfg, T.Llama4Config):
            model = T.Llama4ForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16)
        elif isinstance(cfg, T.Mistral3Config):
            model = T.Mistral3ForConditionalGeneration._from_config(cfg, dtype=torch.bfloat16)
        else:
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    out = []
    walk(model, "", out, set())
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tensors.tsv"), "w") as f:
        f.write("\n".join(out) + "\n")


def synthetic():
    small = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                 num_attention_heads=4, vocab_size=1000)
    gemma3 = T.Gemma3Config()
    gemma3.text_config.num_hidden_layers = 2
    gemma3.text_config.layer_types = gemma3.text_config.layer_types[:2]
    gemma3.vision_config.num_hidden_layers = 2
    gemma3.vision_config.vision_use_head = False
    # SigLIP builds its pooling head when vision_use_head is absent (transformers' default).
    head = T.Gemma3Config()
    head.text_config.num_hidden_layers = 2
    head.text_config.layer_types = head.text_config.layer_types[:2]
    head.vision_config.num_hidden_layers = 1
    return {
        "synthetic-gemma": T.GemmaConfig(**small, num_key_value_heads=1, head_dim=64),
        "synthetic-llama-biases": T.LlamaConfig(**small, num_key_value_heads=2,
                                                attention_bias=True, mlp_bias=True),
        "synthetic-deepseek-v3": T.DeepseekV3Config(
            **{**small, "num_hidden_layers": 3}, moe_intermediate_size=128,
            first_k_dense_replace=1, num_key_value_heads=4, n_routed_experts=8,
            n_shared_experts=1, num_experts_per_tok=2, q_lora_rank=96, kv_lora_rank=64,
            qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32),
        # Per-layer feed-forward: the sparse step makes layers 1 and 3 experts, layer 3 is
        # then listed dense.
        "synthetic-qwen3-moe-sparse": T.Qwen3MoeConfig(
            **{**small, "num_hidden_layers": 4}, num_key_value_heads=2, head_dim=32,
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
            decoder_sparse_step=2, mlp_only_layers=[3]),
        # OLMo 2: query and key norms over all heads, grouped key/value heads.
        "synthetic-olmo2": T.Olmo2Config(**small, num_key_value_heads=2),
        # gpt-oss without attention biases, and Llama 4's text model with dense and expert
        # layers alternating (interleave_moe_layer_step 2), biases on, two chunked layers.
        "synthetic-gpt-oss": T.GptOssConfig(**small, num_key_value_heads=2, head_dim=64,
                                            num_local_experts=4, num_experts_per_tok=2,
                                            attention_bias=False),
        "synthetic-llama4-text": T.Llama4TextConfig(
            **{**small, "num_hidden_layers": 4}, num_key_value_heads=2, head_dim=64,
            intermediate_size_mlp=384, num_local_experts=4, num_experts_per_tok=2,
            interleave_moe_layer_step=2, attention_bias=True, no_rope_layers=[1, 0, 1, 0]),
        "synthetic-gemma3-vision": gemma3,
        # Command-R with query and key norms (per head, over (heads, head_dim)).
        "synthetic-cohere-qk-norm": T.CohereConfig(**small, num_key_value_heads=2,
                                                   use_qk_norm=True, attention_bias=True),
        # Phi-3.5-MoE's layout: LayerNorms with biases, biases on q/k/v/o, a head bias.
        "synthetic-phimoe": T.PhimoeConfig(**small, num_key_value_heads=2, num_local_experts=4,
                                           num_experts_per_tok=2, attention_bias=True,
                                           lm_head_bias=True, sliding_window=64),
        # GLM-4.5 with query/key norms, two dense layers first, two shared experts.
        "synthetic-glm4-moe": T.Glm4MoeConfig(
            **{**small, "num_hidden_layers": 3}, num_key_value_heads=2, head_dim=32,
            moe_intermediate_size=64, n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=2, first_k_dense_replace=2, use_qk_norm=True,
            attention_bias=True),
        "synthetic-gemma3-vision-head": head,
    }


def main():
    models, out = sys.argv[1], sys.argv[2]
    for name in sorted(os.listdir(models)):
        cfg = AutoConfig.from_pretrained(os.path.join(models, name))
        dump(cfg, os.path.join(out, name))
    for name, cfg in synthetic().items():
        folder = os.path.join(out, name)
        dump(cfg, folder)
        cfg.dtype = torch.bfloat16
        cfg.to_json_file(os.path.join(folder, "config.json"))


if __name__ == "__main__":
    main()
