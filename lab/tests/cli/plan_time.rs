//! `lab plan` with a workload: time and cost rows, and the refusals of bad workloads.

use crate::support::{json, lab, repo_root, usage_error};

fn model(name: &str) -> String {
    repo_root()
        .join("examples/models")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn bad_workloads_are_one_line_and_exit_2() {
    let m = model("llama-3.1-8b");
    let base = ["plan", "--model", m.as_str()];
    let cases: [(&[&str], &str); 14] = [
        (
            &[
                "--requests",
                "0",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
            ],
            "--requests",
        ),
        (
            &[
                "--requests",
                "5",
                "--input-tokens",
                "-1",
                "--output-tokens",
                "1",
            ],
            "no sign",
        ),
        (
            &[
                "--requests",
                "5",
                "--input-tokens",
                "0",
                "--output-tokens",
                "1",
            ],
            "--input-tokens",
        ),
        (
            &["--requests", "5", "--input-tokens", "1"],
            "needs --requests, --input-tokens and --output-tokens",
        ),
        (
            &[
                "--requests",
                "5",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
                "--train-tokens",
                "9",
            ],
            "not both",
        ),
        (
            &[
                "--requests",
                "5",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
                "--mode",
                "training",
            ],
            "are for --mode inference",
        ),
        (&["--train-tokens", "9"], "need --mode training"),
        (
            &["--mode", "training", "--train-tokens", "0"],
            "--train-tokens",
        ),
        (
            &["--mode", "training", "--method", "lora"],
            "needs --train-tokens",
        ),
        (
            &[
                "--mode",
                "training",
                "--train-tokens",
                "9",
                "--method",
                "dora",
            ],
            "--method must be full, lora or qlora",
        ),
        (
            &[
                "--mode",
                "training",
                "--train-tokens",
                "9",
                "--lora-rank",
                "8",
            ],
            "need --method lora or qlora",
        ),
        (
            &[
                "--requests",
                "5",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
                "--context",
                "9",
            ],
            "leave --context out",
        ),
        (
            &[
                "--requests",
                "5",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
                "--profile",
                "Eager",
            ],
            "--profile must be",
        ),
        (
            &[
                "--requests",
                "5",
                "--input-tokens",
                "1",
                "--output-tokens",
                "1",
                "--accepted-results",
                "3",
            ],
            "predictions",
        ),
    ];
    for (extra, needle) in cases {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        usage_error(&args, needle);
    }
    // Several --days without a workload, and a workload no GPU holds.
    usage_error(
        &["plan", "--model", m.as_str(), "--days", "3", "--days", "7"],
        "need a workload",
    );
    usage_error(
        &[
            "plan",
            "--model",
            m.as_str(),
            "--requests",
            "1",
            "--input-tokens",
            "4000000",
            "--output-tokens",
            "1",
            "--gpu",
            "t4",
        ],
        "no GPU of the catalog can run this workload",
    );
}

#[test]
fn a_workload_answers_first_then_ranks_every_package_by_its_finishing_cost() {
    let m = model("llama-3.1-8b");
    let out = lab()
        .args([
            "plan",
            "--model",
            m.as_str(),
            "--requests",
            "2000000",
            "--input-tokens",
            "1024",
            "--output-tokens",
            "512",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("answer: "), "{text}");
    assert!(text.contains("never a cost per accepted result"));
    let v = json(&[
        "plan",
        "--model",
        m.as_str(),
        "--requests",
        "2000000",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "512",
        "--json",
    ]);
    let rows = v["time"]["rows"].as_array().unwrap();
    // 15 GPUs x 3 durations, every one listed; the runnable ones ranked by cost.
    assert_eq!(rows.len(), 45);
    let costs: Vec<i64> = rows
        .iter()
        .filter_map(|r| r["finish"]["cost_cents"].as_i64())
        .collect();
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    for r in rows.iter().filter(|r| !r["setup"].is_null()) {
        for basis in ["ceiling", "expected"] {
            let s = &r["setup"][basis];
            assert_eq!(s["basis"], basis);
            assert_eq!(s["profile"], "eager");
            // Exact decimals as strings, with their stated places.
            let tpot = s["tpot_s"].as_str().unwrap();
            assert_eq!(tpot.split('.').nth(1).unwrap().len(), 6, "{tpot}");
        }
        let c: f64 = r["setup"]["ceiling"]["hours"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let e: f64 = r["setup"]["expected"]["hours"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(c <= e, "{r}");
        // The unit cost of accepted results stays null: predictions never fill it.
        assert!(r.get("unit_cost_usd").is_none());
    }
    assert!(v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["unit_cost_usd"].is_null()));
}

#[test]
fn several_gpus_and_durations_and_training_methods() {
    let m = model("llama-3.2-1b");
    let v = json(&[
        "plan",
        "--model",
        m.as_str(),
        "--mode",
        "training",
        "--train-tokens",
        "100000000",
        "--context",
        "2048",
        "--method",
        "qlora",
        "--gpu",
        "h200",
        "--gpu",
        "l4",
        "--days",
        "3",
        "--days",
        "30",
        "--json",
    ]);
    let rows = v["time"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert!(v["weights_format"].as_str().unwrap().starts_with("int4"));
    assert_eq!(v["time"]["workload"]["method"], "qlora");
    assert!(v["time"]["trained_parameters"].as_u64().unwrap() > 0);
}

#[test]
fn a_context_past_the_configs_positions_is_a_note_naming_its_rope_scaling() {
    let mistral = model("mistral-7b-v0.1");
    let v = json(&[
        "plan",
        "--model",
        mistral.as_str(),
        "--context",
        "40000",
        "--gpu",
        "h200",
        "--json",
    ]);
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("exceeds config.json's max_position_embeddings 32768; no rope_scaling")),
        "{notes:?}"
    );
    let llama = model("llama-3.1-8b");
    let v = json(&[
        "plan",
        "--model",
        llama.as_str(),
        "--requests",
        "10",
        "--input-tokens",
        "200000",
        "--output-tokens",
        "10",
        "--gpu",
        "h200",
        "--days",
        "7",
        "--json",
    ]);
    let notes = v["time"]["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("rope_scaling llama3 with factor 8.0 (original 8192 positions) is already in the 131072 positions")),
        "{notes:?}"
    );
    // Within the positions: no note.
    let v = json(&[
        "plan",
        "--model",
        mistral.as_str(),
        "--context",
        "4096",
        "--gpu",
        "h200",
        "--json",
    ]);
    assert!(v["notes"].as_array().unwrap().is_empty());
}

#[test]
fn a_gpu_perf_file_replaces_the_embedded_one_through_the_same_validator() {
    let m = model("llama-3.1-8b");
    let dir = tempfile::tempdir().unwrap();
    let shipped = std::fs::read_to_string(repo_root().join("data/gpu-perf.csv")).unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, shipped.replacen("h200,4800,", "h200,fast,", 1)).unwrap();
    let bad = bad.display().to_string();
    let args = [
        "plan",
        "--model",
        m.as_str(),
        "--requests",
        "10",
        "--input-tokens",
        "100",
        "--output-tokens",
        "10",
        "--gpu",
        "h200",
        "--gpu-perf",
        bad.as_str(),
    ];
    usage_error(
        &args,
        "gpu performance file: line 13: bandwidth_gb_s must be a positive decimal",
    );
    // A faster H200 (twice the bandwidth) in a replacement file halves the decode ceiling.
    let fast = dir.path().join("fast.csv");
    std::fs::write(&fast, shipped.replacen("h200,4800,", "h200,9600,", 1)).unwrap();
    let fast = fast.display().to_string();
    let base = [
        "plan",
        "--model",
        m.as_str(),
        "--requests",
        "1",
        "--input-tokens",
        "1024",
        "--output-tokens",
        "2",
        "--batch",
        "1",
        "--gpu",
        "h200",
        "--days",
        "7",
        "--json",
    ];
    let tpot = |v: &serde_json::Value| -> f64 {
        v["time"]["rows"][0]["setup"]["ceiling"]["tpot_s"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let shipped_tpot = tpot(&json(&base));
    let mut with_file: Vec<&str> = base.to_vec();
    with_file.extend(["--gpu-perf", fast.as_str()]);
    let fast_tpot = tpot(&json(&with_file));
    assert!(
        (shipped_tpot / fast_tpot - 2.0).abs() < 0.01,
        "{shipped_tpot} {fast_tpot}"
    );
}
