use super::*;
use crate::plan::layout::Role;

fn example(name: &str) -> String {
    let path = format!(
        "{}/../examples/models/{name}/config.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const SUPPORTED_EXAMPLES: [(&str, &str); 8] = [
    ("llama-3.1-8b", "llama"),
    ("llama-3.2-1b", "llama"),
    ("mistral-7b-v0.1", "mistral"),
    ("qwen2.5-0.5b", "qwen2"),
    ("qwen3-0.6b", "qwen3"),
    ("phi-3-mini-4k", "phi3"),
    ("mixtral-8x7b", "mixtral"),
    ("gemma-2-2b", "gemma2"),
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
        ("gemma-3-1b", "gemma3_text"),
        ("gemma-3-4b-it", "gemma3"),
        ("deepseek-v2-lite", "deepseek_v2"),
        ("qwen3-30b-a3b", "qwen3_moe"),
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
        "{}/../examples/models/gemma-3-1b",
        env!("CARGO_MANIFEST_DIR")
    );
    let model = crate::plan::model::read(std::path::Path::new(&gemma)).unwrap();
    let e = from_model(&model).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("\"gemma3_text\""), "{e}");
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
        if spec.family == "mixtral" {
            // The experts are stacked by transformers itself: only q/k/v is ours.
            assert_eq!(stacks.len() as u64, spec.layers, "{name}");
            assert!(stacks.iter().all(|a| a.name.ends_with("qkv_proj.weight")));
            continue;
        }
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
        } else if name == "gemma-2-2b" {
            // The stacked gate/up, 2 x 9216 x 2304 x 2 B = 81 MiB, gets a segment rounded up
            // to 82 MiB whose 1 MiB rest is not split off (a large-pool block splits only
            // when more than 1 MiB remains): 1 MiB more per layer than transformers' two
            // 40.5 MiB tensors.
            assert_eq!(allocated, plan.allocated_bytes() + 26 * (1 << 20), "{name}");
        } else {
            assert_eq!(allocated, plan.allocated_bytes(), "{name}");
        }
        assert!(reserved >= allocated, "{name}");
    }
}

#[test]
fn mixtral_lists_router_then_stacked_experts_as_transformers_5_materialises_them() {
    let spec = from_config(&example("mixtral-8x7b")).unwrap();
    assert_eq!(
        spec.experts,
        Some(Routing {
            experts: 8,
            per_token: 2
        })
    );
    assert!(!spec.qkv_bias && !spec.o_bias && !spec.mlp_bias && !spec.tied_embeddings);
    // `sliding_window: null`: every layer attends in full.
    assert!(spec.windows.iter().all(Option::is_none));
    let layer: Vec<(&str, &[u64])> = spec.tensors[1..10]
        .iter()
        .map(|t| (t.name.as_str(), t.shape.as_slice()))
        .collect();
    assert_eq!(
        layer,
        [
            (
                "model.layers.0.self_attn.q_proj.weight",
                &[4096u64, 4096][..]
            ),
            ("model.layers.0.self_attn.k_proj.weight", &[1024, 4096][..]),
            ("model.layers.0.self_attn.v_proj.weight", &[1024, 4096][..]),
            ("model.layers.0.self_attn.o_proj.weight", &[4096, 4096][..]),
            ("model.layers.0.mlp.gate.weight", &[8, 4096][..]),
            (
                "model.layers.0.mlp.experts.gate_up_proj",
                &[8, 28672, 4096][..]
            ),
            (
                "model.layers.0.mlp.experts.down_proj",
                &[8, 4096, 14336][..]
            ),
            ("model.layers.0.input_layernorm.weight", &[4096][..]),
            (
                "model.layers.0.post_attention_layernorm.weight",
                &[4096][..]
            ),
        ]
    );
    // 46,702,792,704 parameters (Mixtral-8x7B's published total).
    assert_eq!(spec.parameters(), 46_702_792_704);
    // A window is Mistral's, per layer.
    let mut v: Value = serde_json::from_str(&example("mixtral-8x7b")).unwrap();
    v["sliding_window"] = 4096.into();
    let slid = from_config(&v.to_string()).unwrap();
    assert!(slid.windows.iter().all(|w| *w == Some(4096)));
    // Other routers than Mixtral's are refused by name, and so is Mixtral's with another
    // activation (the experts are SwiGLU).
    v["hidden_act"] = "gelu".into();
    assert!(from_config(&v.to_string())
        .unwrap_err()
        .to_string()
        .contains("hidden_act"));
    let e = from_config(&example("qwen1.5-moe-a2.7b")).unwrap_err();
    assert!(e.to_string().contains("\"qwen2_moe\""), "{e}");
}

/// A safetensors file of `tensors` (name, shape; F32 data counting up from `first`) in `dir`.
fn write_safetensors(
    dir: &std::path::Path,
    file: &str,
    tensors: &[(String, Vec<u64>)],
    first: f32,
) {
    let mut header = serde_json::Map::new();
    let mut data: Vec<u8> = Vec::new();
    let mut next = first;
    for (name, shape) in tensors {
        let n: u64 = shape.iter().product();
        let begin = data.len();
        for _ in 0..n {
            data.extend_from_slice(&next.to_le_bytes());
            next += 1.0;
        }
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [begin, data.len()]}),
        );
    }
    let text = Value::Object(header).to_string();
    let mut bytes = (text.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(text.as_bytes());
    bytes.extend_from_slice(&data);
    std::fs::write(dir.join(file), bytes).unwrap();
}

/// A tiny Mixtral config: 2 layers, 4 experts, hidden 8, intermediate 4, vocab 16.
fn tiny_mixtral() -> Value {
    serde_json::json!({
        "model_type": "mixtral", "hidden_size": 8, "intermediate_size": 4,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "vocab_size": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu"
    })
}

/// The values a source reads, as f32 (every test file is F32).
fn read_f32(sources: &weights::Sources, i: usize) -> Vec<f32> {
    let mut open: Vec<Option<std::fs::File>> = sources.files.iter().map(|_| None).collect();
    let mut host = Vec::new();
    sources.read(i, &mut open, &mut host).unwrap();
    host.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn mixtral_experts_are_read_from_the_checkpoints_per_expert_tensors_in_transformers_order() {
    let spec = from_config(&tiny_mixtral().to_string()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The checkpoint's names (Mixtral-8x7B's index): every tensor but the experts and router
    // as transformers names them, the router and experts per expert.
    let mut names: Vec<(String, Vec<u64>)> = Vec::new();
    for t in &spec.tensors {
        match weights::checkpoint_layout(&t.name, &t.shape) {
            Some(parts) => names.extend(parts),
            None => names.push((t.name.clone(), t.shape.clone())),
        }
    }
    // Stored in another order than transformers', to show the order comes from the spec.
    names.reverse();
    write_safetensors(dir.path(), "model.safetensors", &names, 0.0);
    std::fs::write(dir.path().join("config.json"), tiny_mixtral().to_string()).unwrap();
    let sources = weights::locate(dir.path(), &spec).unwrap();
    let value_of = |name: &str, element: u64| -> f32 {
        let mut start = 0u64;
        for (n, shape) in &names {
            if n == name {
                return (start + element) as f32;
            }
            start += shape.iter().product::<u64>();
        }
        panic!("{name}")
    };
    let at = |name: &str| spec.tensors.iter().position(|t| t.name == name).unwrap();
    let gate_up = read_f32(&sources, at("model.layers.1.mlp.experts.gate_up_proj"));
    assert_eq!(gate_up.len(), 4 * 8 * 8);
    // [E, 2I, H]: expert e's rows 0..I are its w1 (gate), rows I..2I its w3 (up).
    for e in 0..4u64 {
        for row in 0..8u64 {
            let (w, r) = if row < 4 {
                ("w1", row)
            } else {
                ("w3", row - 4)
            };
            let name = format!("model.layers.1.block_sparse_moe.experts.{e}.{w}.weight");
            for col in 0..8u64 {
                let got = gate_up[((e * 8 + row) * 8 + col) as usize];
                assert_eq!(
                    got,
                    value_of(&name, r * 8 + col),
                    "e{e} row {row} col {col}"
                );
            }
        }
    }
    let down = read_f32(&sources, at("model.layers.0.mlp.experts.down_proj"));
    // [E, H, I]: expert e's w2.
    for e in 0..4u64 {
        let name = format!("model.layers.0.block_sparse_moe.experts.{e}.w2.weight");
        for k in 0..32u64 {
            assert_eq!(down[(e * 32 + k) as usize], value_of(&name, k));
        }
    }
    let router = read_f32(&sources, at("model.layers.0.mlp.gate.weight"));
    let first = value_of("model.layers.0.block_sparse_moe.gate.weight", 0);
    assert_eq!(
        router,
        (0..32).map(|k| first + k as f32).collect::<Vec<_>>()
    );
    // The same folder with transformers 5's own names reads the same data as one piece each.
    let fused: Vec<(String, Vec<u64>)> = spec
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.shape.clone()))
        .collect();
    write_safetensors(dir.path(), "model.safetensors", &fused, 0.0);
    let direct = weights::locate(dir.path(), &spec).unwrap();
    assert!(direct.tensors.iter().all(|t| t.pieces.len() == 1));
    let i = at("model.layers.1.mlp.experts.gate_up_proj");
    assert_eq!(
        direct.tensors[i].pieces[0].end - direct.tensors[i].pieces[0].begin,
        4 * 256
    );
    // A missing expert is named, with the tensor transformers would build from it.
    names.retain(|(n, _)| n != "model.layers.1.block_sparse_moe.experts.2.w3.weight");
    write_safetensors(dir.path(), "model.safetensors", &names, 0.0);
    let e = weights::locate(dir.path(), &spec).unwrap_err().to_string();
    assert!(
        e.contains("\"model.layers.1.block_sparse_moe.experts.2.w3.weight\"")
            && e.contains("\"model.layers.1.mlp.experts.gate_up_proj\""),
        "{e}"
    );
}

#[test]
fn gemma2_reads_its_caps_scale_and_four_zero_centred_norms() {
    let spec = from_config(&example("gemma-2-2b")).unwrap();
    assert_eq!(
        spec.gemma,
        Some(Gemma {
            attn_softcap: Some(50.0),
            final_softcap: Some(30.0),
            query_pre_attn_scalar: 256.0
        })
    );
    assert!(spec.tied_embeddings && !spec.qkv_bias && spec.experts.is_none());
    assert_eq!((spec.head_dim, spec.heads, spec.kv_heads), (256, 8, 4));
    // Every other layer slides, from the first.
    assert_eq!(spec.windows[..3], [Some(4096), None, Some(4096)]);
    let norms: Vec<(&str, Init)> = spec.tensors[8..12]
        .iter()
        .map(|t| (&t.name["model.layers.0.".len()..], t.init))
        .collect();
    assert_eq!(
        norms,
        [
            ("input_layernorm.weight", Init::Zeros),
            ("post_attention_layernorm.weight", Init::Zeros),
            ("pre_feedforward_layernorm.weight", Init::Zeros),
            ("post_feedforward_layernorm.weight", Init::Zeros),
        ]
    );
    assert_eq!(spec.tensors.last().unwrap().name, "model.norm.weight");
    // The replay holds the one-element embed_scale after the embedding: one 512-byte block
    // more than without it.
    let mut plain = spec.clone();
    plain.gemma = None;
    assert_eq!(fused::replay(&spec, 2).0, fused::replay(&plain, 2).0 + 512);
    let base: Value = serde_json::from_str(&example("gemma-2-2b")).unwrap();
    let with = |key: &str, value: Value| {
        let mut v = base.clone();
        if value.is_null() {
            v[key] = Value::Null;
        } else if value == Value::String("absent".into()) {
            v.as_object_mut().unwrap().remove(key);
        } else {
            v[key] = value;
        }
        from_config(&v.to_string())
    };
    // Null caps are no caps; absent ones the class defaults.
    let g = with("attn_logit_softcapping", Value::Null)
        .unwrap()
        .gemma
        .unwrap();
    assert_eq!(g.attn_softcap, None);
    let g = with("final_logit_softcapping", "absent".into())
        .unwrap()
        .gemma
        .unwrap();
    assert_eq!(g.final_softcap, Some(30.0));
    let g = with("query_pre_attn_scalar", 144.into())
        .unwrap()
        .gemma
        .unwrap();
    assert_eq!(g.query_pre_attn_scalar, 144.0);
    // Gemma 2 reads hidden_activation, never hidden_act.
    assert!(with("hidden_act", "silu".into()).is_ok());
    let e = with("hidden_activation", "gelu".into())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("hidden_activation") && e.contains("gelu_pytorch_tanh"),
        "{e}"
    );
    let e = with("use_bidirectional_attention", true.into())
        .unwrap_err()
        .to_string();
    assert!(e.contains("use_bidirectional_attention"), "{e}");
    let e = with("attn_logit_softcapping", (-1.0).into())
        .unwrap_err()
        .to_string();
    assert!(e.contains("positive number"), "{e}");
}
