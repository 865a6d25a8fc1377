#!/usr/bin/env python3
"""Writes model folders whose safetensors files hold real headers and sparse data, for
benchmarking header readers (scripts/bench_headers.py).

Usage:

    python3 scripts/gen_headers.py deepseek DIR   # 163 shards, 91,991 tensors + index + config
    python3 scripts/gen_headers.py million DIR    # one model.safetensors of 1,000,000 tensors

`deepseek`: the tensor names and shapes of DeepSeek-V3 (`modeling_deepseek.py` with the
dimensions of its config.json, written out below: 61 layers, the first 3 dense, 256 routed
experts and 1 shared, 7168 hidden, multi-token-prediction layer 61), its FP8 layout (each
matrix `F8_E4M3` with an `F32` `weight_scale_inv` of 128 x 128 blocks, norms and the
embedding in `BF16`), in file order over 163 shards as the published index spreads them
(about 565 tensors a shard). Only the headers are written; each file is extended to its full
length with `truncate`, so the ~690 GB of data take no disk space (a sparse file).

`million`: one header of 1,000,000 `BF16` tensors of shape [1000] (names like
`model.layers.123456.weight`) and the config of examples/models/qwen2.5-0.5b, so that
`lab plan` has a model to plan with it.
"""

import json
import os
import struct
import sys

CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "n_group": 8,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 1,
    "max_position_embeddings": 163840,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000,
    "rope_scaling": {
        "type": "yarn",
        "factor": 40,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
    },
    "attention_bias": False,
    "tie_word_embeddings": False,
    "vocab_size": 129280,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}

SHARDS = 163


def blocks(n):
    return (n + 127) // 128


def deepseek_tensors():
    """(name, dtype, shape) in the order the checkpoint stores them."""
    c = CONFIG
    h = c["hidden_size"]
    heads = c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    out = [("model.embed_tokens.weight", "BF16", [c["vocab_size"], h])]

    def linear(name, n_out, n_in):
        out.append((name + ".weight", "F8_E4M3", [n_out, n_in]))
        out.append((name + ".weight_scale_inv", "F32", [blocks(n_out), blocks(n_in)]))

    def mlp(prefix, inter):
        linear(prefix + ".gate_proj", inter, h)
        linear(prefix + ".up_proj", inter, h)
        linear(prefix + ".down_proj", h, inter)

    for layer in range(c["num_hidden_layers"] + c["num_nextn_predict_layers"]):
        p = f"model.layers.{layer}"
        out.append((p + ".input_layernorm.weight", "BF16", [h]))
        a = p + ".self_attn"
        linear(a + ".q_a_proj", c["q_lora_rank"], h)
        out.append((a + ".q_a_layernorm.weight", "BF16", [c["q_lora_rank"]]))
        linear(a + ".q_b_proj", heads * qk, c["q_lora_rank"])
        linear(a + ".kv_a_proj_with_mqa", c["kv_lora_rank"] + c["qk_rope_head_dim"], h)
        out.append((a + ".kv_a_layernorm.weight", "BF16", [c["kv_lora_rank"]]))
        linear(
            a + ".kv_b_proj",
            heads * (c["qk_nope_head_dim"] + c["v_head_dim"]),
            c["kv_lora_rank"],
        )
        linear(a + ".o_proj", h, heads * c["v_head_dim"])
        out.append((p + ".post_attention_layernorm.weight", "BF16", [h]))
        if layer < c["first_k_dense_replace"]:
            mlp(p + ".mlp", c["intermediate_size"])
        else:
            out.append((p + ".mlp.gate.weight", "BF16", [c["n_routed_experts"], h]))
            out.append((p + ".mlp.gate.e_score_correction_bias", "F32", [c["n_routed_experts"]]))
            for e in range(c["n_routed_experts"]):
                mlp(f"{p}.mlp.experts.{e}", c["moe_intermediate_size"])
            mlp(p + ".mlp.shared_experts", c["moe_intermediate_size"] * c["n_shared_experts"])
        if layer >= c["num_hidden_layers"]:
            out.append((p + ".enorm.weight", "BF16", [h]))
            out.append((p + ".hnorm.weight", "BF16", [h]))
            out.append((p + ".eh_proj.weight", "BF16", [h, 2 * h]))
            out.append((p + ".shared_head.norm.weight", "BF16", [h]))
            out.append((p + ".shared_head.head.weight", "BF16", [c["vocab_size"], h]))
    out.append(("model.norm.weight", "BF16", [h]))
    out.append(("lm_head.weight", "BF16", [c["vocab_size"], h]))
    return out


WIDTH = {"BF16": 2, "F32": 4, "F8_E4M3": 1}


def write_file(path, tensors):
    """Writes the header of `tensors` (name, dtype, shape) and extends the file to its data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape in tensors:
        n = WIDTH[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.truncate(8 + len(text) + offset)


def deepseek(folder):
    os.makedirs(folder, exist_ok=True)
    tensors = deepseek_tensors()
    per = -(-len(tensors) // SHARDS)
    weight_map = {}
    for s in range(SHARDS):
        part = tensors[s * per : (s + 1) * per]
        name = f"model-{s + 1:05d}-of-{SHARDS:06d}.safetensors"
        write_file(os.path.join(folder, name), part)
        for t in part:
            weight_map[t[0]] = name
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    print(f"{folder}: {len(tensors)} tensors in {SHARDS} shards")


def million(folder):
    os.makedirs(folder, exist_ok=True)
    tensors = [(f"model.layers.{i}.weight", "BF16", [1000]) for i in range(1_000_000)]
    write_file(os.path.join(folder, "model.safetensors"), tensors)
    with open("examples/models/qwen2.5-0.5b/config.json", encoding="utf-8") as f:
        config = f.read()
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        f.write(config)
    size = os.path.getsize(os.path.join(folder, "model.safetensors"))
    print(f"{folder}: 1000000 tensors in one file of {size} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("deepseek", "million"):
        sys.exit(__doc__)
    {"deepseek": deepseek, "million": million}[sys.argv[1]](sys.argv[2])
