//! Every way `lab` prints, with standard output closed early or full: a closed pipe (the
//! reader went away, `lab tariffs | head -1`) is a quiet end, exit 0, nothing on stderr but
//! what the command says anyway; a full disk (`> /dev/full`) is exit 1 with one line
//! `lab: error: cannot write to standard output: ...`. Run for `--help`, `--version` and every
//! subcommand, each in a form that succeeds without a GPU (fake worker where one is needed).

use super::support::{fake_measurement, fake_worker, good_kit, lab_path, repo_root};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Arguments of a successful run of `name` (a subcommand, or `--help`/`--version`), with
/// every file it writes placed in the fresh folder `dir`.
pub fn invocation(name: &str, dir: &Path) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    let worker = || path(&fake_worker(dir, "worker", "", &fake_measurement(), 0));
    let small = ["--batch", "1", "--context", "16", "--repeats", "2"];
    let mut args: Vec<String> = match name {
        "--help" | "--version" => vec![name.into()],
        "estimate" => vec!["estimate", "--parameters", "7000000000", "--bits", "16"]
            .into_iter()
            .map(String::from)
            .collect(),
        "environment" => vec!["environment".into(), "--device".into(), "cuda:0".into()],
        "measure" => {
            let mut args: Vec<String> = ["measure", "--device", "cuda:0", "--width", "64"]
                .into_iter()
                .chain(small)
                .map(String::from)
                .collect();
            args.extend(["--output".into(), path(&dir.join("m.json"))]);
            args.extend(["--worker".into(), worker()]);
            args
        }
        "price" => ["price", "--gpu", "b200", "--days", "7", "--lots", "2"]
            .map(String::from)
            .to_vec(),
        "tariffs" => vec!["tariffs".into()],
        "plan" => vec![
            "plan".into(),
            "--model".into(),
            path(&repo_root().join("examples/models/llama-3.1-8b")),
        ],
        "compare" => ["compare", "--gpus", "4", "--days", "7"]
            .map(String::from)
            .to_vec(),
        "sweep" => {
            let mut args: Vec<String> = [
                "sweep", "--device", "cuda:0", "--vary", "width", "--from", "64", "--to", "64",
            ]
            .into_iter()
            .chain(small)
            .map(String::from)
            .collect();
            args.extend(["--output-dir".into(), path(&dir.join("sweep"))]);
            args.extend(["--worker".into(), worker()]);
            args
        }
        "report" => vec![
            "report".into(),
            path(&repo_root().join("examples/h200/python-small-float32.json")),
        ],
        "record" => {
            let grid = dir.join("resultats-bruts.csv");
            std::fs::copy(repo_root().join("dist/resultats-bruts.csv"), &grid).unwrap();
            let mut args = vec!["record".into(), "--results".into(), path(&grid)];
            args.extend(
                [
                    "--gpu",
                    "b200",
                    "--days",
                    "7",
                    "--lots",
                    "1",
                    "--outcome",
                    "failed",
                    "--date-utc",
                    "2026-10-02T14:05:00Z",
                ]
                .map(String::from),
            );
            args
        }
        "results" => {
            let grid = dir.join("results-grid.csv");
            std::fs::copy(repo_root().join("dist/resultats-bruts.csv"), &grid).unwrap();
            vec!["results".into(), "--results".into(), path(&grid)]
        }
        "verify-kit" => vec!["verify-kit".into(), path(&good_kit(dir))],
        "completions" => vec!["completions".into(), "bash".into()],
        other => panic!(
            "no invocation for `lab {other}` in lab/tests/cli/stdout.rs: add one that succeeds \
             without a GPU"
        ),
    };
    args.shrink_to_fit();
    args
}

/// `--help`, `--version`, every subcommand, and every subcommand's `--help`.
pub fn names() -> Vec<String> {
    let mut names = vec!["--help".to_owned(), "--version".to_owned()];
    names.extend(
        lab::cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_owned()),
    );
    names
}

fn run(args: &[String], stdout: Stdio) -> Output {
    Command::new(lab_path())
        .args(args)
        .env_remove("LAB_TORCH_WORKER")
        .env_remove("LIBTORCH")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Standard output whose reader is already gone: every write fails with EPIPE.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer.into()
}

fn full_disk() -> Stdio {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into()
}

/// The `lab: error:` lines of `stderr` (a sweep also logs its points there).
fn error_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("lab: error:"))
        .collect()
}

fn check(name: &str, subcommand_help: bool) {
    let with_help = |mut args: Vec<String>| {
        if subcommand_help {
            args.truncate(1);
            args.push("--help".into());
        }
        args
    };
    // The case itself works and prints something.
    let dir = tempfile::tempdir().unwrap();
    let args = with_help(invocation(name, dir.path()));
    let output = run(&args, Stdio::piped());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
    assert!(!output.stdout.is_empty(), "{args:?} printed nothing");

    let dir = tempfile::tempdir().unwrap();
    let args = with_help(invocation(name, dir.path()));
    let output = run(&args, closed_pipe());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "closed pipe, {args:?}: {stderr}"
    );
    assert!(
        error_lines(&stderr).is_empty(),
        "closed pipe, {args:?}: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "closed pipe, {args:?}: {stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let args = with_help(invocation(name, dir.path()));
    let output = run(&args, full_disk());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "/dev/full, {args:?}: {stderr}"
    );
    assert_eq!(
        error_lines(&stderr),
        ["lab: error: cannot write to standard output: No space left on device (os error 28)"],
        "/dev/full, {args:?}: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "/dev/full, {args:?}: {stderr}"
    );
}

#[test]
fn every_command_ends_quietly_on_a_closed_pipe_and_fails_on_a_full_disk() {
    let names = names();
    assert!(names.len() >= 13, "{names:?}");
    for name in &names {
        check(name, false);
    }
}

#[test]
fn every_command_help_goes_through_the_same_path() {
    for name in names().iter().filter(|n| !n.starts_with('-')) {
        check(name, true);
    }
}

/// `lab` alone is a usage error: one line naming the commands, exit 2, whatever stdout is.
#[test]
fn lab_alone_is_a_usage_error_whatever_stdout_is() {
    for stdout in [closed_pipe(), full_disk()] {
        let output = run(&[], stdout);
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("lab: error: a command is required: estimate, environment,")
                && stderr.contains(" plan,"),
            "{stderr}"
        );
    }
}
