//! `lab verify-kit` through the binary, on archives packed like `cargo xtask dist` packs them
//! (the tamper matrix of the layout rule is in `xtask/tests/kit.rs`, on the real writer).

use super::support::{good_kit, lab};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::Path;

/// Options of every member: the layout `cargo xtask dist` writes (Unix, 0644, deflate). The
/// release writer lives in xtask; the verifier accepts any deflate stream ("content-identical
/// re-packing"), so the zip crate's default level stands in for it here.
fn options() -> zip::write::SimpleFileOptions {
    zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644)
        .system(zip::System::Unix)
}

/// Copies `source` into `target`, with `change` applied to each (name, bytes) member; a
/// `None` drops the member.
fn rewrite(
    source: &Path,
    target: &Path,
    change: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>,
    extra: Option<(&str, &[u8])>,
) {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(source).unwrap()).unwrap();
    let mut writer = zip::ZipWriter::new(std::fs::File::create(target).unwrap());
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).unwrap();
        let name = entry.name().unwrap().to_string();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        if let Some(bytes) = change(&name, bytes) {
            writer.start_file(name, options()).unwrap();
            writer.write_all(&bytes).unwrap();
        }
    }
    if let Some((name, bytes)) = extra {
        writer.start_file(name, options()).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap();
}

#[test]
fn a_good_kit_passes() {
    let dir = tempfile::tempdir().unwrap();
    let archive = good_kit(dir.path());
    let output = lab().arg("verify-kit").arg(&archive).output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains(": sha256 "), "{stdout}");
    assert!(
        stdout.contains("ok, 9 members match MANIFEST.json"),
        "{stdout}"
    );

    let output = lab()
        .arg("verify-kit")
        .arg(&archive)
        .arg("--json")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["members_expected"], 9);
    assert_eq!(v["findings"].as_array().unwrap().len(), 0);
    assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn a_changed_member_is_named_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let good = good_kit(dir.path());
    let bad = dir.path().join("changed.zip");
    rewrite(
        &good,
        &bad,
        |name, bytes| {
            Some(if name.ends_with("/calcul_forfaits.py") {
                b"tampered\n".to_vec()
            } else {
                bytes
            })
        },
        None,
    );
    let output = lab().arg("verify-kit").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("calcul_forfaits.py"), "{stdout}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("failed the kit check: 2 problem(s)"),
        "{stderr}"
    );

    let output = lab()
        .arg("verify-kit")
        .arg(&bad)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["file"].as_str().unwrap().contains("calcul_forfaits.py")));
}

#[test]
fn a_tenth_or_missing_member_fails() {
    let dir = tempfile::tempdir().unwrap();
    let good = good_kit(dir.path());
    let tenth = dir.path().join("tenth.zip");
    rewrite(
        &good,
        &tenth,
        |_, b| Some(b),
        Some(("iteragpu-lab-v1/extra.txt", b"x")),
    );
    let output = lab().arg("verify-kit").arg(&tenth).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("extra.txt"));

    let missing = dir.path().join("missing.zip");
    rewrite(
        &good,
        &missing,
        |name, b| (!name.ends_with("/LICENSE.txt")).then_some(b),
        None,
    );
    let output = lab().arg("verify-kit").arg(&missing).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("LICENSE.txt"));
}

#[test]
fn not_a_zip_is_exit_1_with_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kit.zip");
    std::fs::write(&path, "not a zip").unwrap();
    let output = lab().arg("verify-kit").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("kit.zip"));
}

#[test]
fn missing_file_is_exit_1_folder_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    // Missing: a file that cannot be read, exit 1 (as `cargo xtask verify --archive`).
    // A folder: bad input, exit 2.
    for (path, code, needle) in [
        (dir.path().join("none.zip"), 1, "cannot read"),
        (dir.path().to_path_buf(), 2, "is not a file"),
    ] {
        let output = lab().arg("verify-kit").arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{stderr}");
        assert!(output.stdout.is_empty());
    }
}
