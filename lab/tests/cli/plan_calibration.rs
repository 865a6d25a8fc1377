//! `lab plan --calibration DOC…`: the committed H200 documents of `lab measure --model`
//! scale the H200's expected decode and prefill times; every refusal class is one line, exit 2.

use crate::support::{json, lab, repo_root, usage_error};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn path(rel: &str) -> String {
    repo_root().join(rel).display().to_string()
}

fn llama() -> String {
    path("examples/models/llama-3.1-8b")
}

fn run2(name: &str) -> String {
    path(&format!("examples/h200/measure-model/run2/{name}"))
}

/// The workload of the committed documents (128 + 128 tokens) on the H200 for 3 days.
fn plan_args<'a>(model: &'a str, requests: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "plan",
        "--model",
        model,
        "--requests",
        requests,
        "--input-tokens",
        "128",
        "--output-tokens",
        "128",
        "--gpu",
        "h200",
        "--days",
        "3",
    ];
    v.extend_from_slice(extra);
    v
}

fn h200_row(v: &Value) -> &Value {
    &v["time"]["rows"][0]
}

fn dec(v: &Value) -> f64 {
    v.as_str().unwrap().parse().unwrap()
}

/// A copy of a committed document, edited by `edit`, in `dir`.
fn edited(dir: &Path, name: &str, edit: impl Fn(&mut Value)) -> PathBuf {
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(run2("lab-llama-b1.json")).unwrap()).unwrap();
    edit(&mut v);
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    p
}

#[test]
fn one_document_gives_its_ratios_and_scales_the_expected_times() {
    // Worked value: lab-llama-b1.json, batch 1, 128 + 128 tokens, eager. The median decode
    // step is 0.023208704 s (gpu_seconds of 128 `decode` rows) and lab plan expects
    // 0.037906 s at batch 1 (TPOT below; transformers' eager step: lab's worker is faster):
    // 0.6123; the median warm prefill 0.022721121 s over the expected TTFT 0.030866 s: 0.7361
    // (4 decimals, half-to-even).
    let m = llama();
    let doc = run2("lab-llama-b1.json");
    let plain = json(&plan_args(&m, "1", &["--batch", "1", "--json"]));
    let e = &h200_row(&plain)["setup"]["expected"];
    assert_eq!(e["tpot_s"], "0.037906");
    assert_eq!(e["ttft_s"], "0.030866");
    assert!(h200_row(&plain)["calibration"].is_null());
    let cal = json(&plan_args(
        &m,
        "1",
        &["--batch", "1", "--json", "--calibration", &doc],
    ));
    let row = h200_row(&cal);
    let c = &row["calibration"];
    assert_eq!(c["gpu"], "h200");
    assert_eq!(c["decode_ratio"], "0.6123");
    assert_eq!(c["prefill_ratio"], "0.7361");
    assert_eq!(
        c["label"],
        "calibrated from your measurement (lab-llama-b1.json, ratio 0.61 decode, 0.74 prefill)"
    );
    assert_eq!(c["files"][0], doc.as_str());
    // The measured figures come back: 0.037906 x 0.6123 and 0.030866 x 0.7361, to rounding.
    let x = &row["setup"]["expected"];
    assert!((dec(&x["tpot_s"]) - 0.023208704).abs() < 2e-6, "{x}");
    assert!((dec(&x["ttft_s"]) - 0.022721121).abs() < 2e-6, "{x}");
    // The ceiling stays the datasheet's.
    assert_eq!(
        row["setup"]["ceiling"],
        h200_row(&plain)["setup"]["ceiling"]
    );
    // The text labels the row.
    let out = lab()
        .args(plan_args(&m, "1", &["--batch", "1", "--calibration", &doc]))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("  h200: expected times calibrated from your measurement (lab-llama-b1.json, ratio 0.61 decode, 0.74 prefill)"),
        "{text}"
    );
}

#[test]
fn several_documents_take_the_median_ratio_per_phase() {
    let m = llama();
    let b1 = run2("lab-llama-b1.json");
    let b16 = run2("lab-llama-b16.json");
    let one = |d: &str| {
        json(&plan_args(&m, "1000", &["--json", "--calibration", d]))["time"]["rows"][0]
            ["calibration"]
            .clone()
    };
    let (r1, r16) = (one(&b1), one(&b16));
    assert_eq!(r16["decode_ratio"], "0.3827");
    let both = json(&plan_args(
        &m,
        "1000",
        &["--json", "--calibration", &b1, &b16],
    ));
    let c = &h200_row(&both)["calibration"];
    let mid = |k: &str| (dec(&r1[k]) + dec(&r16[k])) / 2.0;
    assert!(
        (dec(&c["decode_ratio"]) - mid("decode_ratio")).abs() < 1e-4,
        "{c}"
    );
    assert!(
        (dec(&c["prefill_ratio"]) - mid("prefill_ratio")).abs() < 1e-4,
        "{c}"
    );
    assert_eq!(c["files"].as_array().unwrap().len(), 2);
    assert!(c["label"]
        .as_str()
        .unwrap()
        .contains("(lab-llama-b1.json, lab-llama-b16.json, median ratio "));
    // Only the measured GPU model is calibrated.
    let all = json(&[
        "plan",
        "--model",
        &m,
        "--requests",
        "1000",
        "--input-tokens",
        "128",
        "--output-tokens",
        "128",
        "--days",
        "3",
        "--json",
        "--calibration",
        &b1,
    ]);
    for r in all["time"]["rows"].as_array().unwrap() {
        assert_eq!(
            r["calibration"].is_null(),
            r["gpu"] != "h200",
            "{}",
            r["gpu"]
        );
    }
}

#[test]
fn the_cuda_graphs_profile_uses_the_graph_decode_rows() {
    let m = llama();
    let doc = run2("lab-llama-b1.json");
    let eager = json(&plan_args(&m, "1", &["--json", "--calibration", &doc]));
    let graphs = json(&plan_args(
        &m,
        "1",
        &["--json", "--profile", "cuda-graphs", "--calibration", &doc],
    ));
    let d = |v: &Value| dec(&h200_row(v)["calibration"]["decode_ratio"]);
    assert_ne!(d(&eager), d(&graphs));
    // Graph replays (about 7.25 ms) against the expected cuda-graphs step.
    let tpot = dec(&h200_row(&graphs)["setup"]["expected"]["tpot_s"]);
    assert!((tpot - 0.00725).abs() < 0.0001, "{tpot}");
}

#[test]
fn each_refusal_class_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama();
    let b1 = run2("lab-llama-b1.json");
    let synthetic = edited(dir.path(), "synthetic.json", |v| {
        v["schema"] = "iteragpu-lab/measurement/v1".into()
    });
    let other_schema = edited(dir.path(), "other.json", |v| {
        v["schema"] = "someone/else/v3".into()
    });
    let incomplete = edited(dir.path(), "incomplete.json", |v| {
        let phases = v["phases"].as_array_mut().unwrap();
        phases.truncate(phases.len() - 10);
    });
    let no_model = edited(dir.path(), "no-model.json", |v| {
        v.as_object_mut().unwrap().remove("model");
    });
    let odd_context = edited(dir.path(), "odd-context.json", |v| {
        v["workload"]["context"] = 300.into()
    });
    let other_model = edited(dir.path(), "other-model.json", |v| {
        v["model"]["config_sha256"] = "ab".repeat(32).into()
    });
    let other_gpu = edited(dir.path(), "other-gpu.json", |v| {
        v["environment"]["device_name"] = "NVIDIA H20".into()
    });
    let fp16 = edited(dir.path(), "fp16.json", |v| {
        v["workload"]["dtype"] = "float16".into()
    });
    let no_graph = edited(dir.path(), "no-graph.json", |v| {
        v["workload"]["graph"] = false.into();
        let phases = v["phases"].as_array_mut().unwrap();
        phases.retain(|p| p["phase"] != "graph_capture" && p["phase"] != "graph_decode");
    });
    // The committed two-GPU run of the synthetic `lab measure --device all`.
    let real_synthetic = PathBuf::from(path("examples/h200x2/cuda-0.json"));
    let fleet = PathBuf::from(path("examples/h200x2/comparison.json"));
    let not_json = dir.path().join("notes.json");
    std::fs::write(&not_json, "median 0.02 s").unwrap();
    let copy = dir.path().join("copy.json");
    std::fs::copy(&b1, &copy).unwrap();
    let s = |p: &Path| p.display().to_string();
    let comparison = run2("hf/measured-same-run.json");
    let mistral = run2("lab-mistral-b1.json");
    let cases: Vec<(Vec<String>, String)> = vec![
        (vec![s(&synthetic)], "is a synthetic lab measure document".into()),
        (vec![s(&other_schema)], "has schema 'someone/else/v3'".into()),
        (vec![comparison.clone()], "has no schema".into()),
        (
            vec![s(&real_synthetic)],
            "is a synthetic lab measure document".into(),
        ),
        (
            vec![s(&fleet)],
            "is the comparison of lab measure --device".into(),
        ),
        (vec![s(&not_json)], "is not JSON".into()),
        (vec![s(&incomplete)], "failed or incomplete run".into()),
        (vec![s(&no_model)], "incomplete model measurement".into()),
        (vec![s(&odd_context)], "context = input + output".into()),
        (
            vec![s(&other_model)],
            format!(
                "config digest {}; the plan's config.json has 0f858d1427344917e9c96e9dc5aa451dd6fabc62200912116cf0bec5925cbfb7",
                "ab".repeat(32)
            ),
        ),
        (
            vec![mistral.clone()],
            "config digest 6206cc248c1566bb6b1f1f21ea5d00fb53718ebe9f013ab77404561bdbd78865".into(),
        ),
        (vec![s(&other_gpu)], "GPU model 'NVIDIA H20' is not one catalog GPU".into()),
        (vec![s(&fp16)], "measured in float16 but the plan's weights are bfloat16".into()),
        (vec![b1.clone(), b1.clone()], "the same document as".into()),
        (vec![b1.clone(), s(&copy)], "the same document as".into()),
        (vec![s(dir.path())], "is not a file".into()),
    ];
    for (docs, needle) in &cases {
        let mut args = plan_args(&m, "10", &["--calibration"]);
        args.extend(docs.iter().map(String::as_str));
        let line = usage_error(&args, needle);
        let last = docs.last().unwrap();
        let named = Path::new(last).file_name().unwrap().to_str().unwrap();
        assert!(line.contains(named), "{line}");
    }
    let mut args = plan_args(&m, "10", &["--profile", "cuda-graphs", "--calibration"]);
    let ng = s(&no_graph);
    args.push(&ng);
    usage_error(&args, "has no graph_decode rows for --profile cuda-graphs");
    usage_error(
        &[
            "plan",
            "--model",
            &m,
            "--mode",
            "training",
            "--train-tokens",
            "1000000",
            "--calibration",
            &b1,
        ],
        "give an inference workload",
    );
}

#[test]
fn runtime_device_names_find_their_catalog_gpu_and_other_boards_are_refused() {
    // The names runtimes print (`gpu_name.rs`): an A100's carries its board and memory, a
    // T4's says "Tesla"; each calibrates its own catalog GPU. A PCIe or NVL board is not the
    // catalog's SXM GPU of the same name.
    let dir = tempfile::tempdir().unwrap();
    let m = llama();
    for (name, gpu) in [
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx6000ada"),
    ] {
        let doc = edited(dir.path(), &format!("{gpu}.json"), |v| {
            v["environment"]["device_name"] = Value::from(name);
        });
        let d = doc.display().to_string();
        let mut args = plan_args(&m, "1", &["--batch", "1", "--json", "--calibration", &d]);
        args[10] = gpu;
        let out = lab().args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = v["time"]["rows"].as_array().unwrap();
        assert!(
            rows.iter().any(|r| r["calibration"]["gpu"] == gpu),
            "{name}: {v}"
        );
    }
    // "Tesla T4" is the T4: the H200's 23.2 ms step, relabelled, is faster than the T4's
    // ceiling for that workload (16 GB at 320 GB/s), so it is refused as no T4 measurement.
    let doc = edited(dir.path(), "t4.json", |v| {
        v["environment"]["device_name"] = Value::from("Tesla T4");
    });
    let d = doc.display().to_string();
    let mut args = plan_args(&m, "1", &["--batch", "1", "--calibration", &d]);
    args[10] = "t4";
    let line = usage_error(
        &args,
        "faster than the ceiling of 0.047018 s for that workload on one t4",
    );
    assert!(line.contains("t4.json"), "{line}");
    // A look-alike (Cyrillic Н) is no H200 and is shown escaped, never as the name it imitates.
    let doc = edited(dir.path(), "cyrillic.json", |v| {
        v["environment"]["device_name"] = Value::from("NVIDIA \u{41d}200");
    });
    let d = doc.display().to_string();
    usage_error(
        &plan_args(&m, "1", &["--calibration", &d]),
        r"GPU model 'NVIDIA \u{41d}200' is not one catalog GPU",
    );
    for name in [
        "NVIDIA H100 PCIe",
        "NVIDIA H100 NVL",
        "NVIDIA A100 80GB PCIe",
    ] {
        let doc = edited(dir.path(), "board.json", |v| {
            v["environment"]["device_name"] = Value::from(name);
        });
        let d = doc.display().to_string();
        let args = plan_args(&m, "1", &["--calibration", &d]);
        usage_error(&args, &format!("GPU model '{name}' is not one catalog GPU"));
    }
}

/// The documents run up to the next flag (PROTOCOL §8: a flag never swallows the flags after
/// it), and a file the system cannot read is an I/O failure, exit 1, as for `--tariffs`.
#[test]
fn the_documents_end_at_the_next_flag_and_an_unreadable_one_is_exit_1() {
    let m = llama();
    let doc = run2("lab-llama-b1.json");
    let v = json(&plan_args(
        &m,
        "1",
        &["--calibration", &doc, "--batch", "1", "--json"],
    ));
    assert_eq!(h200_row(&v)["calibration"]["decode_ratio"], "0.6123");
    crate::support::Lab::new(&plan_args(&m, "1", &["--calibration", "--json"]))
        .refused(2, "--calibration");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json").display().to_string();
    crate::support::Lab::new(&plan_args(&m, "1", &["--calibration", &missing]))
        .refused(1, "missing.json: cannot be read");
}

/// The finding of outside testing: run5/call3's Llama document (lab's worker at batch 1,
/// eager decode ratio 0.1235, prefill 0.2559) applied at batch 1000 printed an expected TTFT
/// below the ceiling. The document is plausible at its own workload (its 4.7 ms step is above
/// the 3.3 ms ceiling there), so it is accepted; at batch 1000 the rows say the ratio is
/// extrapolated, and the prefill it would push below the datasheet bound is held at the
/// ceiling, by name, in the text and in `--json`.
#[test]
fn the_0_1235_document_at_batch_1000_is_held_at_the_ceiling_and_labelled_extrapolated() {
    let m = llama();
    let doc = path("examples/h200/measure-model/run5/call3/lab-llama-b1.json");
    let v = json(&plan_args(
        &m,
        "1000",
        &["--batch", "1000", "--json", "--calibration", &doc],
    ));
    let row = h200_row(&v);
    let c = &row["calibration"];
    assert_eq!(c["decode_ratio"], "0.1235");
    assert_eq!(c["prefill_ratio"], "0.2559");
    assert_eq!(c["measured_batch"], serde_json::json!([1, 1]));
    assert_eq!(c["measured_input_tokens"], serde_json::json!([128, 128]));
    assert_eq!(c["measured_output_tokens"], serde_json::json!([128, 128]));
    assert_eq!(c["extrapolated"], true);
    let s = &row["setup"];
    let (e, top) = (&s["expected"], &s["ceiling"]);
    assert_eq!(s["batch"], 1000);
    assert_eq!(s["ceiling_batch"], 1000);
    assert_eq!(e["held_at_ceiling"], serde_json::json!(["prefill"]));
    assert_eq!(top["held_at_ceiling"], serde_json::json!([]));
    assert_eq!(
        row["finish"]["held_at_ceiling"],
        serde_json::json!(["prefill"])
    );
    // Held: the expected prefill is the ceiling's, never below it; decode stays scaled.
    assert_eq!(e["ttft_s"], top["ttft_s"]);
    assert!(dec(&e["tpot_s"]) >= dec(&top["tpot_s"]), "{s}");
    assert!(dec(&e["prefill_tokens_per_s"]) <= dec(&top["prefill_tokens_per_s"]));
    assert!(dec(&e["seconds"]) >= dec(&top["seconds"]));
    assert!(dec(&row["finish"]["hours"]) >= dec(&row["finish"]["ceiling_hours"]));
    let notes: Vec<&str> = row["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let extrapolated = "calibration extrapolated: measured at batch 1 x (128 + 128) tokens on one GPU, applied at batch 1000 x (128 + 128) tokens";
    let held = "expected prefill held at the ceiling (1 replica, batch 1000): the calibration's ratio (0.1235 decode, 0.2559 prefill), measured at batch 1 x (128 + 128) tokens on one GPU, would put the expected time below the datasheet bound";
    assert!(notes.contains(&extrapolated), "{notes:?}");
    assert!(notes.contains(&held), "{notes:?}");
    let out = lab()
        .args(plan_args(
            &m,
            "1000",
            &["--batch", "1000", "--calibration", &doc],
        ))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&format!("  h200: {extrapolated}")), "{text}");
    assert!(text.contains(&format!("  h200: {held}")), "{text}");
    // At its own workload nothing is extrapolated or held: the measured times come back.
    let own = json(&plan_args(
        &m,
        "1",
        &["--batch", "1", "--json", "--calibration", &doc],
    ));
    let row = h200_row(&own);
    assert_eq!(row["calibration"]["extrapolated"], false);
    assert_eq!(
        row["setup"]["expected"]["held_at_ceiling"],
        serde_json::json!([])
    );
    assert!(row["notes"].as_array().unwrap().iter().all(|n| !n
        .as_str()
        .unwrap()
        .contains("held at the ceiling")
        && !n.as_str().unwrap().contains("extrapolated")));
}

/// A document whose own measurement beats the ceiling of its own workload (datasheet peaks
/// at 100 %) measures no engine of this model on this GPU: refused by name, for either phase,
/// with the plausible band (ceiling / expected and above) stated.
#[test]
fn a_measurement_faster_than_its_own_ceiling_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let m = llama();
    let faster = |phase: &'static str| {
        move |v: &mut Value| {
            for p in v["phases"].as_array_mut().unwrap() {
                if p["phase"] == phase {
                    for k in ["wall_seconds", "gpu_seconds"] {
                        let x = p[k].as_f64().unwrap();
                        p[k] = Value::from(x / 10.0);
                    }
                }
            }
        }
    };
    let decode = edited(dir.path(), "too-fast-decode.json", faster("decode"));
    let prefill = edited(dir.path(), "too-fast-prefill.json", faster("warm_prefill"));
    for (doc, needle) in [
        (&decode, "measures a decode step of 0.002321 s at batch 1 x (128 + 128) tokens, faster than the ceiling of "),
        (&prefill, "measures a prefill of 0.002272 s at batch 1 x (128 + 128) tokens, faster than the ceiling of "),
    ] {
        let d = doc.display().to_string();
        let line = usage_error(&plan_args(&m, "10", &["--calibration", &d]), needle);
        assert!(line.contains(&d), "{line}");
        assert!(line.contains("on one h200"), "{line}");
        assert!(line.contains("or more, this one is"), "{line}");
    }
}
