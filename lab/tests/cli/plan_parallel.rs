//! `lab plan --tensor-parallel N` and `--gpus N`: a fixed degree or a fixed package size
//! instead of the smallest that fits; degrees the engines cannot shard refused by name; and
//! one `--gpu` filter for the memory table and the time table.

use crate::support::Lab;
use serde_json::Value;

const LLAMA: &str = "examples/models/llama-3.1-8b";

fn model(name: &str) -> String {
    crate::support::repo_root().join(name).display().to_string()
}

fn plan(args: &[&str]) -> Value {
    let m = model(LLAMA);
    let mut all = vec!["plan", "--json", "--model", &m];
    all.extend_from_slice(args);
    Lab::new(&all).json()
}

fn package<'a>(v: &'a Value, gpu: &str) -> &'a Value {
    v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["gpu"] == gpu)
        .unwrap_or_else(|| panic!("no {gpu}"))
}

#[test]
fn a_degree_out_of_range_or_not_dividing_the_heads_is_refused_by_name() {
    let m = model(LLAMA);
    for (n, needle) in [
        ("0", "invalid value '0' for '--tensor-parallel <N>': must be a whole number from 1 to 64"),
        ("65", "must be a whole number from 1 to 64"),
        ("99999999999999999999999", "must be a whole number from 1 to 64"),
        ("-2", "(no sign)"),
        ("3", "--tensor-parallel 3 does not divide the 32 attention heads; this model allows 1, 2, 4, 8, 16, 32"),
        ("64", "--tensor-parallel 64 does not divide the 32 attention heads"),
    ] {
        Lab::new(&["plan", "--model", &m, "--tensor-parallel", n]).refused(2, needle);
    }
    // Qwen2.5-0.5B: 14 heads, 2 key/value heads; 7 divides the heads but cannot split the
    // key/value heads (neither divides the other).
    let q = model("examples/models/qwen2.5-0.5b");
    Lab::new(&["plan", "--model", &q, "--tensor-parallel", "7"]).refused(
        2,
        "--tensor-parallel 7 does not split the 2 key/value heads (they must divide it or it them); this model allows 1, 2, 14",
    );
    for (args, needle) in [
        (&["--gpus", "0"][..], "invalid value '0' for '--gpus <N>'"),
        (&["--gpus", "1025"], "must be a whole number from 1 to 1024"),
        (
            &["--gpus", "4", "--tensor-parallel", "8"],
            "--tensor-parallel 8 does not divide --gpus 4",
        ),
    ] {
        let mut all = vec!["plan", "--model", &m];
        all.extend_from_slice(args);
        Lab::new(&all).refused(2, needle);
    }
    // --gpus 7 on Qwen2.5-0.5B: degree 1 divides it (seven replicas' worth of GPUs).
    let v = Lab::new(&[
        "plan", "--json", "--model", &q, "--gpus", "7", "--gpu", "t4",
    ])
    .json();
    assert_eq!(package(&v, "t4")["gpus"], 1);
    assert_eq!(package(&v, "t4")["gpus_bought"], 7);
}

#[test]
fn a_fixed_degree_replaces_the_smallest_that_fits() {
    // One H200 holds Llama-3.1-8B; at tensor parallel 2 each GPU holds half the weights and
    // half the cache (8 key/value heads over 2 GPUs).
    let free = plan(&["--gpu", "h200"]);
    let two = plan(&["--gpu", "h200", "--tensor-parallel", "2"]);
    let (p1, p2) = (package(&free, "h200"), package(&two, "h200"));
    assert_eq!(p1["gpus"], 1);
    assert_eq!(p2["gpus"], 2);
    assert_eq!(two["fixed_tensor_parallel"], 2);
    let m = &two["memory"];
    let weights = m["weights_allocated_bytes"].as_u64().unwrap();
    let kv = m["kv_cache_bytes"]
        .as_u64()
        .unwrap()
        .max(m["prefill_kv_cache_bytes"].as_u64().unwrap());
    let need = p2["need_bytes_per_gpu"].as_u64().unwrap();
    // Sharded weights and cache; the workspace per GPU at most whole.
    let sharded = weights.div_ceil(2) + kv.div_ceil(2);
    assert!(
        need > sharded && need <= sharded + m["activation_bytes"].as_u64().unwrap(),
        "{need}"
    );
    assert!(need < p1["need_bytes_per_gpu"].as_u64().unwrap());
    // A degree too small to fit: not the next one, a refusal in the row.
    let one = plan(&["--gpu", "t4", "--tensor-parallel", "1", "--context", "8192"]);
    let t4 = package(&one, "t4");
    assert_eq!(t4["fits"], false);
    assert_eq!(t4["not_fitting"], "at tensor parallel 1");
    let text = Lab::new(&[
        "plan",
        "--model",
        &model(LLAMA),
        "--gpu",
        "t4",
        "--tensor-parallel",
        "1",
        "--context",
        "8192",
    ])
    .stdout_has("packages for 7 days at tensor parallel 1, fitting ones cheapest first:")
    .run();
    assert!(String::from_utf8(text.stdout)
        .unwrap()
        .contains("no (at tensor parallel 1)"));
}

#[test]
fn gpus_fix_the_package_size_in_whole_lots() {
    let v = plan(&["--gpus", "2"]);
    assert_eq!(v["fixed_gpus"], 2);
    // One-GPU lots: two lots; two-GPU lots: one; each buying exactly 2 GPUs.
    for (gpu, lots) in [("t4", 2), ("h200", 2), ("a100-80gb", 1)] {
        let p = package(&v, gpu);
        assert_eq!(
            (p["lots"].as_u64(), p["gpus_bought"].as_u64()),
            (Some(lots), Some(2)),
            "{gpu}"
        );
    }
    // Llama-3.1-8B fits one H200: the smallest degree dividing 2 is 1 (2 GPUs bought).
    assert_eq!(package(&v, "h200")["gpus"], 1);
    let three = plan(&["--gpus", "3"]);
    let a100 = package(&three, "a100-80gb");
    assert_eq!(a100["fits"], false);
    assert_eq!(a100["not_fitting"], "lots of 2 GPUs cannot make 3");
    assert!(a100["need_bytes_per_gpu"].as_u64().unwrap() > 16_000_000_000);
    assert_eq!(package(&three, "h200")["gpus_bought"], 3);
    // One GPU per package: two-GPU lots cannot make it; one-GPU lots as without the flag.
    let one = plan(&["--gpus", "1"]);
    assert_eq!(
        package(&one, "b200")["not_fitting"],
        "lots of 2 GPUs cannot make 1"
    );
    let free = plan(&[]);
    for key in [
        "gpus",
        "lots",
        "gpus_bought",
        "total_cents",
        "need_bytes_per_gpu",
        "fits",
    ] {
        assert_eq!(
            package(&one, "h200")[key],
            package(&free, "h200")[key],
            "{key}"
        );
    }
}

#[test]
fn a_workload_uses_the_fixed_degree_and_package_size() {
    let m = model(LLAMA);
    let base = [
        "plan",
        "--json",
        "--model",
        &m,
        "--requests",
        "2000",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "256",
        "--days",
        "7",
    ];
    let run = |extra: &[&str]| {
        let mut all = base.to_vec();
        all.extend_from_slice(extra);
        Lab::new(&all).json()
    };
    let v = run(&["--gpu", "a100-80gb", "--tensor-parallel", "2"]);
    let rows = v["time"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["setup"]["tensor_parallel"], 2);
    assert!(rows[0]["alternatives"].as_array().unwrap().is_empty());
    // Tensor parallel never crosses machines: 2 on one-GPU lots cannot run.
    let v = run(&[
        "--gpu",
        "h200",
        "--gpu",
        "a100-80gb",
        "--tensor-parallel",
        "2",
    ]);
    let h200 = v["time"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["gpu"] == "h200")
        .unwrap();
    assert!(h200["setup"].is_null());
    assert_eq!(
        h200["notes"][0],
        "tensor parallel 2 needs 2 GPUs in one machine; its lots hold 1"
    );
    // --gpus 4 on H200s: exactly 4 lots, more time bought as consecutive packages.
    let v = run(&["--gpu", "h200", "--gpus", "4"]);
    let f = &v["time"]["rows"][0]["finish"];
    assert_eq!(
        (f["lots"].as_u64(), f["packages"].as_u64()),
        (Some(4), Some(1))
    );
    // Lots of 2 cannot make 3 GPUs.
    let v = run(&["--gpu", "h200", "--gpu", "a100-80gb", "--gpus", "3"]);
    let a100 = v["time"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["gpu"] == "a100-80gb")
        .unwrap();
    assert_eq!(a100["notes"][0], "lots of 2 GPUs cannot make --gpus 3");
}

#[test]
fn with_a_workload_gpu_filters_the_memory_table_too() {
    let m = model(LLAMA);
    let v = Lab::new(&[
        "plan",
        "--json",
        "--model",
        &m,
        "--requests",
        "100",
        "--input-tokens",
        "512",
        "--output-tokens",
        "64",
        "--gpu",
        "h200",
        "--gpu",
        "l40s",
        "--days",
        "7",
    ])
    .json();
    let mut memory: Vec<&str> = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["gpu"].as_str().unwrap())
        .collect();
    memory.sort_unstable();
    let mut time: Vec<&str> = v["time"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["gpu"].as_str().unwrap())
        .collect();
    time.sort_unstable();
    assert_eq!(memory, ["h200", "l40s"]);
    assert_eq!(time, memory);
    // Without a workload one --gpu is allowed, and filters as before.
    let one = plan(&["--gpu", "l40s"]);
    assert_eq!(one["packages"].as_array().unwrap().len(), 1);
}
