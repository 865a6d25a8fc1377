//! `lab plan`: the worked check (Llama-3.1-8B) and the error classes (one line; exit 2 for
//! bad input, exit 1 for a file that is missing or cannot be read).

use crate::support::lab;
use serde_json::Value;

fn models() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/models")
}

fn plan_json(args: &[&str]) -> Value {
    let out = lab().arg("plan").args(args).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn llama_3_1_8b_worked_check() {
    let model = models().join("llama-3.1-8b");
    let p = plan_json(&["--model", model.to_str().unwrap(), "--context", "8192"]);
    assert_eq!(p["parameters"], 8030261248u64);
    assert_eq!(p["memory"]["weights_bytes"], 16060522496u64);
    // As allocated on the H200: the two rotary buffers' 512-byte blocks on top.
    assert_eq!(p["memory"]["weights_allocated_bytes"], 16060523520u64);
    assert_eq!(p["memory"]["kv_cache_bytes_per_token"], 131072);
    assert_eq!(p["memory"]["kv_cache_bytes"], 1073741824u64);
    let pk = p["packages"].as_array().unwrap();
    let find = |id: &str| pk.iter().find(|x| x["gpu"] == id).unwrap().clone();
    // One T4 cannot hold it (it takes two); one H200 can.
    assert_ne!(find("t4")["gpus"], 1);
    assert_eq!(find("h200")["gpus"], 1);
    assert_eq!(find("h200")["fits"], true);
    assert_eq!(find("h200")["lots"], 1);
    assert_eq!(find("h200")["total_cents"], 51072);
    // Fitting packages cheapest first.
    let totals: Vec<i64> = pk
        .iter()
        .filter_map(|x| x["total_cents"].as_i64())
        .collect();
    assert!(totals.windows(2).all(|w| w[0] <= w[1]));
    // Only T4 restricted: one GPU is not enough.
    let t4 = plan_json(&[
        "--model",
        model.to_str().unwrap(),
        "--context",
        "8192",
        "--gpu",
        "t4",
    ]);
    assert_eq!(t4["packages"].as_array().unwrap().len(), 1);
}

#[test]
fn known_parameter_counts_per_family() {
    for (name, params) in [
        ("llama-3.2-1b", 1235814400u64),
        ("mistral-7b-v0.1", 7241732096),
        ("qwen2.5-0.5b", 494032768),
        ("qwen3-0.6b", 596049920),
        ("gemma-2-2b", 2614341888),
        ("gemma-3-1b", 999885952),
        ("phi-3-mini-4k", 3821079552),
        ("mixtral-8x7b", 46702792704),
        ("deepseek-v2-lite", 15706484224),
        // The public multimodal config: most text fields left to Gemma3TextConfig's defaults.
        ("gemma-3-4b-it", 4300079472),
        // Qwen3-30B-A3B, a mixture of experts on every layer ("30.5B").
        ("qwen3-30b-a3b", 30532122624),
        // Qwen1.5-MoE-A2.7B: experts, a shared expert and its gate ("14.3B").
        ("qwen1.5-moe-a2.7b", 14315784192),
        // Granite-3.3-8B-Instruct, tied embeddings.
        ("granite-3.3-8b-instruct", 8170864640),
        // gpt-oss-20b ("20.91B"), its MXFP4 experts counted as parameters.
        ("gpt-oss-20b", 20914757184),
        // gpt-oss-120b ("116.83B") and Phi-3.5-MoE-instruct ("41.9B", biases and LayerNorms).
        ("gpt-oss-120b", 116829156672),
        ("phi-3.5-moe-instruct", 41873153344),
        // Llama 4 Scout and Maverick with their vision towers ("109B", "400B").
        ("llama-4-scout-17b-16e", 108641793536),
        ("llama-4-maverick-17b-128e", 401583781376),
        // Command-R v01 ("35B") and Command R7B, tied.
        ("c4ai-command-r-v01", 34980831232),
        ("c4ai-command-r7b-12-2024", 8028033024),
        // GLM-4.5-Air ("106B total"), without its multi-token-prediction layer.
        ("glm-4.5-air", 106852245504),
        // Mistral-Small-3.2-24B: Pixtral tower, projector, decoder; the head tied as
        // transformers 5.17 ties it for this config.
        ("mistral-small-3.2-24b", 23340272640),
    ] {
        let p = plan_json(&["--model", models().join(name).to_str().unwrap()]);
        assert_eq!(p["parameters"], params, "{name}");
    }
}

/// The architecture line names each feed-forward kind with its own width, over every shipped
/// config: the dense MLP's `intermediate` only when some layer has it (with its layer count
/// when experts hold the others), the experts' own width (and the shared experts') when some
/// layer has them. Llama 4 Scout, experts on all 48 layers, shows no dense width; Maverick
/// alternates.
#[test]
fn architecture_line_shows_each_feed_forward_kind() {
    let mut seen = 0;
    for entry in std::fs::read_dir(models()).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("config.json").is_file() {
            continue;
        }
        let folder = dir.to_str().unwrap();
        let out = lab()
            .args(["plan", "--model", folder, "--weights-dtype", "bf16"])
            .output()
            .unwrap();
        if !out.status.success() {
            continue;
        }
        let text = String::from_utf8(out.stdout).unwrap();
        let line = text.lines().nth(1).unwrap();
        let a = &plan_json(&["--model", folder, "--weights-dtype", "bf16"])["architecture"];
        let (dense, moe) = (
            a["dense_layers"].as_u64().unwrap(),
            a["expert_layers"].as_u64().unwrap(),
        );
        assert_eq!(dense + moe, a["layers"].as_u64().unwrap(), "{folder}");
        let width = format!(", intermediate {}", a["intermediate_size"]);
        assert_eq!(line.contains(&width), dense > 0, "{folder}: {line}");
        if moe > 0 {
            let e = &a["experts"];
            let experts = format!(
                "{} experts ({} per token) of intermediate {}",
                e[0], e[1], a["expert_intermediate"]
            );
            assert!(line.contains(&experts), "{folder}: {line}");
            let shared = a["shared_expert_intermediate"].as_u64().unwrap();
            assert_eq!(
                line.contains(&format!("{experts}, shared {shared}")),
                shared > 0,
                "{line}"
            );
            if dense > 0 {
                let on = |n: u64| format!(" on {n} layer{}", if n == 1 { "" } else { "s" });
                assert!(line.contains(&format!("{width}{}, ", on(dense))), "{line}");
                assert!(line.contains(&format!("{}, vocabulary", on(moe))), "{line}");
            }
        } else {
            assert!(!line.contains("experts"), "{folder}: {line}");
        }
        seen += 1;
    }
    assert!(seen >= 20, "{seen}");
    let line = |name: &str| {
        let out = lab()
            .args(["plan", "--model", models().join(name).to_str().unwrap()])
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .nth(1)
            .unwrap()
            .to_string()
    };
    let scout = line("llama-4-scout-17b-16e");
    assert!(scout.contains(", head 128, 16 experts (1 per token) of intermediate 8192, shared 8192, vocabulary 202048"), "{scout}");
    assert!(!scout.contains("16384"), "{scout}");
    let maverick = line("llama-4-maverick-17b-128e");
    assert!(maverick.contains(", head 128, intermediate 16384 on 24 layers, 128 experts (1 per token) of intermediate 8192, shared 8192 on 24 layers, vocabulary 202048"), "{maverick}");
}

#[test]
fn quantized_and_fractional_bits() {
    let model = models().join("llama-3.1-8b");
    let m = model.to_str().unwrap();
    let bf16 = plan_json(&["--model", m]);
    let int4 = plan_json(&["--model", m, "--weights-dtype", "int4"]);
    let bits = plan_json(&["--model", m, "--bits", "4.5"]);
    let w = |v: &Value| v["memory"]["weights_bytes"].as_u64().unwrap();
    // Embedding and head (2 x 128256 x 4096) and norms stay 16-bit.
    let rest = 8030261248u64 - 6979321856;
    assert_eq!(w(&bits), 6979321856 * 45 / 80 + rest * 2);
    assert!(w(&int4) < w(&bits) && w(&bits) < w(&bf16));
    let train = plan_json(&[
        "--model",
        m,
        "--mode",
        "training",
        "--batch",
        "1",
        "--context",
        "1024",
    ]);
    assert_eq!(train["memory"]["optimizer_bytes"], 8030261248u64 * 8);
    assert_eq!(train["memory"]["master_weights_bytes"], 8030261248u64 * 4);
}

#[test]
fn errors_are_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let check = |path: &std::path::Path, needle: &str| {
        let out = lab().args(["plan", "--model"]).arg(path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{needle}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    };
    check(d, "no config.json");
    std::fs::write(d.join("config.json"), r#"{"model_type":"gpt_neox"}"#).unwrap();
    check(d, "unknown model_type");
    let cfg = std::fs::read_to_string(models().join("llama-3.2-1b/config.json")).unwrap();
    std::fs::write(
        d.join("config.json"),
        cfg.replace("\"vocab_size\"", "\"vocab\""),
    )
    .unwrap();
    check(d, "vocab_size");
    std::fs::write(d.join("config.json"), &cfg).unwrap();
    std::fs::write(d.join("model.safetensors"), [5u8, 0, 0]).unwrap();
    check(d, "truncated");
    let mut bytes = 1000u64.to_le_bytes().to_vec();
    bytes.extend_from_slice(b"{}");
    std::fs::write(d.join("model.safetensors"), &bytes).unwrap();
    check(d, "does not fit");
    // Next to an index, model.safetensors is a file the index does not list.
    std::fs::write(
        d.join("model.safetensors.index.json"),
        r#"{"weight_map":{"a":"b.safetensors"}}"#,
    )
    .unwrap();
    check(d, "\"model.safetensors\" that");
    std::fs::remove_file(d.join("model.safetensors")).unwrap();
    std::fs::write(
        d.join("model.safetensors.index.json"),
        r#"{"weight_map":{"a":"model-00001-of-00002.safetensors"}}"#,
    )
    .unwrap();
    check(d, "model-00001-of-00002.safetensors");
    std::fs::write(
        d.join("model.safetensors.index.json"),
        r#"{"weight_map":{"a":"../x.safetensors"}}"#,
    )
    .unwrap();
    check(d, "is a path");
    for args in [
        vec!["--batch", "0"],
        vec!["--context", "1e3"],
        vec!["--bits", "4.55555"],
        vec!["--mode", "serve"],
        vec!["--kv-dtype", "int3"],
        vec!["--kv-dtype", "int4"],
        vec!["--days", "5"],
        vec!["--gpu", "x100"],
    ] {
        let out = lab()
            .args(["plan", "--model"])
            .arg(models().join("llama-3.2-1b"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    }
}

/// A FIFO or another non-regular file in place of a model file is refused at once (opening a
/// FIFO for reading would block forever), whichever file it stands for.
#[test]
fn non_regular_model_files_are_refused_without_blocking() {
    for name in [
        "model.safetensors",
        "config.json",
        "model.safetensors.index.json",
    ] {
        let dir = tempfile::tempdir().unwrap();
        if name != "config.json" {
            std::fs::copy(
                models().join("llama-3.2-1b/config.json"),
                dir.path().join("config.json"),
            )
            .unwrap();
        }
        let fifo = dir.path().join(name);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let output = lab()
            .args(["plan", "--model"])
            .arg(dir.path())
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        // A FIFO named config.json is there: it is no config file, not a missing one.
        let expected = format!("{name} is not a regular file");
        assert!(stderr.contains(&expected), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        // A folder of that name is refused the same way.
        std::fs::remove_file(&fifo).unwrap();
        std::fs::create_dir(&fifo).unwrap();
        let output = lab()
            .args(["plan", "--model"])
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name} folder: {stderr}");
        assert!(stderr.contains(&expected), "{name} folder: {stderr}");
    }
}

/// A dump of `scripts/module_order.py`: (name, config path, [(elements, bytes)]).
type Fixture = (String, std::path::PathBuf, Vec<(u64, u64)>);

fn module_orders() -> Vec<Fixture> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/module-order");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let own = dir.join("config.json");
        let config = if own.is_file() {
            own
        } else {
            models().join(&name).join("config.json")
        };
        let text = std::fs::read_to_string(dir.join("tensors.tsv")).unwrap();
        let tensors = text
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.split('\t').collect();
                let elements: u64 = f[1].parse().unwrap();
                (elements, elements * f[2].parse::<u64>().unwrap())
            })
            .collect();
        out.push((name, config, tensors));
    }
    out.sort();
    assert!(out.len() >= 16, "fixtures missing under {}", root.display());
    out
}

/// Every tensor, in the order transformers 5.17 materialises it, for every family.
#[test]
fn layout_is_transformers_module_order() {
    use lab::plan::layout;
    for (name, config, expected) in module_orders() {
        let arch = lab::plan::model::read(&config).unwrap().architecture;
        let mut got = Vec::new();
        arch.tensors(&mut |t| {
            got.push((t.elements, layout::tensor_bytes(t, 2, &|n| 2 * n)));
        });
        let first = got.iter().zip(&expected).position(|(g, e)| g != e);
        assert!(
            first.is_none() && got.len() == expected.len(),
            "{name}: {} tensors listed, {} expected; first difference at {first:?}",
            got.len(),
            expected.len()
        );
    }
}

/// The parameter count is the sum of the dump's parameters (its `p` rows), for every family,
/// plus DeepSeek-V3's `e_score_correction_bias`: a buffer to transformers, but a persistent
/// one, stored in the checkpoint's safetensors beside the parameters, which lab plan counts
/// with them (as the headers do).
#[test]
fn parameter_counts_are_the_dumped_parameters() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/module-order");
    for (name, config, _) in module_orders() {
        let arch = lab::plan::model::read(&config).unwrap().architecture;
        let counts = arch.parameter_counts().narrow().unwrap();
        let text = std::fs::read_to_string(root.join(&name).join("tensors.tsv")).unwrap();
        let dumped: u128 = text
            .lines()
            .map(|line| line.split('\t').collect::<Vec<_>>())
            .filter(|f| f[3] == "p" || (f[0].ends_with(".e_score_correction_bias") && f[2] == "2"))
            .map(|f| f[1].parse::<u128>().unwrap())
            .sum();
        assert_eq!(counts.total(), dumped, "{name}");
    }
}

/// The model folder of an H200 row's label: "mixtral-8x7b (4 layers)" is the shipped config
/// with fewer layers, written under `tmp` as the scripts built it.
fn h200_model(label: &str, tmp: &std::path::Path) -> std::path::PathBuf {
    let Some((base, rest)) = label.split_once(" (") else {
        return models().join(label);
    };
    let layers: u64 = rest.trim_end_matches(" layers)").parse().unwrap();
    let text = std::fs::read_to_string(models().join(base).join("config.json")).unwrap();
    let mut cfg: Value = serde_json::from_str(&text).unwrap();
    cfg["num_hidden_layers"] = layers.into();
    let dir = tmp.join(base);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    dir
}

/// `weights_allocated_bytes` is what the H200 measured (`torch.cuda.memory_allocated()`
/// after loading, `examples/h200/plan/plan-h200.csv`), to the byte, for every model there.
#[test]
fn weights_as_allocated_match_the_h200() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let csv = std::fs::read_to_string(root.join("examples/h200/plan/plan-h200.csv")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = std::collections::BTreeSet::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (model, measured): (&str, u64) = (f[0], f[4].parse().unwrap());
        if !checked.insert(model.to_string()) {
            continue;
        }
        let folder = h200_model(model, tmp.path());
        let p = plan_json(&[
            "--model",
            folder.to_str().unwrap(),
            "--weights-dtype",
            "bf16",
        ]);
        assert_eq!(
            p["memory"]["weights_allocated_bytes"], measured,
            "{model}: predicted vs measured allocated bytes"
        );
    }
    assert_eq!(checked.len(), 9);
}

/// Loaded in a process of its own (`scripts/plan_weights_fresh.py`, then
/// `scripts/time_new_family_h200.py` for the five configs added with the new families), every
/// model's allocated and reserved bytes on the H200 are `lab plan`'s, to the byte: the nine
/// above, the multimodal Gemma 3 from its public config, DeepSeek-V2-Lite, Qwen3-30B-A3B,
/// Qwen2.5-32B, Qwen1.5-MoE-A2.7B, Granite-3.3-8B and OLMo-2-1B.
#[test]
fn weights_allocated_and_reserved_match_a_fresh_process_on_the_h200() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let csv = std::fs::read_to_string(root.join("examples/h200/plan/plan-h200-weights-fresh.csv"));
    let tmp = tempfile::tempdir().unwrap();
    let mut rows = 0;
    for line in csv.unwrap().lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let folder = h200_model(f[0], tmp.path());
        let p = plan_json(&[
            "--model",
            folder.to_str().unwrap(),
            "--weights-dtype",
            "bf16",
        ]);
        let measured = |i: usize| f[i].parse::<u64>().unwrap();
        assert_eq!(
            p["memory"]["weights_allocated_bytes"],
            measured(2),
            "{}",
            f[0]
        );
        assert_eq!(
            p["memory"]["weights_reserved_bytes"],
            measured(4),
            "{}",
            f[0]
        );
        rows += 1;
    }
    assert_eq!(rows, 16);
}

/// The new families on the H200 (`examples/h200/time/new-family-memory*.csv`, one fresh process
/// per point, `scripts/time_new_family_h200.py`): the KV cache after a prefill of `context`
/// tokens at `batch` is `lab plan`'s `kv_cache_bytes` to the byte, and the prefill's peak of
/// allocated bytes is within 5 % of `lab plan`'s `total_bytes`.
#[test]
fn new_families_kv_cache_and_peak_match_the_h200() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/h200/time");
    let mut rows = 0;
    for file in ["new-family-memory.csv", "new-family-memory-run3.csv"] {
        let csv = std::fs::read_to_string(root.join(file)).unwrap();
        for line in csv.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            let (model, batch, context) = (f[0], f[1], f[2]);
            let p = plan_json(&[
                "--model",
                models().join(model).to_str().unwrap(),
                "--weights-dtype",
                "bf16",
                "--batch",
                batch,
                "--context",
                context,
            ]);
            let measured = |i: usize| f[i].parse::<u64>().unwrap();
            assert_eq!(p["memory"]["kv_cache_bytes"], measured(5), "{line}");
            let total = p["memory"]["total_bytes"].as_u64().unwrap() as i128;
            let peak = measured(8) as i128;
            // |predicted - measured| <= 5 % of measured, in integers.
            assert!(
                (total - peak).abs() * 100 <= peak * 5,
                "{line}: plan {total}"
            );
            rows += 1;
        }
    }
    assert_eq!(rows, 10);
}

/// Writes a safetensors file with these tensors (name, dtype, shape) and zeroed data.
fn write_safetensors(path: &std::path::Path, tensors: &[(&str, &str, &[u64])]) {
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, dtype, shape) in tensors {
        let width = match *dtype {
            "F32" | "I32" => 4,
            "U8" | "I8" | "F8_E4M3" => 1,
            _ => 2,
        };
        let bytes = shape.iter().product::<u64>() * width;
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let text = Value::Object(header).to_string();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(text.as_bytes());
    out.resize(out.len() + offset as usize, 0);
    std::fs::write(path, out).unwrap();
}

/// A tiny Llama config (hidden 64, 2 layers, vocabulary 128, untied): 90,432 parameters.
fn tiny_llama(dir: &std::path::Path, extra: &str) {
    std::fs::write(
        dir.join("config.json"),
        format!(
            r#"{{"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":128,"torch_dtype":"float16"{extra}}}"#
        ),
    )
    .unwrap();
}

/// Headers holding far fewer elements than the config describes are an incomplete folder:
/// refused, not planned as a tiny model; a pre-quantized checkpoint's packed headers are not
/// a parameter count, and a quantized format is still accepted for it.
#[test]
fn partial_and_pre_quantized_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_llama(d, "");
    let whole = plan_json(&["--model", d.to_str().unwrap()]);
    assert_eq!(whole["parameters"], 90432);
    write_safetensors(
        &d.join("model.safetensors"),
        &[("model.embed_tokens.weight", "F16", &[128, 64])],
    );
    let out = lab().args(["plan", "--model"]).arg(d).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("under half of the 90432 parameters"), "{err}");
    assert_eq!(err.lines().count(), 1);
    // GPTQ-style: packed int32 weights and fp16 scales, with a quantization_config.
    tiny_llama(
        d,
        r#","quantization_config":{"quant_method":"gptq","bits":4}"#,
    );
    write_safetensors(
        &d.join("model.safetensors"),
        &[
            ("model.embed_tokens.weight", "F16", &[128, 64]),
            // Enough packed bytes for the config's matrices at 4 bits (plan::quantization).
            ("model.layers.0.mlp.down_proj.qweight", "I32", &[72, 160]),
            ("model.layers.0.mlp.down_proj.scales", "F16", &[1, 64]),
        ],
    );
    let p = plan_json(&["--model", d.to_str().unwrap()]);
    assert_eq!(p["parameters"], 90432);
    assert_eq!(p["headers"]["elements"], 128 * 64 + 72 * 160 + 64);
    assert!(p["notes"][0]
        .as_str()
        .unwrap()
        .contains("pre-quantized checkpoint (gptq)"));
    let int4 = plan_json(&["--model", d.to_str().unwrap(), "--weights-dtype", "int4"]);
    // Matrices at 4.125 bits, the rest (embedding, head, norms) in 16 bits.
    // Per layer: q and o 64 x 64, k and v 64 x 32, three 64 x 128 feed-forward matrices.
    let linear = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128) as u64;
    let rest = 90432 - linear;
    assert_eq!(int4["memory"]["weights_bytes"], linear * 33 / 64 + rest * 2);
}

/// Figures past 64 bits (or past 2^128 on the way) are refused in one line, never wrapped
/// into a small wrong number.
#[test]
fn huge_products_are_refused_not_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Shared experts: 2^40 x 2^24 overflows 64 bits.
    std::fs::write(
        d.join("config.json"),
        r#"{"model_type":"deepseek_v2","hidden_size":16,"intermediate_size":16,"num_hidden_layers":2,
"num_attention_heads":1,"vocab_size":16,"n_routed_experts":1,"num_experts_per_tok":1,
"moe_intermediate_size":1099511627776,"n_shared_experts":16777216,"kv_lora_rank":4,
"qk_rope_head_dim":4,"qk_nope_head_dim":4,"v_head_dim":4,"q_lora_rank":null,"torch_dtype":"bfloat16"}"#,
    )
    .unwrap();
    refused(d, &[], 2, "overflows 64 bits");
    // The prefill workspace per token times batch times context passes 2^128.
    std::fs::write(
        d.join("config.json"),
        r#"{"model_type":"mixtral","hidden_size":1,"intermediate_size":917217481106,"num_hidden_layers":1,
"num_attention_heads":1,"num_key_value_heads":1,"vocab_size":1,"num_local_experts":6032996,"num_experts_per_tok":6032996,
"torch_dtype":"bfloat16"}"#,
    )
    .unwrap();
    refused(
        d,
        &[
            "--bits",
            "1",
            "--kv-dtype",
            "int8",
            "--batch",
            "4087173159",
            "--context",
            "1880706648",
        ],
        2,
        "lower --batch or --context",
    );
    // Vision geometry with no patch.
    let cfg = std::fs::read_to_string(models().join("gemma-3-4b-it/config.json")).unwrap();
    std::fs::write(
        d.join("config.json"),
        cfg.replace("\"patch_size\": 14", "\"patch_size\": 1000"),
    )
    .unwrap();
    refused(d, &[], 2, "patch_size 1000 is larger than image_size 896");
}

/// Runs `lab plan --model path` plus `args`: exit `code`, nothing on stdout, one stderr line
/// (returned) holding `needle`.
fn refused(path: &std::path::Path, args: &[&str], code: i32, needle: &str) -> String {
    let out = lab()
        .args(["plan", "--model"])
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{path:?} {args:?}: {err}");
    assert!(out.stdout.is_empty(), "{path:?} {args:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("lab: error: "), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    err
}

/// A safetensors file of the header `header`, its data zeros.
fn safetensors(header: &str, data: usize) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(std::iter::repeat_n(0u8, data));
    bytes
}

const ONE_TENSOR: &str = r#"{"a":{"dtype":"BF16","shape":[8],"data_offsets":[0,16]}}"#;

/// A Llama config.json of 11 parameters (every size 1), so that ONE_TENSOR's 8 elements are
/// a plausible header for it (not under half of the config).
const TINY_LLAMA: &str = r#"{
  "model_type": "llama",
  "hidden_size": 1,
  "intermediate_size": 1,
  "num_hidden_layers": 1,
  "num_attention_heads": 1,
  "vocab_size": 1,
  "torch_dtype": "bfloat16"
}
"#;

/// A folder with [`TINY_LLAMA`] as its config.json.
fn llama_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), TINY_LLAMA).unwrap();
    dir
}

/// PROTOCOL §8: a path that is missing or cannot be read is exit 1, as for `--tariffs`; a
/// folder without config.json is bad input, exit 2.
#[test]
fn a_missing_model_is_exit_1_a_folder_without_config_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let line = refused(&missing, &[], 1, "cannot read --model");
    assert!(line.contains("No such file or directory"), "{line}");
    refused(dir.path(), &[], 2, "the folder has no config.json");
    // A --model link to nowhere is a path that cannot be read.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&missing, &link).unwrap();
    refused(&link, &[], 1, "cannot read --model");
}

/// A model file that is a dangling symbolic link or a link loop is reported (exit 1), never
/// skipped for the config arithmetic; a valid link, as in a Hugging Face cache snapshot
/// (`snapshots/<rev>/x -> ../../blobs/<hash>`), is read through.
#[test]
fn model_file_symlinks_are_followed_or_reported() {
    for name in [
        "model.safetensors",
        "model.safetensors.index.json",
        "config.json",
    ] {
        for target in ["nowhere", "loop"] {
            let dir = llama_folder();
            let path = dir.path().join(name);
            if name == "config.json" {
                std::fs::remove_file(&path).unwrap();
            }
            // "loop" points at itself.
            let to = if target == "loop" {
                path.clone()
            } else {
                dir.path().join("nowhere")
            };
            std::os::unix::fs::symlink(&to, &path).unwrap();
            let line = refused(dir.path(), &[], 1, "cannot read");
            assert!(line.contains(name), "{line}");
            assert!(line.contains("symbolic link"), "{line}");
        }
    }
    // A shard named by the index that is a dangling link.
    let dir = llama_folder();
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        r#"{"weight_map":{"a":"model-00001-of-00001.safetensors"}}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "../blobs/gone",
        dir.path().join("model-00001-of-00001.safetensors"),
    )
    .unwrap();
    refused(dir.path(), &[], 1, "model-00001-of-00001.safetensors");

    // A Hugging Face cache: every file of the snapshot is a relative link into blobs/.
    let cache = tempfile::tempdir().unwrap();
    let blobs = cache.path().join("blobs");
    let snapshot = cache.path().join("snapshots/0123abcd");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snapshot).unwrap();
    let config = TINY_LLAMA.as_bytes().to_vec();
    let files: [(&str, Vec<u8>); 3] = [
        ("config.json", config),
        (
            "model.safetensors.index.json",
            br#"{"weight_map":{"a":"model-00001-of-00001.safetensors"}}"#.to_vec(),
        ),
        (
            "model-00001-of-00001.safetensors",
            safetensors(ONE_TENSOR, 16),
        ),
    ];
    for (index, (name, bytes)) in files.iter().enumerate() {
        std::fs::write(blobs.join(format!("blob{index}")), bytes).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/blob{index}"), snapshot.join(name))
            .unwrap();
    }
    let p = plan_json(&["--model", snapshot.to_str().unwrap()]);
    assert_eq!(p["parameters"], 8);
    assert_eq!(p["headers"]["files"][0], "model-00001-of-00001.safetensors");
    // The same with model.safetensors alone.
    std::fs::remove_file(snapshot.join("model.safetensors.index.json")).unwrap();
    std::fs::rename(
        snapshot.join("model-00001-of-00001.safetensors"),
        snapshot.join("model.safetensors"),
    )
    .unwrap();
    let p = plan_json(&["--model", snapshot.to_str().unwrap()]);
    assert_eq!(p["headers"]["files"][0], "model.safetensors");
}

/// Messages say what the file is, name it once, and cut long echoed values.
#[test]
fn messages_name_the_file_once_and_cut_long_values() {
    let dir = llama_folder();
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();

    // Over the 16 MiB cap: named as a model config, not an index.
    let mut big = text.clone();
    big.push_str(&" ".repeat(16 << 20));
    std::fs::write(&config, &big).unwrap();
    refused(dir.path(), &[], 2, "too large for a model config");

    // A config error names the file once.
    value.as_object_mut().unwrap().remove("vocab_size");
    std::fs::write(&config, value.to_string()).unwrap();
    let line = refused(dir.path(), &[], 2, "has no \"vocab_size\"");
    assert_eq!(line.matches("config.json").count(), 1, "{line}");
    value["vocab_size"] = "x".repeat(100_000).into();
    std::fs::write(&config, value.to_string()).unwrap();
    let line = refused(dir.path(), &[], 2, "\"vocab_size\" must be a whole number");
    assert_eq!(line.matches("config.json").count(), 1, "{line}");
    assert!(line.len() < 400, "{line}");

    // A 100,000-character model_type: cut to 64 characters, escaped.
    let long = format!("\u{202e}{}", "x".repeat(100_000));
    value["vocab_size"] = 128256.into();
    value["model_type"] = long.into();
    std::fs::write(&config, value.to_string()).unwrap();
    let line = refused(dir.path(), &[], 2, "unknown model_type");
    assert!(
        line.contains(&format!("\"\\u{{202e}}{}…\"", "x".repeat(63))),
        "{line}"
    );
    // The value is cut; the rest is the message and the list of known families.
    assert!(line.len() < 600, "{line}");

    // A shard that is a folder or a FIFO is there, but no regular file.
    let dir = llama_folder();
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        r#"{"weight_map":{"a":"b.safetensors"}}"#,
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("b.safetensors")).unwrap();
    refused(dir.path(), &[], 2, "b.safetensors is not a regular file");
    std::fs::remove_dir(dir.path().join("b.safetensors")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.path().join("b.safetensors"))
        .status()
        .unwrap();
    assert!(made.success());
    refused(dir.path(), &[], 2, "b.safetensors is not a regular file");
    std::fs::remove_file(dir.path().join("b.safetensors")).unwrap();
    // A long shard name that is not there: cut.
    let name = format!("{}.safetensors", "s".repeat(100_000));
    std::fs::write(
        dir.path().join("model.safetensors.index.json"),
        serde_json::json!({"weight_map": {"a": name}}).to_string(),
    )
    .unwrap();
    let line = refused(dir.path(), &[], 2, "which is not in");
    assert!(line.len() < 400, "{line}");
}

/// A key given twice is refused in config.json (at any depth), in the index and in a
/// safetensors header alike; a UTF-8 byte-order mark is accepted in config.json and in the
/// index alike.
#[test]
fn duplicate_keys_are_refused_and_a_bom_accepted_in_every_json_file() {
    let dir = llama_folder();
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    let body = text.trim().trim_start_matches('{');
    // Both orders: neither the first nor the last key wins.
    for (first, second) in [("foo", "llama"), ("llama", "foo")] {
        let dup = text
            .trim()
            .replacen('{', &format!("{{\"model_type\": \"{first}\", "), 1);
        let dup = dup.replace(
            "\"model_type\": \"llama\"",
            &format!("\"model_type\": \"{second}\""),
        );
        std::fs::write(&config, dup).unwrap();
        refused(dir.path(), &[], 2, "key \"model_type\" is listed twice");
    }
    std::fs::write(&config, format!("{{\"vocab_size\": 1, {body}")).unwrap();
    let line = refused(dir.path(), &[], 2, "key \"vocab_size\" is listed twice");
    assert_eq!(line.matches("config.json").count(), 1, "{line}");
    // Nested, as in a Gemma 3 text_config.
    std::fs::write(
        &config,
        format!("{{\"text_config\": {{\"hidden_size\": 1, \"hidden_size\": 2}}, {body}"),
    )
    .unwrap();
    refused(
        dir.path(),
        &[],
        2,
        "key \"hidden_size\" in \"text_config\" is listed twice",
    );
    // A BOM in config.json and in the index.
    std::fs::write(&config, format!("\u{feff}{text}")).unwrap();
    std::fs::write(
        dir.path().join("b.safetensors"),
        safetensors(ONE_TENSOR, 16),
    )
    .unwrap();
    let index = dir.path().join("model.safetensors.index.json");
    std::fs::write(&index, "\u{feff}{\"weight_map\":{\"a\":\"b.safetensors\"}}").unwrap();
    let p = plan_json(&["--model", dir.path().to_str().unwrap()]);
    assert_eq!(p["parameters"], 8);
    // The index: a tensor listed twice in weight_map, or weight_map itself twice.
    std::fs::write(
        &index,
        r#"{"weight_map":{"a":"b.safetensors","a":"c.safetensors"}}"#,
    )
    .unwrap();
    refused(
        dir.path(),
        &[],
        2,
        "key \"a\" in \"weight_map\" is listed twice",
    );
    std::fs::write(
        &index,
        r#"{"weight_map":{"a":"c.safetensors"},"weight_map":{"a":"b.safetensors"}}"#,
    )
    .unwrap();
    refused(dir.path(), &[], 2, "key \"weight_map\" is listed twice");
    // A header: a tensor twice (as before), or a field of one tensor twice.
    std::fs::remove_file(&index).unwrap();
    std::fs::remove_file(dir.path().join("b.safetensors")).unwrap();
    let twice = r#"{"a":{"dtype":"BF16","dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#;
    std::fs::write(dir.path().join("model.safetensors"), safetensors(twice, 8)).unwrap();
    refused(
        dir.path(),
        &[],
        2,
        "key \"dtype\" in \"a\" is listed twice in the safetensors header",
    );
}

/// Named flag values are exact, case-sensitive names (as `--dtype`, `--mode`, `--gpu`), and
/// `--bits` is shown as the number it is.
#[test]
fn format_names_are_exact_and_bits_normalized() {
    let model = models().join("llama-3.2-1b");
    for (flag, value) in [
        ("--weights-dtype", "INT4"),
        ("--weights-dtype", "INT4-G128"),
        ("--weights-dtype", "BF16"),
        ("--weights-dtype", "bfloat16"),
        ("--kv-dtype", "FP8"),
        ("--kv-dtype", "Int8"),
    ] {
        refused(&model, &[flag, value], 2, "must be one of");
    }
    let m = model.to_str().unwrap();
    let int4 = plan_json(&["--model", m, "--weights-dtype", "int4"]);
    let g128 = plan_json(&["--model", m, "--weights-dtype", "int4-g128"]);
    assert_eq!(int4["memory"], g128["memory"]);
    for (typed, shown) in [
        ("01", "1"),
        ("64.0000", "64"),
        ("4.50", "4.5"),
        ("4.125", "4.125"),
    ] {
        let p = plan_json(&["--model", m, "--bits", typed]);
        assert_eq!(
            p["weights_format"],
            format!("{shown} bits per matrix weight"),
            "{typed}"
        );
        let out = lab()
            .args(["plan", "--model", m, "--bits", typed])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("weights {shown} bits per matrix weight,")),
            "{typed}: {text}"
        );
    }
}

/// A quantized dtype written in config.json counts like the same `--weights-dtype` (matrices
/// quantized, the rest in 16 bits); a dtype lab plan does not know is named in the refusal.
#[test]
fn configured_dtypes_count_like_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_llama(d, "");
    let config = d.join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    let flag = plan_json(&["--model", d.to_str().unwrap(), "--weights-dtype", "int4"]);
    std::fs::write(&config, text.replace("\"float16\"", "\"int4\"")).unwrap();
    let configured = plan_json(&["--model", d.to_str().unwrap()]);
    assert_eq!(
        configured["memory"]["weights_bytes"],
        flag["memory"]["weights_bytes"]
    );
    for dtype in ["auto", "float64"] {
        std::fs::write(
            &config,
            text.replace("\"float16\"", &format!("\"{dtype}\"")),
        )
        .unwrap();
        let line = refused(
            d,
            &[],
            2,
            &format!("config.json's dtype \"{dtype}\" is not a weights format"),
        );
        assert!(line.contains("give --weights-dtype"), "{line}");
    }
}

/// Training keeps no KV cache: over every example model, the training text names none (no
/// row, no dtype, no per-token line), while the inference text of the same model does.
#[test]
fn training_text_has_no_kv_cache_line() {
    let mut seen = 0;
    for entry in std::fs::read_dir(models()).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("config.json").is_file() {
            continue;
        }
        // A config that states no dtype (OLMo 2's public copy) is planned in bf16.
        let stated = std::fs::read_to_string(dir.join("config.json"))
            .unwrap()
            .contains("dtype\"");
        let run = |mode: &str| {
            let mut command = lab();
            command.args(["plan", "--model"]).arg(&dir).args([
                "--mode",
                mode,
                "--context",
                "1024",
                "--gpu",
                "h200",
            ]);
            if !stated {
                command.args(["--weights-dtype", "bf16"]);
            }
            command.output().unwrap()
        };
        // Example configs of architectures lab plan does not know yet are refused by name.
        if String::from_utf8_lossy(&run("inference").stderr).contains("unknown model_type") {
            continue;
        }
        let text = |mode: &str| {
            let out = run(mode);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let training = text("training");
        assert!(
            !training.contains("KV cache"),
            "{}:\n{training}",
            dir.display()
        );
        assert!(training.contains("\n  AdamW moments (fp32)"), "{training}");
        assert!(
            text("inference").contains("\n  KV cache "),
            "{}",
            dir.display()
        );
        seen += 1;
    }
    assert!(seen >= 16, "{seen} example models");
}

/// An MXFP4 checkpoint (gpt-oss) is counted as transformers 5.17 loads it without the
/// `kernels` package: experts dequantized, every parameter in bf16, from the config alone or
/// beside headers holding the packed blocks and scales; the note gives the stored bytes and
/// the kept-MXFP4 figure.
#[test]
fn mxfp4_experts_are_counted_dequantized_as_transformers_loads_them() {
    let shipped = models().join("gpt-oss-20b");
    let p = plan_json(&["--model", shipped.to_str().unwrap()]);
    assert_eq!(p["memory"]["weights_bytes"], 2 * 20914757184u64);
    assert_eq!(
        p["weights_format"],
        "bf16 (MXFP4 experts dequantized on load)"
    );
    assert_eq!(p["kv_dtype"], "bf16");
    let note = p["notes"][0].as_str().unwrap();
    // bf16 everywhere but the experts' 19,110,297,600 matrix elements at half a byte plus a
    // byte per 32, and their 6,635,520 biases in float32: the released 13.8 GB.
    assert!(note.contains("at least 13774535808 bytes"), "{note}");
    assert!(note.contains("no safetensors header was read"), "{note}");
    // A tiny gpt-oss folder with the checkpoint's packed tensors: 2 layers, hidden 64, 4
    // experts of 64, 4 heads of 16, 2 KV heads, vocabulary 128.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("config.json"),
        r#"{"model_type":"gpt_oss","hidden_size":64,"intermediate_size":64,"num_hidden_layers":2,
"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":128,
"num_local_experts":4,"num_experts_per_tok":2,"quantization_config":{"quant_method":"mxfp4"}}"#,
    )
    .unwrap();
    let mut tensors: Vec<(String, &str, Vec<u64>)> = vec![
        ("model.embed_tokens.weight".into(), "BF16", vec![128, 64]),
        ("lm_head.weight".into(), "BF16", vec![128, 64]),
    ];
    for l in 0..2 {
        let at = |n: &str| format!("model.layers.{l}.{n}");
        tensors.extend([
            (at("self_attn.q_proj.weight"), "BF16", vec![64, 64]),
            (at("self_attn.k_proj.weight"), "BF16", vec![32, 64]),
            (at("self_attn.v_proj.weight"), "BF16", vec![32, 64]),
            (at("self_attn.o_proj.weight"), "BF16", vec![64, 64]),
            (
                at("mlp.experts.gate_up_proj_blocks"),
                "U8",
                vec![4, 128, 2, 16],
            ),
            (at("mlp.experts.gate_up_proj_scales"), "U8", vec![4, 128, 2]),
            (at("mlp.experts.down_proj_blocks"), "U8", vec![4, 64, 2, 16]),
            (at("mlp.experts.down_proj_scales"), "U8", vec![4, 64, 2]),
        ]);
    }
    let refs: Vec<(&str, &str, &[u64])> = tensors
        .iter()
        .map(|(n, t, s)| (n.as_str(), *t, s.as_slice()))
        .collect();
    write_safetensors(&d.join("model.safetensors"), &refs);
    let p = plan_json(&["--model", d.to_str().unwrap()]);
    // Per layer: attention 2 x 64 x 64 + 2 x 32 x 64 and biases 64 + 2 x 32 + 64, sinks 4,
    // router 4 x 64 + 4, experts 4 x 64 x 128 + 4 x 128 + 4 x 64 x 64 + 4 x 64, two norms.
    let layer = 12288 + 192 + 4 + 260 + 32768 + 512 + 16384 + 256 + 128;
    let params = 2 * layer + 2 * 128 * 64 + 64;
    assert_eq!(p["parameters"], params);
    assert_eq!(p["memory"]["weights_bytes"], 2 * params);
    let stored = p["headers"]["data_bytes"].as_u64().unwrap();
    assert!(stored < 2 * params);
    let note = p["notes"].as_array().unwrap();
    assert!(
        note.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains(&format!("the safetensors hold {stored} bytes"))),
        "{note:?}"
    );
}

/// Headers whose elements differ from the config by exactly what transformers drops or adds
/// on load are planned as it allocates: a tied head stored anyway (not allocated again), an
/// untied head missing (allocated, newly initialised), DeepSeek-V3's multi-token-prediction
/// layer (dropped); any other difference keeps the headers' count.
#[test]
fn headers_beyond_or_short_of_what_transformers_loads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Tensors of these element counts, F16, the first named as the embedding.
    let write = |counts: &[u64]| {
        let names: Vec<String> = (0..counts.len())
            .map(|i| format!("model.layers.0.t{i}.weight"))
            .collect();
        let shapes: Vec<[u64; 1]> = counts.iter().map(|c| [*c]).collect();
        let tensors: Vec<(&str, &str, &[u64])> = names
            .iter()
            .zip(&shapes)
            .map(|(n, s)| (n.as_str(), "F16", &s[..]))
            .collect();
        write_safetensors(&d.join("model.safetensors"), &tensors);
    };
    let plan = || plan_json(&["--model", d.to_str().unwrap()]);
    let note = |p: &Value| p["notes"][0].as_str().unwrap_or_default().to_string();
    // Tied (90,432 less the 128 x 64 head = 82,240), the head stored too.
    tiny_llama(d, r#","tie_word_embeddings":true"#);
    write(&[82240, 8192]);
    let p = plan();
    assert_eq!(p["parameters"], 82240);
    assert_eq!(p["memory"]["weights_bytes"], 2 * 82240);
    assert!(
        note(&p).contains("a stored output head (128 x 64)"),
        "{}",
        note(&p)
    );
    // Untied, the head missing from the headers.
    tiny_llama(d, "");
    write(&[82240]);
    let p = plan();
    assert_eq!(p["parameters"], 90432);
    assert_eq!(p["memory"]["weights_bytes"], 2 * 90432);
    assert!(
        note(&p).contains("less its untied output head"),
        "{}",
        note(&p)
    );
    // Any other difference: the headers are used, as before.
    write(&[82240, 10]);
    let p = plan();
    assert_eq!(p["parameters"], 82250);
    assert!(
        note(&p).contains("(-8182); the headers are used"),
        "{}",
        note(&p)
    );
    // DeepSeek-V3 (the synthetic config: 3 layers of hidden 256, vocabulary 1000,
    // num_nextn_predict_layers 1) with its MTP layer 3 in the headers: one expert layer
    // (attention 112,800, experts 8 x 256 x 256 + 8 x 256 x 128, router 8 x 256 + 8, shared
    // expert 3 x 128 x 256, two norms: 1,000,104) and its embedding and head 2 x 1000 x 256,
    // eh_proj 256 x 512 and three norms (643,840).
    let v3 = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/module-order/synthetic-deepseek-v3/config.json"),
    )
    .unwrap();
    std::fs::write(d.join("config.json"), &v3).unwrap();
    let mtp = 1_000_104 + 643_840;
    write(&[3_018_992, mtp]);
    let p = plan();
    assert_eq!(p["parameters"], 3_018_992);
    assert_eq!(p["memory"]["weights_bytes"], 2 * 3_018_992u64);
    assert!(
        note(&p).contains("and 1643944 of 1 multi-token-prediction layer(s)"),
        "{}",
        note(&p)
    );
    // Stating no MTP layer: the same headers are used as they are.
    std::fs::write(
        d.join("config.json"),
        v3.replace(
            "\"num_nextn_predict_layers\": 1",
            "\"num_nextn_predict_layers\": 0",
        ),
    )
    .unwrap();
    assert_eq!(plan()["parameters"], 3_018_992 + mtp);
}

/// A block-scaled FP8 config (DeepSeek-V3's quantization_config) is planned in FP8 as
/// transformers keeps it on a GPU of compute capability 8.9 or more: a float8 byte per matrix
/// weight plus a float32 scale per 128 x 128 tile (a partial tile counts whole), the rest in
/// bf16; with headers too (their multi-token-prediction layer not counted).
#[test]
fn fp8_block_configs_are_planned_in_fp8() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fp8 = |extra: &str| {
        format!(
            r#","quantization_config":{{"quant_method":"fp8","activation_scheme":"dynamic","weight_block_size":[128,128]{extra}}}"#
        )
    };
    // The tiny Llama: 14 matrices of at most 128 x 128, one tile each; 73,728 matrix weights,
    // the rest (embedding, head, norms) 16,704 in 16 bits.
    tiny_llama(d, &fp8(""));
    let p = plan_json(&["--model", d.to_str().unwrap()]);
    assert_eq!(p["parameters"], 90432);
    assert_eq!(p["memory"]["weights_bytes"], 73728 + 14 * 4 + 16704 * 2);
    assert_eq!(
        p["weights_format"],
        "fp8 (as configured: float8 matrices with their block scales)"
    );
    assert!(p["notes"][0]
        .as_str()
        .unwrap()
        .contains("dequantizes to bf16, 180864 bytes"));
    // One-byte scales (ue8m0), and a float32 activation scale per matrix (static).
    tiny_llama(
        d,
        &fp8(r#","scale_fmt":"ue8m0","activation_scheme":"static""#)
            .replace(r#""activation_scheme":"dynamic","#, ""),
    );
    let p = plan_json(&["--model", d.to_str().unwrap()]);
    assert_eq!(
        p["memory"]["weights_bytes"],
        73728 + 14 * (1 + 4) + 16704 * 2
    );
    for bad in [r#"[128]"#, r#"[128,0]"#, r#""128""#] {
        tiny_llama(
            d,
            &format!(
                r#","quantization_config":{{"quant_method":"fp8","weight_block_size":{bad}}}"#
            ),
        );
        refused(d, &[], 2, "\"weight_block_size\" in quantization_config");
    }
    // With headers (the matrices in float8, the rest in 16 bits, 14 scales, and 5000 more
    // elements the config does not describe): the weights are still what the loader builds.
    tiny_llama(d, &fp8(""));
    write_safetensors(
        &d.join("model.safetensors"),
        &[
            ("model.layers.0.mlp.down_proj.weight", "F8_E4M3", &[73728]),
            ("model.embed_tokens.weight", "F16", &[16704]),
            (
                "model.layers.0.mlp.down_proj.weight_scale_inv",
                "F32",
                &[14],
            ),
            ("model.layers.2.extra", "F16", &[5000]),
        ],
    );
    let p = plan_json(&["--model", d.to_str().unwrap()]);
    assert_eq!(p["memory"]["weights_bytes"], 73728 + 14 * 4 + 16704 * 2);
    assert!(p["notes"].as_array().unwrap().iter().any(|n| n
        .as_str()
        .unwrap()
        .contains("FP8 checkpoint (the safetensors hold 117192 bytes)")));
    // DeepSeek-V3 (61 layers, hidden 7168, 256 experts of 2048): 671,026,419,200 parameters,
    // 669,065,609,216 of them in matrices (one byte each) with 163,352,928 bytes of float32
    // tile scales, 1,960,809,984 in 16 bits (embedding, head, norms, routers): 673,150,582,112
    // bytes (the checkpoint stores its MTP layer too, which transformers does not build).
    std::fs::remove_file(d.join("model.safetensors")).unwrap();
    std::fs::write(
        d.join("config.json"),
        r#"{"model_type":"deepseek_v3","hidden_size":7168,"intermediate_size":18432,"moe_intermediate_size":2048,
"num_hidden_layers":61,"num_attention_heads":128,"num_key_value_heads":128,"n_routed_experts":256,
"n_shared_experts":1,"first_k_dense_replace":3,"moe_layer_freq":1,"num_experts_per_tok":8,
"q_lora_rank":1536,"kv_lora_rank":512,"qk_rope_head_dim":64,"qk_nope_head_dim":128,"v_head_dim":128,
"vocab_size":129280,"tie_word_embeddings":false,"torch_dtype":"bfloat16","num_nextn_predict_layers":1,
"quantization_config":{"activation_scheme":"dynamic","fmt":"e4m3","quant_method":"fp8","weight_block_size":[128,128]}}"#,
    )
    .unwrap();
    let p = plan_json(&["--model", d.to_str().unwrap()]);
    assert_eq!(p["parameters"], 671026419200u64);
    assert_eq!(p["memory"]["weights_bytes"], 673150582112u64);
}

/// A GPTQ, AWQ, bitsandbytes or compressed-tensors config without headers is refused naming
/// the format (what its loader allocates depends on tensors and kernels the config does not
/// state), never planned at the config's float dtype; with --bits or --weights-dtype it is
/// planned at that width.
#[test]
fn config_only_packed_formats_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (q, needle) in [
        (
            r#"{"quant_method":"gptq","bits":4,"group_size":128}"#,
            r#"pre-quantized "gptq" checkpoint (4 bits, groups of 128: at least 4.15625 bits per matrix weight)"#,
        ),
        (
            r#"{"quant_method":"awq","w_bit":4,"q_group_size":64}"#,
            r#""awq" checkpoint (4 bits, groups of 64: at least 4.3125 bits"#,
        ),
        (
            r#"{"quant_method":"bitsandbytes","load_in_4bit":true}"#,
            r#""bitsandbytes" checkpoint (4-bit: at least 4.125 bits"#,
        ),
        (
            r#"{"quant_method":"hqq"}"#,
            r#"pre-quantized "hqq" checkpoint and no safetensors header"#,
        ),
    ] {
        tiny_llama(d, &format!(r#","quantization_config":{q}"#));
        let e = refused(d, &[], 2, needle);
        assert!(
            e.contains("give the model folder with its safetensors"),
            "{e}"
        );
        let p = plan_json(&["--model", d.to_str().unwrap(), "--bits", "4.5"]);
        assert_eq!(p["weights_format"], "4.5 bits per matrix weight");
    }
}
