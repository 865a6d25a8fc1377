//! `lab report` through the binary: tables, Markdown, JSON, the SVG file and the errors.

use super::support::{assert_refused, fake, lab, repo_root};
use assert_cmd::Command;
use lab::document::Phase;
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// One phase row; `base`, `end`, `peak` are allocated bytes; reserved is 2 MiB throughout;
/// the wall time is 1 ms plus 1 ms per repetition, the GPU time 0.5 ms.
fn row(phase: &str, rep: Option<u64>, passes: u64, base: u64, end: u64, peak: u64) -> String {
    let phase: Phase = serde_json::from_value(Value::from(phase)).unwrap();
    let wall: f64 = format!("0.00{}", rep.unwrap_or(0) + 1).parse().unwrap();
    fake::row_json(
        phase,
        rep,
        passes,
        (wall, Some(0.0005)),
        fake::counters(base, end, peak),
    )
}

/// A `lab measure`-shaped document for batch 1, context 16, width 64.
fn document(dtype: &str, implementation: &str) -> String {
    let bytes = if dtype == "float32" { 4 } else { 2 };
    let p = 33_088 * bytes;
    let input = 16 * 64 * bytes;
    let phases = [
        row("model_load", None, 0, 0, p, p),
        row("inputs", None, 0, p, p + input, p + input),
        row(
            "cold_forward",
            None,
            1,
            p + input,
            p + 2 * input,
            p + 9 * input,
        ),
        row("warmup", None, 1, p + input, p + 2 * input, p + 9 * input),
        row(
            "warm_forward",
            Some(1),
            1,
            p + input,
            p + 2 * input,
            p + 9 * input,
        ),
        row(
            "warm_forward",
            Some(2),
            1,
            p + input,
            p + 2 * input,
            p + 9 * input,
        ),
    ]
    .join(",");
    format!(
        r#"{{"schema":"iteragpu-lab/measurement/v1",
"tool":{{"name":"iteragpu-lab","version":"1.0.0","implementation":"{implementation}"}},
"created_utc":"2026-11-30T10:00:00Z",
"environment":{{"runtime":{{"language":"Rust","version":"1.95"}},"torch_version":"2.11.0",
"cuda_build_version":"13.0","hip_build_version":null,"device":"cuda:0","device_name":"NVIDIA H200",
"compute_capability":"9.0","total_memory_bytes":150109880320,"multiprocessor_count":132,
"device_count":1,"tf32_matmul_allowed":false}},
"configuration":{{"device":"cuda:0","batch":1,"context":16,"width":64,"dtype":"{dtype}",
"warmup":1,"repeats":2,"seed":0}},
"synthetic_model":{{"architecture":"MLP","width":64,"hidden":256,"parameters":33088,
"dtype_bytes":{bytes},"parameter_bytes":{p},"input_bytes":{input},"output_bytes":{input},
"flops_per_forward":1048576}},
"phases":[{phases}]}}"#
    )
}

fn files(dir: &Path) -> (PathBuf, PathBuf) {
    let a = dir.join("small-float32.json");
    let b = dir.join("small-bfloat16.json");
    std::fs::write(&a, document("float32", "rust")).unwrap();
    std::fs::write(&b, document("bfloat16", "python")).unwrap();
    (a, b)
}

fn usage_error(cmd: &mut Command, needle: &str) {
    failure(cmd, 2, needle);
}

/// Exit `code`, nothing on stdout, one stderr line containing `needle`.
fn failure(cmd: &mut Command, code: i32, needle: &str) {
    assert_refused(&cmd.output().unwrap(), code, needle);
}

#[test]
fn text_tables_per_phase_with_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = files(dir.path());
    let output = lab().arg("report").arg(&a).arg(&b).output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("[1] small-float32.json — rust float32 b1 c16 w64 on NVIDIA H200"));
    assert!(text.contains("[2] small-bfloat16.json — python bfloat16 b1 c16 w64"));
    for phase in [
        "model_load",
        "inputs",
        "cold_forward",
        "warmup",
        "warm_forward",
    ] {
        assert!(text.contains(&format!("\n{phase}\n")), "{phase}");
    }
    assert!(text.contains("pred peak alloc"));
    // float32 cold forward: baseline 0.130 MiB (weights + input), predicted end = baseline +
    // one 4096-byte output = 0.134 MiB, predicted peak = baseline + two 16384-byte hidden
    // activations = 0.161 MiB
    let cold = text.split("\ncold_forward\n").nth(1).unwrap();
    let first = cold.lines().nth(1).unwrap();
    assert!(first.starts_with("  [1]"), "{first}");
    assert!(
        first.contains("0.134") && first.contains("0.161"),
        "{first}"
    );
}

#[test]
fn markdown_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = files(dir.path());
    let md = lab()
        .args(["report", "--markdown"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(md.starts_with("## Measurement report"));
    assert!(md.contains("### `warm_forward`"));
    assert!(md.contains("| [2] | 2 |"));

    let output = lab()
        .args(["report", "--json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(output.status.success());
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["files"].as_array().unwrap().len(), 2);
    assert_eq!(v["files"][0]["file"], "small-float32.json");
    assert_eq!(v["files"][0]["sha256"].as_str().unwrap().len(), 64);
    let load = &v["phases"][0];
    assert_eq!(load["phase"], "model_load");
    assert_eq!(load["rows"][0]["peak_allocated_bytes"], 132_352);
    // four tensors each rounded up to 512 bytes: the 256-byte second bias takes 512
    assert_eq!(load["rows"][0]["predicted_peak_allocated_bytes"], 132_608);
    assert_eq!(
        load["rows"][0]["peak_allocated_minus_predicted_bytes"],
        -256
    );
    let warm = &v["phases"][4];
    assert_eq!(warm["rows"].as_array().unwrap().len(), 4);
    assert_eq!(warm["rows"][1]["repetition"], 2);
}

#[test]
fn svg_is_written_once_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = files(dir.path());
    let svg = dir.path().join("chart.svg");
    let output = lab()
        .arg("report")
        .arg(&a)
        .arg(&b)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(output.status.success());
    let drawing = std::fs::read_to_string(&svg).unwrap();
    assert!(drawing.starts_with("<svg"));
    assert!(drawing.contains("cold_forward"));
    assert!(drawing.contains("python bfloat16 b1 c16 w64"));
    assert!(drawing.contains("Warm forward per repetition"));

    usage_error(
        lab().arg("report").arg(&a).arg("--svg").arg(&svg),
        "already exists",
    );
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), drawing);
}

#[test]
fn svg_mode_follows_the_umask_like_any_new_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = files(dir.path());
    for (umask, mode) in [("022", 0o644), ("002", 0o664), ("077", 0o600)] {
        let svg = dir.path().join(format!("chart-{umask}.svg"));
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
            .arg(assert_cmd::cargo::cargo_bin("lab"))
            .arg("report")
            .arg(&a)
            .arg(&b)
            .arg("--svg")
            .arg(&svg)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let mode_found = std::fs::metadata(&svg).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode_found, mode, "umask {umask}: {mode_found:o}");
    }
}

#[test]
fn bad_files_are_one_line_exit_2_missing_ones_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    // A missing file is a runtime failure (exit 1), as for every file `lab` reads.
    let missing = dir.path().join("missing.json");
    failure(lab().arg("report").arg(&missing), 1, "cannot read");
    failure(lab().arg("report").arg(&missing), 1, "missing.json");

    let not_json = dir.path().join("notes.json");
    std::fs::write(&not_json, "hello").unwrap();
    usage_error(
        lab().arg("report").arg(&not_json),
        "not a measurement document",
    );

    let other_schema = dir.path().join("v0.json");
    std::fs::write(
        &other_schema,
        document("float32", "rust").replace("measurement/v1", "measurement/v0"),
    )
    .unwrap();
    usage_error(lab().arg("report").arg(&other_schema), "schema");

    usage_error(lab().arg("report").arg(dir.path()), "is not a file");

    // a bad file among good ones: nothing printed, no SVG written
    let (a, _) = files(dir.path());
    let svg = dir.path().join("never.svg");
    failure(
        lab()
            .arg("report")
            .arg(&a)
            .arg(&missing)
            .arg("--svg")
            .arg(&svg),
        1,
        "missing.json",
    );
    assert!(!svg.exists());
    usage_error(
        lab()
            .arg("report")
            .arg(&a)
            .arg(&not_json)
            .arg("--svg")
            .arg(&svg),
        "not a measurement document",
    );
    assert!(!svg.exists());
}

/// A real H200 document with a `graph` object (`lab measure --graph-replays 1000`, rust,
/// float32, b1 c16 w64).
fn graph_example() -> PathBuf {
    repo_root().join("examples/h200/graph/rust-small-float32.json")
}

/// Standard output of `lab report ARGS`, which must succeed.
fn report<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> String {
    let output = lab().arg("report").args(args).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// The graph floor of examples/h200/graph/rust-small-float32.json, worked out by hand from its
/// `graph` object and its two warm_forward GPU times (35.232 and 34.240 µs, median 34.736):
/// 7.5804 µs per forward (min 7.5792, max 7.5930), wall 12.915 µs; overhead 34.736 - 7.580 =
/// 27.156 µs, 34.736 / 7.580 = 4.58; 1,048,576 FLOP / 7.580 µs = 0.138 TFLOP/s; capture:
/// 69,347,840 - 34,739,712 B allocated and 73,400,320 - 35,651,584 B reserved.
const GRAPH_LINES: [&str; 4] = [
    "[1] graph floor: 5 batches of 1000 CUDA-graph replays, median 7.58 µs per forward \
     (min 7.58, max 7.59); one replay + synchronize: median wall 12.91 µs",
    "[1] eager vs graph: 34.74 µs vs 7.58 µs per forward (GPU events, medians); launch \
     overhead 27.16 µs per forward (eager = 4.6× graph)",
    "[1] achieved by graph time: 0.138 TFLOP/s (the launch-free figure to compare across GPUs)",
    "[1] graph memory: warm-up and capture left 34608128 B more allocated and 37748736 B more \
     reserved (the graph keeps its own private memory pool while it exists); replays: end \
     allocated 69347840 B = baseline 69347840 B",
];

#[test]
fn a_graph_document_shows_its_graph_floor() {
    let file = graph_example();
    let text = report([&file]);
    let (_, graph) = text
        .split_once("\n\nCUDA graph (docs/PROTOCOL.md §4.6)\n")
        .unwrap_or_else(|| panic!("no graph section: {text}"));
    let expected: Vec<String> = GRAPH_LINES.iter().map(|l| format!("  {l}")).collect();
    assert_eq!(graph.lines().collect::<Vec<_>>(), expected);

    let md = report([OsStr::new("--markdown"), file.as_os_str()]);
    let (_, graph) = md
        .split_once("\n\n### CUDA graph (docs/PROTOCOL.md §4.6)\n\n")
        .unwrap_or_else(|| panic!("no graph section: {md}"));
    let expected: Vec<String> = GRAPH_LINES.iter().map(|l| format!("- {l}")).collect();
    assert_eq!(graph.lines().collect::<Vec<_>>(), expected);

    let v: Value = serde_json::from_str(&report([OsStr::new("--json"), file.as_os_str()])).unwrap();
    let graph = &v["files"][0]["graph"];
    assert_eq!(graph["replays"], 1000);
    // The document's float, as its shortest decimal in a string (no float in --json).
    assert_eq!(
        graph["median_gpu_seconds_per_forward"],
        "0.000007580448150634766"
    );
    assert_eq!(graph["capture"]["end_reserved_bytes"], 73_400_320);
}

#[test]
fn without_a_graph_object_the_report_is_unchanged() {
    // The graph example with its `graph` object removed (same name, so only the SHA-256 of
    // its file line differs): the report is the graph report up to its graph section.
    let dir = tempfile::tempdir().unwrap();
    let with = graph_example();
    let mut document: Value = serde_json::from_slice(&std::fs::read(&with).unwrap()).unwrap();
    assert!(document.as_object_mut().unwrap().remove("graph").is_some());
    let without = dir.path().join("rust-small-float32.json");
    std::fs::write(&without, serde_json::to_vec(&document).unwrap()).unwrap();
    // The one SHA-256 in a one-file report, left out.
    let skip_sha = |text: &str| {
        let (head, tail) = text.split_once("sha256 ").unwrap();
        format!("{head}{}", &tail[64..])
    };
    for format in [None, Some("--markdown")] {
        let flag = format.map(OsStr::new);
        let plain = report(flag.into_iter().chain([without.as_os_str()]));
        let graphed = report(flag.into_iter().chain([with.as_os_str()]));
        let title = if format.is_some() {
            "\n\n### CUDA graph"
        } else {
            "\n\nCUDA graph"
        };
        assert!(!plain.contains("graph"), "{plain}");
        let (before, _) = graphed.split_once(title).unwrap();
        assert_eq!(
            skip_sha(&plain),
            skip_sha(&format!("{before}\n")),
            "{format:?}"
        );
    }
    let json = report([OsStr::new("--json"), without.as_os_str()]);
    assert!(!json.contains("graph"), "{json}");

    // Beside a graph document, a document without one says so on one line.
    let text = report([&with, &without]);
    assert!(
        text.ends_with("\n  [2] no graph object (measured without --graph-replays)\n"),
        "{text}"
    );
}

/// Every timing field of the documents `lab report` reads, in a synthetic document (its rows
/// and its `graph` object) and in a model document (`lab measure --model`), at each kind of
/// absurd value: negative, 0 where a host clock cannot read 0 (wall times), a subnormal
/// (below one nanosecond), past 30 days (the longest package), 1e308, and text that is not a
/// number. Each is refused in one line naming the file and the field, exit 2, nothing on
/// standard output; the bounds themselves (1 ns, 30 days) are accepted.
#[test]
fn timing_fields_out_of_bounds_are_refused_by_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let synthetic: Value =
        serde_json::from_str(&std::fs::read_to_string(graph_example()).unwrap()).unwrap();
    let model: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo_root().join("examples/h200/measure-model/run1/lab-llama-b1.json"),
        )
        .unwrap(),
    )
    .unwrap();
    // (document, JSON pointer, what the message names, whether 0 is a valid reading)
    let fields: [(&Value, &str, &str, bool); 11] = [
        (
            &synthetic,
            "/phases/2/wall_seconds",
            "phases[2] (cold_forward): wall_seconds",
            false,
        ),
        (
            &synthetic,
            "/phases/4/gpu_seconds",
            "phases[4] (warm_forward): gpu_seconds",
            true,
        ),
        (
            &synthetic,
            "/graph/batch_gpu_seconds_per_forward/1",
            "graph.batch_gpu_seconds_per_forward[1]",
            true,
        ),
        (
            &synthetic,
            "/graph/median_gpu_seconds_per_forward",
            "graph.median_gpu_seconds_per_forward",
            true,
        ),
        (
            &synthetic,
            "/graph/min_gpu_seconds_per_forward",
            "graph.min_gpu_seconds_per_forward",
            true,
        ),
        (
            &synthetic,
            "/graph/max_gpu_seconds_per_forward",
            "graph.max_gpu_seconds_per_forward",
            true,
        ),
        (
            &synthetic,
            "/graph/synchronised_wall_seconds_median",
            "graph.synchronised_wall_seconds_median",
            false,
        ),
        (
            &synthetic,
            "/graph/synchronised_wall_seconds_min",
            "graph.synchronised_wall_seconds_min",
            false,
        ),
        (
            &synthetic,
            "/graph/capture_wall_seconds",
            "graph.capture_wall_seconds",
            false,
        ),
        (
            &model,
            "/phases/0/wall_seconds",
            "phases[0] (model_load): wall_seconds",
            false,
        ),
        (&model, "/phases/5/gpu_seconds", "gpu_seconds", true),
    ];
    let path = dir.path().join("forged.json");
    let run = |doc: &Value, pointer: &str, raw: &str| {
        let mut doc = doc.clone();
        *doc.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer}")) = Value::from("__VALUE__");
        let text = doc.to_string().replace("\"__VALUE__\"", raw);
        std::fs::write(&path, text).unwrap();
        lab().arg("report").arg(&path).output().unwrap()
    };
    for (doc, pointer, named, zero) in fields {
        let mut bad = vec![
            ("-1", "negative"),
            ("-5e-324", "negative"),
            ("5e-324", "below one nanosecond"),
            ("2.2250738585072014e-308", "below one nanosecond"),
            ("9.99e-10", "below one nanosecond"),
            ("2592000.001", "more than 30 days"),
            ("1e308", "more than 30 days"),
        ];
        if !zero {
            bad.push(("0", "zero, and a host clock around a step always moves"));
        }
        for (raw, why) in bad {
            let out = run(doc, pointer, raw);
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            assert_refused(&out, 2, "forged.json: ");
            assert!(
                err.contains(&format!("{named} is ")),
                "{pointer} = {raw}: {err}"
            );
            assert!(err.contains(why), "{pointer} = {raw}: {err}");
            assert!(err.contains("2592000 s (30 days"), "{err}");
        }
        // Text is not a number: refused as such (serde's words; the rows' times name their
        // field, the graph's and the model rows' say where).
        for raw in ["\"NaN\"", "\"1e308\"", "\"inf\""] {
            let out = run(doc, pointer, raw);
            assert_refused(&out, 2, "forged.json: not a ");
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                err.contains("invalid type: string"),
                "{pointer} = {raw}: {err}"
            );
            if pointer.starts_with("/phases/") && std::ptr::eq(doc, &synthetic) {
                assert!(
                    err.contains(&format!(
                        "expected {}: a number of seconds",
                        pointer.rsplit('/').next().unwrap()
                    )),
                    "{err}"
                );
            }
        }
        // The bounds themselves, and 0 where a clock may read it, are times.
        let mut good = vec!["1e-9", "2592000"];
        if zero {
            good.push("0");
        }
        for raw in good {
            let out = run(doc, pointer, raw);
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                !err.contains(named) || out.status.success(),
                "{pointer} = {raw}: {err}"
            );
        }
    }
}
