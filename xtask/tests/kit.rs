//! `cargo xtask dist` and `cargo xtask verify --archive` on kits built from fixture files in
//! temporary folders: a good kit builds reproducibly; every broken kit and broken archive of
//! the acceptance list is caught with a message naming the file.

use std::fs;
use std::io::{Cursor, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, System, ZipArchive, ZipWriter};

const ROOT: &str = "iteragpu-lab-v1";
/// The members in archive order: sorted by path.
const NAMES: [&str; 9] = [
    "LICENSE.txt",
    "MANIFEST.json",
    "README.md",
    "calcul_forfaits.py",
    "mesure-memoire.ipynb",
    "mesure_memoire.py",
    "protocole-qualite.md",
    "resultats-bruts.csv",
    "tarifs-forfaits.csv",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The repository's notebook: `dist` refuses one that is not generated from the script
/// shipped beside it, so fixtures carry the real pair.
fn clean_notebook() -> String {
    fs::read_to_string(repo_root().join("dist/mesure-memoire.ipynb")).unwrap()
}

/// The eight source files, relative to the source root, in one order.
fn fixture_files() -> Vec<(&'static str, Vec<u8>)> {
    let root = repo_root();
    vec![
        ("dist/README.md", b"# Kit\n\nRead me.\n".to_vec()),
        ("dist/mesure-memoire.ipynb", clean_notebook().into_bytes()),
        (
            "dist/mesure_memoire.py",
            fs::read(root.join("dist/mesure_memoire.py")).unwrap(),
        ),
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
    // No temporary file left behind, and the archive readable by all (0666 less umask 022).
    assert_eq!(fs::read_dir(&out).unwrap().count(), 1);
    let mode = fs::metadata(out.join("iteragpu-lab-v1.zip"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o644, "{mode:o}");

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
        nb["cells"][2]["outputs"] =
            serde_json::json!([{"output_type": "stream", "name": "stdout", "text": ["13.03\n"]}]);
    });
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        nb,
        "cell 2, field `outputs`: 1 saved output(s)",
    );
}

#[test]
fn notebook_with_one_execution_count_is_refused() {
    let nb = notebook_with(|nb| nb["cells"][2]["execution_count"] = serde_json::json!(1));
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        nb,
        "cell 2, field `execution_count`: is 1",
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

/// `dist` refuses what `verify` refuses: a notebook cell edited by hand (out of date with the
/// script), duplicate cell ids, ids in a 4.4 notebook, papermill's run metadata.
#[test]
fn notebook_out_of_date_or_invalid_is_refused() {
    let edited = clean_notebook().replacen("(bits + 7) // 8", "bits // 8", 1);
    assert_ne!(edited, clean_notebook());
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        edited.into_bytes(),
        "out of date with dist/mesure_memoire.py",
    );
    let twin_ids = notebook_with(|nb| nb["cells"][3]["id"] = nb["cells"][2]["id"].clone());
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        twin_ids,
        "cell 3, field `id`: \"parameters\" is already the id of cell 2",
    );
    let old_minor = notebook_with(|nb| nb["nbformat_minor"] = serde_json::json!(4));
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        old_minor,
        "cell ids exist only from nbformat 4.5",
    );
    let papermill = notebook_with(|nb| {
        nb["metadata"]["papermill"] = serde_json::json!({"input_path": "/home/someone/x.ipynb", "parameters": {"DEVICE": "cuda:1"}});
        nb["cells"][2]["metadata"]["papermill"] =
            serde_json::json!({"duration": 1.5, "status": "completed"});
    });
    assert_dist_refuses(
        "dist/mesure-memoire.ipynb",
        papermill,
        "cell 2, field `metadata.papermill`: papermill's run record",
    );
}

/// Temporary files of a killed run (pid gone) are removed by the next run; files of other
/// patterns and a live process's temporary file are left alone.
#[test]
fn stale_temporary_files_are_cleaned_on_the_next_run() {
    let src = fixture();
    let out = src.path().join("out");
    fs::create_dir_all(&out).unwrap();
    let stale = out.join(".iteragpu-lab-v1.zip.dist-tmp.4000000000.Ab3xYz");
    let live = out.join(format!(
        ".iteragpu-lab-v1.zip.dist-tmp.{}.Qw9rTy",
        std::process::id()
    ));
    let other = out.join("notes.txt");
    let old = out.join(format!(
        ".iteragpu-lab-v1.zip.dist-tmp.{}.Zx8kLm",
        std::process::id()
    ));
    for path in [&stale, &live, &other, &old] {
        fs::write(path, b"partial").unwrap();
    }
    // Over an hour old: stale whatever its process.
    fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(7200))
        .unwrap();
    dist(src.path(), &out, &[], "022");
    assert!(!stale.exists() && !old.exists());
    assert!(live.exists() && other.exists());
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

/// `verify --archive` uses the library's schema check: a manifest field changed to what dist
/// never writes (a foreign release, a NUL, a date that is no date) is named, like `lab
/// verify-kit` names it.
#[test]
fn manifest_fields_outside_their_schema_are_caught() {
    let good = good_entries();
    let original = &good.iter().find(|(n, _)| *n == manifest_path()).unwrap().1;
    let original: serde_json::Value = serde_json::from_slice(original).unwrap();
    for (field, bad, expect) in [
        ("version", "6.6.6", "version is \"6.6.6\""),
        ("version", "1.0.0\u{0}", "version is \"1.0.0\\u{0}\""),
        ("catalog_snapshot_date", "2026-13-01", "not a calendar date"),
    ] {
        let mut manifest = original.clone();
        manifest[field] = serde_json::json!(bad);
        let mut bytes = serde_json::to_vec_pretty(&manifest).unwrap();
        bytes.push(b'\n');
        let mut entries = good.clone();
        entries
            .iter_mut()
            .find(|(n, _)| *n == manifest_path())
            .unwrap()
            .1 = bytes;
        assert_archive_rejected(&zip_bytes(&files(entries)), &manifest_path(), expect);
    }
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

// ---------------------------------------------------------------------------------------------
// The tamper matrix of the layout rule (lab::kit::layout): each archive is the real dist
// output, taken apart and reassembled with one change.

/// One entry of an archive taken apart: the header fields, the name, the compressed data.
#[derive(Clone)]
struct RawEntry {
    made_by: u16,
    version_needed: u16,
    flags: u16,
    method: u16,
    time: u16,
    date: u16,
    crc32: u32,
    size: u32,
    name: Vec<u8>,
    data: Vec<u8>,
    local_extra: Vec<u8>,
    central_extra: Vec<u8>,
    comment: Vec<u8>,
    internal: u16,
    external: u32,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Takes a plain archive (as dist writes it) apart.
fn take_apart(bytes: &[u8]) -> Vec<RawEntry> {
    let end = bytes.len() - 22;
    assert_eq!(u32_at(bytes, end), 0x0605_4b50);
    let count = u16_at(bytes, end + 10);
    let mut at = u32_at(bytes, end + 16) as usize;
    let mut entries = Vec::new();
    for _ in 0..count {
        let name_len = u16_at(bytes, at + 28) as usize;
        let extra_len = u16_at(bytes, at + 30) as usize;
        let comment_len = u16_at(bytes, at + 32) as usize;
        let local = u32_at(bytes, at + 42) as usize;
        let compressed = u32_at(bytes, at + 20) as usize;
        let data_at =
            local + 30 + u16_at(bytes, local + 26) as usize + u16_at(bytes, local + 28) as usize;
        entries.push(RawEntry {
            made_by: u16_at(bytes, at + 4),
            version_needed: u16_at(bytes, at + 6),
            flags: u16_at(bytes, at + 8),
            method: u16_at(bytes, at + 10),
            time: u16_at(bytes, at + 12),
            date: u16_at(bytes, at + 14),
            crc32: u32_at(bytes, at + 16),
            size: u32_at(bytes, at + 24),
            name: bytes[at + 46..at + 46 + name_len].to_vec(),
            data: bytes[data_at..data_at + compressed].to_vec(),
            local_extra: Vec::new(),
            central_extra: bytes[at + 46 + name_len..at + 46 + name_len + extra_len].to_vec(),
            comment: Vec::new(),
            internal: u16_at(bytes, at + 36),
            external: u32_at(bytes, at + 38),
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    entries
}

/// How to reassemble: bytes before the first entry (with offsets adjusted or not), the
/// archive comment, bytes after the end record, and a change to the stated directory size.
#[derive(Default)]
struct Assembly {
    prefix: Vec<u8>,
    adjust_offsets: bool,
    comment: Vec<u8>,
    suffix: Vec<u8>,
    directory_size_delta: i64,
}

fn assemble(entries: &[RawEntry], how: &Assembly) -> Vec<u8> {
    let mut out = how.prefix.clone();
    let base = if how.adjust_offsets {
        how.prefix.len()
    } else {
        0
    };
    let mut offsets = Vec::new();
    let shared = |out: &mut Vec<u8>, e: &RawEntry| {
        for v in [e.version_needed, e.flags, e.method, e.time, e.date] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in [e.crc32, e.data.len() as u32, e.size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    };
    for e in entries {
        offsets.push((out.len() - how.prefix.len() + base) as u32);
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        shared(&mut out, e);
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(e.local_extra.len() as u16).to_le_bytes());
        out.extend_from_slice(&e.name);
        out.extend_from_slice(&e.local_extra);
        out.extend_from_slice(&e.data);
    }
    let directory = out.len() - how.prefix.len() + base;
    let directory_start = out.len();
    for (e, offset) in entries.iter().zip(offsets) {
        out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        out.extend_from_slice(&e.made_by.to_le_bytes());
        shared(&mut out, e);
        for v in [
            e.name.len() as u16,
            e.central_extra.len() as u16,
            e.comment.len() as u16,
            0,
            e.internal,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&e.external.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&e.name);
        out.extend_from_slice(&e.central_extra);
        out.extend_from_slice(&e.comment);
    }
    let size = (out.len() - directory_start) as i64 + how.directory_size_delta;
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    for v in [0u16, 0, entries.len() as u16, entries.len() as u16] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(size as u32).to_le_bytes());
    out.extend_from_slice(&(directory as u32).to_le_bytes());
    out.extend_from_slice(&(how.comment.len() as u16).to_le_bytes());
    out.extend_from_slice(&how.comment);
    out.extend_from_slice(&how.suffix);
    out
}

fn dist_bytes() -> Vec<u8> {
    let src = fixture();
    dist(src.path(), &src.path().join("out"), &[], "022")
}

fn index_of(entries: &[RawEntry], name: &str) -> usize {
    let full = format!("{ROOT}/{name}");
    entries
        .iter()
        .position(|e| e.name == full.as_bytes())
        .unwrap()
}

#[test]
fn reassembling_unchanged_gives_the_same_bytes() {
    let bytes = dist_bytes();
    assert_eq!(assemble(&take_apart(&bytes), &Assembly::default()), bytes);
}

/// Every case dist never writes is refused, by name, with exit 1.
#[test]
fn tamper_matrix_is_refused() {
    let good = take_apart(&dist_bytes());
    let readme = index_of(&good, "README.md");
    let readme_name = format!("{ROOT}/README.md");
    let script = b"#!/bin/sh\necho 'installing...'\nexit 0\n".to_vec();
    let with = |change: &dyn Fn(&mut Vec<RawEntry>)| {
        let mut entries = good.clone();
        change(&mut entries);
        assemble(&entries, &Assembly::default())
    };
    let cases: Vec<(&str, Vec<u8>, String, &str)> = vec![
        (
            "wrong central-directory size",
            assemble(
                &good,
                &Assembly {
                    directory_size_delta: 1,
                    ..Default::default()
                },
            ),
            "downloaded.zip".into(),
            "the end record states a central directory of",
        ),
        (
            "bytes after the end record",
            assemble(
                &good,
                &Assembly {
                    suffix: b"trailing".to_vec(),
                    ..Default::default()
                },
            ),
            "downloaded.zip".into(),
            "8 byte(s) after the end-of-central-directory record",
        ),
        (
            "archive comment",
            assemble(
                &good,
                &Assembly {
                    comment: b"hello".to_vec(),
                    ..Default::default()
                },
            ),
            "downloaded.zip".into(),
            "holds an archive comment (5 bytes)",
        ),
        (
            "prepended script, offsets adjusted",
            assemble(
                &good,
                &Assembly {
                    prefix: script.clone(),
                    adjust_offsets: true,
                    ..Default::default()
                },
            ),
            format!("{ROOT}/LICENSE.txt"),
            "byte(s) before it (prepended data",
        ),
        (
            "prepended script, offsets not adjusted",
            assemble(
                &good,
                &Assembly {
                    prefix: script.clone(),
                    ..Default::default()
                },
            ),
            "downloaded.zip".into(),
            "not a readable zip archive",
        ),
        (
            "mode 0755",
            with(&|e| e[readme].external = 0o100_755 << 16),
            readme_name.clone(),
            "mode 0755, expected 0644",
        ),
        (
            "mode 0666",
            with(&|e| e[readme].external = 0o100_666 << 16),
            readme_name.clone(),
            "mode 0666",
        ),
        (
            "setuid",
            with(&|e| e[readme].external = 0o104_644 << 16),
            readme_name.clone(),
            "mode 4644",
        ),
        (
            "symlink",
            with(&|e| e[readme].external = 0o120_777 << 16),
            readme_name.clone(),
            "a symbolic link",
        ),
        (
            "extra field",
            with(&|e| {
                // An extended-timestamp field (0x5455), as Info-ZIP writes it.
                let field = vec![0x55, 0x54, 5, 0, 1, 0, 0, 0, 0];
                e[readme].local_extra = field.clone();
                e[readme].central_extra = field;
            }),
            readme_name.clone(),
            "byte(s) of extra fields",
        ),
        (
            "data-descriptor flag",
            with(&|e| e[readme].flags |= 0x0008),
            readme_name.clone(),
            "data-descriptor flag set",
        ),
        (
            "encryption flag",
            with(&|e| e[readme].flags |= 0x0001),
            readme_name.clone(),
            "encrypted",
        ),
        (
            "UTF-8 flag",
            with(&|e| e[readme].flags |= 0x0800),
            readme_name.clone(),
            "general-purpose flags 0x0800",
        ),
        (
            "file comment",
            with(&|e| e[readme].comment = b"note".to_vec()),
            readme_name.clone(),
            "a file comment of 4 byte(s)",
        ),
        (
            "made by MS-DOS",
            with(&|e| e[readme].made_by = 0x0014),
            readme_name.clone(),
            "made by host 0",
        ),
        (
            "another date",
            with(&|e| e[readme].date ^= 1),
            readme_name.clone(),
            "dated differently",
        ),
        (
            "internal attributes",
            with(&|e| e[readme].internal = 1),
            readme_name.clone(),
            "internal attributes",
        ),
        (
            "stored instead of deflated",
            with(&|e| {
                e[readme].method = 0;
                e[readme].data = b"# Kit\n\nRead me.\n".to_vec();
            }),
            readme_name.clone(),
            "compression method 0",
        ),
        (
            "out of path order",
            with(&|e| e.swap(0, 2)),
            "downloaded.zip".into(),
            "members are not in path order",
        ),
        (
            "duplicate member",
            with(&|e| {
                let twin = e[readme].clone();
                e.insert(readme, twin);
            }),
            readme_name.clone(),
            "appears 2 times",
        ),
        (
            "path traversal",
            with(&|e| e[readme].name = format!("{ROOT}/../README.md").into_bytes()),
            format!("{ROOT}/../README.md"),
            "unsafe entry name",
        ),
        (
            "directory entry",
            with(&|e| {
                let mut dir = e[readme].clone();
                dir.name = format!("{ROOT}/").into_bytes();
                dir.external = 0o040_755 << 16;
                e.insert(0, dir);
            }),
            format!("{ROOT}/"),
            "a directory entry",
        ),
    ];
    for (case, bytes, member, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("downloaded.zip");
        fs::write(&path, &bytes).unwrap();
        let output = xtask(&["verify", "--archive", path.to_str().unwrap()], &[], "022");
        let all = text(&output);
        assert_eq!(output.status.code(), Some(1), "{case}: {all}");
        // Findings about the whole archive name it as given.
        let member = if member == "downloaded.zip" {
            path.display().to_string()
        } else {
            member
        };
        assert!(
            all.lines()
                .any(|l| l.starts_with(&format!("{member}: ")) && l.contains(expect)),
            "{case}: no line `{member}: ...{expect}...` in:\n{all}"
        );
    }
}

/// The rule allows content-identical re-packing: another deflate level (other compressed
/// bytes, same members, same layout) passes.
#[test]
fn repacking_with_another_deflate_level_passes() {
    let bytes = dist_bytes();
    let mut entries = take_apart(&bytes);
    let mut archive = ZipArchive::new(Cursor::new(&bytes)).unwrap();
    for entry in &mut entries {
        let mut content = Vec::new();
        archive
            .by_name(std::str::from_utf8(&entry.name).unwrap())
            .unwrap()
            .read_to_end(&mut content)
            .unwrap();
        entry.data = flate_fast(&content);
    }
    let repacked = assemble(&entries, &Assembly::default());
    assert_ne!(sha256(&repacked), sha256(&bytes));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repacked.zip");
    fs::write(&path, &repacked).unwrap();
    let output = xtask(&["verify", "--archive", path.to_str().unwrap()], &[], "022");
    assert!(output.status.success(), "{}", text(&output));
}

/// Raw deflate of `content` at the fastest level, through the zip crate (a one-member zip
/// whose data is taken out).
fn flate_fast(content: &[u8]) -> Vec<u8> {
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(1));
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    writer.start_file("x", options).unwrap();
    writer.write_all(content).unwrap();
    let bytes = writer.finish().unwrap().into_inner();
    take_apart(&bytes).remove(0).data
}

/// The published kit's SHA-256, built from this repository's sources with the default entry
/// time. It changes when a kit source changes (then re-pin: `cargo xtask dist` prints the new
/// hash) or when the compressor changes (then `compressor_output_is_pinned` in
/// xtask/src/archive.rs fails too: decide before publishing; see that module's documentation).
#[test]
fn published_kit_hash_is_pinned() {
    let pin = fs::read_to_string(repo_root().join("xtask/published-kit.sha256")).unwrap();
    let pinned = pin
        .lines()
        .find(|l| l.ends_with("  iteragpu-lab-v1.zip"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let bytes = dist(&repo_root(), out.path(), &[], "022");
    assert_eq!(
        sha256(&bytes),
        pinned,
        "the kit built from this tree is not the pinned one: if a source of the kit changed on \
         purpose, write the new hash into xtask/published-kit.sha256; if only Cargo.lock \
         changed, the compressor writes other bytes (see xtask/src/archive.rs)"
    );
}
