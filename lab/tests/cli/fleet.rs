//! `lab measure --device all|LIST` and `lab environment --device all|LIST` with a fake worker
//! that plays a machine of several GPUs: the folder layout, the documents, the comparison and
//! its flags, and the refusals (docs/PROTOCOL.md §4.7).

use super::support::{fake, lab};
use assert_cmd::Command;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A measurement reply for GPU `index` whose warm forwards take `gpu_seconds` of events.
fn measurement(index: u32, count: u32, gpu_seconds: f64, memory: u64) -> String {
    fake::measurement(
        fake::environment(index, u64::from(count), memory),
        fake::phases(gpu_seconds * 1.2, gpu_seconds),
    )
}

/// A fake worker for `count` GPUs: answers an environment request with `env-N.json` and a
/// measurement of `cuda:N` with `m-N.json`, N read from the request.
fn fake_fleet(dir: &Path, count: u32, replies: &[(u32, String)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    for index in 0..count {
        let env = fake::environment_reply(fake::environment(
            index,
            u64::from(count),
            fake::FAKE_GPU_BYTES,
        ));
        std::fs::write(dir.join(format!("env-{index}.json")), env).unwrap();
    }
    for (index, reply) in replies {
        std::fs::write(dir.join(format!("m-{index}.json")), reply).unwrap();
    }
    let path = dir.join("worker");
    let script = format!(
        "#!/bin/sh\nrequest=$(cat)\n\
         case \"$request\" in\n\
         *'\"command\":\"environment\"'*) index=$(printf '%s' \"$request\" | sed -n 's/.*\"device_index\":\\([0-9]*\\).*/\\1/p'); cat '{d}'/env-$index.json ;;\n\
         *) index=$(printf '%s' \"$request\" | sed -n 's/.*\"device\":\"cuda:\\([0-9]*\\)\".*/\\1/p'); cat '{d}'/m-$index.json ;;\n\
         esac\necho\n",
        d = dir.display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn measure_all(worker: &Path, device: &str, folder: &Path) -> Command {
    let mut command = lab();
    command.args([
        "measure",
        "--device",
        device,
        "--batch",
        "1",
        "--context",
        "16",
        "--width",
        "64",
        "--output-dir",
    ]);
    command.arg(folder).arg("--worker").arg(worker);
    command
}

fn names(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_gpu_gets_a_document_in_a_new_folder_and_a_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let replies = [
        (0, measurement(0, 2, 40e-6, 150_109_880_320)),
        (1, measurement(1, 2, 40e-6, 150_109_880_320)),
    ];
    let worker = fake_fleet(dir.path(), 2, &replies);
    let folder = dir.path().join("fleet");
    let output = measure_all(&worker, "all", &folder).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        names(&folder),
        ["comparison.json", "cuda-0.json", "cuda-1.json"]
    );
    for index in [0, 1] {
        let text = std::fs::read(folder.join(format!("cuda-{index}.json"))).unwrap();
        let document = lab::document::parse(&text).unwrap();
        assert_eq!(
            document.configuration.device.to_string(),
            format!("cuda:{index}")
        );
        assert_eq!(
            document.environment.device.to_string(),
            format!("cuda:{index}")
        );
        assert!(document.graph.is_none());
    }
    let comparison: Value =
        serde_json::from_slice(&std::fs::read(folder.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(comparison["basis"], "warm_forward_gpu");
    assert_eq!(comparison["flagged"], false);
    assert_eq!(comparison["gpus"][1]["deviation_percent"], 0.0);
    assert_eq!(comparison["gpus"][1]["counters_match"], true);
    assert!(stdout.contains("every GPU answered"), "{stdout}");
    assert!(stdout.contains("cuda:1: wrote"), "{stdout}");
}

#[test]
fn a_slow_gpu_and_a_smaller_one_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let replies = [
        (0, measurement(0, 3, 40e-6, 150_109_880_320)),
        (1, measurement(1, 3, 40e-6, 150_109_880_320)),
        (2, measurement(2, 3, 50e-6, 150_000_000_000)),
    ];
    let worker = fake_fleet(dir.path(), 3, &replies);
    let folder = dir.path().join("fleet");
    let output = measure_all(&worker, "cuda:2,cuda:0,cuda:1", &folder)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    // 50 µs against a median of 40 µs: 25 % slower.
    assert!(
        stdout.contains("FLAGGED cuda:2: 25.0 % slower than the median"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FLAGGED cuda:2: announces 150000000000 B, 109880320 B less"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("FLAGGED cuda:0") && !stdout.contains("FLAGGED cuda:1"),
        "{stdout}"
    );
    let comparison: Value =
        serde_json::from_slice(&std::fs::read(folder.join("comparison.json")).unwrap()).unwrap();
    // The order asked is kept.
    assert_eq!(comparison["gpus"][0]["device"], "cuda:2");
    assert_eq!(comparison["flagged"], true);
}

#[test]
fn a_gpu_that_fails_is_flagged_the_others_are_written_and_the_exit_is_1() {
    let dir = tempfile::tempdir().unwrap();
    let oom = fake::error(
        lab::worker::WorkerErrorKind::OutOfMemory,
        "out of memory on cuda:1",
    );
    let replies = [(0, measurement(0, 2, 40e-6, 150_109_880_320)), (1, oom)];
    let worker = fake_fleet(dir.path(), 2, &replies);
    let folder = dir.path().join("fleet");
    let output = measure_all(&worker, "all", &folder).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(names(&folder), ["comparison.json", "cuda-0.json"]);
    assert!(
        stdout.contains("FLAGGED cuda:1: no measurement: out of memory"),
        "{stdout}"
    );
    assert!(stderr.contains("cuda:1 could not be measured"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn refusals_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let replies = [
        (0, measurement(0, 2, 40e-6, 150_109_880_320)),
        (1, measurement(1, 2, 40e-6, 150_109_880_320)),
    ];
    let worker = fake_fleet(dir.path(), 2, &replies);
    let folder = dir.path().join("fleet");
    // A GPU that does not exist: exit 2, no folder.
    let output = measure_all(&worker, "cuda:0,cuda:5", &folder)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cuda:5 does not exist"));
    assert!(!folder.exists());
    // Repeated, empty or non-GPU entries.
    for device in ["cuda:0,cuda:0", "cuda:0,", "cuda:0,cpu"] {
        let output = measure_all(&worker, device, &folder).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{device}");
        assert!(!folder.exists());
    }
    // An existing folder is never reused.
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("keep.txt"), "x").unwrap();
    let output = measure_all(&worker, "all", &folder).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists"));
    assert_eq!(names(&folder), ["keep.txt"]);
    // Several GPUs need --output-dir; one GPU needs --output.
    let file = dir.path().join("one.json");
    let mut command = lab();
    command.args([
        "measure",
        "--device",
        "all",
        "--batch",
        "1",
        "--context",
        "16",
        "--width",
        "64",
        "--output",
    ]);
    let output = command
        .arg(&file)
        .arg("--worker")
        .arg(&worker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--output-dir"));
    let output = measure_all(&worker, "cuda:0", &dir.path().join("single"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--output FILE"));
    assert!(!file.exists() && !dir.path().join("single").exists());
}

#[test]
fn environment_of_every_gpu_is_compared() {
    let dir = tempfile::tempdir().unwrap();
    let worker = fake_fleet(dir.path(), 2, &[]);
    let output = lab()
        .args(["environment", "--device", "all", "--worker"])
        .arg(&worker)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("== cuda:0 =="), "{stdout}");
    assert!(stdout.contains("== cuda:1 =="), "{stdout}");
    assert!(
        stdout.contains("every GPU answered with the same name"),
        "{stdout}"
    );
    let output = lab()
        .args([
            "environment",
            "--device",
            "cuda:0,cuda:3",
            "--json",
            "--worker",
        ])
        .arg(&worker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    let problems = value["devices"][0]["problems"].to_string();
    assert!(problems.contains("cuda:3 does not exist"), "{value}");
}

#[test]
fn graph_replays_flag_is_checked_and_the_graph_reaches_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let counters = serde_json::to_value(lab::document::AllocatorCounters {
        baseline_allocated_bytes: 140_800,
        baseline_reserved_bytes: 2_097_152,
        end_allocated_bytes: 34_754_048,
        end_reserved_bytes: 37_748_736,
        peak_allocated_bytes: 34_787_328,
        peak_reserved_bytes: 37_748_736,
    })
    .unwrap();
    let mut reply: Value =
        serde_json::from_str(&measurement(0, 1, 40e-6, 150_109_880_320)).unwrap();
    reply["measurement"]["graph"] = json!({
        "memory_pool": "private", "capture_warmup_forwards": 3, "replays": 100, "batches": 5,
        "batch_gpu_seconds_per_forward": [7.6e-6, 7.5e-6, 7.7e-6, 7.6e-6, 7.6e-6],
        "median_gpu_seconds_per_forward": 7.6e-6, "min_gpu_seconds_per_forward": 7.5e-6,
        "max_gpu_seconds_per_forward": 7.7e-6, "synchronised_wall_seconds_median": 14e-6,
        "synchronised_wall_seconds_min": 13e-6, "synchronised_wall_seconds_max": 30e-6,
        "capture_wall_seconds": 0.05, "capture": counters, "replay": counters
    });
    let worker = fake_fleet(dir.path(), 1, &[(0, reply.to_string())]);
    let file = dir.path().join("g.json");
    let base = |replays: &str, out: &Path| {
        let mut command = lab();
        command.args([
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            "1",
            "--context",
            "16",
        ]);
        command.args(["--width", "64", "--graph-replays", replays, "--output"]);
        command.arg(out).arg("--worker").arg(&worker);
        command
    };
    for bad in ["0", "-1", "1000001", "x", "2.5", ""] {
        let output = base(bad, &file).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("--graph-replays"),
            "{bad}"
        );
        assert!(!file.exists());
    }
    let output = base("100", &file).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("median 7.60 µs per forward"), "{stdout}");
    assert!(
        stdout.contains("launch overhead 32.40 µs per forward"),
        "{stdout}"
    );
    let document = lab::document::parse(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(document.graph.unwrap().replays, 100);
    // An inconsistent graph from the worker is refused, and nothing is written.
    reply["measurement"]["graph"]["min_gpu_seconds_per_forward"] = json!(1.0);
    let worker = fake_fleet(dir.path(), 1, &[(0, reply.to_string())]);
    let other = dir.path().join("h.json");
    let mut command = lab();
    command.args([
        "measure",
        "--device",
        "cuda:0",
        "--batch",
        "1",
        "--context",
        "16",
    ]);
    command.args(["--width", "64", "--graph-replays", "100", "--output"]);
    let output = command
        .arg(&other)
        .arg("--worker")
        .arg(&worker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("min ≤ median ≤ max"));
    assert!(!other.exists());
}
