//! `lab plan` on a `model_type` the families do not know: with safetensors headers, a lower
//! bound (the headers' exact bytes, the KV cache of the standard fields when all are there
//! and typed), shown as "at least" and never as a fit; without headers, refused as before.

use crate::plan_headers::{bf16, folder};
use crate::support::Lab;
use serde_json::{json, Value};

/// 4 layers, 8 heads, 2 key/value heads, head 64 (hidden 512 / 8).
fn config(extra: Value) -> String {
    let mut c = json!({"model_type": "fancy_new", "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 2, "hidden_size": 512, "torch_dtype": "bfloat16"});
    for (k, v) in extra.as_object().unwrap() {
        if v.is_string() && v == "ABSENT" {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c.to_string()
}

/// Two BF16 tensors of 1000 and 3000 elements: 8000 bytes of data.
fn model(extra: Value) -> tempfile::TempDir {
    folder(
        &config(extra),
        &[("model.safetensors", bf16(&[("a", 1000), ("b", 3000)]))],
    )
}

fn plan(dir: &std::path::Path, args: &[&str]) -> Lab {
    let mut lab = Lab::new(&["plan", "--model"]).arg(dir);
    for a in args {
        lab = lab.arg(*a);
    }
    lab
}

#[test]
fn headers_and_standard_fields_give_a_lower_bound_never_a_fit() {
    let dir = model(json!({}));
    let v = plan(dir.path(), &["--json", "--context", "1000", "--batch", "3"]).json();
    assert_eq!(v["lower_bound"], true);
    assert_eq!(v["model_type"], "fancy_new");
    assert_eq!(v["parameters"], 4000);
    assert!(v["architecture"].is_null() && v["parameters_from_config"].is_null());
    let m = &v["memory"];
    assert_eq!(m["weights_bytes"], 8000);
    // 4 layers x 2 (K and V) x 2 heads x 64 x 2 bytes = 2048 B per token.
    assert_eq!(m["kv_cache_bytes_per_token"], 2048);
    assert_eq!(m["kv_cache_bytes"], 2048 * 1000 * 3);
    assert_eq!(m["activation_bytes"], 0);
    assert_eq!(m["total_bytes"], 8000 + 2048 * 1000 * 3);
    let not = v["not_modelled"].as_array().unwrap();
    assert!(
        not.iter()
            .any(|n| n.as_str().unwrap().starts_with("prefill workspace")),
        "{not:?}"
    );
    for p in v["packages"].as_array().unwrap() {
        assert_eq!(p["fits"], false, "{p}");
        assert!(p["at_least"] == true || !p["not_fitting"].is_null(), "{p}");
    }
    let h200 = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["gpu"] == "h200")
        .unwrap();
    assert_eq!(
        (h200["at_least"].as_bool(), h200["gpus"].as_u64()),
        (Some(true), Some(1))
    );
    // The text: "at least", never "yes"; the total labelled as a bound.
    let out = plan(dir.path(), &["--gpu", "h200"])
        .stdout_has("  total (peak), at least  ")
        .stdout_has("  prefill workspace (one layer)  not modelled")
        .stdout_has("none is known to fit")
        .stdout_has("at least\n")
        .run();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(" yes"), "{text}");
}

#[test]
fn without_all_standard_fields_the_kv_cache_is_not_modelled_and_says_why() {
    for (extra, why) in [
        (
            json!({"num_hidden_layers": "ABSENT"}),
            "config.json has no \"num_hidden_layers\"",
        ),
        (
            json!({"num_attention_heads": "ABSENT"}),
            "config.json has no \"num_attention_heads\"",
        ),
        (
            json!({"hidden_size": "ABSENT"}),
            "config.json has no \"hidden_size\"",
        ),
        (
            json!({"num_hidden_layers": "4"}),
            "\"num_hidden_layers\" is \"4\", not a whole number",
        ),
        (
            json!({"num_key_value_heads": 2.5}),
            "\"num_key_value_heads\" is 2.5",
        ),
        (
            json!({"num_key_value_heads": 3}),
            "num_key_value_heads 3 does not divide num_attention_heads 8",
        ),
        (
            json!({"hidden_size": 500}),
            "hidden_size 500 is not a multiple",
        ),
        (json!({"sliding_window": 4096}), "states \"sliding_window\""),
        (json!({"kv_lora_rank": 512}), "states \"kv_lora_rank\""),
    ] {
        let dir = model(extra.clone());
        let v = plan(dir.path(), &["--json"]).json();
        let m = &v["memory"];
        assert_eq!(
            (m["kv_cache_bytes"].as_u64(), m["total_bytes"].as_u64()),
            (Some(0), Some(8000)),
            "{extra}"
        );
        let first = v["not_modelled"][0].as_str().unwrap();
        assert!(
            first.starts_with("KV cache (") && first.contains(why),
            "{extra}: {first}"
        );
        plan(dir.path(), &[])
            .stdout_has("  KV cache                       not modelled")
            .run();
    }
    // Absent key/value heads and head width: the attention heads and hidden / heads.
    let dir = model(json!({"num_key_value_heads": null}));
    let v = plan(dir.path(), &["--json", "--context", "1"]).json();
    assert_eq!(v["memory"]["kv_cache_bytes_per_token"], 4 * 2 * 8 * 64 * 2);
    let dir = model(json!({"head_dim": 32}));
    let v = plan(dir.path(), &["--json", "--kv-dtype", "fp8"]).json();
    assert_eq!(v["memory"]["kv_cache_bytes_per_token"], 4 * 2 * 2 * 32);
}

#[test]
fn without_headers_an_unknown_model_type_is_refused_as_before() {
    let dir = folder(&config(json!({})), &[]);
    plan(dir.path(), &[]).refused(2, "unknown model_type \"fancy_new\": lab plan knows llama");
    plan(&dir.path().join("config.json"), &[]).refused(2, "unknown model_type \"fancy_new\"");
}

#[test]
fn what_needs_the_layout_is_refused_by_name() {
    let dir = model(json!({}));
    plan(dir.path(), &["--weights-dtype", "int4"])
        .refused(2, "--weights-dtype or --bits would need its layout");
    plan(dir.path(), &["--bits", "4.5"])
        .refused(2, "--weights-dtype or --bits would need its layout");
    plan(
        dir.path(),
        &[
            "--requests",
            "10",
            "--input-tokens",
            "8",
            "--output-tokens",
            "8",
        ],
    )
    .refused(2, "a workload's time needs its layers' layout");
    // The standard heads constrain a fixed degree; without them every degree is allowed.
    plan(dir.path(), &["--tensor-parallel", "3"]).refused(
        2,
        "--tensor-parallel 3 does not divide the 8 attention heads",
    );
    let bare = model(json!({"num_attention_heads": "ABSENT"}));
    let v = plan(
        bare.path(),
        &["--json", "--tensor-parallel", "3", "--gpu", "h200"],
    )
    .json();
    assert_eq!(v["packages"][0]["gpus"], 3);
    // Training: the state of a float checkpoint counted (16 bytes per element), activations
    // not; an 8-bit checkpoint refused.
    let v = plan(dir.path(), &["--json", "--mode", "training"]).json();
    assert_eq!(v["memory"]["total_bytes"], 4000 * 16);
    assert_eq!(v["memory"]["kv_cache_bytes"], 0);
    assert!(v["not_modelled"][0]
        .as_str()
        .unwrap()
        .starts_with("training activations"));
    plan(dir.path(), &["--mode", "training"])
        .stdout_has("  activations             not modelled")
        .run();
    let text = String::from_utf8(plan(dir.path(), &["--mode", "training"]).run().stdout).unwrap();
    assert!(!text.contains("KV"), "{text}");
    let fp8 = folder(
        &config(json!({})),
        &[(
            "model.safetensors",
            crate::plan_headers::raw(
                r#"{"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}"#,
                4,
            ),
        )],
    );
    plan(fp8.path(), &["--mode", "training"])
        .refused(2, "training state is counted only for float checkpoints");
    // A known family still reports no lower bound.
    let known = crate::support::repo_root().join("examples/models/llama-3.2-1b");
    let v = Lab::new(&["plan", "--json", "--model"]).arg(known).json();
    assert_eq!(
        (
            v["lower_bound"].as_bool(),
            v["not_modelled"].as_array().map(Vec::len)
        ),
        (Some(false), Some(0))
    );
}
