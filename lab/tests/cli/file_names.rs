//! Odd output file names (a newline, a carriage return, an escape, a right-to-left mark) in
//! the lines that confirm a written file: each confirmation stays one line, the name escaped
//! as error lines escape it (`\n`), for every command that writes a file and says so.

use super::support::{fake_measurement, fake_worker, lab, repo_root};
use std::path::Path;

/// Names a file system accepts that would break or disguise a one-line confirmation.
const ODD: [(&str, &str); 4] = [
    ("a\nb", r"a\nb"),
    ("a\rb", r"a\rb"),
    ("a\u{1b}[31mb", r"a\u{1b}[31mb"),
    ("a\u{202e}b", r"a\u{202e}b"),
];

/// Runs `args` (plus `--svg`/`--output` `file`, given by the caller) and checks that `file`
/// was written and that the run's stdout and stderr are whole lines with `shown` in them.
fn confirms(args: &[&std::ffi::OsStr], file: &Path, shown: &str) {
    let out = lab().args(args).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(file.is_file(), "{} was not written", file.display());
    let all = format!("{stdout}{stderr}");
    let line = all
        .lines()
        .find(|l| l.contains(shown))
        .unwrap_or_else(|| panic!("no line shows {shown:?}: {all:?}"));
    assert!(line.contains("written") || line.contains("wrote"), "{line}");
    for raw in ["\r", "\u{1b}", "\u{202e}"] {
        assert!(!all.contains(raw), "raw {raw:?} printed: {all:?}");
    }
}

#[test]
fn plan_svg_confirmation_is_one_line_for_odd_names() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo_root().join("examples/models/llama-3.1-8b");
    for (i, (name, shown)) in ODD.iter().enumerate() {
        let file = dir.path().join(format!("{i}{name}.svg"));
        let args = [
            "plan".as_ref(),
            "--model".as_ref(),
            model.as_os_str(),
            "--requests".as_ref(),
            "100".as_ref(),
            "--input-tokens".as_ref(),
            "16".as_ref(),
            "--output-tokens".as_ref(),
            "16".as_ref(),
            "--svg".as_ref(),
            file.as_os_str(),
        ];
        confirms(&args, &file, shown);
    }
}

#[test]
fn report_svg_confirmation_is_one_line_for_odd_names() {
    let dir = tempfile::tempdir().unwrap();
    let doc = repo_root().join("examples/h200/rust-small-float32.json");
    for (i, (name, shown)) in ODD.iter().enumerate() {
        let file = dir.path().join(format!("{i}{name}.svg"));
        let args = [
            "report".as_ref(),
            doc.as_os_str(),
            "--svg".as_ref(),
            file.as_os_str(),
        ];
        confirms(&args, &file, shown);
    }
}

#[test]
fn measure_output_confirmation_is_one_line_for_odd_names() {
    let dir = tempfile::tempdir().unwrap();
    let worker = fake_worker(dir.path(), "worker", "", &fake_measurement(), 0);
    for (i, (name, shown)) in ODD.iter().enumerate() {
        let file = dir.path().join(format!("{i}{name}.json"));
        let args = [
            "measure".as_ref(),
            "--device".as_ref(),
            "cuda:0".as_ref(),
            "--width".as_ref(),
            "64".as_ref(),
            "--batch".as_ref(),
            "1".as_ref(),
            "--context".as_ref(),
            "16".as_ref(),
            "--repeats".as_ref(),
            "2".as_ref(),
            "--output".as_ref(),
            file.as_os_str(),
            "--worker".as_ref(),
            worker.as_os_str(),
        ];
        confirms(&args, &file, shown);
    }
}
