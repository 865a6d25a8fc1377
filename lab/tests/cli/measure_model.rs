//! `lab measure --model` guards through the binary, with fake workers (no GPU, no libtorch):
//! the flag rules, an unsupported family, a folder without safetensors, an existing output,
//! a missing worker, no GPU, out of memory (exit codes, one line, no file) and the document
//! written from a worker's answer (valid against `lab/schema/model-measurement.schema.json`).

use super::support::{fake_worker, lab, repo_root};
use std::path::{Path, PathBuf};

fn model(name: &str) -> String {
    repo_root()
        .join("examples/models")
        .join(name)
        .display()
        .to_string()
}

fn args(model_dir: &str, output: &Path, worker: &Path, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "measure",
        "--device",
        "cuda:0",
        "--model",
        model_dir,
        "--batch",
        "1",
        "--input-tokens",
        "8",
        "--output-tokens",
        "2",
        "--repeats",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(["--output".into(), output.display().to_string()]);
    a.extend(["--worker".into(), worker.display().to_string()]);
    a
}

/// Exit `code`, one stderr line naming `needle`, nothing on stdout, no file in `dir`.
fn refused(args: &[String], dir: &Path, code: i32, needle: &str) {
    let before = files(dir);
    let out = lab().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.to_lowercase().contains(&needle.to_lowercase()),
        "'{needle}' not in {stderr}"
    );
    assert_eq!(files(dir), before, "a file was written");
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn row(phase: &str, rep: Option<u64>, base: u64, end: u64) -> serde_json::Value {
    serde_json::json!({
        "phase": phase, "repetition": rep, "tokens": 1,
        "wall_seconds": 0.001, "gpu_seconds": 0.0005,
        "baseline_allocated_bytes": base, "baseline_reserved_bytes": base,
        "end_allocated_bytes": end, "end_reserved_bytes": end,
        "peak_allocated_bytes": end + 4096, "peak_reserved_bytes": end + 4096
    })
}

fn fake_model_measurement(graph: bool) -> String {
    let w = 1_000_000u64;
    let mut phases = vec![
        row("model_load", None, 0, w),
        row("inputs", None, w, w + 512),
        row("kv_cache", None, w + 512, 2 * w),
        row("cold_prefill", None, 2 * w, 2 * w),
        row("warmup", None, 2 * w, 2 * w),
        row("warm_prefill", Some(1), 2 * w, 2 * w),
        row("warm_prefill", Some(2), 2 * w, 2 * w),
        row("decode", Some(1), 2 * w, 2 * w),
        row("decode", Some(2), 2 * w, 2 * w),
    ];
    if graph {
        phases.push(row("graph_capture", None, 2 * w, 2 * w));
        phases.push(row("graph_decode", Some(1), 2 * w, 2 * w));
        phases.push(row("graph_decode", Some(2), 2 * w, 2 * w));
    }
    serde_json::json!({"model_measurement": {
        "environment": {
            "torch_version": "2.11.0", "cuda_build_version": "13.0", "hip_build_version": null,
            "device_count": 1,
            "device": {"index": 0, "name": "Fake GPU", "compute_capability": "9.0",
                       "total_memory_bytes": 150_109_880_320u64, "multiprocessor_count": 132},
            "device_problem": null, "tf32_matmul_allowed": false
        },
        "phases": phases
    }})
    .to_string()
}

#[test]
fn flags_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let worker = dir.path().join("no-worker");
    let llama = model("llama-3.1-8b");
    // --width belongs to the synthetic MLP.
    let mut a = args(&llama, &out, &worker, &["--random-weights"]);
    a.extend(["--width".into(), "64".into()]);
    refused(&a, dir.path(), 2, "--width");
    // --random-weights, --graph, --input-tokens need --model.
    for flag in ["--random-weights", "--graph"] {
        let a: Vec<String> = [
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            "1",
            "--context",
            "8",
            "--width",
            "8",
            flag,
            "--output",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([out.display().to_string()])
        .collect();
        refused(&a, dir.path(), 2, "--model");
    }
    // No output length.
    let mut a = args(&llama, &out, &worker, &["--random-weights"]);
    let i = a.iter().position(|x| x == "--output-tokens").unwrap();
    a.drain(i..i + 2);
    refused(&a, dir.path(), 2, "--output-tokens");
    // --context no larger than the prompt.
    a.extend(["--context".into(), "8".into()]);
    refused(&a, dir.path(), 2, "no decode step");
    // A CPU is never measured.
    let mut a = args(&llama, &out, &worker, &["--random-weights"]);
    a[2] = "cpu".into();
    refused(&a, dir.path(), 2, "never falls back");
}

#[test]
fn the_model_is_checked_before_the_worker_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    // A worker that would fail loudly if it were ever started.
    let worker = fake_worker(dir.path(), "w", "started", "", 9);
    refused(
        &args(
            &model("deepseek-v2-lite"),
            &out,
            &worker,
            &["--random-weights"],
        ),
        dir.path(),
        2,
        "\"deepseek_v2\"",
    );
    refused(
        &args(&model("llama-3.1-8b"), &out, &worker, &[]),
        dir.path(),
        2,
        "--random-weights",
    );
    let empty = tempfile::tempdir().unwrap();
    refused(
        &args(
            &empty.path().display().to_string(),
            &out,
            &worker,
            &["--random-weights"],
        ),
        dir.path(),
        2,
        "no config.json",
    );
    // An existing output is never overwritten.
    std::fs::write(&out, "keep").unwrap();
    refused(
        &args(&model("qwen3-0.6b"), &out, &worker, &["--random-weights"]),
        dir.path(),
        2,
        "exists",
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep");
}

#[test]
fn worker_failures_are_typed_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let qwen = model("qwen3-0.6b");
    refused(
        &args(
            &qwen,
            &out,
            &dir.path().join("absent"),
            &["--random-weights"],
        ),
        dir.path(),
        2,
        "not installed",
    );
    let no_gpu = fake_worker(
        dir.path(),
        "no-gpu",
        "",
        r#"{"error":{"kind":"no_cuda_device","message":"no CUDA device: libtorch sees no GPU"}}"#,
        0,
    );
    refused(
        &args(&qwen, &out, &no_gpu, &["--random-weights"]),
        dir.path(),
        2,
        "no cuda device",
    );
    let oom = fake_worker(
        dir.path(),
        "oom",
        "",
        r#"{"error":{"kind":"out_of_memory","message":"out of memory on cuda:0 during kv_cache"}}"#,
        0,
    );
    refused(
        &args(&qwen, &out, &oom, &["--random-weights"]),
        dir.path(),
        1,
        "out of memory",
    );
    // A synthetic-measurement answer to a model request is not accepted.
    let wrong = fake_worker(
        dir.path(),
        "wrong",
        "",
        &super::support::fake_measurement(),
        0,
    );
    refused(
        &args(&qwen, &out, &wrong, &["--random-weights"]),
        dir.path(),
        1,
        "another question",
    );
    // Rows that do not match the workload (no graph rows although --graph was asked).
    let short = fake_worker(dir.path(), "short", "", &fake_model_measurement(false), 0);
    refused(
        &args(&qwen, &out, &short, &["--random-weights", "--graph"]),
        dir.path(),
        1,
        "not a valid model measurement",
    );
}

#[test]
fn a_worker_answer_becomes_a_document_valid_against_its_schema_with_the_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let worker = fake_worker(dir.path(), "ok", "", &fake_model_measurement(true), 0);
    let a = args(
        &model("qwen3-0.6b"),
        &out,
        &worker,
        &["--random-weights", "--graph", "--dtype", "bfloat16"],
    );
    let run = lab().args(&a).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        stdout.contains("lab plan predicted vs measured"),
        "{stdout}"
    );
    assert!(stdout.contains("graph decode: median 500.0 µs"), "{stdout}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(doc["schema"], "iteragpu-lab/model-measurement/v1");
    assert_eq!(doc["model"]["family"], "qwen3");
    assert_eq!(doc["model"]["weights_source"], "random");
    assert_eq!(doc["model"]["parameters"], 596_049_920u64);
    assert_eq!(doc["workload"]["context"], 10);
    let memory = doc["prediction"]["memory"].as_array().unwrap();
    assert_eq!(memory[0]["figure"], "weights_allocated_bytes");
    assert_eq!(memory[0]["measured_bytes"], 1_000_000);
    // kv: 10 positions × 28 layers × 2 × 8 heads × 128 × 2 bytes.
    // After lab plan's two weight figures, the same two replayed over the worker's stacked
    // q/k/v and gate/up layout, then the KV cache.
    assert_eq!(memory[2]["figure"], "weights_reserved_bytes_stacked");
    assert_eq!(memory[3]["figure"], "weights_allocated_bytes_stacked");
    assert_eq!(memory[4]["figure"], "kv_cache_bytes");
    assert_eq!(memory[4]["predicted_bytes"], 10 * 28 * 2 * 8 * 128 * 2);
    // "Fake GPU" is no catalog GPU: no time figures, and the note says why.
    assert!(doc["prediction"]["time"].is_null());
    assert!(doc["prediction"]["notes"][0]
        .as_str()
        .unwrap()
        .contains("'Fake GPU' is not one catalog GPU"));
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("lab/schema/model-measurement.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // A document with a figure removed is not valid: the schema is not empty.
    let mut broken = doc.clone();
    broken["model"]
        .as_object_mut()
        .unwrap()
        .remove("config_sha256");
    assert!(!validator.is_valid(&broken));
}

#[test]
fn lab_report_shows_the_prediction_beside_the_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let worker = fake_worker(dir.path(), "ok", "", &fake_model_measurement(false), 0);
    let a = args(&model("llama-3.2-1b"), &out, &worker, &["--random-weights"]);
    assert!(lab().args(&a).output().unwrap().status.success());
    let report = lab()
        .args(["report", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(
        text.contains("weights_allocated_bytes  predicted"),
        "{text}"
    );
    assert!(text.contains("measured        1000000 B"), "{text}");
    assert!(
        text.contains("eager decode: median 500.0 µs per step"),
        "{text}"
    );
    // Mixed kinds are refused; --svg is not drawn for a model measurement.
    let synthetic = dir.path().join("s.json");
    std::fs::write(&synthetic, super::support::fake_measurement()).unwrap();
    let mixed = lab()
        .args(["report", out.to_str().unwrap(), synthetic.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(mixed.status.code(), Some(2));
    let svg = lab()
        .args([
            "report",
            out.to_str().unwrap(),
            "--svg",
            dir.path().join("c.svg").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(svg.status.code(), Some(2));
    // A model document whose rows do not match its workload is refused by name.
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    doc["workload"]["repeats"] = 5.into();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, doc.to_string()).unwrap();
    let r = lab()
        .args(["report", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("warm_prefill rows"));
}

/// The kinds of file `lab report` tells apart (each read once), given two at a time in both
/// orders: a model measurement's problem is named first, then a mix of kinds, then a
/// document given twice (of either kind), then the first file in order that does not read
/// (not JSON: 2, missing: 1, a folder: 2); two good files of one kind are reported.
#[test]
fn lab_report_tells_every_pair_of_file_kinds_apart() {
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Kind {
        Model,
        BadModel,
        Synthetic,
        Comparison,
        NotJson,
        Missing,
        Folder,
    }
    use Kind::*;
    let dir = tempfile::tempdir().unwrap();
    let model_doc = dir.path().join("m.json");
    let worker = fake_worker(dir.path(), "ok", "", &fake_model_measurement(false), 0);
    let a = args(
        &model("llama-3.2-1b"),
        &model_doc,
        &worker,
        &["--random-weights"],
    );
    assert!(lab().args(&a).output().unwrap().status.success());
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&model_doc).unwrap()).unwrap();
    doc["workload"]["repeats"] = 5.into();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, doc.to_string()).unwrap();
    let synthetic = repo_root().join("examples/h200/rust-small-float32.json");
    let not_json = dir.path().join("notes.txt");
    std::fs::write(&not_json, "not json\n").unwrap();
    let path = |kind: Kind| match kind {
        Model => model_doc.clone(),
        BadModel => bad.clone(),
        Synthetic => synthetic.clone(),
        Comparison => repo_root().join("examples/h200x2/comparison.json"),
        NotJson => not_json.clone(),
        Missing => dir.path().join("missing.json"),
        Folder => dir.path().to_path_buf(),
    };
    let fails = |kind: Kind| match kind {
        NotJson => Some((2, "not a measurement document")),
        Missing => Some((1, "cannot read")),
        Folder => Some((2, "is not a file")),
        _ => None,
    };
    let expected = |a: Kind, b: Kind| -> (i32, &str) {
        let models = [a, b]
            .iter()
            .filter(|k| matches!(k, Model | BadModel))
            .count();
        if a == BadModel || b == BadModel {
            (2, "warm_prefill rows")
        } else if models == 1 {
            (2, "not both at once")
        } else if a == b && fails(a).is_none() {
            (2, "are the same document")
        } else {
            fails(a).or(fails(b)).unwrap_or((0, ""))
        }
    };
    let kinds = [
        Model, BadModel, Synthetic, Comparison, NotJson, Missing, Folder,
    ];
    for a in kinds {
        for b in kinds {
            let out = lab()
                .arg("report")
                .arg(path(a))
                .arg(path(b))
                .output()
                .unwrap();
            let (code, needle) = expected(a, b);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(code), "{a:?} {b:?}: {stderr}");
            if code == 0 {
                assert!(!out.stdout.is_empty(), "{a:?} {b:?}");
            } else {
                assert!(out.stdout.is_empty(), "{a:?} {b:?}");
                // A comparison's note ("note: ... reporting the documents it compares") may
                // come first; the refusal is one line.
                let refusal: Vec<&str> = stderr
                    .lines()
                    .filter(|l| !l.starts_with("note: "))
                    .collect();
                assert_eq!(refusal.len(), 1, "{a:?} {b:?}: {stderr}");
                assert!(refusal[0].contains(needle), "{a:?} {b:?}: {stderr}");
            }
        }
    }
}

/// A fake worker for two GPUs: the environment question answered with two GPUs, a model
/// measurement of `cuda:N` with `m-N.json` (`device_index` read from the request).
fn fake_two_gpus(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    for index in 0..2u32 {
        let env = super::support::fake::environment_reply(super::support::fake::environment(
            index,
            2,
            super::support::fake::FAKE_GPU_BYTES,
        ));
        std::fs::write(dir.join(format!("env-{index}.json")), env).unwrap();
        let m = fake_model_measurement(false).replace("\"index\":0", &format!("\"index\":{index}"));
        std::fs::write(dir.join(format!("m-{index}.json")), m).unwrap();
    }
    let path = dir.join("worker2");
    let script = format!(
        "#!/bin/sh\nrequest=$(cat)\n\
         index=$(printf '%s' \"$request\" | sed -n 's/.*\"device_index\":\\([0-9]*\\).*/\\1/p')\n\
         case \"$request\" in\n\
         *'\"command\":\"environment\"'*) cat '{d}'/env-$index.json ;;\n\
         *) cat '{d}'/m-$index.json ;;\n\
         esac\necho\n",
        d = dir.display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn device_all_writes_one_model_document_per_gpu_in_a_new_folder() {
    let dir = tempfile::tempdir().unwrap();
    let worker = fake_two_gpus(dir.path());
    let folder = dir.path().join("gpus");
    let mut a = args(
        &model("qwen3-0.6b"),
        &dir.path().join("unused.json"),
        &worker,
        &["--random-weights"],
    );
    a[2] = "all".into();
    // Several GPUs: --output is refused, --output-dir asked for, nothing written.
    refused(&a, dir.path(), 2, "--output-dir");
    let at = a.iter().position(|x| x == "--output").unwrap();
    a[at] = "--output-dir".into();
    a[at + 1] = folder.display().to_string();
    let run = lab().args(&a).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["cuda-0.json", "cuda-1.json"]);
    for index in 0..2 {
        let doc: serde_json::Value = serde_json::from_slice(
            &std::fs::read(folder.join(format!("cuda-{index}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(doc["workload"]["device"], format!("cuda:{index}"));
        assert_eq!(doc["model"]["family"], "qwen3");
        assert!(stdout.contains(&format!("cuda:{index}: wrote")), "{stdout}");
    }
    // The folder exists now: a second run is refused before any GPU work.
    refused(&a, dir.path(), 2, "exists");
}

/// `fake_model_measurement(true)` on a device named `name`, with distinct step times: warm
/// prefills 0.002 s by the wall clock only (no GPU time) and 0.003 s by GPU events (median
/// 0.0025), eager decode 0.006 and 0.004 s (median 0.005), graph decode 0.0031 and 0.0029 s
/// (median 0.003).
fn timed_measurement(name: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&fake_model_measurement(true)).unwrap();
    let m = &mut v["model_measurement"];
    m["environment"]["device"]["name"] = name.into();
    for row in m["phases"].as_array_mut().unwrap() {
        let rep = row["repetition"].as_u64();
        let gpu = match (row["phase"].as_str().unwrap(), rep) {
            ("warm_prefill", Some(1)) => {
                row["wall_seconds"] = 0.002.into();
                serde_json::Value::Null
            }
            ("warm_prefill", _) => 0.003.into(),
            ("decode", Some(1)) => 0.006.into(),
            ("decode", _) => 0.004.into(),
            ("graph_decode", Some(1)) => 0.0031.into(),
            ("graph_decode", _) => 0.0029.into(),
            _ => continue,
        };
        row["gpu_seconds"] = gpu;
    }
    v.to_string()
}

fn dec(v: &serde_json::Value) -> rust_decimal::Decimal {
    v.as_str()
        .unwrap_or_else(|| panic!("not a decimal string: {v}"))
        .parse()
        .unwrap()
}

/// Runs `lab measure --model qwen3-0.6b --graph` (batch 1, 8 + 2 tokens) with a fake worker
/// reporting `name`; the document and stdout.
fn measured_on(dir: &Path, name: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let out = dir.join(format!("m-{}.json", files(dir).len()));
    let worker = fake_worker(
        dir,
        &format!("w{}", files(dir).len()),
        "",
        &timed_measurement(name),
        0,
    );
    let mut flags = vec!["--random-weights", "--graph"];
    flags.extend_from_slice(extra);
    let run = lab()
        .args(args(&model("qwen3-0.6b"), &out, &worker, &flags))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    (doc, String::from_utf8_lossy(&run.stdout).into_owned())
}

#[test]
fn on_an_h200_the_time_model_stands_beside_each_measured_phase() {
    use rust_decimal::Decimal;
    let dir = tempfile::tempdir().unwrap();
    let (doc, stdout) = measured_on(dir.path(), "NVIDIA H200", &["--dtype", "bfloat16"]);
    let t = &doc["prediction"]["time"];
    assert_eq!(t["gpu"], "h200", "{t}");
    assert_eq!(t["factors"], "measured");
    let label = t["label"].as_str().unwrap();
    assert!(label.contains("ceiling = datasheet peaks"), "{label}");
    assert!(label.contains("factors measured on h200"), "{label}");
    // Worked example, independently: lab plan for the same workload on the H200 (batch 1,
    // 8 + 2 tokens, bf16) gives TTFT = one prefill and TPOT = one decode step at batch 1,
    // rounded to 6 decimals; the document's 9-decimal figures round to the same.
    let model_dir = model("qwen3-0.6b");
    let plan = |profile: &str| {
        let v = super::support::json(&[
            "plan",
            "--model",
            &model_dir,
            "--requests",
            "1",
            "--input-tokens",
            "8",
            "--output-tokens",
            "2",
            "--batch",
            "1",
            "--gpu",
            "h200",
            "--weights-dtype",
            "bf16",
            "--kv-dtype",
            "bf16",
            "--profile",
            profile,
            "--json",
        ]);
        v["time"]["rows"][0]["setup"].clone()
    };
    let (eager, graphs) = (plan("eager"), plan("cuda-graphs"));
    let phases = t["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["warm_prefill", "decode", "graph_decode"]);
    let cases = [
        (
            &phases[0],
            "eager",
            &eager["expected"]["ttft_s"],
            "0.0025",
            "median gpu_seconds (wall_seconds where none) of 2 warm_prefill rows",
        ),
        (
            &phases[1],
            "eager",
            &eager["expected"]["tpot_s"],
            "0.005",
            "median gpu_seconds of 2 decode rows",
        ),
        (
            &phases[2],
            "cuda-graphs",
            &graphs["expected"]["tpot_s"],
            "0.003",
            "median gpu_seconds of 2 graph_decode rows",
        ),
    ];
    for (p, profile, plan_expected, measured, from) in cases {
        assert_eq!(p["profile"], profile, "{p}");
        let expected = dec(&p["expected_seconds"]);
        assert_eq!(
            expected.round_dp_with_strategy(6, rust_decimal::RoundingStrategy::MidpointNearestEven),
            dec(plan_expected),
            "{p}"
        );
        assert!(expected > Decimal::ZERO);
        // The ceiling (datasheet peaks, no launch cost) is below the expected figure.
        assert!(dec(&p["ceiling_seconds"]) < expected, "{p}");
        assert_eq!(dec(&p["measured_seconds"]), dec(&measured.into()), "{p}");
        assert_eq!(
            p["measured_seconds"].as_str().unwrap().len(),
            "0.".len() + 9
        );
        assert_eq!(p["measured_from"], from);
        let error = dec(&p["measured_seconds"]) - expected;
        assert_eq!(dec(&p["error_seconds"]), error, "{p}");
        let pct = (error * Decimal::ONE_HUNDRED / expected)
            .round_dp_with_strategy(3, rust_decimal::RoundingStrategy::MidpointNearestEven);
        assert_eq!(dec(&p["error_percent"]), pct, "{p}");
    }
    // Eager and graph decode share the ceiling and differ in the expected launches.
    assert_eq!(phases[1]["ceiling_seconds"], phases[2]["ceiling_seconds"]);
    assert!(dec(&phases[2]["expected_seconds"]) < dec(&phases[1]["expected_seconds"]));
    assert_eq!(
        eager["ceiling"]["tpot_s"], graphs["ceiling"]["tpot_s"],
        "the plan's ceiling has no profile either"
    );
    let notes = doc["prediction"]["notes"].to_string();
    assert!(!notes.contains("time figures"), "{notes}");
    // The summary shows the time lines after the memory lines, in the document's figures.
    let memory_at = stdout.find("lab plan predicted vs measured").unwrap();
    let time_at = stdout.find("lab plan time predicted vs measured").unwrap();
    assert!(memory_at < time_at, "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("graph_decode") && l.contains(" ceiling "))
        .unwrap();
    for key in [
        "ceiling_seconds",
        "expected_seconds",
        "measured_seconds",
        "error_seconds",
    ] {
        assert!(
            line.contains(phases[2][key].as_str().unwrap()),
            "{key}: {line}"
        );
    }
    // lab report of the document shows the same time lines after the memory lines.
    let written = dir.path().join("written.json");
    std::fs::write(&written, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let report = lab()
        .args(["report", written.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(report.status.success());
    let text = String::from_utf8_lossy(&report.stdout);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    assert!(at("lab plan predicted vs measured") < at("lab plan time predicted vs measured"));
    assert!(text.contains(line.trim()), "{text}");
    // The schema holds the typed time section, and refuses a broken one.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("lab/schema/model-measurement.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let mut broken = doc.clone();
    broken["prediction"]["time"]["phases"][0]["expected_seconds"] = 0.5.into();
    assert!(!validator.is_valid(&broken));
}

#[test]
fn a_device_the_time_model_cannot_price_leaves_time_null_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // Not one catalog GPU: another name, a PCIe board of an SXM catalog row, a look-alike
    // with a Cyrillic letter (shown escaped).
    for (name, shown) in [
        ("Fake GPU", "Fake GPU"),
        ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
        ("NVIDIA \u{41d}200", "NVIDIA \\u{41d}200"),
    ] {
        let (doc, stdout) = measured_on(dir.path(), name, &[]);
        assert!(doc["prediction"]["time"].is_null(), "{name}");
        let note = doc["prediction"]["notes"][0].as_str().unwrap();
        assert!(note.starts_with("time figures: null: the device"), "{note}");
        assert!(
            note.contains(&format!("'{shown}' is not one catalog GPU")),
            "{note}"
        );
        assert!(stdout.contains(note), "{stdout}");
        assert!(!stdout.contains("lab plan time predicted"), "{stdout}");
    }
    // A catalog GPU, but fp32 (the default dtype): the time model has no fp32 rate.
    let (doc, _) = measured_on(dir.path(), "NVIDIA H200", &["--dtype", "float32"]);
    assert!(doc["prediction"]["time"].is_null());
    let note = doc["prediction"]["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("time figures: null: the time model cannot price this workload on h200: data/gpu-perf.csv has no fp32"),
        "{note}"
    );
}

#[test]
fn committed_documents_without_time_figures_still_read() {
    // Written before the time model: `"time": null` and the old note.
    for rel in [
        "examples/h200/measure-model/run1/lab-llama-b1.json",
        "examples/h200/measure-model/run5/call3/lab-llama-b1.json",
    ] {
        let path = repo_root().join(rel);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(v["prediction"]["time"].is_null(), "{rel}");
        let r = lab()
            .args(["report", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(text.contains("lab plan predicted vs measured"), "{text}");
        assert!(!text.contains("lab plan time predicted"), "{text}");
    }
}
