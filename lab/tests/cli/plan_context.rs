//! `--context` past the config's `max_position_embeddings`: the note says what its rope
//! scaling allows; a training plan prints no KV line; latent attention is shown by its own
//! widths.

use crate::plan_headers::folder;
use crate::support::Lab;
use serde_json::json;

fn notes(dir: &std::path::Path, context: &str) -> Vec<String> {
    let v = Lab::new(&[
        "plan",
        "--json",
        "--gpu",
        "h200",
        "--context",
        context,
        "--model",
    ])
    .arg(dir)
    .json();
    v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

/// Qwen3-0.6B's config with these rope fields, as Qwen's cards add YaRN.
fn qwen3(rope: serde_json::Value) -> tempfile::TempDir {
    let path = crate::support::repo_root().join("examples/models/qwen3-0.6b/config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for (k, v) in rope.as_object().unwrap() {
        c[k] = v.clone();
    }
    folder(&c.to_string(), &[])
}

#[test]
fn the_note_says_how_far_the_rope_scaling_reaches() {
    let yarn =
        json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768});
    // max_position_embeddings 40960; YaRN x4 over 32768 reaches 131072.
    for key in ["rope_scaling", "rope_parameters"] {
        let dir = qwen3(json!({ key: yarn }));
        let within = notes(dir.path(), "100000");
        assert!(
            within.iter().any(|n| n.contains("exceeds config.json's max_position_embeddings 40960; rope_scaling yarn stretches the 32768 original positions by 4.0 to 131072: the context is within that")),
            "{key}: {within:?}"
        );
        let beyond = notes(dir.path(), "140000");
        assert!(
            beyond
                .iter()
                .any(|n| n.contains("to 131072: the context is beyond that too")),
            "{beyond:?}"
        );
        assert!(notes(dir.path(), "40960").is_empty());
    }
    // A scaling whose reach the fields do not give (llama3): what the config states.
    let dir = qwen3(
        json!({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}),
    );
    let n = notes(dir.path(), "50000");
    assert!(n.iter().any(|n| n.contains("rope_scaling llama3 with factor 8.0 (original 8192 positions) is already in the 40960 positions config.json states")), "{n:?}");
    // None, null, or a scaling without a factor.
    for rope in [
        json!({}),
        json!({"rope_scaling": null}),
        json!({"rope_scaling": {"rope_type": "default"}}),
    ] {
        let dir = qwen3(rope.clone());
        let n = notes(dir.path(), "50000");
        assert!(
            n.iter()
                .any(|n| n.contains("no rope_scaling: positions past it were never trained")),
            "{rope}: {n:?}"
        );
    }
}

#[test]
fn a_training_plan_prints_no_kv_line_even_past_the_positions() {
    let dir = qwen3(json!({}));
    let out = Lab::new(&[
        "plan",
        "--mode",
        "training",
        "--gpu",
        "h200",
        "--context",
        "50000",
        "--model",
    ])
    .arg(dir.path())
    .stdout_has("note: context 50000 exceeds config.json's max_position_embeddings 40960")
    .run();
    let text = String::from_utf8(out.stdout).unwrap();
    for line in text.lines().skip(2) {
        assert!(!line.contains("KV"), "{line}");
    }
}

#[test]
fn latent_attention_shows_its_own_widths() {
    let ds = crate::support::repo_root().join("examples/models/deepseek-v2-lite");
    let out = Lab::new(&["plan", "--gpu", "h200", "--model"])
        .arg(&ds)
        .stdout_has("  hidden 2048, 27 layers, 16 heads, latent attention (cached per token: latent 512 + rope 64; query not compressed; query/key head 128 + rope 64, value head 128), intermediate 10944")
        .run();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("KV heads, head"), "{text}");
    let v = Lab::new(&["plan", "--json", "--gpu", "h200", "--model"])
        .arg(&ds)
        .json();
    let l = &v["architecture"]["latent"];
    assert_eq!(
        (
            l["kv_lora_rank"].as_u64(),
            l["q_lora_rank"].as_u64(),
            l["qk_rope_head_dim"].as_u64(),
            l["qk_nope_head_dim"].as_u64(),
            l["v_head_dim"].as_u64()
        ),
        (Some(512), None, Some(64), Some(128), Some(128))
    );
    // A dense model keeps its heads' line.
    let llama = crate::support::repo_root().join("examples/models/llama-3.1-8b");
    Lab::new(&["plan", "--gpu", "h200", "--model"])
        .arg(llama)
        .stdout_has("  hidden 4096, 32 layers, 32 heads, 8 KV heads, head 128, intermediate 14336")
        .run();
}

/// A `max_position_embeddings` that is there but not a whole number (each JSON type, a
/// fraction, a negative) is refused by name, exit 2, as transformers' config classes refuse
/// it, rather than the context note being left out; absent, the plan goes on.
#[test]
fn a_mistyped_max_position_embeddings_is_refused_by_name() {
    for given in [
        json!("40960"),
        json!(40960.5),
        json!(true),
        json!(null),
        json!(-1),
        json!([40960]),
        json!({"n": 40960}),
    ] {
        let dir = qwen3(json!({ "max_position_embeddings": given }));
        let out = crate::support::lab()
            .args(["plan", "--context", "1024", "--model"])
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{given}: {stderr}");
        assert!(
            stderr.contains("max_position_embeddings must be a whole number of positions, got"),
            "{given}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    let path = crate::support::repo_root().join("examples/models/qwen3-0.6b/config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    c.as_object_mut().unwrap().remove("max_position_embeddings");
    let dir = folder(&c.to_string(), &[]);
    assert!(notes(dir.path(), "100000")
        .iter()
        .all(|n| !n.contains("max_position_embeddings")));
}
