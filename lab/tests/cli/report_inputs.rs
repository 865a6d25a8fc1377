//! What `lab report` accepts: every file `lab` writes (a measurement document, the comparison
//! of `lab measure --device all`), each document once, and JSON without a float.

use super::support::{lab, repo_root};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn output(args: &[&Path]) -> std::process::Output {
    let mut command = lab();
    command.arg("report");
    for a in args {
        command.arg(a);
    }
    command.output().unwrap()
}

fn h200x2(name: &str) -> PathBuf {
    repo_root().join("examples/h200x2").join(name)
}

/// The comparison `lab measure --device all` writes reports the documents it names, exactly
/// as if they were given, with a note saying so; in either of the repository's examples.
#[test]
fn the_comparison_of_device_all_reports_its_documents() {
    for folder in ["examples/h200x2", "examples/h200x2/merged-smoke/all"] {
        let folder = repo_root().join(folder);
        let comparison = output(&[&folder.join("comparison.json")]);
        assert!(comparison.status.success(), "{comparison:?}");
        let direct = output(&[&folder.join("cuda-0.json"), &folder.join("cuda-1.json")]);
        assert_eq!(comparison.stdout, direct.stdout);
        let note = String::from_utf8(comparison.stderr).unwrap();
        assert!(
            note.contains("is the comparison `lab measure --device all` writes; reporting the documents it compares: cuda-0.json, cuda-1.json"),
            "{note}"
        );
    }
}

/// A comparison whose names leave its folder, that names no document, or a JSON object of
/// another shape, is refused (exit 2, one line).
#[test]
fn other_json_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(h200x2("comparison.json")).unwrap();
    let cases = [
        (
            text.replace("\"cuda-0.json\"", "\"../cuda-0.json\""),
            "not a file name beside it",
        ),
        (
            text.replace("\"cuda-0.json\"", "null")
                .replace("\"cuda-1.json\"", "null"),
            "names no document",
        ),
        (
            text.replace("\"flagged\"", "\"flagged_by\""),
            "not a measurement document",
        ),
        ("{}".to_string(), "not a measurement document"),
    ];
    for (content, needle) in cases {
        let path = dir.path().join("comparison.json");
        std::fs::write(&path, content).unwrap();
        let out = output(&[&path]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// The same document twice is refused whatever the way it arrives: the same path, another
/// spelling of it, a link, a copy under another name, standard input, a comparison that names
/// it. Two different documents pass.
#[test]
fn a_document_given_twice_is_refused_as_a_class() {
    let dir = tempfile::tempdir().unwrap();
    let original = repo_root().join("examples/h200/rust-small-float32.json");
    let copy = dir.path().join("renamed.json");
    std::fs::copy(&original, &copy).unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&original, &link).unwrap();
    let hard = dir.path().join("hard.json");
    std::fs::hard_link(&copy, &hard).unwrap();
    let spelled = repo_root().join("examples/h200/../h200/./rust-small-float32.json");
    for second in [&original, &spelled, &link, &copy, &hard] {
        let out = output(&[&original, second]);
        assert_eq!(out.status.code(), Some(2), "{second:?}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("are the same document (sha256 ed2c081712eeb45c430e61679b91b524743d7f5de7e00462f7bbf52a96f71236)"),
            "{err}"
        );
        assert!(err.contains(&second.display().to_string()), "{err}");
    }
    let out = lab()
        .args(["report", "-"])
        .arg(&original)
        .write_stdin(std::fs::read(&original).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("(standard input) and "));
    let out = output(&[&h200x2("comparison.json"), &h200x2("cuda-1.json")]);
    assert_eq!(out.status.code(), Some(2));
    let other = repo_root().join("examples/h200/python-small-float32.json");
    assert!(output(&[&original, &other]).status.success());
}

/// `lab report --json` has no float, for every example document the repository holds: times
/// are strings holding the document's own decimal digits, FLOP/s whole numbers in a string.
#[test]
fn report_json_holds_no_float() {
    fn floats(v: &Value, at: &str, found: &mut Vec<String>) {
        match v {
            Value::Number(n) if !(n.is_u64() || n.is_i64()) => found.push(format!("{at} = {n}")),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| floats(x, &format!("{at}[{i}]"), found)),
            Value::Object(o) => o
                .iter()
                .for_each(|(k, x)| floats(x, &format!("{at}.{k}"), found)),
            _ => {}
        }
    }
    let mut documents = Vec::new();
    for folder in ["examples/h200", "examples/h200/graph", "examples/h200x2"] {
        for entry in std::fs::read_dir(repo_root().join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json")
                && (name.starts_with("rust-")
                    || name.starts_with("python-")
                    || name.starts_with("cuda-"))
            {
                documents.push(path);
            }
        }
    }
    assert!(documents.len() >= 14, "{documents:?}");
    for path in &documents {
        let out = lab().args(["report", "--json"]).arg(path).output().unwrap();
        assert!(out.status.success(), "{path:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut found = Vec::new();
        floats(&v, "", &mut found);
        assert!(found.is_empty(), "{path:?}: {found:?}");
        // The document's own digits come back as written.
        let document: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let first = &document["phases"][0]["wall_seconds"];
        assert_eq!(
            v["phases"][0]["rows"][0]["wall_seconds"],
            Value::String(first.to_string()),
            "{path:?}"
        );
    }
}
