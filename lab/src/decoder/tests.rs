use super::*;
use crate::plan::layout::Role;

fn example(name: &str) -> String {
    let path = format!(
        "{}/../examples/models/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const SUPPORTED_EXAMPLES: [(&str, &str); 6] = [
    ("llama-3.1-8b", "llama"),
    ("llama-3.2-1b", "llama"),
    ("mistral-7b-v0.1", "mistral"),
    ("qwen2.5-0.5b", "qwen2"),
    ("qwen3-0.6b", "qwen3"),
    ("phi-3-mini-4k", "phi3"),
];

#[test]
fn every_supported_example_gives_the_plan_parameter_count_in_layout_order() {
    for (name, family) in SUPPORTED_EXAMPLES {
        let text = example(name);
        let spec = from_config(&text).unwrap();
        assert_eq!(spec.family, family, "{name}");
        let arch = family::read(&serde_json::from_str(&text).unwrap()).unwrap();
        let planned = arch.parameter_counts().narrow().unwrap().total();
        assert_eq!(u128::from(spec.parameters()), planned, "{name}");
        // Same tensors, same order as the plan's allocator replay (buffers aside).
        let mut order = Vec::new();
        arch.tensors(&mut |t| {
            if !matches!(t.role, Role::Buffer(_)) {
                order.push(t.elements);
            }
        });
        let ours: Vec<u64> = spec
            .tensors
            .iter()
            .map(|t| t.shape.iter().product())
            .collect();
        assert_eq!(ours, order, "{name}");
    }
}

#[test]
fn rotary_facts_are_read_as_written() {
    let llama = from_config(&example("llama-3.1-8b")).unwrap();
    assert_eq!(llama.rope_theta, 500_000.0);
    assert_eq!(llama.rms_norm_eps, 1e-5);
    assert_eq!(
        llama.rope_scaling,
        RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0
        }
    );
    assert!(!llama.tied_embeddings && !llama.qk_norm && !llama.qkv_bias);
    assert_eq!(llama.tensors.last().unwrap().name, "lm_head.weight");
    let qwen3 = from_config(&example("qwen3-0.6b")).unwrap();
    assert_eq!(qwen3.rope_scaling, RopeScaling::Default);
    assert!(qwen3.qk_norm && qwen3.tied_embeddings && !qwen3.qkv_bias);
    assert_eq!(qwen3.tensors.last().unwrap().name, "model.norm.weight");
    let qwen2 = from_config(&example("qwen2.5-0.5b")).unwrap();
    assert!(qwen2.qkv_bias && !qwen2.o_bias);
    assert!(qwen2.windows.iter().all(Option::is_none));
    let mistral = from_config(&example("mistral-7b-v0.1")).unwrap();
    assert!(mistral.windows.iter().all(|w| *w == Some(4096)));
}

#[test]
fn rope_parameters_of_transformers_5_are_read_too() {
    let mut v: Value = serde_json::from_str(&example("llama-3.2-1b")).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("rope_theta");
    let scaling = o.remove("rope_scaling").unwrap();
    let mut params = scaling.clone();
    params["rope_theta"] = 123_456.0.into();
    o.insert("rope_parameters".into(), params);
    let spec = from_config(&v.to_string()).unwrap();
    assert_eq!(spec.rope_theta, 123_456.0);
    assert!(matches!(spec.rope_scaling, RopeScaling::Llama3 { factor, .. } if factor == 32.0));
}

#[test]
fn other_families_and_unsupported_settings_are_refused_by_name() {
    for (name, family) in [
        ("gemma-2-2b", "gemma2"),
        ("gemma-3-1b", "gemma3_text"),
        ("mixtral-8x7b", "mixtral"),
        ("deepseek-v2-lite", "deepseek_v2"),
    ] {
        let e = from_config(&example(name)).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{name}");
        assert!(e.to_string().contains(&format!("\"{family}\"")), "{e}");
    }
    let base: Value = serde_json::from_str(&example("llama-3.2-1b")).unwrap();
    let with = |key: &str, value: Value| {
        let mut v = base.clone();
        if value.is_null() {
            v.as_object_mut().unwrap().remove(key);
        } else {
            v[key] = value;
        }
        from_config(&v.to_string()).unwrap_err().to_string()
    };
    assert!(with("rope_theta", Value::Null).contains("\"rope_theta\""));
    assert!(with("rms_norm_eps", Value::Null).contains("\"rms_norm_eps\""));
    assert!(with("rms_norm_eps", (-1.0).into()).contains("positive number"));
    assert!(with("hidden_act", "gelu".into()).contains("hidden_act"));
    let yarn = serde_json::json!({"rope_type": "yarn", "factor": 4.0});
    assert!(with("rope_scaling", yarn).contains("\"yarn\""));
    let no_factor = serde_json::json!({"rope_type": "linear"});
    assert!(with("rope_scaling", no_factor).contains("\"factor\""));
    assert!(with("attention_bias", "yes".into()).contains("true or false"));
    let phi: Value = serde_json::from_str(&example("phi-3-mini-4k")).unwrap();
    let mut partial = phi.clone();
    partial["partial_rotary_factor"] = 0.75.into();
    let e = from_config(&partial.to_string()).unwrap_err().to_string();
    assert!(e.contains("partial_rotary_factor 0.75"), "{e}");
    let mut longrope = phi;
    longrope["rope_scaling"] =
        serde_json::json!({"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]});
    let e = from_config(&longrope.to_string()).unwrap_err().to_string();
    assert!(e.contains("\"longrope\""), "{e}");
}

#[test]
fn phi3_keeps_its_fused_tensors_in_its_own_order_without_biases() {
    let spec = from_config(&example("phi-3-mini-4k")).unwrap();
    assert_eq!(spec.family, "phi3");
    assert!(!spec.qkv_bias && !spec.o_bias && !spec.mlp_bias);
    // Every layer slides with the config's window.
    assert!(spec.windows.iter().all(|w| *w == Some(2047)));
    let names: Vec<&str> = spec.tensors[1..7].iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "model.layers.0.self_attn.o_proj.weight",
            "model.layers.0.self_attn.qkv_proj.weight",
            "model.layers.0.mlp.gate_up_proj.weight",
            "model.layers.0.mlp.down_proj.weight",
            "model.layers.0.input_layernorm.weight",
            "model.layers.0.post_attention_layernorm.weight",
        ]
    );
    assert_eq!(spec.tensors[2].shape, vec![3 * 3072, 3072]);
    assert_eq!(spec.tensors[3].shape, vec![2 * 8192, 3072]);
    // Already fused: each tensor is its own allocation, as transformers allocates it.
    let allocs = fused::allocations(&spec);
    assert_eq!(allocs.len(), spec.tensors.len());
    assert!(allocs.iter().all(|a| a.members.len() == 1));
}

#[test]
fn kv_bytes_per_position_is_two_tensors_per_layer() {
    let spec = from_config(&example("llama-3.1-8b")).unwrap();
    // 2 × 32 layers × 8 heads × 128 × 2 bytes = 131,072 bytes (128 KiB per token).
    assert_eq!(spec.kv_bytes_per_position(2), 131_072);
}

#[test]
fn bias_flags_follow_each_family_modeling_file_not_the_config_alone() {
    // modeling_mistral.py and modeling_qwen2.py build their projections with fixed biases,
    // whatever `attention_bias` / `mlp_bias` say; Llama reads both, Qwen3 `attention_bias`.
    let biased = |name: &str| {
        let mut v: Value = serde_json::from_str(&example(name)).unwrap();
        v["attention_bias"] = true.into();
        v["mlp_bias"] = true.into();
        from_config(&v.to_string()).unwrap()
    };
    let bias_names = |spec: &DecoderSpec| -> Vec<String> {
        spec.tensors
            .iter()
            .filter(|t| t.name.starts_with("model.layers.0.") && t.name.ends_with(".bias"))
            .map(|t| t.name["model.layers.0.".len()..].to_owned())
            .collect()
    };
    let mistral = biased("mistral-7b-v0.1");
    assert!(!mistral.qkv_bias && !mistral.o_bias && !mistral.mlp_bias);
    assert!(bias_names(&mistral).is_empty());
    let qwen2 = biased("qwen2.5-0.5b");
    assert_eq!(
        bias_names(&qwen2),
        [
            "self_attn.q_proj.bias",
            "self_attn.k_proj.bias",
            "self_attn.v_proj.bias"
        ]
    );
    let qwen3 = biased("qwen3-0.6b");
    assert!(qwen3.qkv_bias && qwen3.o_bias && !qwen3.mlp_bias);
    assert_eq!(bias_names(&qwen3).len(), 4);
    let llama = biased("llama-3.2-1b");
    assert!(llama.qkv_bias && llama.o_bias && llama.mlp_bias);
    assert_eq!(bias_names(&llama).len(), 7);
}

#[test]
fn a_folder_is_read_once_through_the_plan_model() {
    let folder = format!(
        "{}/../examples/models/qwen3-0.6b",
        env!("CARGO_MANIFEST_DIR")
    );
    let model = crate::plan::model::read(std::path::Path::new(&folder)).unwrap();
    let spec = from_model(&model).unwrap();
    assert_eq!(spec, from_config(&model.config_text).unwrap());
    assert_eq!(
        u128::from(spec.parameters()),
        model
            .architecture
            .parameter_counts()
            .narrow()
            .unwrap()
            .total()
    );
    let gemma = format!(
        "{}/../examples/models/gemma-2-2b",
        env!("CARGO_MANIFEST_DIR")
    );
    let model = crate::plan::model::read(std::path::Path::new(&gemma)).unwrap();
    let e = from_model(&model).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("\"gemma2\""), "{e}");
}

#[test]
fn stacked_allocations_cover_every_tensor_once_at_its_first_member() {
    for (name, _) in SUPPORTED_EXAMPLES {
        let spec = from_config(&example(name)).unwrap();
        let allocs = fused::allocations(&spec);
        let mut seen = vec![0u32; spec.tensors.len()];
        let mut elements = 0u64;
        for a in &allocs {
            let mut rows = 0;
            for &(i, first) in &a.members {
                seen[i] += 1;
                assert_eq!(first, rows, "{name} {}", a.name);
                rows += spec.tensors[i].shape[0];
                assert_eq!(
                    spec.tensors[i].shape[1..],
                    a.shape[1..],
                    "{name} {}",
                    a.name
                );
            }
            assert_eq!(rows, a.shape[0], "{name} {}", a.name);
            elements += a.elements();
        }
        assert!(
            seen.iter().all(|&n| n == 1),
            "{name}: a tensor not in exactly one"
        );
        assert_eq!(elements, spec.parameters(), "{name}");
        // Load order: allocations in order of their first member.
        let firsts: Vec<usize> = allocs.iter().map(|a| a.members[0].0).collect();
        assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{name}");
        // Per layer: one q/k/v stack (plus one of biases where the family has them), one
        // gate/up stack, nothing else stacked.
        let stacks: Vec<&fused::Allocation> =
            allocs.iter().filter(|a| a.members.len() > 1).collect();
        let per_layer = if spec.qkv_bias { 3 } else { 2 } + if spec.mlp_bias { 1 } else { 0 };
        if spec.family == "phi3" {
            // Fused in the checkpoint already: nothing to stack.
            assert!(stacks.is_empty(), "{name}");
            continue;
        }
        assert_eq!(stacks.len() as u64, spec.layers * per_layer, "{name}");
        let l0 = &allocs
            .iter()
            .find(|a| a.name == "model.layers.0.self_attn.qkv_proj.weight")
            .unwrap();
        assert_eq!(
            l0.shape,
            vec![
                (spec.heads + 2 * spec.kv_heads) * spec.head_dim,
                spec.hidden
            ],
            "{name}"
        );
        let gu = &allocs
            .iter()
            .find(|a| a.name == "model.layers.0.mlp.gate_up_proj.weight")
            .unwrap();
        assert_eq!(gu.shape, vec![2 * spec.intermediate, spec.hidden], "{name}");
    }
}

#[test]
fn biases_stack_apart_from_weights() {
    let spec = from_config(&example("qwen2.5-0.5b")).unwrap();
    let allocs = fused::allocations(&spec);
    let b = allocs
        .iter()
        .find(|a| a.name == "model.layers.3.self_attn.qkv_proj.bias")
        .unwrap();
    assert_eq!(
        b.shape,
        vec![(spec.heads + 2 * spec.kv_heads) * spec.head_dim]
    );
    let names: Vec<&str> = b
        .members
        .iter()
        .map(|(i, _)| spec.tensors[*i].name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "model.layers.3.self_attn.q_proj.bias",
            "model.layers.3.self_attn.k_proj.bias",
            "model.layers.3.self_attn.v_proj.bias"
        ]
    );
    assert!(allocs
        .iter()
        .any(|a| a.name == "model.layers.3.self_attn.o_proj.weight"));
}

/// `model_load`'s end counters over its baseline (allocated, reserved) measured on one H200
/// with random bf16 weights (`examples/h200/measure-model/run3/`, the `lab-*-b1.json` files).
const MEASURED_STACKED_LOAD: [(&str, u128, u128); 4] = [
    ("llama-3.1-8b", 16060523520, 16062087168),
    ("mistral-7b-v0.1", 14483465216, 14485028864),
    ("qwen3-0.6b", 1192115200, 1254096896),
    ("qwen2.5-0.5b", 989756416, 1052770304),
];

#[test]
fn stacked_replay_gives_the_counters_measured_on_the_h200() {
    for (name, allocated, reserved) in MEASURED_STACKED_LOAD {
        let spec = from_config(&example(name)).unwrap();
        assert_eq!(fused::replay(&spec, 2), (allocated, reserved), "{name}");
    }
}

#[test]
fn stacked_replay_allocates_what_the_plan_allocates_unless_a_block_stays_unsplit() {
    for (name, _) in SUPPORTED_EXAMPLES {
        let text = example(name);
        let spec = from_config(&text).unwrap();
        let arch = family::read(&serde_json::from_str(&text).unwrap()).unwrap();
        let mut plan = crate::plan::allocator::CachingAllocator::new();
        arch.tensors(&mut |t| {
            plan.allocate(crate::plan::layout::tensor_bytes(t, 2, &|n| n * 2));
        });
        let (allocated, reserved) = fused::replay(&spec, 2);
        if name == "qwen2.5-0.5b" {
            // Its transformers layout leaves sub-MiB remainders inside handed-out blocks.
            assert!(allocated < plan.allocated_bytes(), "{name}");
        } else {
            assert_eq!(allocated, plan.allocated_bytes(), "{name}");
        }
        assert!(reserved >= allocated, "{name}");
    }
}
