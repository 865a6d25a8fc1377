//! What the CLI tests share: the `lab` command and the [`Lab`] builder that runs it and checks
//! its outcome, usage-error and JSON helpers on top of it, a fake torch worker that speaks the
//! worker's JSON protocol, and its replies built from lab's types ([`fake`]).

#![allow(dead_code)] // Each test module uses its own part.

pub mod fake;
mod run;

pub use run::Lab;

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// The `lab` binary under test, never picking up a real worker or libtorch from the
/// developer's environment.
pub fn lab() -> Command {
    let mut command = Command::cargo_bin("lab").unwrap();
    command
        .env_remove("LAB_TORCH_WORKER")
        .env_remove("LIBTORCH");
    command
}

/// Path of the `lab` binary under test.
pub fn lab_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("lab")
}

/// Runs `args`: exit 2, nothing on stdout, exactly one stderr line starting `lab: error: `,
/// with no control character, containing `needle`. Returns that line.
pub fn usage_error(args: &[&str], needle: &str) -> String {
    Lab::new(args).refused(2, needle)
}

/// Checks the `output` of a refused run: exit `code`, nothing on stdout, exactly one stderr
/// line containing `needle`.
pub fn assert_refused(output: &std::process::Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(output.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(needle), "expected '{needle}' in {stderr}");
}

/// Runs `args`, expects success, and parses stdout as one JSON value.
pub fn json(args: &[&str]) -> serde_json::Value {
    Lab::new(args).json()
}

/// The repository's root (the parent of `lab/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fake torch worker in `dir`: a shell script that reads its request, prints `stderr` on
/// standard error and `stdout` on standard output, and exits `code`.
pub fn fake_worker(dir: &Path, name: &str, stderr: &str, stdout: &str, code: i32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\nprintf '%s' '{}' >&2\nprintf '%s\\n' '{}'\nexit {code}\n",
        stderr.replace('\'', ""),
        stdout.replace('\'', "")
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A worker answer to a measurement of batch 1, context 16, width 64, warm-up 1, repeats 2 (six
/// phase rows), on a fake GPU of 150109880320 bytes.
pub fn fake_measurement() -> String {
    fake::measurement(
        fake::environment(0, 1, fake::FAKE_GPU_BYTES),
        fake::phases(0.0001, 0.00005),
    )
}

/// A kit of small fake files with its manifest, packed in path order with the layout
/// `cargo xtask dist` writes (Unix, 0644, deflate; the release writer itself lives in xtask).
pub fn good_kit(dir: &Path) -> PathBuf {
    use std::io::Write as _;
    let files: Vec<(&str, Vec<u8>)> = lab::kit::MEMBERS
        .iter()
        .filter(|n| **n != lab::kit::MANIFEST_NAME)
        .map(|n| (*n, format!("content of {n}\n").into_bytes()))
        .collect();
    let manifest =
        lab::kit::Manifest::describe(files.iter().map(|(n, b)| (*n, b.as_slice()))).to_bytes();
    let path = dir.join("iteragpu-lab-v1.zip");
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644)
        .system(zip::System::Unix);
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    for name in lab::kit::MEMBERS {
        let bytes = files
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(manifest.as_slice(), |(_, b)| b.as_slice());
        writer
            .start_file(lab::kit::member_path(name), options)
            .unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap();
    path
}
