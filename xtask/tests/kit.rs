//! `cargo xtask dist` and `cargo xtask verify --archive` on kits built from fixture files in
//! temporary folders: a good kit builds reproducibly; every broken kit and broken archive of
//! the acceptance list is caught with a message naming the file.

use std::fs;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, System, ZipArchive, ZipWriter};

const ROOT: &str = "iteragpu-lab-v1";
const NAMES: [&str; 9] = [
    "README.md",
    "mesure-memoire.ipynb",
    "mesure_memoire.py",
    "calcul_forfaits.py",
    "tarifs-forfaits.csv",
    "protocole-qualite.md",
    "resultats-bruts.csv",
    "LICENSE.txt",
    "MANIFEST.json",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn clean_notebook() -> String {
    serde_json::json!({
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
        "cells": [
            {"id": "intro", "cell_type": "markdown", "metadata": {}, "source": ["# Mesure\n", "Same protocol as mesure_memoire.py.\n"]},
            {"id": "code1", "cell_type": "code", "metadata": {}, "source": "x = 7_000_000_000 * 2\nprint(x / 2**30)", "outputs": [], "execution_count": null}
        ]
    })
    .to_string()
}

/// The eight source files, relative to the source root, in one order.
fn fixture_files() -> Vec<(&'static str, Vec<u8>)> {
    let root = repo_root();
    vec![
        ("dist/README.md", b"# Kit\n\nRead me.\n".to_vec()),
        ("dist/mesure-memoire.ipynb", clean_notebook().into_bytes()),
        ("dist/mesure_memoire.py", b"print('measure')\n".to_vec()),
        ("dist/calcul_forfaits.py", b"print('price')\n".to_vec()),
        ("dist/protocole-qualite.md", b"# Protocole\n".to_vec()),
        (
            "dist/resultats-bruts.csv",
            b"run_id,measurement_file,measurement_sha256,gpu,days,lots,threshold,observed,accepted_units\n"
                .to_vec(),
        ),
        (
            "data/tarifs-forfaits.csv",
            fs::read(root.join("data/tarifs-forfaits.csv")).unwrap(),
        ),
        ("LICENSE.txt", fs::read(root.join("LICENSE.txt")).unwrap()),
    ]
}

fn write_fixture(dir: &Path, files: &[(&str, Vec<u8>)]) {
    for (path, bytes) in files {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path(), &fixture_files());
    dir
}

/// Runs the xtask binary with `args` under `sh` (so that `umask` can be set), with `env`.
fn xtask(args: &[&str], env: &[(&str, &str)], umask: &str) -> Output {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .env_remove("SOURCE_DATE_EPOCH");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Builds the kit under `source` into `out`; returns the archive bytes.
fn dist(source: &Path, out: &Path, env: &[(&str, &str)], umask: &str) -> Vec<u8> {
    let output = xtask(
        &[
            "dist",
            "--source",
            source.to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ],
        env,
        umask,
    );
    assert!(output.status.success(), "{}", text(&output));
    fs::read(out.join("iteragpu-lab-v1.zip")).unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    lab::digest::sha256_hex(bytes)
}

#[test]
fn good_kit_builds_nine_clean_entries_and_verifies() {
    let src = fixture();
    let out = src.path().join("out");
    let output = xtask(
        &[
            "dist",
            "--source",
            src.path().to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ],
        &[],
        "022",
    );
    assert!(output.status.success(), "{}", text(&output));
    let bytes = fs::read(out.join("iteragpu-lab-v1.zip")).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("iteragpu-lab-v1.zip"), "{stdout}");
    assert!(
        stdout.contains(&format!("sha256 {}", sha256(&bytes))),
        "{stdout}"
    );
    assert!(stdout.contains("iteragpu-lab-v1/MANIFEST.json"), "{stdout}");
    // No temporary file left behind.
    assert_eq!(fs::read_dir(&out).unwrap().count(), 1);

    // Local headers: no flags (no data descriptor), Deflate, no extra field.
    let locals: Vec<usize> = (0..bytes.len() - 4)
        .filter(|&i| bytes[i..i + 4] == *b"PK\x03\x04")
        .collect();
    assert_eq!(locals.len(), 9);
    for at in locals {
        let u16_at = |o: usize| u16::from_le_bytes([bytes[at + o], bytes[at + o + 1]]);
        assert_eq!(
            (u16_at(6), u16_at(8), u16_at(28)),
            (0, 8, 0),
            "local header at {at}"
        );
    }
    let mut archive = ZipArchive::new(Cursor::new(&bytes)).unwrap();
    assert_eq!(archive.len(), 9);
    let expected: Vec<String> = NAMES.iter().map(|n| format!("{ROOT}/{n}")).collect();
    for (i, name) in expected.iter().enumerate() {
        let file = archive.by_index(i).unwrap();
        assert_eq!(file.name().unwrap(), name.as_str());
        assert_eq!(file.unix_mode(), Some(0o100_644), "{name}");
        assert_eq!(file.system(), System::Unix, "{name}");
        assert_eq!(file.compression(), CompressionMethod::Deflated, "{name}");
        assert_eq!(
            file.extra_data().as_deref().unwrap_or_default(),
            b"",
            "{name}"
        );
        let t = file.last_modified().unwrap();
        assert_eq!(
            (t.year(), t.month(), t.day(), t.hour(), t.minute()),
            (2026, 9, 24, 0, 0)
        );
    }
    let mut manifest = String::new();
    archive
        .by_name(&format!("{ROOT}/MANIFEST.json"))
        .unwrap()
        .read_to_string(&mut manifest)
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(manifest["catalog_snapshot_date"], "2026-09-24");
    assert_eq!(manifest["hash_algorithm"], "sha256");
    let members = manifest["members"].as_array().unwrap();
    let paths: Vec<&str> = members
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(paths, sorted);
    let own = members
        .iter()
        .find(|m| m["path"] == "iteragpu-lab-v1/MANIFEST.json")
        .unwrap();
    assert!(own["size"].is_null() && own["sha256"].is_null());
    assert!(own["unhashed_reason"]
        .as_str()
        .unwrap()
        .contains("own fingerprint"));
    let readme = members
        .iter()
        .find(|m| m["path"] == "iteragpu-lab-v1/README.md")
        .unwrap();
    assert_eq!(readme["sha256"], sha256(b"# Kit\n\nRead me.\n"));
    assert_eq!(readme["size"], 16);

    let check = xtask(
        &[
            "verify",
            "--archive",
            out.join("iteragpu-lab-v1.zip").to_str().unwrap(),
        ],
        &[],
        "022",
    );
    assert!(check.status.success(), "{}", text(&check));
    assert!(text(&check).contains("ok, 9 members match MANIFEST.json"));
}

#[test]
fn two_builds_under_other_tz_umask_mtimes_and_order_are_identical() {
    let a = fixture();
    let b = tempfile::tempdir().unwrap();
    let mut files = fixture_files();
    files.reverse();
    write_fixture(b.path(), &files);
    // Junk that must never get in, and other mtimes.
    write_fixture(
        b.path(),
        &[
            ("dist/.DS_Store", b"junk".to_vec()),
            ("dist/README.md~", b"backup".to_vec()),
            (
                "dist/__pycache__/mesure_memoire.cpython-311.pyc",
                b"cache".to_vec(),
            ),
            (
                "dist/.ipynb_checkpoints/mesure-memoire-checkpoint.ipynb",
                b"{}".to_vec(),
            ),
            ("data/extra.csv", b"a,b\n".to_vec()),
        ],
    );
    for (path, _) in &files {
        let file = fs::File::options()
            .write(true)
            .open(b.path().join(path))
            .unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000))
            .unwrap();
    }
    let first = dist(
        a.path(),
        &a.path().join("out"),
        &[("TZ", "UTC"), ("LC_ALL", "C")],
        "022",
    );
    let second = dist(
        b.path(),
        &b.path().join("out"),
        &[("TZ", "Pacific/Kiritimati"), ("LC_ALL", "C.UTF-8")],
        "077",
    );
    assert_eq!(sha256(&first), sha256(&second));
    assert_eq!(ZipArchive::new(Cursor::new(&second)).unwrap().len(), 9);

    // SOURCE_DATE_EPOCH is honoured (and clamped), and a malformed one is refused.
    let dated = dist(
        a.path(),
        &a.path().join("dated"),
        &[("SOURCE_DATE_EPOCH", "1700000000")],
        "022",
    );
    assert_ne!(sha256(&dated), sha256(&first));
    let clamped = dist(
        a.path(),
        &a.path().join("clamped"),
        &[("SOURCE_DATE_EPOCH", "0")],
        "022",
    );
    let mut archive = ZipArchive::new(Cursor::new(&clamped)).unwrap();
    let t = archive.by_index(0).unwrap().last_modified().unwrap();
    assert_eq!((t.year(), t.month(), t.day()), (1980, 1, 1));
    let bad = xtask(
        &[
            "dist",
            "--source",
            a.path().to_str().unwrap(),
            "--out-dir",
            a.path().join("bad").to_str().unwrap(),
        ],
        &[("SOURCE_DATE_EPOCH", "yesterday")],
        "022",
    );
    assert!(!bad.status.success());
    assert!(text(&bad).contains("SOURCE_DATE_EPOCH"), "{}", text(&bad));
    assert!(!a.path().join("bad/iteragpu-lab-v1.zip").exists());
}

/// Builds a kit whose `file` has `bytes`; requires `dist` to refuse it, naming the file and
/// `expect`, and to write no archive.
fn assert_dist_refuses(file: &str, bytes: Vec<u8>, expect: &str) {
    let src = fixture();
    write_fixture(src.path(), &[(file, bytes)]);
    let out = src.path().join("out");
    let output = xtask(
        &[
            "dist",
            "--source",
            src.path().to_str().unwrap(),
            "--out-dir",
            out.to_str().unwrap(),
        ],
        &[],
        "022",
    );
    let all = text(&output);
    assert!(!output.status.success(), "accepted: {all}");
    assert!(
        all.contains(&format!("{file}: ")),
        "{file} not named: {all}"
    );
    assert!(all.contains(expect), "{expect} not in: {all}");
    assert!(!out.join("iteragpu-lab-v1.zip").exists());
}

fn notebook_with(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut nb: serde_json::Value = serde_json::from_str(&clean_notebook()).unwrap();
    edit(&mut nb);
    serde_json::to_vec_pretty(&nb).unwrap()
}

#[test]
fn notebook_with_one_output_is_refused() {
    let nb = notebook_with(|nb| {
        nb["cells"][1]["outputs"] =
            serde_json::json!([{"output_type": "stream", "name": "stdout", "text": ["13.03\n"]}]);
    });
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        nb,
        "cell 1, field `outputs`: 1 saved output(s)",
    );
}

#[test]
fn notebook_with_one_execution_count_is_refused() {
    let nb = notebook_with(|nb| nb["cells"][1]["execution_count"] = serde_json::json!(1));
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        nb,
        "cell 1, field `execution_count`: is 1",
    );
}

#[test]
fn notebook_with_widget_state_is_refused() {
    let nb = notebook_with(|nb| {
        nb["metadata"]["widgets"] = serde_json::json!({
            "application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2, "version_minor": 0}
        });
    });
    assert_dist_refuses("dist/mesure-memoire.ipynb", nb, "field `metadata.widgets`");
}

#[test]
fn results_grid_with_one_row_is_refused() {
    let mut grid = fixture_files()
        .into_iter()
        .find(|(p, _)| *p == "dist/resultats-bruts.csv")
        .unwrap()
        .1;
    grid.extend_from_slice(b"1,run.json,abc,b200,7,2,0.9,0.93,120\n");
    assert_dist_refuses(
        "dist/resultats-bruts.csv",
        grid,
        "1 row(s) after the header",
    );
}

#[test]
fn catalog_with_a_missing_row_is_refused() {
    let catalog = fs::read_to_string(repo_root().join("data/tarifs-forfaits.csv")).unwrap();
    let shorter: String = catalog.lines().take(45).map(|l| format!("{l}\n")).collect();
    assert_dist_refuses("data/tarifs-forfaits.csv", shorter.into_bytes(), "30-day");
}

#[test]
fn missing_source_file_is_refused() {
    let src = fixture();
    fs::remove_file(src.path().join("dist/protocole-qualite.md")).unwrap();
    let output = xtask(
        &[
            "dist",
            "--source",
            src.path().to_str().unwrap(),
            "--out-dir",
            src.path().join("out").to_str().unwrap(),
        ],
        &[],
        "022",
    );
    assert!(!output.status.success());
    assert!(
        text(&output).contains("dist/protocole-qualite.md"),
        "{}",
        text(&output)
    );
}

// ---------------------------------------------------------------------------------------------
// Broken archives, checked by `verify --archive`.

/// A good archive's entries, in order: (name, bytes).
fn good_entries() -> Vec<(String, Vec<u8>)> {
    let src = fixture();
    let bytes = dist(src.path(), &src.path().join("out"), &[], "022");
    let mut archive = ZipArchive::new(Cursor::new(bytes)).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut file = archive.by_index(i).unwrap();
            let mut content = Vec::new();
            file.read_to_end(&mut content).unwrap();
            (file.name().unwrap().to_string(), content)
        })
        .collect()
}

/// One entry of a hand-made archive.
enum Entry {
    File(String, Vec<u8>),
    Symlink(String, String),
    Dir(String),
}

fn zip_bytes(entries: &[Entry]) -> Vec<u8> {
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .unix_permissions(0o644)
        .system(System::Unix);
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    for entry in entries {
        match entry {
            Entry::File(name, bytes) => {
                writer.start_file(name.as_str(), options).unwrap();
                writer.write_all(bytes).unwrap();
            }
            Entry::Symlink(name, target) => {
                writer
                    .add_symlink(name.as_str(), target.as_str(), options)
                    .unwrap();
            }
            Entry::Dir(name) => writer.add_directory(name.as_str(), options).unwrap(),
        }
    }
    writer.finish().unwrap().into_inner()
}

fn files(entries: Vec<(String, Vec<u8>)>) -> Vec<Entry> {
    entries
        .into_iter()
        .map(|(n, b)| Entry::File(n, b))
        .collect()
}

/// Writes `bytes` as a zip in a temp folder and requires `verify --archive` to fail with a
/// line naming `member` and containing `expect`.
fn assert_archive_rejected(bytes: &[u8], member: &str, expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("downloaded.zip");
    fs::write(&path, bytes).unwrap();
    let output = xtask(&["verify", "--archive", path.to_str().unwrap()], &[], "022");
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(
        all.lines()
            .any(|l| l.contains(&format!("{member}: ")) && l.contains(expect)),
        "no line `{member}: ...{expect}...` in:\n{all}"
    );
}

fn manifest_path() -> String {
    format!("{ROOT}/MANIFEST.json")
}

#[test]
fn rebuilt_good_archive_passes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.zip");
    fs::write(&path, zip_bytes(&files(good_entries()))).unwrap();
    let output = xtask(&["verify", "--archive", path.to_str().unwrap()], &[], "022");
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn manifest_with_one_wrong_hash_is_caught() {
    let mut entries = good_entries();
    let readme = format!("{ROOT}/README.md");
    let good = sha256(&entries.iter().find(|(n, _)| *n == readme).unwrap().1);
    let manifest = entries
        .iter_mut()
        .find(|(n, _)| *n == manifest_path())
        .unwrap();
    let edited = String::from_utf8(manifest.1.clone())
        .unwrap()
        .replace(&good, &"0".repeat(64));
    assert_ne!(edited.as_bytes(), manifest.1.as_slice());
    manifest.1 = edited.into_bytes();
    assert_archive_rejected(&zip_bytes(&files(entries)), &readme, "SHA-256");
}

#[test]
fn member_changed_after_the_manifest_is_caught() {
    let mut entries = good_entries();
    let name = format!("{ROOT}/calcul_forfaits.py");
    entries.iter_mut().find(|(n, _)| *n == name).unwrap().1 = b"print('cheaper')\n".to_vec();
    assert_archive_rejected(&zip_bytes(&files(entries)), &name, "in MANIFEST.json");
}

#[test]
fn tenth_member_is_caught() {
    let mut entries = good_entries();
    entries.push((format!("{ROOT}/notes.txt"), b"extra".to_vec()));
    let bytes = zip_bytes(&files(entries));
    assert_archive_rejected(&bytes, &format!("{ROOT}/notes.txt"), "unexpected entry");
    assert_archive_rejected(&bytes, "downloaded.zip", "holds 10 entries");
}

#[test]
fn missing_member_is_caught() {
    let mut entries = good_entries();
    let name = format!("{ROOT}/protocole-qualite.md");
    entries.retain(|(n, _)| *n != name);
    assert_archive_rejected(
        &zip_bytes(&files(entries)),
        &name,
        "missing from the archive",
    );
}

#[test]
fn duplicate_name_is_caught() {
    // The zip writer refuses duplicate names, so write a twin with a same-length name and
    // patch it into a duplicate in both the local and the central headers.
    let mut entries = good_entries();
    entries.insert(1, (format!("{ROOT}/README.mX"), b"# Other\n".to_vec()));
    let mut bytes = zip_bytes(&files(entries));
    let (from, to) = (b"README.mX", b"README.md");
    let mut patched = 0;
    for i in 0..bytes.len() - from.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            patched += 1;
        }
    }
    assert_eq!(patched, 2);
    assert_archive_rejected(&bytes, &format!("{ROOT}/README.md"), "appears 2 times");
}

#[test]
fn parent_dir_name_is_caught() {
    let mut entries = good_entries();
    entries.push((format!("{ROOT}/../evil.txt"), b"x".to_vec()));
    assert_archive_rejected(
        &zip_bytes(&files(entries)),
        &format!("{ROOT}/../evil.txt"),
        "unsafe entry name",
    );
}

#[test]
fn symlink_entry_is_caught() {
    let mut entries = files(good_entries());
    let name = format!("{ROOT}/LICENSE.txt");
    let at = entries
        .iter()
        .position(|e| matches!(e, Entry::File(n, _) if *n == name))
        .unwrap();
    entries[at] = Entry::Symlink(name.clone(), "/etc/passwd".to_string());
    assert_archive_rejected(&zip_bytes(&entries), &name, "a symbolic link");
}

#[test]
fn directory_entry_is_caught() {
    let mut entries = files(good_entries());
    entries.insert(0, Entry::Dir(format!("{ROOT}/")));
    assert_archive_rejected(
        &zip_bytes(&entries),
        &format!("{ROOT}/"),
        "a directory entry",
    );
}

#[test]
fn not_a_zip_is_caught() {
    assert_archive_rejected(b"hello", "downloaded.zip", "not a readable zip");
}

/// The same exit codes as `lab verify-kit` for a path that is not an archive: a missing file
/// is exit 1, a folder is bad input, exit 2; each one line on stderr, nothing on stdout.
#[test]
fn missing_archive_is_exit_1_folder_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.zip");
    for (path, code, needle) in [
        (
            missing.clone(),
            1,
            format!("xtask: error: cannot read {}: ", missing.display()),
        ),
        (
            dir.path().to_path_buf(),
            2,
            format!(
                "xtask: error: {} is not a file; give the kit's .zip archive",
                dir.path().display()
            ),
        ),
    ] {
        let output = xtask(&["verify", "--archive", path.to_str().unwrap()], &[], "022");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&needle),
            "expected {needle:?} in {stderr:?}"
        );
        assert!(output.stdout.is_empty(), "{}", text(&output));
    }
}
