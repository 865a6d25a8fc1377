//! The arithmetic of every family, in the library: the public parameter counts and KV cache
//! per token of the shipped configs, small configs counted by hand, the per-layer patterns.

use super::*;
use crate::plan::memory::{kv_bytes_per_token, kv_cache_bytes};

/// The architecture of a config's text.
fn arch(text: &str) -> Architecture {
    read(&serde_json::from_str(text).unwrap()).unwrap()
}

/// The refusal of a config's text.
fn refusal(text: &str) -> String {
    read(&serde_json::from_str(text).unwrap())
        .unwrap_err()
        .to_string()
}

fn parameters(a: &Architecture) -> u64 {
    u64::try_from(a.parameter_counts().narrow().unwrap().total()).unwrap()
}

macro_rules! shipped {
    ($name:literal) => {
        include_str!(concat!(
            "../../../../examples/models/",
            $name,
            "/config.json"
        ))
    };
}

/// Public parameter counts (the model cards, and the safetensors headers' element counts of
/// the released checkpoints) and the bf16 KV cache per token, for every shipped config.
#[test]
fn shipped_configs_count_their_public_parameters_and_kv_cache() {
    for (name, text, params, kv) in [
        (
            "llama-3.1-8b",
            shipped!("llama-3.1-8b"),
            8_030_261_248u64,
            131_072u128,
        ),
        (
            "llama-3.2-1b",
            shipped!("llama-3.2-1b"),
            1_235_814_400,
            32_768,
        ),
        (
            "mistral-7b-v0.1",
            shipped!("mistral-7b-v0.1"),
            7_241_732_096,
            131_072,
        ),
        (
            "qwen2.5-0.5b",
            shipped!("qwen2.5-0.5b"),
            494_032_768,
            12_288,
        ),
        ("qwen3-0.6b", shipped!("qwen3-0.6b"), 596_049_920, 114_688),
        ("gemma-2-2b", shipped!("gemma-2-2b"), 2_614_341_888, 106_496),
        ("gemma-3-1b", shipped!("gemma-3-1b"), 999_885_952, 26_624),
        (
            "gemma-3-4b-it",
            shipped!("gemma-3-4b-it"),
            4_300_079_472,
            139_264,
        ),
        (
            "phi-3-mini-4k",
            shipped!("phi-3-mini-4k"),
            3_821_079_552,
            393_216,
        ),
        (
            "mixtral-8x7b",
            shipped!("mixtral-8x7b"),
            46_702_792_704,
            131_072,
        ),
        (
            "deepseek-v2-lite",
            shipped!("deepseek-v2-lite"),
            15_706_484_224,
            31_104,
        ),
        // The model card's 20.91B; 24 layers of 8 KV heads of 64.
        (
            "gpt-oss-20b",
            shipped!("gpt-oss-20b"),
            20_914_757_184,
            49_152,
        ),
        // The model card's 116.83B; 36 layers of 8 KV heads of 64.
        (
            "gpt-oss-120b",
            shipped!("gpt-oss-120b"),
            116_829_156_672,
            73_728,
        ),
        // Phi-3.5-MoE-instruct (the card's 41.9B): 16 experts of 6400 on 32 layers, biases on
        // q/k/v/o, LayerNorms with biases, a head bias; 8 KV heads of 128.
        (
            "phi-3.5-moe-instruct",
            shipped!("phi-3.5-moe-instruct"),
            41_873_153_344,
            131_072,
        ),
        // 109B and 400B with the vision tower (the checkpoints' headers say 108.64B and
        // 401.58B); 48 layers of 8 KV heads of 128.
        (
            "llama-4-scout-17b-16e",
            shipped!("llama-4-scout-17b-16e"),
            108_641_793_536,
            196_608,
        ),
        (
            "llama-4-maverick-17b-128e",
            shipped!("llama-4-maverick-17b-128e"),
            401_583_781_376,
            196_608,
        ),
        // Command-R v01 ("35B"): 64 key/value heads of 128 on 40 layers, tied.
        (
            "c4ai-command-r-v01",
            shipped!("c4ai-command-r-v01"),
            34_980_831_232,
            1_310_720,
        ),
        // Command R7B (8.03B in its safetensors, "7B" on its card): 8 key/value heads.
        (
            "c4ai-command-r7b-12-2024",
            shipped!("c4ai-command-r7b-12-2024"),
            8_028_033_024,
            131_072,
        ),
        // GLM-4.5-Air ("106B total"): the multi-token-prediction layer is not built.
        (
            "glm-4.5-air",
            shipped!("glm-4.5-air"),
            106_852_245_504,
            188_416,
        ),
        // Mistral-Small-3.2-24B: the tower, projector and decoder, the head tied (see
        // mistral3.rs: the top level does not say false).
        (
            "mistral-small-3.2-24b",
            shipped!("mistral-small-3.2-24b"),
            23_340_272_640,
            163_840,
        ),
    ] {
        let a = arch(text);
        assert_eq!(parameters(&a), params, "{name}");
        assert_eq!(kv_bytes_per_token(&a, 2), kv, "{name}");
        assert_eq!(a.layer_kinds.len() as u64, a.layers, "{name}");
    }
}

/// Llama-3.1-8B by hand: 32 layers of attention `4096 x (4096 + 2 x 1024 + 4096)`, MLP
/// `3 x 4096 x 14336` and two norms, the embedding and the untied head `128256 x 4096`, the
/// final norm; 8 KV heads of 128 x 2 (K, V) x 2 bytes x 32 layers.
#[test]
fn llama_3_1_8b_by_hand() {
    let a = arch(shipped!("llama-3.1-8b"));
    let layer = 4096 * (4096 + 2 * 1024 + 4096) + 3 * 4096 * 14336 + 2 * 4096;
    assert_eq!(parameters(&a), 32 * layer + 2 * 128_256 * 4096 + 4096);
    assert_eq!(kv_bytes_per_token(&a, 2), 8 * 128 * 2 * 2 * 32);
    // At 8192 tokens, batch 1: 1 GiB.
    assert_eq!(kv_cache_bytes(&a, 2, 1, 8192, true), 1 << 30);
}

/// A small decoder: hidden 64, intermediate 128, 2 layers, 4 heads of 16, 2 KV heads,
/// vocabulary 128; `extra` fields appended.
fn tiny(model_type: &str, extra: &str) -> Architecture {
    arch(&format!(
        r#"{{"model_type":"{model_type}","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":128{extra}}}"#
    ))
}

/// Per layer: q and o 64 x 64, k and v 64 x 32, MLP 3 x 64 x 128, 2 norms of 64 = 36,992;
/// plus the embedding and head 2 x 128 x 64 and the final norm: 90,432.
const TINY_LLAMA: u64 = 2 * (2 * 4096 + 2 * 2048 + 3 * 8192 + 2 * 64) + 2 * 8192 + 64;

#[test]
fn every_family_counts_its_own_tensors() {
    assert_eq!(TINY_LLAMA, 90_432);
    let cases = [
        ("llama", "", TINY_LLAMA),
        ("mistral", "", TINY_LLAMA),
        // OLMo 2: query and key norms over all heads (64 and 32 wide) in each layer.
        ("olmo2", "", TINY_LLAMA + 2 * (64 + 32)),
        // Granite: Llama's tensors (its multipliers add none).
        ("granite", "", TINY_LLAMA),
        (
            "granite",
            r#","attention_bias":true,"mlp_bias":true"#,
            TINY_LLAMA + 2 * (192 + 320),
        ),
        // Phi-3 fuses q, k, v and gate, up: the same totals.
        ("phi3", "", TINY_LLAMA),
        // Qwen2: biases on q (64), k and v (32 each) in every layer.
        ("qwen2", "", TINY_LLAMA + 2 * 128),
        // Qwen3: query and key norms of the head width.
        ("qwen3", "", TINY_LLAMA + 2 * 2 * 16),
        // Gemma: tied by default.
        ("gemma", "", TINY_LLAMA - 8192),
        // Gemma 2 and 3: tied, four norms per layer; Gemma 3 adds query/key norms.
        ("gemma2", "", TINY_LLAMA - 8192 + 2 * 2 * 64),
        (
            "gemma3_text",
            "",
            TINY_LLAMA - 8192 + 2 * 2 * 64 + 2 * 2 * 16,
        ),
        // Llama with every bias: q, k, v, o (64 + 32 + 32 + 64) and MLP (128 + 128 + 64).
        (
            "llama",
            r#","attention_bias":true,"mlp_bias":true"#,
            TINY_LLAMA + 2 * (192 + 320),
        ),
        // Mixtral: 4 experts of the MLP and a 4 x 64 router per layer.
        (
            "mixtral",
            r#","num_local_experts":4,"num_experts_per_tok":2"#,
            TINY_LLAMA + 2 * (3 * 24_576 + 256),
        ),
    ];
    for (model_type, extra, expected) in cases {
        let a = tiny(model_type, extra);
        assert_eq!(a.model_type(), model_type);
        assert_eq!(parameters(&a), expected, "{model_type} {extra}");
    }
}

/// DeepSeek: latent attention on every layer, dense first layers, experts after; the KV
/// cache is the latent plus the rotary key per layer.
#[test]
fn deepseek_layers_are_latent_and_dense_first() {
    let text = r#"{"model_type":"deepseek_v3","hidden_size":64,"intermediate_size":128,"num_hidden_layers":3,
"num_attention_heads":4,"vocab_size":128,"n_routed_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":32,
"n_shared_experts":1,"first_k_dense_replace":1,"kv_lora_rank":16,"q_lora_rank":24,"qk_rope_head_dim":8,
"qk_nope_head_dim":8,"v_head_dim":8}"#;
    let a = arch(text);
    let kinds: Vec<FeedForward> = a.layer_kinds.iter().map(|l| l.feed_forward).collect();
    assert_eq!(
        kinds,
        [
            FeedForward::Dense,
            FeedForward::Experts,
            FeedForward::Experts
        ]
    );
    assert!(a
        .layer_kinds
        .iter()
        .all(|l| l.attention == Attention::Latent));
    assert_eq!(kv_bytes_per_token(&a, 2), 3 * (16 + 8) * 2);
    // Attention: q 64x24 + norm 24 + 24 x 4(8+8); kv_a 64 x (16+8), norm 16, kv_b 16 x 4(8+8),
    // o 64 x 4x8.
    let attn = 64 * 24 + 24 + 24 * 64 + 64 * 24 + 16 + 16 * 64 + 64 * 32;
    let dense = 3 * 64 * 128;
    // Experts: 8 x 3 x 64 x 32, router 8 x 64, correction 8, one shared expert 3 x 64 x 32.
    let moe = 8 * 3 * 64 * 32 + 8 * 64 + 8 + 3 * 64 * 32;
    let norms = 2 * 64;
    let expected = 3 * (attn + norms) + dense + 2 * moe + 2 * 128 * 64 + 64;
    assert_eq!(parameters(&a), expected);
    // V2 has no score-correction bias.
    let v2 = arch(&text.replace("deepseek_v3", "deepseek_v2"));
    assert_eq!(parameters(&v2), expected - 2 * 8);
    // Every layer dense when first_k_dense_replace covers them all.
    let all_dense =
        arch(&text.replace("\"first_k_dense_replace\":1", "\"first_k_dense_replace\":3"));
    assert!(all_dense
        .layer_kinds
        .iter()
        .all(|l| l.feed_forward == FeedForward::Dense));
    // attention_bias: biases on q_a (24), kv_a (16 + 8) and o (64) in each layer; V2's
    // mlp_bias on its dense and shared MLPs (128 + 128 + 64, 32 + 32 + 64).
    let biased = arch(&text.replace(
        "\"vocab_size\":128",
        "\"vocab_size\":128,\"attention_bias\":true",
    ));
    assert_eq!(parameters(&biased) - parameters(&a), 3 * (24 + 24 + 64));
    let mlp = text
        .replace("deepseek_v3", "deepseek_v2")
        .replace("\"vocab_size\":128", "\"vocab_size\":128,\"mlp_bias\":true");
    assert_eq!(parameters(&arch(&mlp)) - parameters(&v2), 320 + 2 * 128);
}

#[test]
fn sliding_patterns_follow_each_family() {
    let slides = |a: &Architecture| -> Vec<bool> {
        a.layer_kinds
            .iter()
            .map(|l| matches!(l.attention, Attention::Sliding(_)))
            .collect()
    };
    let window = r#","sliding_window":32"#;
    // Mistral and Phi-3: every layer; Gemma 2: every other from the first; Llama: none.
    assert_eq!(slides(&tiny("mistral", window)), [true, true]);
    assert_eq!(slides(&tiny("phi3", window)), [true, true]);
    assert_eq!(slides(&tiny("gemma2", window)), [true, false]);
    assert_eq!(slides(&tiny("llama", window)), [false, false]);
    // Qwen2/3: only with use_sliding_window, from max_window_layers.
    assert_eq!(slides(&tiny("qwen2", window)), [false, false]);
    let on = r#","sliding_window":32,"use_sliding_window":true,"max_window_layers":1"#;
    assert_eq!(slides(&tiny("qwen3", on)), [false, true]);
    // Gemma 3: five sliding then one full, by default, with its 4096 window.
    let gemma3 = arch(
        r#"{"model_type":"gemma3_text","num_hidden_layers":12,"hidden_size":64,"intermediate_size":128,
"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":128}"#,
    );
    assert_eq!(
        slides(&gemma3),
        [true, true, true, true, true, false, true, true, true, true, true, false]
    );
    assert_eq!(gemma3.sliding_window(), Some(4096));
    // layer_types, when listed, say which layers slide.
    let listed = tiny(
        "llama",
        r#","sliding_window":8,"layer_types":["full_attention","sliding_attention"]"#,
    );
    assert_eq!(slides(&listed), [false, true]);
    // Sliding layers keep at most the window: 2 layers, one of them at 8 tokens.
    assert_eq!(
        kv_cache_bytes(&listed, 2, 1, 100, true),
        (100 + 8) * 2 * 2 * 16 * 2
    );
    assert_eq!(
        kv_cache_bytes(&listed, 2, 1, 100, false),
        200 * 2 * 2 * 16 * 2
    );
}

#[test]
fn the_supported_list_and_refusals_come_from_the_enum() {
    // The list in the order of the enum; new families are added at its end.
    assert!(Family::supported().starts_with(
        "llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, gemma3, phi3, mixtral, deepseek_v2, deepseek_v3"
    ));
    assert_eq!(Family::supported().split(", ").count(), Family::ALL.len());
    for f in Family::ALL {
        assert_eq!(Family::from_model_type(f.model_type()), Some(*f));
    }
    assert_eq!(Family::from_model_type("gpt_neox"), None);
    let unknown = refusal(r#"{"model_type":"gpt_neox"}"#);
    assert!(
        unknown.contains(&format!("lab plan knows {}", Family::supported())),
        "{unknown}"
    );
    let missing = refusal(r#"{"hidden_size":1}"#);
    assert!(missing.contains("has no \"model_type\""), "{missing}");
    assert!(refusal(r#"{"model_type":null}"#).contains("has no \"model_type\""));
    for (wrong, shown) in [
        ("0", "0"),
        ("true", "true"),
        ("[]", "[]"),
        ("{}", "{}"),
        ("1.5", "1.5"),
    ] {
        let e = refusal(&format!(r#"{{"model_type":{wrong}}}"#));
        assert!(
            e.contains(&format!(
                "\"model_type\" must be a string such as \"llama\", found {shown}"
            )),
            "{wrong}: {e}"
        );
    }
    let e = refusal(
        r#"{"model_type":"mixtral","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
"num_attention_heads":4,"num_key_value_heads":4,"vocab_size":128,"num_local_experts":2,"num_experts_per_tok":3}"#,
    );
    assert!(
        e.contains("num_experts_per_tok 3 must be from 1 to the 2 experts"),
        "{e}"
    );
}

/// Qwen3-30B-A3B by hand: per layer attention `2048 x (4096 + 2 x 512) + 4096 x 2048`, the
/// query and key norms, 128 experts of `3 x 2048 x 768`, the router `128 x 2048`, two norms.
#[test]
fn qwen3_30b_a3b_by_hand() {
    let a = arch(shipped!("qwen3-30b-a3b"));
    let attention = 2048 * (4096 + 2 * 512) + 4096 * 2048 + 2 * 128;
    let layer = attention + 128 * 3 * 2048 * 768 + 128 * 2048 + 2 * 2048;
    assert_eq!(parameters(&a), 48 * layer + 2 * 151_936 * 2048 + 2048);
    assert!(a
        .layer_kinds
        .iter()
        .all(|l| l.feed_forward == FeedForward::Experts && l.attention == Attention::Full));
}

/// Qwen3-MoE's per-layer choice: `mlp_only_layers` and `decoder_sparse_step` (a layer is
/// a mixture of experts when the step divides its 1-based index), the dense layers at
/// `intermediate_size`; the window only with `use_sliding_window`.
#[test]
fn qwen3_moe_layers_follow_mlp_only_layers_and_the_sparse_step() {
    let moe = |extra: &str| {
        tiny(
            "qwen3_moe",
            &format!(
                r#","num_hidden_layers":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32{extra}"#
            ),
        )
    };
    let kinds = |a: &Architecture| -> Vec<bool> {
        a.layer_kinds
            .iter()
            .map(|l| l.feed_forward == FeedForward::Experts)
            .collect()
    };
    assert_eq!(kinds(&moe("")), [true, true, true, true]);
    assert_eq!(
        kinds(&moe(r#","decoder_sparse_step":2"#)),
        [false, true, false, true]
    );
    assert_eq!(
        kinds(&moe(r#","mlp_only_layers":[0,3]"#)),
        [false, true, true, false]
    );
    // One dense layer instead of an expert layer: 3 x 64 x 128 instead of 4 experts of
    // 3 x 64 x 32 and the 4 x 64 router.
    let all = parameters(&moe(""));
    let one_dense = parameters(&moe(r#","mlp_only_layers":[1]"#));
    assert_eq!(one_dense + 4 * 3 * 64 * 32 + 4 * 64, all + 3 * 64 * 128);
    for (extra, needle) in [
        (
            r#","mlp_only_layers":[4]"#,
            "\"mlp_only_layers\" must be a list of layer indices from 0 to 3",
        ),
        (
            r#","mlp_only_layers":"0""#,
            "\"mlp_only_layers\" must be a list",
        ),
        (
            r#","decoder_sparse_step":0"#,
            "\"decoder_sparse_step\" must be a whole number",
        ),
        (
            r#","num_local_experts":8"#,
            "num_experts 4 and num_local_experts 8 disagree",
        ),
    ] {
        let text = format!(
            r#"{{"model_type":"qwen3_moe","hidden_size":64,"intermediate_size":128,"num_hidden_layers":4,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":128,"num_experts":4,
"num_experts_per_tok":2,"moe_intermediate_size":32{extra}}}"#
        );
        let e = refusal(&text);
        assert!(e.contains(needle), "{extra}: {e}");
    }
    let window = r#","sliding_window":8"#;
    assert_eq!(moe(window).sliding_window(), None);
    let on = r#","sliding_window":8,"use_sliding_window":true"#;
    assert_eq!(moe(on).sliding_layers(), 4);
}

/// One valid small config per family (every field it reads stated), for the classes below.
fn base(family: Family) -> serde_json::Value {
    let mut v = serde_json::json!({
        "model_type": family.model_type(), "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "vocab_size": 128, "tie_word_embeddings": false, "attention_bias": false,
        "mlp_bias": false, "torch_dtype": "bfloat16", "sliding_window": 8,
    });
    let extra = match family {
        Family::Mixtral => serde_json::json!({"num_local_experts": 4, "num_experts_per_tok": 2}),
        Family::Qwen2 | Family::Qwen3 => {
            serde_json::json!({"use_sliding_window": true, "max_window_layers": 1})
        }
        Family::Gemma3Text => serde_json::json!({"sliding_window_pattern": 2}),
        Family::DeepseekV2 | Family::DeepseekV3 => serde_json::json!({
            "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
            "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_layer_freq": 1,
            "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
            "v_head_dim": 8}),
        Family::Qwen2Moe => serde_json::json!({
            "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 48, "decoder_sparse_step": 1, "qkv_bias": true,
            "mlp_only_layers": [1], "use_sliding_window": true, "max_window_layers": 2}),
        Family::Qwen3Moe => serde_json::json!({
            "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
            "decoder_sparse_step": 1, "mlp_only_layers": [1], "use_sliding_window": true}),
        Family::GptOss => serde_json::json!({"num_local_experts": 4, "num_experts_per_tok": 2}),
        Family::Llama4Text | Family::Llama4 => serde_json::json!({
            "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size_mlp": 96,
            "interleave_moe_layer_step": 2, "attention_chunk_size": 8, "no_rope_layers": [1, 0]}),
        Family::Cohere => serde_json::json!({"use_qk_norm": true}),
        Family::Cohere2 => serde_json::json!({"sliding_window_pattern": 2}),
        Family::Phimoe => serde_json::json!({
            "num_local_experts": 4, "num_experts_per_tok": 2, "lm_head_bias": true}),
        Family::Glm4Moe => serde_json::json!({
            "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
            "n_shared_experts": 1, "first_k_dense_replace": 1, "use_qk_norm": true,
            "partial_rotary_factor": 0.5}),
        _ => serde_json::json!({}),
    };
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    if family == Family::Llama4 {
        let text = v.clone();
        v = serde_json::json!({"model_type": "llama4", "text_config": text,
            "vision_config": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
            "intermediate_size": 64, "image_size": 32, "patch_size": 16, "num_channels": 3,
            "projector_input_dim": 48, "projector_output_dim": 48, "vision_output_dim": 48}});
        v["text_config"]
            .as_object_mut()
            .unwrap()
            .remove("model_type");
    }
    if family == Family::Mistral3 {
        let mut text = v.clone();
        text["model_type"] = "mistral".into();
        v = serde_json::json!({"model_type": "mistral3", "text_config": text,
            "tie_word_embeddings": false,
            "vision_config": {"hidden_size": 32, "num_hidden_layers": 1, "intermediate_size": 64,
            "num_attention_heads": 2, "patch_size": 16, "num_channels": 3}});
        return v;
    }
    if family == Family::Gemma3 {
        let text = v.clone();
        v = serde_json::json!({"model_type": "gemma3", "text_config": text,
            "mm_tokens_per_image": 4,
            "vision_config": {"hidden_size": 32, "num_hidden_layers": 1, "intermediate_size": 64,
            "num_attention_heads": 2,
            "image_size": 32, "patch_size": 16, "num_channels": 3, "vision_use_head": false}});
        v["text_config"]
            .as_object_mut()
            .unwrap()
            .remove("model_type");
    }
    v
}

/// Every field a family reads, given the wrong JSON type, is refused naming it (never read
/// as "absent"): `attention_bias: "yes"`, `layer_types: "full_attention"`,
/// `quantization_config: "gptq"` included.
#[test]
fn a_field_of_the_wrong_type_is_refused_by_name() {
    for family in Family::ALL.iter().copied() {
        let good = base(family);
        read(&good).unwrap_or_else(|e| panic!("{family:?}: {e}"));
        let scope = |v: &mut serde_json::Value| -> serde_json::Map<String, serde_json::Value> {
            match family {
                Family::Gemma3 | Family::Llama4 | Family::Mistral3 => {
                    v["text_config"].as_object().unwrap().clone()
                }
                _ => v.as_object().unwrap().clone(),
            }
        };
        let mut keys: Vec<String> = scope(&mut good.clone()).keys().cloned().collect();
        keys.retain(|k| k != "model_type");
        keys.extend(["layer_types", "quantization_config"].map(String::from));
        for key in keys {
            let numeric = good
                .get(&key)
                .or_else(|| good.get("text_config").and_then(|t| t.get(&key)))
                .is_some_and(|v| v.is_number() || v.is_boolean());
            // A string where a number or a boolean is expected; a number where a string, a
            // list or an object is.
            let wrong = if numeric {
                serde_json::json!("yes")
            } else {
                serde_json::json!(7)
            };
            let mut bad = good.clone();
            match family {
                Family::Gemma3 | Family::Llama4 | Family::Mistral3 => {
                    bad["text_config"][&key] = wrong.clone()
                }
                _ => bad[&key] = wrong.clone(),
            }
            if key == "quantization_config" {
                bad[&key] = serde_json::json!("gptq");
            }
            if key == "layer_types" {
                match family {
                    Family::Gemma3 | Family::Llama4 | Family::Mistral3 => {
                        bad["text_config"][&key] = serde_json::json!("full_attention")
                    }
                    _ => bad[&key] = serde_json::json!("full_attention"),
                }
            }
            // DeepSeek, Granite and OLMo 2 read no window (their attention has none): the keys are
            // not theirs.
            let ignored = matches!(
                family,
                Family::DeepseekV2
                    | Family::DeepseekV3
                    | Family::Granite
                    | Family::Olmo2
                    | Family::Cohere
                    | Family::Glm4Moe
            ) && matches!(key.as_str(), "sliding_window" | "layer_types")
                // The bias fields exist only in the classes whose modeling file reads them
                // (transformers accepts any value for the others, and builds no bias).
                || (key == "attention_bias"
                    && matches!(
                        family,
                        Family::Mistral
                            | Family::Mixtral
                            | Family::Phi3
                            | Family::Qwen2
                            | Family::Qwen2Moe
                            | Family::Mistral3
                    ))
                || (key == "mlp_bias"
                    && !matches!(
                        family,
                        Family::Llama | Family::Granite | Family::DeepseekV2
                    ));
            // Llama 4 has chunks, not windows.
            let ignored = ignored
                || matches!(family, Family::Llama4 | Family::Llama4Text) && key == "sliding_window";
            match read(&bad) {
                Ok(_) if ignored => {}
                Ok(_) => panic!("{family:?}: {key} = {wrong} was accepted"),
                Err(e) => assert!(
                    e.to_string().contains(&format!("\"{key}\"")),
                    "{family:?} {key}: {e}"
                ),
            }
        }
    }
}

/// Absent or null, a field is either refused naming it or planned: never a panic, never a
/// refusal about another field.
#[test]
fn an_absent_or_null_field_is_planned_or_refused_by_name() {
    for family in Family::ALL.iter().copied() {
        let good = base(family);
        let inner = |v: &serde_json::Value| match family {
            Family::Gemma3 | Family::Llama4 | Family::Mistral3 => {
                v["text_config"].as_object().unwrap().clone()
            }
            _ => v.as_object().unwrap().clone(),
        };
        for key in inner(&good).keys().filter(|k| *k != "model_type") {
            for null in [false, true] {
                let mut changed = good.clone();
                let target = match family {
                    Family::Gemma3 | Family::Llama4 | Family::Mistral3 => {
                        changed["text_config"].as_object_mut().unwrap()
                    }
                    _ => changed.as_object_mut().unwrap(),
                };
                if null {
                    target.insert(key.clone(), serde_json::Value::Null);
                } else {
                    target.remove(key);
                }
                if let Err(e) = read(&changed) {
                    let e = e.to_string();
                    assert!(
                        e.contains(key.as_str()),
                        "{family:?} {key} (null {null}): {e}"
                    );
                }
            }
        }
    }
}

/// A config of `model_type` with 32 heads of 8 (hidden 256), 4 layers, and `extra` fields;
/// no key/value heads and no window stated unless `extra` says so.
fn bare(model_type: &str, extra: &str) -> std::result::Result<Architecture, String> {
    read(
        &serde_json::from_str(&format!(
            r#"{{"model_type":"{model_type}","hidden_size":256,"intermediate_size":512,"num_hidden_layers":4,
"num_attention_heads":32,"head_dim":8,"vocab_size":100{extra}}}"#
        ))
        .unwrap(),
    )
    .map_err(|e| e.to_string())
}

/// transformers' own defaults for absent keys, and its reading of null, per family: the
/// values `AutoConfig.for_model(model_type, ...)` resolves in transformers 5.17 for the same
/// fields (checked with the pinned build of `scripts/module_order.py`).
#[test]
fn absent_and_null_fields_take_the_configuration_class_defaults() {
    let kv = |model_type: &str, extra: &str| bare(model_type, extra).map(|a| a.kv_heads);
    // Absent num_key_value_heads: each class its own default.
    for (model_type, absent) in [
        ("llama", 32),
        ("phi3", 32),
        ("mistral", 8),
        ("mixtral", 8),
        ("qwen2", 32),
        ("qwen3", 32),
        ("gemma", 16),
        ("gemma2", 4),
        ("gemma3_text", 4),
        ("qwen3_moe", 4),
        ("qwen2_moe", 16),
        ("granite", 32),
        ("olmo2", 32),
    ] {
        assert_eq!(kv(model_type, ""), Ok(absent), "{model_type}");
    }
    // Null: the attention heads where the class types it `int | None`, refused where `int`.
    for model_type in ["llama", "phi3", "qwen2", "qwen3", "granite"] {
        assert_eq!(kv(model_type, r#","num_key_value_heads":null"#), Ok(32));
    }
    for model_type in [
        "mistral",
        "mixtral",
        "gemma",
        "gemma2",
        "gemma3_text",
        "qwen3_moe",
    ] {
        let e = kv(model_type, r#","num_key_value_heads":null"#).unwrap_err();
        assert!(
            e.contains("\"num_key_value_heads\" is null"),
            "{model_type}: {e}"
        );
    }
    // A null boolean: the classes type them bool and refuse null.
    for key in [
        "tie_word_embeddings",
        "attention_bias",
        "use_sliding_window",
    ] {
        let e = bare("qwen3", &format!(r#","{key}":null"#)).unwrap_err();
        assert!(
            e.contains(&format!("\"{key}\" must be true or false, found null")),
            "{e}"
        );
    }
    // Mistral's window is 4096 on every layer unless the config says null.
    let mistral = bare("mistral", "").unwrap();
    assert_eq!(
        (mistral.sliding_window(), mistral.sliding_layers()),
        (Some(4096), 4)
    );
    let off = bare("mistral", r#","sliding_window":null"#).unwrap();
    assert_eq!(off.sliding_window(), None);
    // Gemma 2: 4096 on every other layer by default; Mixtral: no window, 8 experts, 2 each.
    let gemma2 = bare("gemma2", "").unwrap();
    assert_eq!(
        (gemma2.sliding_window(), gemma2.sliding_layers()),
        (Some(4096), 2)
    );
    let mixtral = bare("mixtral", "").unwrap();
    assert_eq!(mixtral.sliding_window(), None);
    let e = mixtral.experts.unwrap();
    assert_eq!((e.routed, e.per_token), (8, 2));
}

/// Qwen2/Qwen3 clear the window unless `use_sliding_window` is true, even where
/// `layer_types` lists sliding layers: Qwen3 with 27 of 36 layers listed sliding keeps the
/// whole context on all 36 (planning 9 would be 2.9 times too little at 32K).
#[test]
fn qwen_windows_need_use_sliding_window_even_with_layer_types() {
    let types: Vec<&str> = (0..36)
        .map(|i| {
            if i < 9 {
                "full_attention"
            } else {
                "sliding_attention"
            }
        })
        .collect();
    let listed = format!(
        r#","num_hidden_layers":36,"num_key_value_heads":8,"sliding_window":4096,"layer_types":{}"#,
        serde_json::to_string(&types).unwrap()
    );
    for model_type in ["qwen2", "qwen3"] {
        let text = format!(
            r#"{{"model_type":"{model_type}","hidden_size":256,"intermediate_size":512,"num_attention_heads":32,"head_dim":8,"vocab_size":100{listed}}}"#
        );
        let off = arch(&text);
        assert_eq!(off.sliding_layers(), 0, "{model_type}");
        let full = kv_cache_bytes(&off, 2, 1, 32_768, true);
        assert_eq!(full, 36 * 32_768 * 2 * 8 * 8 * 2);
        let on = arch(&text.replace(
            "\"sliding_window\"",
            "\"use_sliding_window\":true,\"sliding_window\"",
        ));
        assert_eq!(on.sliding_layers(), 27, "{model_type}");
        let windowed = kv_cache_bytes(&on, 2, 1, 32_768, true);
        // 9 full layers at 32K and 27 at 4096: 2.9 times less than what transformers keeps.
        assert_eq!(windowed, (9 * 32_768 + 27 * 4096) * 2 * 8 * 8 * 2);
    }
}

/// DeepSeek: leaving out `n_routed_experts` or `q_lora_rank` is refused naming it (the
/// classes would build 64/256 experts and a 1536-wide query compression); null states
/// "none"; absent shared experts and dense first layers take each class's default.
#[test]
fn deepseek_refuses_absent_experts_and_query_rank() {
    let full = r#","n_routed_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":32,
"kv_lora_rank":16,"q_lora_rank":24,"qk_rope_head_dim":8,"qk_nope_head_dim":8,"v_head_dim":8"#;
    for model_type in ["deepseek_v2", "deepseek_v3"] {
        for key in ["n_routed_experts", "q_lora_rank"] {
            let without = full.replace(&format!("\"{key}\":"), "\"unused\":");
            let e = bare(model_type, &without).unwrap_err();
            assert!(e.contains(&format!("has no \"{key}\"")), "{e}");
            assert!(e.contains("transformers would build"), "{e}");
        }
        // q_lora_rank: null is a plain query projection; the expert counts are strict
        // integers to the classes (transformers 5.17 refuses null), and so to lab.
        let plain = full.replace("\"q_lora_rank\":", "\"q_lora_rank\":null,\"unused\":");
        assert_eq!(
            bare(model_type, &plain)
                .unwrap()
                .latent
                .unwrap()
                .q_lora_rank,
            None
        );
        for key in [
            "n_routed_experts",
            "n_shared_experts",
            "first_k_dense_replace",
        ] {
            let null = format!("{full},\"{key}\":null").replace(
                "\"n_routed_experts\":8,",
                if key == "n_routed_experts" {
                    ""
                } else {
                    "\"n_routed_experts\":8,"
                },
            );
            let e = bare(model_type, &null).unwrap_err();
            assert!(e.contains(key), "{key}: {e}");
        }
        // The class's other name for the expert count.
        let alias = if model_type == "deepseek_v3" {
            "num_local_experts"
        } else {
            "num_experts"
        };
        let spelled = full.replace("\"n_routed_experts\":", &format!("\"{alias}\":"));
        assert_eq!(
            bare(model_type, &spelled).unwrap().experts.unwrap().routed,
            8
        );
        let both = format!("{full},\"{alias}\":16");
        assert!(bare(model_type, &both).unwrap_err().contains(alias));
    }
    // Absent n_shared_experts and first_k_dense_replace: V2 2 and 0, V3 1 and 3.
    let v2 = bare("deepseek_v2", full).unwrap();
    assert_eq!(v2.experts.unwrap().shared_intermediate, 2 * 32);
    assert_eq!(v2.layer_kinds[0].feed_forward, FeedForward::Experts);
    let v3 = bare("deepseek_v3", full).unwrap();
    assert_eq!(v3.experts.unwrap().shared_intermediate, 32);
    let dense_first: Vec<bool> = v3
        .layer_kinds
        .iter()
        .map(|l| l.feed_forward == FeedForward::Dense)
        .collect();
    assert_eq!(dense_first, [true, true, true, false]);
}

/// Qwen1.5-MoE-A2.7B by hand: per layer attention `4 x 2048 x 2048` with q, k, v biases, 60
/// experts of `3 x 2048 x 1408`, the router `60 x 2048`, one shared expert `3 x 2048 x 5632`
/// and its gate `1 x 2048`, two norms; the untied head.
#[test]
fn qwen1_5_moe_by_hand() {
    let a = arch(shipped!("qwen1.5-moe-a2.7b"));
    let layer = 4 * 2048 * 2048
        + 3 * 2048
        + 60 * 3 * 2048 * 1408
        + 60 * 2048
        + 3 * 2048 * 5632
        + 2048
        + 2 * 2048;
    assert_eq!(parameters(&a), 24 * layer + 2 * 151_936 * 2048 + 2048);
    assert_eq!(a.sliding_window(), None);
    // A window only with use_sliding_window: the even layers below max_window_layers.
    let on = arch(&shipped!("qwen1.5-moe-a2.7b").replace(
        "\"use_sliding_window\": false",
        "\"use_sliding_window\": true",
    ));
    assert_eq!(on.sliding_layers(), 11);
    assert_eq!(on.sliding_window(), Some(32_768));
    // layer_types listing sliding layers without use_sliding_window: a window of 0, refused.
    let e = refusal(&shipped!("qwen1.5-moe-a2.7b").replace(
        "\"use_sliding_window\": false",
        &format!(
            "\"use_sliding_window\": false, \"layer_types\": {}",
            serde_json::to_string(&vec!["sliding_attention"; 24]).unwrap()
        ),
    ));
    assert!(e.contains("use_sliding_window is not true"), "{e}");
}

/// gpt-oss: gpt-oss-120b is the 20b's config with 36 layers and 128 experts (the model card's
/// 116.83B), sliding on even layers when `layer_types` is absent, window 128; attention biases
/// unless the config says false; each refusal names its field.
#[test]
fn gpt_oss_layers_sinks_and_refusals() {
    let twenty: serde_json::Value = serde_json::from_str(shipped!("gpt-oss-20b")).unwrap();
    let mut big = twenty.clone();
    big["num_hidden_layers"] = 36.into();
    big["num_local_experts"] = 128.into();
    big.as_object_mut().unwrap().remove("layer_types");
    let a = read(&big).unwrap();
    assert_eq!(parameters(&a), 116_829_156_672);
    assert_eq!((a.sliding_layers(), a.sliding_window()), (18, Some(128)));
    assert_eq!(a.layer_kinds[0].attention, Attention::Sliding(128));
    assert_eq!(a.layer_kinds[1].attention, Attention::Full);
    // At 32K tokens: 18 full layers keep 32768 tokens, 18 sliding ones 128; 2 x 8 x 64 x 2 B.
    assert_eq!(
        kv_cache_bytes(&a, 2, 1, 32_768, true),
        (18 * 32_768 + 18 * 128) * 2048
    );
    // By hand, per layer: q, o 2880 x 4096, k, v 2880 x 512 and their biases, 64 sinks, the
    // router 32 x 2880 + 32, the experts 32 x 2880 x 5760 and 32 x 2880 x 2880 with biases
    // 32 x 5760 and 32 x 2880, two norms.
    let attention = 2 * 2880 * 4096 + 2 * 2880 * 512 + 4096 + 2 * 512 + 2880 + 64;
    let moe = 32 * 2880 + 32 + 32 * 2880 * 8640 + 32 * 8640;
    let layer = attention + moe + 2 * 2880;
    assert_eq!(
        parameters(&read(&twenty).unwrap()),
        24 * layer + 2 * 201_088 * 2880 + 2880
    );
    // attention_bias false drops the four biases of every layer.
    let mut plain = twenty.clone();
    plain["attention_bias"] = false.into();
    assert_eq!(
        parameters(&read(&plain).unwrap()),
        20_914_757_184 - 24 * (4096 + 2 * 512 + 2880)
    );
    // Every field has a class default: the bare model_type is GptOssConfig(), the 120b shape.
    let bare = arch(r#"{"model_type":"gpt_oss"}"#);
    assert_eq!(parameters(&bare), 116_829_156_672);
    for (field, value, needle) in [
        ("head_dim", serde_json::Value::Null, "\"head_dim\" is null"),
        (
            "num_key_value_heads",
            serde_json::Value::Null,
            "\"num_key_value_heads\" is null",
        ),
        (
            "num_experts",
            7.into(),
            "num_experts 7 and num_local_experts 32 disagree",
        ),
        (
            "sliding_window",
            serde_json::Value::Null,
            "layer_types has sliding_attention but no sliding_window",
        ),
        (
            "num_experts_per_tok",
            33.into(),
            "num_experts_per_tok 33 must be from 1 to the 32 experts",
        ),
    ] {
        let mut bad = twenty.clone();
        bad[field] = value;
        let e = read(&bad).unwrap_err().to_string();
        assert!(e.contains(needle), "{field}: {e}");
    }
    // num_experts alone is the class's attribute map for num_local_experts.
    let mut spelled = twenty.clone();
    spelled.as_object_mut().unwrap().remove("num_local_experts");
    spelled["num_experts"] = 32.into();
    assert_eq!(parameters(&read(&spelled).unwrap()), 20_914_757_184);
}

/// Llama 4: Scout has experts on every layer and Maverick on every other one (dense layers of
/// `intermediate_size_mlp`); three layers in four are chunked (the rotary ones of the default
/// `no_rope_layers`), their cache bounded by the 8192-token chunk.
#[test]
fn llama4_interleaved_experts_and_chunked_attention() {
    let scout = arch(shipped!("llama-4-scout-17b-16e"));
    let maverick = arch(shipped!("llama-4-maverick-17b-128e"));
    for a in [&scout, &maverick] {
        assert_eq!((a.chunked_layers(), a.attention_chunk()), (36, Some(8192)));
        assert_eq!(a.layer_kinds[3].attention, Attention::Full);
        assert_eq!(a.layer_kinds[4].attention, Attention::Chunked(8192));
        assert_eq!(a.sliding_layers(), 0);
        // At 128K: 12 full layers keep every token, 36 chunked ones 8192; 2 x 8 x 128 x 2 B.
        assert_eq!(
            kv_cache_bytes(a, 2, 1, 131_072, true),
            (12 * 131_072 + 36 * 8192) * 4096
        );
        assert_eq!(kv_cache_bytes(a, 2, 1, 131_072, false), 48 * 131_072 * 4096);
    }
    let moe = |a: &Architecture| {
        a.layer_kinds
            .iter()
            .filter(|l| l.feed_forward == FeedForward::Experts)
            .count()
    };
    assert_eq!((moe(&scout), moe(&maverick)), (48, 24));
    assert_eq!(maverick.layer_kinds[0].feed_forward, FeedForward::Dense);
    assert_eq!(maverick.layer_kinds[1].feed_forward, FeedForward::Experts);
    // Maverick by hand: attention 5120 x (5120 + 2 x 1024 + 5120), two norms; 24 dense layers
    // of 3 x 5120 x 16384; 24 expert layers of 128 x 3 x 5120 x 8192, the router 128 x 5120
    // and the shared expert 3 x 5120 x 8192; untied 202048 x 5120 twice; the tower
    // 1,088,519,296 (34 layers of 1408 and the adapter) and the projector 5120 x 4096.
    let attention = 5120 * (5120 + 2 * 1024 + 5120) + 2 * 5120;
    let dense = attention + 3 * 5120 * 16_384;
    let experts = attention + 128 * 3 * 5120 * 8192 + 128 * 5120 + 3 * 5120 * 8192;
    let text = 24 * dense + 24 * experts + 2 * 202_048 * 5120 + 5120;
    let vision = 827_904
        + 4 * 1408
        + 34 * (4 * (1408 * 1408 + 1408) + 2 * 5632 * 1408 + 5632 + 1408 + 4 * 1408)
        + 5632 * 4096
        + 4096 * 4096
        + 1408
        + 577 * 1408
        + 5120 * 4096;
    assert_eq!(parameters(&maverick), text + vision);
    assert_eq!(maverick.parameter_counts().narrow().unwrap().vision, vision);
    // The text model alone (llama4_text), as a fine-tuned text-only checkpoint states it.
    let text_only = |extra: &str| {
        let full: serde_json::Value =
            serde_json::from_str(shipped!("llama-4-maverick-17b-128e")).unwrap();
        let mut t = full["text_config"].clone();
        let more: serde_json::Value = serde_json::from_str(&format!("{{{extra}}}")).unwrap();
        for (k, v) in more.as_object().unwrap() {
            t[k] = v.clone();
        }
        read(&t).map_err(|e| e.to_string())
    };
    assert_eq!(parameters(&text_only("").unwrap()), text);
    // Tied in text_config: the head is the embedding, listed once.
    assert_eq!(
        parameters(&text_only(r#""tie_word_embeddings":true"#).unwrap()),
        text - 202_048 * 5120
    );
    // moe_layers, when listed, wins over the step; empty no_rope_layers is the default.
    let listed = text_only(r#""moe_layers":[0],"no_rope_layers":[]"#).unwrap();
    assert_eq!(listed.layer_kinds[0].feed_forward, FeedForward::Experts);
    assert_eq!(listed.layer_kinds[1].feed_forward, FeedForward::Dense);
    assert_eq!(listed.chunked_layers(), 36);
    // A null chunk: every layer full when layer_types says so, refused when some is chunked.
    let types = serde_json::to_string(&vec!["full_attention"; 48]).unwrap();
    let full = text_only(&format!(
        r#""attention_chunk_size":null,"layer_types":{types}"#
    ))
    .unwrap();
    assert_eq!(full.chunked_layers(), 0);
    for (extra, needle) in [
        (
            r#""attention_chunk_size":null"#,
            "\"attention_chunk_size\" is null",
        ),
        (
            r#""no_rope_layers":[1,0]"#,
            "\"no_rope_layers\" lists 2 layers but num_hidden_layers is 48",
        ),
        (
            r#""no_rope_layer_interval":0"#,
            "\"no_rope_layer_interval\" must be a whole number",
        ),
        (r#""head_dim":null"#, "\"head_dim\" is null"),
        (
            r#""interleave_moe_layer_step":0"#,
            "\"interleave_moe_layer_step\"",
        ),
    ] {
        let e = text_only(extra).unwrap_err();
        assert!(e.contains(needle), "{extra}: {e}");
    }
    let sliding = serde_json::to_string(&vec!["sliding_attention"; 48]).unwrap();
    let e = text_only(&format!(r#""layer_types":{sliding}"#)).unwrap_err();
    assert!(
        e.contains("unknown layer type \"sliding_attention\""),
        "{e}"
    );
    // The multimodal config needs both of its parts.
    for part in ["text_config", "vision_config"] {
        let mut v: serde_json::Value =
            serde_json::from_str(shipped!("llama-4-scout-17b-16e")).unwrap();
        v.as_object_mut().unwrap().remove(part);
        let e = read(&v).unwrap_err().to_string();
        assert!(e.contains(&format!("has no \"{part}\" object")), "{e}");
    }
}

/// An MLX (mlx-lm) checkpoint's config is refused naming the format and its width (bits plus
/// a 16-bit scale and bias per group), with or without the copy in `quantization_config`;
/// a `quantization` object beside a named `quant_method` is that method's.
#[test]
fn mlx_packing_is_refused_by_name() {
    let llama = |extra: &str| {
        read(
            &serde_json::from_str(&format!(
                r#"{{"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
"num_attention_heads":4,"vocab_size":128{extra}}}"#
            ))
            .unwrap(),
        )
        .map_err(|e| e.to_string())
    };
    for (extra, width) in [
        (r#","quantization":{"group_size":64,"bits":4}"#, "4.5"),
        (
            r#","quantization":{"group_size":32,"bits":8},"quantization_config":{"group_size":32,"bits":8}"#,
            "9",
        ),
    ] {
        let e = llama(extra).unwrap_err();
        assert!(e.contains("an MLX checkpoint (mlx-lm"), "{e}");
        assert!(e.contains(&format!("with --bits {width} for")), "{e}");
    }
    let named = llama(
        r#","quantization":{"group_size":64,"bits":4},"quantization_config":{"quant_method":"awq","bits":4}"#,
    )
    .unwrap();
    assert_eq!(named.quantization.as_deref(), Some("awq"));
    assert!(llama(r#","quantization":{"note":"none"}"#).is_ok());
    assert!(llama(r#","quantization":null"#).is_ok());
    // A packing block mlx-lm cannot write is refused by name, never planned as unquantized.
    for bad in [
        r#"{"bits":4,"group_size":0}"#,
        r#"{"bits":0,"group_size":64}"#,
        r#"{"bits":"x","group_size":64}"#,
        r#"{"bits":4}"#,
        r#"{"group_size":64,"bits":-4}"#,
        r#"{"group_size":64.5,"bits":4}"#,
    ] {
        let e = llama(&format!(r#","quantization":{bad}"#)).unwrap_err();
        assert!(
            e.contains("\"quantization\" (mlx-lm's packing) must be an object with whole numbers"),
            "{bad}: {e}"
        );
    }
}

/// Command R7B's layers as `Cohere2Config` derives them: three sliding, then one full, from
/// `sliding_window_pattern`; `layer_types` wins when listed; a null window makes every layer
/// full; a zero pattern is refused by name.
#[test]
fn cohere2_layers_follow_the_pattern() {
    let a = arch(shipped!("c4ai-command-r7b-12-2024"));
    let full: Vec<usize> = (0..a.layer_kinds.len())
        .filter(|i| a.layer_kinds[*i].attention == Attention::Full)
        .collect();
    assert_eq!(full, (0..8).map(|k| 4 * k + 3).collect::<Vec<_>>());
    assert_eq!(a.sliding_window(), Some(4096));
    assert_eq!(a.norms_per_layer, 1);
    let absent = bare("cohere2", "").unwrap();
    assert_eq!(absent.sliding_layers(), 3);
    assert_eq!(absent.sliding_window(), Some(4096));
    let null = bare("cohere2", r#","sliding_window":null"#).unwrap();
    assert_eq!(null.sliding_layers(), 0);
    let listed = bare(
        "cohere2",
        r#","layer_types":["full_attention","sliding_attention","full_attention","full_attention"]"#,
    )
    .unwrap();
    assert_eq!(listed.sliding_layers(), 1);
    for bad in [
        r#","sliding_window_pattern":0"#,
        r#","sliding_window_pattern":null"#,
    ] {
        let e = bare("cohere2", bad).unwrap_err();
        assert!(e.contains("sliding_window_pattern"), "{bad}: {e}");
    }
}

/// Command-R: one weight-only norm per layer, the query/key norms over heads x width with
/// `use_qk_norm` (null builds none), biases on all four projections with `attention_bias`,
/// tied unless stated otherwise.
#[test]
fn cohere_norms_and_biases() {
    let plain = bare("cohere", "").unwrap();
    assert!(plain.tied_embeddings && !plain.qk_norm);
    assert_eq!(plain.kv_heads, 32);
    let normed = bare("cohere", r#","use_qk_norm":true"#).unwrap();
    assert_eq!(parameters(&normed) - parameters(&plain), 4 * 2 * 256);
    let null = bare("cohere", r#","use_qk_norm":null"#).unwrap();
    assert_eq!(parameters(&null), parameters(&plain));
    let biased = bare("cohere", r#","attention_bias":true"#).unwrap();
    assert_eq!(parameters(&biased) - parameters(&plain), 4 * 4 * 256);
    assert!(bare("cohere", r#","use_qk_norm":"yes""#)
        .unwrap_err()
        .contains("use_qk_norm"));
}

/// Phi-3.5-MoE: LayerNorms with biases (two per layer and the final one), the head bias with
/// `lm_head_bias`, the class's 16 experts and 8 key/value heads when absent, null refused.
#[test]
fn phimoe_norm_and_head_biases() {
    let a = bare("phimoe", "").unwrap();
    assert_eq!((a.kv_heads, a.experts.map(|e| e.routed)), (8, Some(16)));
    let with_head = bare("phimoe", r#","lm_head_bias":true"#).unwrap();
    assert_eq!(parameters(&with_head) - parameters(&a), 100);
    // Per layer: q and o 256 x 256, k and v 64 x 256 (8 heads of 8), no biases; the router
    // 16 x 256; the experts 16 x 3 x 512 x 256; two LayerNorms of weight and bias.
    let layer = 256 * 256 * 2 + 2 * 64 * 256 + 16 * 256 + 16 * 3 * 512 * 256 + 2 * 2 * 256;
    assert_eq!(parameters(&a), 4 * layer + 2 * 100 * 256 + 2 * 256);
    for key in [
        "num_local_experts",
        "num_key_value_heads",
        "num_experts_per_tok",
    ] {
        let e = bare("phimoe", &format!(r#","{key}":null"#)).unwrap_err();
        assert!(e.contains(key), "{key}: {e}");
    }
    assert!(bare("phimoe", r#","lm_head_bias":null"#)
        .unwrap_err()
        .contains("lm_head_bias"));
}

/// GLM-4.5: dense first layers, experts with shared experts after, the router's fp32
/// buffer; the rotary buffers only over the rotated part of the head; the expert-count alias.
#[test]
fn glm4_moe_layers_rotary_and_aliases() {
    let air = arch(shipped!("glm-4.5-air"));
    assert_eq!(air.layer_kinds[0].feed_forward, FeedForward::Dense);
    assert!(air.layer_kinds[1..]
        .iter()
        .all(|l| l.feed_forward == FeedForward::Experts));
    assert_eq!(air.rotary_width, Some(64));
    let e = air.experts.unwrap();
    assert_eq!(
        (e.routed, e.per_token, e.shared_intermediate),
        (128, 8, 1408)
    );
    let absent = bare("glm4_moe", "").unwrap();
    assert_eq!(absent.rotary_width, Some(4));
    assert_eq!(absent.experts.map(|e| e.routed), Some(128));
    let nested = bare(
        "glm4_moe",
        r#","partial_rotary_factor":0.25,"rope_parameters":{"rope_type":"default","partial_rotary_factor":0.75}"#,
    )
    .unwrap();
    assert_eq!(nested.rotary_width, Some(6));
    let null = bare("glm4_moe", r#","partial_rotary_factor":null"#).unwrap();
    assert_eq!(null.rotary_width, Some(8));
    let alias = bare("glm4_moe", r#","num_local_experts":16"#).unwrap();
    assert_eq!(alias.experts.map(|e| e.routed), Some(16));
    for (extra, needle) in [
        (
            r#","num_local_experts":16,"n_routed_experts":8"#,
            "num_local_experts",
        ),
        (
            r#","partial_rotary_factor":"half""#,
            "partial_rotary_factor",
        ),
        (r#","partial_rotary_factor":0"#, "partial_rotary_factor"),
        (r#","n_routed_experts":null"#, "n_routed_experts"),
        (r#","first_k_dense_replace":null"#, "first_k_dense_replace"),
    ] {
        let e = bare("glm4_moe", extra).unwrap_err();
        assert!(e.contains(needle), "{extra}: {e}");
    }
}

/// Mistral 3: the decoder read as its text model type says, the head tied by the top level,
/// and a missing `text_config` / `vision_config` or an unknown text model refused by name.
#[test]
fn mistral3_text_part_and_refusals() {
    let small = arch(shipped!("mistral-small-3.2-24b"));
    assert!(small.tied_embeddings);
    assert_eq!(small.sliding_window(), None);
    let mut v: serde_json::Value = serde_json::from_str(shipped!("mistral-small-3.2-24b")).unwrap();
    v["tie_word_embeddings"] = false.into();
    let untied = read(&v).unwrap();
    assert_eq!(parameters(&untied) - parameters(&small), 131_072 * 5120);
    // Without a window stated, MistralConfig's 4096; Ministral3Config has none and a
    // 128-wide head by default.
    let mut mistral = v.clone();
    mistral["text_config"]
        .as_object_mut()
        .unwrap()
        .remove("sliding_window");
    assert_eq!(read(&mistral).unwrap().sliding_layers(), 40);
    let mut ministral = mistral.clone();
    ministral["text_config"]["model_type"] = "ministral3".into();
    ministral["text_config"]
        .as_object_mut()
        .unwrap()
        .remove("head_dim");
    let m = read(&ministral).unwrap();
    assert_eq!((m.sliding_layers(), m.head_dim), (0, 128));
    for (key, value, needle) in [
        ("text_config", serde_json::Value::Null, "text_config"),
        ("vision_config", serde_json::Value::Null, "vision_config"),
        (
            "text_config",
            serde_json::json!({"model_type": "llama"}),
            "text_config model_type",
        ),
        (
            "vision_config",
            serde_json::json!({"model_type": "siglip"}),
            "vision_config model_type",
        ),
    ] {
        let mut bad = v.clone();
        bad[key] = value;
        let e = read(&bad).unwrap_err().to_string();
        assert!(e.contains(needle), "{key}: {e}");
    }
}

/// Fuzz over every field of every family's config (the decoder's and, for the multimodal
/// families, the top level's): absent, null, zero, negative, huge, a fraction, a string, a
/// list, an object, and the expert count's other spellings. `read` never panics; a refusal
/// names the field changed; a value transformers' strict classes refuse (negative, a
/// fraction, a string where a number is, a number where a flag is) is either refused by
/// name or changes nothing (the field is not one the family builds from). Which defaults
/// apply where the field is absent, null or zero is what `scripts/config_defaults_check.py`
/// holds against transformers itself in `cargo xtask verify`.
#[test]
fn every_field_mutation_is_the_same_architecture_or_refused_by_name() {
    let aliases = ["num_local_experts", "num_experts", "n_routed_experts"];
    for family in Family::ALL.iter().copied() {
        let good = base(family);
        let before = read(&good).unwrap_or_else(|e| panic!("{family:?}: {e}"));
        let nested = matches!(family, Family::Gemma3 | Family::Mistral3);
        let inner_keys: Vec<String> = if nested {
            good["text_config"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        } else {
            good.as_object().unwrap().keys().cloned().collect()
        };
        let mut keys: Vec<(bool, String)> = inner_keys.into_iter().map(|k| (nested, k)).collect();
        if nested {
            keys.extend(good.as_object().unwrap().keys().map(|k| (false, k.clone())));
        }
        keys.retain(|(_, k)| k != "model_type");
        for (inside, key) in keys {
            let value = if inside {
                good["text_config"][&key].clone()
            } else {
                good[&key].clone()
            };
            let strict: &[serde_json::Value] = match &value {
                serde_json::Value::Number(_) => &[
                    serde_json::json!(-1),
                    serde_json::json!(2.5),
                    serde_json::json!("yes"),
                    serde_json::json!([1]),
                ],
                serde_json::Value::Bool(_) => &[serde_json::json!("yes"), serde_json::json!(1)],
                _ => &[],
            };
            let loose = [
                None,
                Some(serde_json::Value::Null),
                Some(serde_json::json!(0)),
                Some(serde_json::json!(1u64 << 41)),
                Some(serde_json::json!({})),
            ];
            let mutations = strict
                .iter()
                .cloned()
                .map(|v| (true, Some(v)))
                .chain(loose.into_iter().map(|v| (false, v)));
            for (must_refuse_if_read, mutation) in mutations {
                let mut changed = good.clone();
                let target = if inside {
                    changed["text_config"].as_object_mut().unwrap()
                } else {
                    changed.as_object_mut().unwrap()
                };
                match &mutation {
                    None => {
                        target.remove(&key);
                    }
                    Some(v) => {
                        target.insert(key.clone(), v.clone());
                    }
                }
                let what = format!("{family:?} {key} = {mutation:?}");
                let result = std::panic::catch_unwind(|| read(&changed))
                    .unwrap_or_else(|_| panic!("{what}: panicked"));
                match result {
                    Err(e) => {
                        let e = e.to_string();
                        let named = e.contains(key.as_str())
                            || (aliases.contains(&key.as_str())
                                && aliases.iter().any(|a| e.contains(a)));
                        assert!(named, "{what}: refused without naming it: {e}");
                    }
                    Ok(after) if must_refuse_if_read => {
                        assert_eq!(after, before, "{what}: accepted and planned differently");
                    }
                    Ok(_) => {}
                }
            }
            // The expert count under its other names: the same count, or refused by name.
            if aliases.contains(&key.as_str()) {
                for other in aliases.iter().filter(|a| **a != key) {
                    let mut spelled = good.clone();
                    let map = spelled.as_object_mut().unwrap();
                    map.remove(&key);
                    map.insert(other.to_string(), value.clone());
                    // The classes' attribute maps (transformers 5.17): these read the other
                    // name as the same field; the rest ignore it and build their default.
                    let mapped = matches!(
                        (family, *other),
                        (Family::Mixtral | Family::DeepseekV2, "num_experts")
                            | (
                                Family::DeepseekV3 | Family::Qwen3Moe | Family::Glm4Moe,
                                "num_local_experts"
                            )
                            | (Family::Qwen3Moe | Family::GptOss, "num_experts")
                    );
                    match read(&spelled) {
                        Ok(a) if mapped => assert_eq!(a, before, "{family:?} {key} as {other}"),
                        Ok(a) => {
                            assert_ne!(a.experts, before.experts, "{family:?} {key} as {other}")
                        }
                        Err(e) => assert!(
                            aliases.iter().any(|a| e.to_string().contains(a)),
                            "{family:?} {key} spelled {other}: {e}"
                        ),
                    }
                }
            }
        }
    }
}

/// `architectures` against `model_type`: a class of the family (any of them listed) passes,
/// the remote-code spelling `PhiMoEForCausalLM` included; only other families' classes, or a
/// list that is not one of names, is refused naming both fields.
#[test]
fn architectures_contradicting_the_model_type_are_refused_by_name() {
    let with = |family: Family, list: serde_json::Value| {
        let mut v = base(family);
        v["architectures"] = list;
        read(&v)
    };
    for family in Family::ALL.iter().copied() {
        let own = match family {
            Family::Phimoe => "PhiMoEForCausalLM".to_string(),
            Family::Gemma3Text => "Gemma3ForCausalLM".to_string(),
            Family::Gemma3 => "Gemma3ForConditionalGeneration".to_string(),
            Family::Mistral3 => "Mistral3ForConditionalGeneration".to_string(),
            Family::Llama4Text => "Llama4ForCausalLM".to_string(),
            Family::Llama4 => "Llama4ForConditionalGeneration".to_string(),
            f => {
                let t = f.model_type();
                let (a, b) = t.split_at(1);
                format!("{}{}ForCausalLM", a.to_uppercase(), b.replace('_', ""))
            }
        };
        with(family, serde_json::json!([own])).unwrap_or_else(|e| panic!("{own}: {e}"));
        with(family, serde_json::json!(["SomethingElse", own])).unwrap();
        with(family, serde_json::json!([])).unwrap();
        with(family, serde_json::Value::Null).unwrap();
        let other = if family == Family::Llama {
            "MistralForCausalLM"
        } else {
            "LlamaForCausalLM"
        };
        for bad in [
            serde_json::json!([other]),
            serde_json::json!("LlamaForCausalLM"),
            serde_json::json!([7]),
        ] {
            let e = with(family, bad.clone()).unwrap_err().to_string();
            assert!(e.contains("\"architectures\""), "{family:?} {bad}: {e}");
        }
    }
}

/// Gemma 3's vision side as transformers builds it: SigLIP divides its width by the heads
/// (null, zero, a remainder refused), and the projector divides by the side of
/// `mm_tokens_per_image` tokens (zero, null, a text, a fraction refused).
#[test]
fn gemma3_vision_heads_and_image_tokens_are_what_transformers_can_build() {
    let shipped: Value = serde_json::from_str(shipped!("gemma-3-4b-it")).unwrap();
    assert!(read(&shipped).is_ok());
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut v = shipped.clone();
        edit(&mut v);
        read(&v).map(drop).map_err(|e| e.to_string())
    };
    for (heads, needle) in [
        (Value::Null, "num_attention_heads is null"),
        (
            Value::from(0),
            "\"num_attention_heads\" must be a whole number",
        ),
        (
            Value::from(-1),
            "\"num_attention_heads\" must be a whole number",
        ),
        (
            Value::from("16"),
            "\"num_attention_heads\" must be a whole number",
        ),
        (
            Value::from(7),
            "hidden_size 1152 is not a multiple of num_attention_heads 7",
        ),
    ] {
        let e = with(&|v| v["vision_config"]["num_attention_heads"] = heads.clone()).unwrap_err();
        assert!(e.contains(needle), "{heads}: {e}");
    }
    for (tokens, needle) in [
        (
            Value::from(0),
            "\"mm_tokens_per_image\" must be a whole number",
        ),
        (
            Value::Null,
            "\"mm_tokens_per_image\" must be a whole number",
        ),
        (
            Value::from("256"),
            "\"mm_tokens_per_image\" must be a whole number",
        ),
        (
            Value::from(1.5),
            "\"mm_tokens_per_image\" must be a whole number",
        ),
    ] {
        let e = with(&|v| v["mm_tokens_per_image"] = tokens.clone()).unwrap_err();
        assert!(e.contains(needle), "{tokens}: {e}");
    }
    // More tokens than the grid holds is built by transformers (the pooling fails only in a
    // forward), and so are the class defaults when absent.
    assert!(with(&|v| v["mm_tokens_per_image"] = Value::from(4225)).is_ok());
    assert!(with(&|v| {
        v.as_object_mut().unwrap().remove("mm_tokens_per_image");
        v["vision_config"]
            .as_object_mut()
            .unwrap()
            .remove("num_attention_heads");
    })
    .is_ok());
}
