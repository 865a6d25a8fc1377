use super::*;

fn example(name: &str) -> PathBuf {
    PathBuf::from(format!(
        "{}/../examples/models/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
}

fn ask(model: PathBuf, random: bool) -> Ask {
    Ask {
        model,
        random_weights: random,
        workload: ModelWorkload {
            device: "cuda:0".into(),
            batch: 1,
            input_tokens: 128,
            output_tokens: 64,
            context: 192,
            dtype: Dtype::Bfloat16,
            warmup: 1,
            repeats: 2,
            seed: 0,
            graph: true,
        },
    }
}

#[test]
fn a_config_alone_prepares_with_random_weights_and_the_plan_of_the_same_workload() {
    let p = prepare(&ask(example("llama-3.1-8b"), true)).unwrap();
    assert_eq!(p.facts.family, "llama");
    assert_eq!(p.facts.parameters, 8_030_261_248);
    assert_eq!(p.facts.weights_source, WeightsSource::Random);
    assert!(p.run.sources.is_none());
    // bf16 KV cache: 192 positions × 128 KiB per position.
    assert_eq!(p.plan_memory.kv_cache_bytes, 192 * 131_072);
    assert!(p.plan_memory.weights_allocated_bytes >= 2 * 8_030_261_248);
    assert_eq!(p.facts.config_sha256.len(), 64);
}

#[test]
fn guards_before_any_worker() {
    // No safetensors without --random-weights: named, with the way out.
    let e = prepare(&ask(example("llama-3.1-8b"), false)).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("--random-weights"), "{e}");
    // Unsupported family: refused by name even with random weights.
    let e = prepare(&ask(example("deepseek-v2-lite"), true)).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("\"deepseek_v2\""), "{e}");
    // Mixtral and Gemma 2 prepare, with the plan's parameters for the same config.
    for (name, family, parameters) in [
        ("mixtral-8x7b", "mixtral", 46_702_792_704u64),
        ("gemma-2-2b", "gemma2", 2_614_341_888),
    ] {
        let p = prepare(&ask(example(name), true)).unwrap();
        assert_eq!(
            (p.facts.family.as_str(), p.facts.parameters),
            (family, parameters)
        );
    }
    // A folder without config.json.
    let dir = tempfile::tempdir().unwrap();
    let e = prepare(&ask(dir.path().to_path_buf(), true)).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("no config.json"), "{e}");
    // Inconsistent context.
    let mut a = ask(example("qwen3-0.6b"), true);
    a.workload.context = 10;
    assert_eq!(prepare(&a).unwrap_err().exit_code(), 2);
}

#[test]
fn safetensors_missing_a_tensor_or_with_another_shape_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string(example("qwen3-0.6b").join("config.json")).unwrap();
    std::fs::write(dir.path().join("config.json"), &config).unwrap();
    let write = |entries: &[(&str, &[u64])]| {
        let mut header = serde_json::Map::new();
        let mut offset = 0u64;
        for (name, shape) in entries {
            let bytes = shape.iter().product::<u64>() * 2;
            header.insert(
                (*name).into(),
                serde_json::json!({"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + bytes]}),
            );
            offset += bytes;
        }
        let text = serde_json::Value::Object(header).to_string();
        let mut file = (text.len() as u64).to_le_bytes().to_vec();
        file.extend(text.as_bytes());
        file.resize(file.len() + offset as usize, 0);
        std::fs::write(dir.path().join("model.safetensors"), file).unwrap();
    };
    write(&[("model.embed_tokens.weight", &[151_936, 1024])]);
    let e = prepare(&ask(dir.path().to_path_buf(), false)).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string()
            .contains("model.layers.0.self_attn.q_proj.weight"),
        "{e}"
    );
    write(&[("model.embed_tokens.weight", &[1000, 1024])]);
    let e = prepare(&ask(dir.path().to_path_buf(), false)).unwrap_err();
    assert!(e.to_string().contains("has shape [1000, 1024]"), "{e}");
}

fn row(
    phase: ModelPhase,
    repetition: Option<u64>,
    base: u64,
    end: u64,
    peak: u64,
) -> model_run::ModelPhaseRow {
    model_run::ModelPhaseRow {
        phase,
        repetition,
        tokens: 1,
        wall_seconds: 0.001,
        gpu_seconds: Some(0.001),
        baseline_allocated_bytes: base,
        baseline_reserved_bytes: base,
        end_allocated_bytes: end,
        end_reserved_bytes: end,
        peak_allocated_bytes: peak,
        peak_reserved_bytes: peak,
    }
}

#[test]
fn the_prediction_puts_each_plan_figure_beside_its_counter_with_the_error() {
    let p = prepare(&ask(example("qwen3-0.6b"), true)).unwrap();
    let m = &p.plan_memory;
    let load_end = m.weights_allocated_bytes + 512;
    let kv_end = load_end + m.kv_cache_bytes;
    let mut phases = vec![
        row(ModelPhase::ModelLoad, None, 0, load_end, load_end),
        row(ModelPhase::Inputs, None, load_end, load_end, load_end),
        row(ModelPhase::KvCache, None, load_end, kv_end, kv_end),
        row(ModelPhase::ColdPrefill, None, kv_end, kv_end, kv_end + 1000),
        row(ModelPhase::Warmup, None, kv_end, kv_end, kv_end),
    ];
    phases.push(row(
        ModelPhase::WarmPrefill,
        Some(1),
        kv_end,
        kv_end,
        kv_end,
    ));
    phases.push(row(
        ModelPhase::WarmPrefill,
        Some(2),
        kv_end,
        kv_end,
        kv_end,
    ));
    let mut doc = ModelDocument {
        schema: MODEL_SCHEMA_ID.into(),
        tool: Tool::rust(),
        created_utc: "2026-12-01T00:00:00Z".into(),
        environment: crate::document::tests::sample_environment(),
        model: p.facts.clone(),
        workload: p.run.workload.clone(),
        phases,
        prediction: prediction_stub(),
    };
    doc.workload.output_tokens = 2;
    doc.workload.graph = false;
    // Decode rows missing: the check names them.
    assert!(model_run::check_rows(&doc).unwrap_err().contains("decode"));
    doc.phases
        .push(row(ModelPhase::Decode, Some(1), kv_end, kv_end, kv_end));
    doc.phases
        .push(row(ModelPhase::Decode, Some(2), kv_end, kv_end, kv_end));
    model_run::check_rows(&doc).unwrap();
    let pred = prediction(&doc, m, &p.run.spec, &[]);
    let weights = &pred.memory[0];
    assert_eq!(weights.figure, "weights_allocated_bytes");
    assert_eq!(weights.error_bytes, 512);
    let figures: Vec<&str> = pred.memory.iter().map(|c| c.figure.as_str()).collect();
    assert_eq!(
        figures,
        [
            "weights_allocated_bytes",
            "weights_reserved_bytes",
            "weights_reserved_bytes_stacked",
            "weights_allocated_bytes_stacked",
            "kv_cache_bytes",
            "total_bytes"
        ]
    );
    // The stacked figures are the replay over the worker's layout.
    let (alloc, reserved) = crate::decoder::fused::replay(&p.run.spec, 2);
    assert_eq!(pred.memory[2].predicted_bytes as u128, reserved);
    assert_eq!(pred.memory[3].predicted_bytes as u128, alloc);
    let kv = &pred.memory[4];
    assert_eq!((kv.figure.as_str(), kv.error_bytes), ("kv_cache_bytes", 0));
    assert_eq!(kv.error_percent, Some(rust_decimal::Decimal::ZERO));
    let total = pred.memory.last().unwrap();
    assert_eq!(total.measured_bytes, kv_end + 1000);
    assert!(pred.time.is_none());
    // A row out of order is refused.
    doc.phases.swap(0, 1);
    assert!(model_run::check_rows(&doc).is_err());
}

#[test]
fn error_percent_is_exact_and_rounded_half_to_even() {
    let c = model_run::compare("x", 3, "m", 4);
    assert_eq!(c.error_percent.unwrap().to_string(), "33.333");
    let c = model_run::compare("x", 8000, "m", 7999);
    assert_eq!(c.error_percent.unwrap().to_string(), "-0.012"); // -0.0125 -> -0.012
    assert_eq!(model_run::compare("x", 0, "m", 5).error_percent, None);
}

fn prediction_stub() -> Prediction {
    Prediction {
        source: String::new(),
        memory: Vec::new(),
        time: None,
        notes: Vec::new(),
    }
}

/// The kind test reads the top-level `schema` string only: every other shape is not a
/// model document, whatever it holds deeper.
#[test]
fn is_model_document_reads_the_top_level_schema_only() {
    let id = MODEL_SCHEMA_ID;
    for yes in [
        format!(r#"{{"schema":"{id}"}}"#),
        format!(r#"  {{"rows":[1,{{"a":null}}],"schema":"{id}","x":{{}}}}"#),
        format!(r#"{{"schema":"{}"}}"#, id.replace('/', "\\/")),
    ] {
        assert!(is_model_document(yes.as_bytes()), "{yes}");
    }
    for no in [
        String::new(),
        format!(r#"["{id}"]"#),
        format!(r#"{{"schema":["{id}"]}}"#),
        format!(r#"{{"inner":{{"schema":"{id}"}}}}"#),
        format!(r#"{{"schema":"{id}x"}}"#),
        r#"{"schema":null}"#.to_string(),
        format!(r#"{{"schema":"{id}""#),
        r#"{"format":"iteragpu-lab-measurement"}"#.to_string(),
    ] {
        assert!(!is_model_document(no.as_bytes()), "{no}");
    }
}
