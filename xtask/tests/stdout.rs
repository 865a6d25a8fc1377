//! Every `cargo xtask` command that prints, with standard output closed early or full: a
//! closed pipe is a quiet end (exit 0), a full disk exit 1 with one line
//! `xtask: error: cannot write to standard output: ...` (all through `lab::stdout`). The
//! long commands (`verify` without `--archive`, `worker`) print through the same function;
//! they are left to CI. Standard error on /dev/full keeps every exit code as it is.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The real kit, built by `cargo xtask dist` from the repository's sources into `dir/kit`.
fn good_kit(dir: &Path) -> String {
    let out = dir.join("kit");
    let status = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["dist", "--out-dir"])
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "xtask dist failed");
    out.join("iteragpu-lab-v1.zip").display().to_string()
}

/// Arguments of a successful run of each case, writing only under `dir`.
fn cases(dir: &Path) -> Vec<Vec<String>> {
    let out = |name: &str| dir.join(name).display().to_string();
    vec![
        vec!["--help".into()],
        vec!["dist".into(), "--help".into()],
        vec!["dist".into(), "--out-dir".into(), out("dist")],
        vec!["verify".into(), "--archive".into(), good_kit(dir)],
        vec!["man".into(), "--out-dir".into(), out("man")],
    ]
}

fn run(args: &[String], stdout: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn xtask_ends_quietly_on_a_closed_pipe_and_fails_on_a_full_disk() {
    for index in 0..cases(tempfile::tempdir().unwrap().path()).len() {
        let dir = tempfile::tempdir().unwrap();
        let args = &cases(dir.path())[index];
        let output = run(args, Stdio::piped());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!output.stdout.is_empty(), "{args:?} printed nothing");

        let dir = tempfile::tempdir().unwrap();
        let args = &cases(dir.path())[index];
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = run(args, writer.into());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(0),
            "closed pipe, {args:?}: {stderr}"
        );
        assert!(!stderr.contains("error"), "closed pipe, {args:?}: {stderr}");
        assert!(
            !stderr.contains("panicked"),
            "closed pipe, {args:?}: {stderr}"
        );

        let dir = tempfile::tempdir().unwrap();
        let args = &cases(dir.path())[index];
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let output = run(args, full.into());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "/dev/full, {args:?}: {stderr}"
        );
        assert_eq!(
            stderr.trim_end(),
            "xtask: error: cannot write to standard output: No space left on device (os error 28)",
            "/dev/full, {args:?}"
        );
    }
}

/// Standard error that cannot be written (`2>/dev/full`): the message is lost, the exit code
/// stays the command's own (never the panic code 101 of `eprintln!`), for refusals and for a
/// success that reports on stderr.
#[test]
fn xtask_keeps_its_exit_code_when_stderr_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let path = |p: &Path| p.display().to_string();
    let cases: Vec<(Vec<String>, i32)> = vec![
        // A folder where the archive is expected: bad input.
        (
            vec!["verify".into(), "--archive".into(), path(dir.path())],
            2,
        ),
        // A missing archive: a failed read.
        (
            vec![
                "verify".into(),
                "--archive".into(),
                path(&dir.path().join("missing.zip")),
            ],
            1,
        ),
        // An output folder that is a file: the command fails.
        (vec!["man".into(), "--out-dir".into(), path(&file)], 1),
        (vec!["no-such-command".into()], 2),
        // Success, with its note on stderr.
        (vec!["notebook".into(), "--check".into()], 0),
    ];
    let full = || -> Stdio {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
            .into()
    };
    for (args, code) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(!stderr.is_empty(), "{args:?} said nothing on stderr");
        let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(full())
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?} with stderr on /dev/full"
        );
    }
}
