//! `lab sweep` through the binary, with a fake torch worker (a shell script speaking the
//! worker's JSON protocol, passed with `--worker`, as in `measure_guard.rs`) that answers with
//! its typed `out_of_memory` error above a width limit. Each point starts the worker afresh.

use super::support::lab;
use assert_cmd::Command;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::process::kill_lab_and_expect_worker_gone;

/// Writes the fake worker into `dir`. It appends the requested width to `$FAKE_DIR/calls`;
/// fits up to `$FAKE_LIMIT` (peak 1000 bytes per unit of width), answers `out_of_memory`
/// above; `FAKE_NO_GPU` answers `no_cuda_device`; `FAKE_CRASH_AT=w` dies without an answer
/// (`FAKE_CRASH_TEXT` on stderr); `FAKE_BAD_AT=w` answers rows without `warm_forward`;
/// `FAKE_SLOW_AT=w` sleeps 2 s first (touching `slow-started`), `FAKE_HANG_AT=w` 60 s (writing
/// its pid to `worker.pid`).
fn fake(dir: &Path) -> PathBuf {
    let script = dir.join("fake-worker");
    std::fs::write(
        &script,
        r#"#!/bin/sh
request=$(cat)
width=$(printf '%s' "$request" | sed -n 's/.*"width":\([0-9]*\).*/\1/p')
echo "$width" >> "$FAKE_DIR/calls"
if [ -n "$FAKE_NO_GPU" ]; then
  echo '{"error":{"kind":"no_cuda_device","message":"no CUDA device: libtorch 2.11.0 sees no GPU"}}'
  exit 0
fi
if [ -n "$FAKE_CRASH_AT" ] && [ "$width" = "$FAKE_CRASH_AT" ]; then
  echo "${FAKE_CRASH_TEXT:-the worker crashed}" >&2; exit 134
fi
if [ -n "$FAKE_SLOW_AT" ] && [ "$width" = "$FAKE_SLOW_AT" ]; then touch "$FAKE_DIR/slow-started"; sleep 2; fi
if [ -n "$FAKE_HANG_AT" ] && [ "$width" = "$FAKE_HANG_AT" ]; then echo $$ > "$FAKE_DIR/worker.pid"; exec sleep 60; fi
if [ "$width" -gt "$FAKE_LIMIT" ]; then
  echo "progress line" >&2
  echo '{"error":{"kind":"out_of_memory","message":"out of memory on cuda:0 during cold_forward (tried to allocate 2.00 GiB)"}}'
  exit 0
fi
row() { # phase repetition peak
  printf '{"phase":"%s","repetition":%s,"forward_passes":1,"wall_seconds":0.002,"gpu_seconds":0.001,"baseline_allocated_bytes":0,"baseline_reserved_bytes":0,"end_allocated_bytes":%s,"end_reserved_bytes":%s,"peak_allocated_bytes":%s,"peak_reserved_bytes":%s}' "$1" "$2" "$3" "$3" "$3" "$3"
}
peak=$((width * 1000))
last="$(row warm_forward 1 0),$(row warm_forward 2 0)"
if [ -n "$FAKE_BAD_AT" ] && [ "$width" = "$FAKE_BAD_AT" ]; then last="$(row warmup null 0)"; fi
printf '{"measurement":{"environment":{"torch_version":"2.11.0","cuda_build_version":"13.0","hip_build_version":null,"device_count":1,"device":{"index":0,"name":"NVIDIA H200","compute_capability":"9.0","total_memory_bytes":150109880320,"multiprocessor_count":132},"device_problem":null,"tf32_matmul_allowed":false},"phases":[%s,%s,%s,%s,%s]}}\n' \
  "$(row model_load null $peak)" "$(row inputs null 0)" "$(row cold_forward null 0)" "$(row warmup null 0)" "$last"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn sweep_cmd(dir: &Path, out: &Path, limit: u64, extra: &[&str]) -> Command {
    let mut cmd = lab();
    cmd.env("FAKE_DIR", dir)
        .env("FAKE_LIMIT", limit.to_string())
        .arg("sweep")
        .args(["--device", "cuda:0", "--vary", "width"])
        .arg("--worker")
        .arg(fake(dir))
        .arg("--output-dir")
        .arg(out)
        .args(extra);
    cmd
}

fn calls(dir: &Path) -> Vec<u64> {
    std::fs::read_to_string(dir.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

#[test]
fn doubles_then_bisects_and_writes_every_point() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(dir.path(), &out, 1000, &["--from", "64", "--to", "100000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        calls(dir.path()),
        vec![64, 128, 256, 512, 1024, 768, 896, 960, 992, 1008, 1000, 1004, 1002, 1001]
    );
    assert!(
        stdout.contains("largest width that fitted: 1000"),
        "{stdout}"
    );
    assert!(!stdout.contains("STOPPED EARLY"), "{stdout}");
    assert!(
        stdout.contains("smallest width that ran out of memory: 1001"),
        "{stdout}"
    );
    // peak reserved 1000000 B of 150109880320 B
    assert!(
        stdout.contains("0.00 % of the device's 139.80 GiB"),
        "{stdout}"
    );
    for fitted in [64, 128, 256, 512, 768, 896, 960, 992, 1000] {
        assert!(
            out.join(format!("width-{fitted}.json")).is_file(),
            "{fitted}"
        );
    }
    for oom in [1024, 1008, 1004, 1002, 1001] {
        assert!(!out.join(format!("width-{oom}.json")).exists(), "{oom}");
    }
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines.len(), 15);
    assert!(lines[0].starts_with("step,dimension,value,batch,context,width,dtype,status,"));
    assert!(lines[1]
        .starts_with("1,width,64,1,16,64,float32,fitted,64000,64000,150109880320,0.000000,"));
    assert!(summary.contains(",1001,1,16,1001,float32,out_of_memory,"));
    assert!(summary.contains(
        "out of memory on cuda:0 during cold_forward (tried to allocate 2.00 GiB); no file was written"
    ));
    // every fitted point's file is a valid document naming its own width
    let document = lab::document::read(&out.join("width-1000.json")).unwrap();
    assert_eq!(document.document.configuration.width, 1000);
    assert_eq!(document.document.synthetic_model.width, 1000);
    assert_eq!(document.document.peak_reserved_bytes(), 1_000_000);
}

#[test]
fn json_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(
        dir.path(),
        &out,
        u64::MAX >> 1,
        &["--from", "100", "--to", "300", "--json"],
    )
    .output()
    .unwrap();
    assert!(output.status.success());
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["dimension"], "width");
    assert_eq!(v["end"], "completed");
    assert_eq!(v["limit_found"], true);
    assert_eq!(v["stopped_at"], Value::Null);
    assert_eq!(v["stop_reason"], Value::Null);
    assert_eq!(v["bounds"]["from"], 100);
    assert_eq!(v["bounds"]["to"], 300);
    // the varied dimension is not a fixed flag: null, its range is `bounds`
    assert_eq!(v["flags"]["width"], Value::Null);
    assert_eq!(v["flags"]["batch"], 1);
    assert_eq!(v["flags"]["context"], 16);
    assert_eq!(v["flags"]["dtype"], "float32");
    assert_eq!(v["flags"]["seed"], 0);
    assert_eq!(v["largest_fitted"]["value"], 300);
    assert_eq!(v["largest_fitted"]["peak_reserved_bytes"], 300_000);
    assert_eq!(
        v["largest_fitted"]["total_memory_bytes"],
        150_109_880_320u64
    );
    assert_eq!(v["largest_fitted"]["peak_reserved_share"], "0.000002");
    assert_eq!(v["smallest_out_of_memory"], Value::Null);
    assert_eq!(v["points"].as_array().unwrap().len(), 3);
    assert_eq!(v["points"][0]["status"], "fitted");
    assert_eq!(calls(dir.path()), vec![100, 200, 300]);
}

#[test]
fn existing_output_dir_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "mine").unwrap();
    let output = sweep_cmd(dir.path(), &out, 1000, &["--from", "64", "--to", "128"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1);
    assert!(calls(dir.path()).is_empty());
    assert_eq!(
        std::fs::read_to_string(out.join("keep.txt")).unwrap(),
        "mine"
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

#[test]
fn bad_input_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    for (args, needle) in [
        (&["--from", "0", "--to", "8"][..], "--from"),
        (
            &["--from", "16", "--to", "8"][..],
            "--to (8) must be at least --from (16)",
        ),
        (&["--from", "1.5", "--to", "8"][..], "--from"),
        (
            &["--from", "1", "--to", "8", "--resolution", "0"][..],
            "--resolution",
        ),
        (
            &["--from", "1", "--to", "8", "--width", "64"][..],
            "--width is the varied dimension",
        ),
        (
            &["--from", "1", "--to", "8", "--dtype", "int8"][..],
            "--dtype",
        ),
        (
            &["--from", "1", "--to", "8", "--warmup", "-1"][..],
            "--warmup",
        ),
        (
            &["--from", "1", "--to", "8", "--repeats", "0"][..],
            "--repeats",
        ),
    ] {
        let output = sweep_cmd(dir.path(), &out, 1000, args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} created the folder");
    }
    assert!(calls(dir.path()).is_empty());
}

#[test]
fn missing_prerequisite_is_exit_2_and_leaves_no_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(dir.path(), &out, 1000, &["--from", "64", "--to", "128"])
        .env("FAKE_NO_GPU", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no CUDA device: libtorch 2.11.0 sees no GPU; nothing was measured"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!out.exists());
}

#[test]
fn a_missing_worker_is_exit_2_before_anything_runs() {
    // The worker is looked for before the folder is made (after the folder is checked): exit
    // 2, one line, no folder.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = lab()
        .env("PATH", "/nonexistent")
        .env_remove("LAB_TORCH_WORKER")
        .args([
            "sweep", "--device", "cuda:0", "--vary", "batch", "--from", "1", "--to", "4",
        ])
        .arg("--worker")
        .arg(dir.path().join("no-such-worker"))
        .arg("--output-dir")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("is not installed"), "{stderr}");
    assert!(!out.exists());
}

/// How a point whose worker died without an answer is reported.
const CRASH: &str = "width=256: the GPU worker ended without an answer (exit status: 134; the worker crashed); no file was written";

#[test]
fn a_crash_stops_the_sweep_and_keeps_finished_points() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(dir.path(), &out, 1000, &["--from", "64", "--to", "4096"])
        .env("FAKE_CRASH_AT", "256")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the worker crashed"), "{stderr}");
    assert!(stderr.contains("2 finished points are kept"), "{stderr}");
    assert!(stderr.contains("before the limit was found"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("sweep STOPPED EARLY ({CRASH}): the search did not finish, the width limit was NOT found")),
        "{stdout}"
    );
    assert!(
        stdout.contains("largest width that fitted before the stop (NOT the limit): 128"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "no point ran out of memory before the stop (the sweep did not reach --to 4096)"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("largest width that fitted:"), "{stdout}");
    assert!(!stdout.contains("up to --to"), "{stdout}");
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines.len(), 4, "{summary}");
    assert!(lines[0].ends_with(",message,sweep_end"), "{summary}");
    assert!(lines[1].ends_with(",failed"), "{summary}");
    assert!(lines[2].ends_with(",failed"), "{summary}");
    assert_eq!(
        lines[3],
        format!("3,width,256,1,16,256,float32,failed,,,,,,,,{CRASH},failed")
    );
}

#[test]
fn json_of_a_failed_sweep_says_the_limit_was_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(
        dir.path(),
        &out,
        1000,
        &["--from", "64", "--to", "4096", "--json"],
    )
    .env("FAKE_CRASH_AT", "256")
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["end"], "failed");
    assert_eq!(v["limit_found"], false);
    assert_eq!(v["stopped_at"], 256);
    assert_eq!(v["stop_reason"], CRASH);
    assert_eq!(v["largest_fitted"]["value"], 128);
    assert_eq!(v["points"].as_array().unwrap().len(), 2);
}

#[test]
fn out_of_memory_is_the_worker_s_kind_not_its_words() {
    // A worker that dies printing "out of memory" on stderr gave no typed answer: the sweep
    // stops on a failure, it does not take the point as the memory limit.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(dir.path(), &out, 100_000, &["--from", "64", "--to", "4096"])
        .env("FAKE_CRASH_AT", "256")
        .env(
            "FAKE_CRASH_TEXT",
            "CUDA out of memory. Tried to allocate 2.00 GiB",
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("before the limit was found"), "{stderr}");
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(!summary.contains(",out_of_memory,"), "{summary}");
    assert!(summary
        .lines()
        .last()
        .unwrap()
        .starts_with("3,width,256,1,16,256,float32,failed,"));
}

#[test]
fn worker_rows_that_are_not_a_measurement_stop_the_sweep() {
    // The fake answers width 256 without its warm_forward rows.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(dir.path(), &out, 100_000, &["--from", "64", "--to", "4096"])
        .env("FAKE_BAD_AT", "256")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // progress lines, then one error line
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(
            "width=256: the GPU worker's rows are not a valid measurement (no `warm_forward` \
             phase row); no file was written (the 2 finished points are kept in"
        ),
        "{stderr}"
    );
    assert_eq!(calls(dir.path()), vec![64, 128, 256]);
    assert!(!out.join("width-256.json").exists());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("width limit was NOT found"), "{stdout}");
}

#[test]
fn summary_csv_follows_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    for (umask, mode) in [("022", 0o644), ("027", 0o640), ("077", 0o600)] {
        let out = dir.path().join(format!("sweep-{umask}"));
        let lab = assert_cmd::cargo::cargo_bin("lab");
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
            .arg(&lab)
            .args([
                "sweep", "--device", "cuda:0", "--vary", "width", "--from", "64", "--to", "128",
            ])
            .arg("--worker")
            .arg(fake(dir.path()))
            .arg("--output-dir")
            .arg(&out)
            .env("FAKE_DIR", dir.path())
            .env("FAKE_LIMIT", "100000")
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let summary = std::fs::metadata(out.join("summary.csv")).unwrap();
        assert_eq!(summary.permissions().mode() & 0o777, mode, "umask {umask}");
    }
}

#[test]
fn first_point_out_of_memory_means_nothing_fitted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = sweep_cmd(dir.path(), &out, 10, &["--from", "64", "--to", "4096"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(
        stdout.contains("no width fitted (not even --from 64)"),
        "{stdout}"
    );
    assert_eq!(calls(dir.path()), vec![64]);
    assert!(out.join("summary.csv").is_file());
}

/// Starts `lab sweep` of width 64..4096 with the fake worker in `dir` (limit 100000), whose
/// behaviour at one point is set by `fake_at` (`FAKE_SLOW_AT` or `FAKE_HANG_AT`); the output
/// streams are piped when `capture`, else discarded.
fn spawn_width_sweep(
    dir: &std::path::Path,
    out: &std::path::Path,
    fake_at: (&str, &str),
    capture: bool,
) -> std::process::Child {
    let stream = || {
        if capture {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        }
    };
    std::process::Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .env("FAKE_DIR", dir)
        .env("FAKE_LIMIT", "100000")
        .env(fake_at.0, fake_at.1)
        .args([
            "sweep", "--device", "cuda:0", "--vary", "width", "--from", "64", "--to", "4096",
        ])
        .arg("--worker")
        .arg(fake(dir))
        .arg("--output-dir")
        .arg(out)
        .stdout(stream())
        .stderr(stream())
        .spawn()
        .unwrap()
}

#[test]
fn sigint_stops_cleanly_and_keeps_finished_points() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let child = spawn_width_sweep(dir.path(), &out, ("FAKE_SLOW_AT", "256"), true);
    let started = dir.path().join("slow-started");
    for _ in 0..200 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(started.exists(), "the slow point never started");
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted by Ctrl-C"), "{stderr}");
    // the point running at the signal finished (the fake ignores it) and is kept; no new one
    assert_eq!(calls(dir.path()), vec![64, 128, 256]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("sweep STOPPED EARLY (interrupted by Ctrl-C): the search did not finish, the width limit was NOT found"),
        "{stdout}"
    );
    assert!(
        stdout.contains("largest width that fitted before the stop (NOT the limit): 256"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "no point ran out of memory before the stop (the sweep did not reach --to 4096)"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("up to --to"), "{stdout}");
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert_eq!(summary.lines().count(), 4, "{summary}");
    assert!(
        summary.lines().skip(1).all(|l| l.ends_with(",interrupted")),
        "{summary}"
    );
    assert!(out.join("width-256.json").is_file());
}

#[test]
fn the_worker_never_outlives_lab_sweep() {
    // The point of width 128 hangs in its worker; `lab sweep` is killed with SIGKILL: the
    // worker must end too (parent-death signal), as under `lab measure`.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let mut child = spawn_width_sweep(dir.path(), &out, ("FAKE_HANG_AT", "128"), false);
    let pid_file = dir.path().join("worker.pid");
    kill_lab_and_expect_worker_gone(&mut child, &pid_file, "lab sweep");
    assert_eq!(calls(dir.path()), vec![64, 128]);
}

/// The order of checks is `lab measure`'s: the user's own arguments (flags, then the output
/// path) before the environment (the worker, its GPUs). With a missing worker and a bad
/// `--output-dir` of any kind (one that exists, one whose parent folder is missing, an
/// existing file), the folder is what is reported, exit 2, one line, nothing created or
/// touched; a bad flag still comes before both.
#[test]
fn a_bad_output_dir_is_reported_before_a_missing_worker() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(existing.join("keep.txt"), "mine").unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let orphan = dir.path().join("no-such-parent").join("sweep");
    let run = |out: &Path, extra: &[&str]| {
        lab()
            .env("PATH", "/nonexistent")
            .env_remove("LAB_TORCH_WORKER")
            .args(["sweep", "--device", "cuda:0", "--vary", "batch"])
            .args(["--from", "1", "--to", "4"])
            .args(extra)
            .arg("--worker")
            .arg(dir.path().join("no-such-worker"))
            .arg("--output-dir")
            .arg(out)
            .output()
            .unwrap()
    };
    for (out, needle) in [
        (&existing, "already exists"),
        (&file, "already exists"),
        (&orphan, "does not exist: create it first"),
    ] {
        let output = run(out, &[]);
        super::support::assert_refused(&output, 2, needle);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("not installed"), "{stderr}");
    }
    assert_eq!(std::fs::read_dir(&existing).unwrap().count(), 1);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    assert!(!orphan.parent().unwrap().exists());
    // A bad flag first, whatever the folder and the worker.
    let output = run(&existing, &["--repeats", "0"]);
    super::support::assert_refused(&output, 2, "--repeats");
}
