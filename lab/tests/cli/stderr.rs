//! Standard error that cannot be written (`lab ... 2>/dev/full`): the message is lost, but
//! the exit code stays the command's own (2 for bad input, 1 for a failure, 0 for success),
//! never the panic code 101 that `eprintln!` gives. Run for a refusal of every subcommand,
//! for usage errors, and for every subcommand's success (some write progress or notes there).

use super::stdout::{invocation, names};
use super::support::{fake_measurement, fake_worker, lab_path, repo_root};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A refusal of `name` (a subcommand) and its exit code, every file it would write placed in
/// the fresh folder `dir`.
fn refusal(name: &str, dir: &Path) -> (Vec<String>, i32) {
    let path = |p: &Path| p.display().to_string();
    let existing = dir.join("existing.json");
    std::fs::write(&existing, "{}").unwrap();
    let missing = path(&dir.join("missing"));
    let (args, code): (Vec<String>, i32) = match name {
        "estimate" => (
            vec!["estimate", "--parameters", "0", "--bits", "16"]
                .into_iter()
                .map(String::from)
                .collect(),
            2,
        ),
        // A diagnostic: it exits 0 whatever it finds; only a bad flag is refused.
        "environment" => (vec!["environment".into(), "--no-such-flag".into()], 2),
        "measure" => {
            let worker = fake_worker(dir, "worker", "", &fake_measurement(), 0);
            let mut args: Vec<String> = [
                "measure",
                "--device",
                "cuda:0",
                "--width",
                "64",
                "--batch",
                "1",
                "--context",
                "16",
            ]
            .map(String::from)
            .to_vec();
            // The output exists already: refused before anything runs.
            args.extend(["--output".into(), path(&existing)]);
            args.extend(["--worker".into(), path(&worker)]);
            (args, 2)
        }
        "price" => (
            ["price", "--gpu", "nope", "--days", "7", "--lots", "1"]
                .map(String::from)
                .to_vec(),
            2,
        ),
        "tariffs" => (vec!["tariffs".into(), "--tariffs".into(), missing], 1),
        "plan" => (vec!["plan".into(), "--model".into(), missing], 1),
        "compare" => (
            vec![
                "compare".into(),
                "--gpus".into(),
                "4".into(),
                "--days".into(),
                "7".into(),
                "--tariffs".into(),
                missing,
            ],
            1,
        ),
        "sweep" => {
            let args: Vec<String> = [
                "sweep",
                "--device",
                "cuda:0",
                "--vary",
                "width",
                "--from",
                "64",
                "--to",
                "64",
                "--batch",
                "1",
                "--context",
                "16",
            ]
            .into_iter()
            .map(String::from)
            .chain(["--output-dir".into(), path(&dir.join("sweep"))])
            .chain(["--worker".into(), missing])
            .collect();
            (args, 2)
        }
        "report" => (vec!["report".into(), missing], 1),
        "record" => (
            vec![
                "record".into(),
                "--results".into(),
                missing,
                "--gpu".into(),
                "b200".into(),
                "--days".into(),
                "7".into(),
                "--lots".into(),
                "1".into(),
                "--outcome".into(),
                "failed".into(),
            ],
            1,
        ),
        "results" => (vec!["results".into(), "--results".into(), missing], 1),
        "verify-kit" => (vec!["verify-kit".into(), missing], 1),
        "completions" => (vec!["completions".into(), "no-such-shell".into()], 2),
        other => panic!(
            "no refusal for `lab {other}` in lab/tests/cli/stderr.rs: add one (and its exit code)"
        ),
    };
    (args, code)
}

fn run(args: &[String], stderr: Stdio) -> Output {
    Command::new(lab_path())
        .args(args)
        .env_remove("LAB_TORCH_WORKER")
        .env_remove("LIBTORCH")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .output()
        .unwrap()
}

fn full_disk() -> Stdio {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into()
}

/// Runs the command `make` gives for a fresh folder twice: with a readable stderr (to check
/// the case: exit `code`, and for a refusal one `lab: error:` line), then with stderr on
/// /dev/full: the same exit code.
fn check(make: impl Fn(&Path) -> Vec<String>, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    let args = make(dir.path());
    let output = run(&args, Stdio::piped());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    if code != 0 {
        assert!(stderr.starts_with("lab: error: "), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let args = make(dir.path());
    let output = run(&args, full_disk());
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?} with stderr on /dev/full"
    );
}

/// `args` as they are, whatever the folder.
fn fixed(args: &[&str]) -> impl Fn(&Path) -> Vec<String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    move |_| args.clone()
}

#[test]
fn every_refusal_keeps_its_exit_code_when_stderr_is_full() {
    let names: Vec<String> = names()
        .into_iter()
        .filter(|n| !n.starts_with('-'))
        .collect();
    assert!(names.len() >= 12, "{names:?}");
    for name in &names {
        let code = refusal(name, tempfile::tempdir().unwrap().path()).1;
        check(|dir| refusal(name, dir).0, code);
        // A usage error caught by the argument parser takes the other path to stderr.
        check(fixed(&[name, "--no-such-flag"]), 2);
    }
    check(fixed(&["no-such-command"]), 2);
    // `lab` alone prints its help on stderr as a usage error.
    let output = run(&[], full_disk());
    assert_eq!(output.status.code(), Some(2));
}

/// A model folder without config.json and a bad flag value are bad input (exit 2), a missing
/// path a failed read (exit 1), whether stderr can be written or not.
#[test]
fn plan_refusals_keep_their_exit_codes_when_stderr_is_full() {
    check(
        |dir| vec!["plan".into(), "--model".into(), dir.display().to_string()],
        2,
    );
    let model = repo_root().join("examples/models/llama-3.2-1b");
    let model = model.display().to_string();
    check(fixed(&["plan", "--model", &model, "--bits", "0"]), 2);
    // A missing path is a failed read, as for --tariffs.
    check(fixed(&["plan", "--model", "/nonexistent/model"]), 1);
}

/// Success stays success: every subcommand's successful run (a sweep logs its points on
/// stderr, `report --svg` names its chart there) exits 0 with stderr full.
#[test]
fn every_success_stays_exit_0_when_stderr_is_full() {
    for name in names() {
        check(|dir| invocation(&name, dir), 0);
    }
    let report = repo_root().join("examples/h200/python-small-float32.json");
    check(
        |dir| {
            vec![
                "report".into(),
                report.display().to_string(),
                "--svg".into(),
                dir.join("chart.svg").display().to_string(),
            ]
        },
        0,
    );
}
