//! `lab measure` and `lab environment` guards through the binary, without a GPU or libtorch:
//! flag validation, refusal to overwrite, a missing worker, a worker whose libtorch cannot
//! load, a worker that reports no GPU or an out-of-memory failure (exit codes, one-line
//! messages, no file), and the document written from a worker's answer (valid against
//! `lab/schema/measurement.schema.json`). The fake workers are small shell scripts that speak
//! the worker's JSON protocol.

use super::process::kill_lab_and_expect_worker_gone;
use super::support::{fake, fake_measurement, fake_worker, lab};
use lab::worker::WorkerErrorKind;
use std::path::{Path, PathBuf};

const SMALL: [&str; 8] = [
    "--batch",
    "1",
    "--context",
    "16",
    "--width",
    "64",
    "--repeats",
    "2",
];

fn measure_args(device: &str, output: &Path, worker: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["measure".into(), "--device".into(), device.into()];
    args.extend(SMALL.iter().map(|s| s.to_string()));
    args.extend(["--output".into(), output.display().to_string()]);
    args.extend(["--worker".into(), worker.display().to_string()]);
    args
}

/// `args` with `flag`'s value replaced (or the flag added).
fn with_flag(mut args: Vec<String>, flag: &str, value: &str) -> Vec<String> {
    match args.iter().position(|a| a == flag) {
        Some(i) => args[i + 1] = value.to_owned(),
        None => args.extend([flag.to_owned(), value.to_owned()]),
    }
    args
}

/// Runs and checks: exit `code`, exactly one stderr line containing `needle`, nothing on stdout.
fn fails(args: &[String], code: i32, needle: &str) -> String {
    let output = lab().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(
        output.stdout.is_empty(),
        "{args:?} printed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("lab: error: "), "{stderr}");
    assert!(
        stderr.to_lowercase().contains(&needle.to_lowercase()),
        "'{needle}' not in {stderr}"
    );
    stderr
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn no_worker_exit_2_and_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let missing = dir.path().join("lab-torch-worker");
    let stderr = fails(&measure_args("cuda:0", &out, &missing), 2, "not installed");
    assert!(stderr.contains("cargo xtask worker"), "{stderr}");
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn no_worker_via_environment_variable_and_next_to_lab() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let mut args: Vec<String> = vec!["measure".into(), "--device".into(), "cuda:0".into()];
    args.extend(SMALL.iter().map(|s| s.to_string()));
    args.extend(["--output".into(), out.display().to_string()]);
    let output = lab()
        .env("LAB_TORCH_WORKER", dir.path().join("nope"))
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("LAB_TORCH_WORKER"));
    // Default place: next to the `lab` test binary, where the default build has no worker.
    let output = lab().args(&args).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(files_in(dir.path()).is_empty());
}

#[test]
fn non_gpu_devices_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    // A worker that would succeed: the device check must come first.
    let worker = fake_worker(dir.path(), "w", "", "{}", 0);
    for (device, needle) in [
        ("cpu", "never falls back"),
        ("mps", "not supported"),
        ("cuda", "explicitly"),
        ("cuda:x", "cuda:N"),
        ("gpu0", "cuda:N"),
    ] {
        fails(&measure_args(device, &out, &worker), 2, needle);
    }
    assert!(!out.exists());
}

#[test]
fn bad_numbers_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let worker = fake_worker(dir.path(), "w", "", "{}", 0);
    for (flag, value) in [
        ("--batch", "0"),
        ("--batch", "-1"),
        ("--context", "1.5"),
        ("--width", "abc"),
        ("--repeats", "0"),
        ("--warmup", "-2"),
        ("--seed", "-1"),
        ("--dtype", "float64"),
        ("--width", "99999999999999999999"),
    ] {
        let args = with_flag(measure_args("cuda:0", &out, &worker), flag, value);
        fails(&args, 2, flag.trim_start_matches('-'));
    }
    let huge = with_flag(
        measure_args("cuda:0", &out, &worker),
        "--batch",
        "4294967296",
    );
    let huge = with_flag(huge, "--context", "4294967296");
    fails(&huge, 2, "too large");
    assert!(!out.exists());
}

#[test]
fn existing_output_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let original = b"not mine to overwrite\n";
    std::fs::write(&out, original).unwrap();
    let worker = fake_worker(dir.path(), "w", "", "{}", 0);
    fails(&measure_args("cuda:0", &out, &worker), 2, "already exists");
    assert_eq!(std::fs::read(&out).unwrap(), original);
    let missing_folder = dir.path().join("no/such/folder/m.json");
    fails(
        &measure_args("cuda:0", &missing_folder, &worker),
        2,
        "does not exist",
    );
}

#[test]
fn libtorch_not_loadable_exit_2_naming_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let loader = "lab-torch-worker: error while loading shared libraries: libtorch_cuda.so: \
                  cannot open shared object file: No such file or directory";
    let worker = fake_worker(dir.path(), "w", loader, "", 127);
    let stderr = fails(&measure_args("cuda:0", &out, &worker), 2, "libtorch");
    assert!(stderr.contains("torch==2.11.0"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn no_gpu_and_bad_index_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let reply = fake::error(
        WorkerErrorKind::NoCudaDevice,
        "no CUDA device: libtorch 2.11.0 sees no GPU",
    );
    let worker = fake_worker(dir.path(), "w", "", &reply, 0);
    fails(&measure_args("cuda:0", &out, &worker), 2, "no CUDA device");
    let reply = fake::error(WorkerErrorKind::BadDeviceIndex, "cuda:5 does not exist");
    let worker = fake_worker(dir.path(), "w2", "", &reply, 0);
    fails(&measure_args("cuda:5", &out, &worker), 2, "does not exist");
    assert!(!out.exists());
}

#[test]
fn out_of_memory_exit_1_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let reply = fake::error(
        WorkerErrorKind::OutOfMemory,
        "out of memory on cuda:0 during cold_forward",
    );
    let worker = fake_worker(dir.path(), "w", "", &reply, 0);
    fails(&measure_args("cuda:0", &out, &worker), 1, "out of memory");
    // A worker killed without an answer is a runtime failure too.
    let worker = fake_worker(
        dir.path(),
        "w2",
        "terminate called: CUDA out of memory",
        "",
        134,
    );
    fails(&measure_args("cuda:0", &out, &worker), 1, "out of memory");
    let names: Vec<PathBuf> = files_in(dir.path());
    assert!(
        names
            .iter()
            .all(|p| p.file_name().unwrap().to_string_lossy().starts_with('w')),
        "{names:?}"
    );
}

#[test]
fn document_written_from_worker_answer_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let worker = fake_worker(dir.path(), "w", "", &fake_measurement(), 0);
    let output = lab()
        .args(measure_args("cuda:0", &out, &worker))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("predicted"), "{stdout}");
    assert!(stdout.contains("launch-bound"), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    let document: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(document["tool"]["implementation"], "rust");
    assert_eq!(document["phases"].as_array().unwrap().len(), 6);
    assert_eq!(document["synthetic_model"]["parameters"], 33_088);
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/measurement.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&document)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // Only the new file: no temporary left behind.
    let mut names: Vec<String> = files_in(dir.path())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["m.json", "w"]);
}

#[test]
fn environment_exits_0_and_says_not_available() {
    let dir = tempfile::tempdir().unwrap();
    let output = lab()
        .args(["environment", "--device", "cuda:0", "--worker"])
        .arg(dir.path().join("missing"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("not available"), "{text}");
    assert!(text.contains("Rust (build)"), "{text}");
    let loader =
        "error while loading shared libraries: libtorch_cpu.so: cannot open shared object file";
    let worker = fake_worker(dir.path(), "w", loader, "", 127);
    let output = lab()
        .args(["environment", "--device", "cuda:0", "--json", "--worker"])
        .arg(&worker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["libtorch_available"], false);
    // Unknown, not zero: the text says "not available" for it.
    assert_eq!(json["device_count"], serde_json::Value::Null);
    assert!(json["problems"][0].as_str().unwrap().contains("libtorch"));
    let output = lab()
        .args(["environment", "--device", "cpu"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn environment_requires_the_device() {
    // docs/PROTOCOL.md §4.5: the device is always named explicitly (as `mesure_memoire.py environment`).
    let output = lab()
        .args(["environment", "--json", "--worker", "/nonexistent"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(output.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--device"), "{stderr}");
}

/// `lab environment --device cuda:0 --worker <worker>` as text (exit 0 checked).
fn environment_text(worker: &Path) -> String {
    let output = lab()
        .args(["environment", "--device", "cuda:0", "--worker"])
        .arg(worker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn environment_names_a_folder_given_as_worker() {
    let dir = tempfile::tempdir().unwrap();
    let text = environment_text(dir.path());
    assert!(
        text.contains("is a folder, not the lab-torch-worker executable"),
        "{text}"
    );
    assert!(!text.contains("not found"), "{text}");
    // and `lab measure` says the same, exit 2
    let out = dir.path().join("m.json");
    fails(&measure_args("cuda:0", &out, dir.path()), 2, "is a folder");
    // a file that is not executable
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let text = environment_text(&plain);
    assert!(text.contains("not executable"), "{text}");
    assert!(!out.exists());
}

#[test]
fn worker_without_answer_is_not_blamed_on_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    // Prints nothing and exits 0, like /bin/true.
    let silent = fake_worker(dir.path(), "silent", "", "", 0);
    let text = environment_text(&silent);
    assert!(
        text.contains("libtorch                      not available (the torch worker gave no readable answer, see note)"),
        "{text}"
    );
    assert!(!text.contains("libtorch not loaded"), "{text}");
    assert!(
        text.contains("note: the GPU worker ended without an answer"),
        "{text}"
    );
    assert!(!text.contains("no file was written"), "{text}");
    // Prints broken JSON.
    let garbled = fake_worker(dir.path(), "garbled", "", r#"{"environment": 42"#, 0);
    let text = environment_text(&garbled);
    assert!(
        text.contains("the torch worker gave no readable answer"),
        "{text}"
    );
    assert!(
        text.contains("note: the GPU worker gave an unreadable answer"),
        "{text}"
    );
    let output = lab()
        .args(["environment", "--device", "cuda:0", "--json", "--worker"])
        .arg(&garbled)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["libtorch_available"], serde_json::Value::Null);
    assert_eq!(json["device_count"], serde_json::Value::Null);
    assert_eq!(json["worker"], garbled.display().to_string());
}

#[test]
fn measure_with_an_unreadable_answer_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let garbled = fake_worker(dir.path(), "w", "", r#"{"measurement": {"phases": 3}}"#, 0);
    let stderr = fails(
        &measure_args("cuda:0", &out, &garbled),
        1,
        "the GPU worker gave an unreadable answer",
    );
    assert!(!stderr.contains("ended without an answer"), "{stderr}");
    let chatty = fake_worker(dir.path(), "w2", "", "hello", 0);
    fails(
        &measure_args("cuda:0", &out, &chatty),
        1,
        "gave an unreadable answer (no JSON object)",
    );
    let silent = fake_worker(dir.path(), "w3", "", "", 0);
    fails(
        &measure_args("cuda:0", &out, &silent),
        1,
        "the GPU worker ended without an answer",
    );
    assert!(!out.exists());
}

#[test]
fn environment_of_a_non_gpu_device_still_shows_libtorch_but_no_device() {
    // The worker describes cuda:0; for `--device cpu` only libtorch's facts are kept.
    let dir = tempfile::tempdir().unwrap();
    let mut environment = fake::environment(0, 1, fake::FAKE_GPU_BYTES);
    environment.libtorch.torch_version = "2.11.0+cu130".into();
    if let Some(device) = environment.device.as_mut() {
        device.name = "NVIDIA H200".into();
    }
    let answer = fake::environment_reply(environment);
    let worker = fake_worker(dir.path(), "w", "", &answer, 0);
    let output = lab()
        .args(["environment", "--device", "cpu", "--json", "--worker"])
        .arg(&worker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["torch_version"], "2.11.0+cu130");
    assert_eq!(json["device_count"], 1);
    assert_eq!(json["device_available"], false);
    assert_eq!(json["device_info"], serde_json::Value::Null);
    assert!(json["problems"][0]
        .as_str()
        .unwrap()
        .contains("'cpu' is not a GPU"));
    let text = lab()
        .args(["environment", "--device", "cpu", "--worker"])
        .arg(&worker)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("device cpu                    not available (see note)"),
        "{text}"
    );
    assert!(!text.contains("NVIDIA H200"), "{text}");
}

#[test]
fn the_worker_never_outlives_lab() {
    // A worker that sleeps (as a long measurement would); `lab measure` is killed with
    // SIGKILL, which it cannot catch: the worker must end too (parent-death signal).
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let pid_file = dir.path().join("worker.pid");
    let worker = dir.path().join("sleepy");
    std::fs::write(
        &worker,
        format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 60\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut lab = std::process::Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .args(measure_args("cuda:0", &out, &worker))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    kill_lab_and_expect_worker_gone(&mut lab, &pid_file, "lab measure");
    assert!(!out.exists());
}
