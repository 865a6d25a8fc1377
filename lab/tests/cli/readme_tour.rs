//! README's set-up and tour, as a newcomer runs them: after the set-up commands (which build
//! `target/release/lab`, put nothing on `PATH`), every `$ ` line of the tour runs as written
//! from the repository root and prints what README shows.

use super::support::lab_path;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The `console` blocks between `start` and `end` (two headings of README), each as its
/// lines.
fn console_blocks(text: &str, start: &str, end: &str) -> Vec<Vec<String>> {
    let from = text.find(start).expect("README section");
    let to = from + text[from..].find(end).expect("README next section");
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text[from..to].lines() {
        match (&mut current, line.trim()) {
            (None, "```console") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().unwrap()),
            (Some(block), _) => block.push(line.to_string()),
            (None, _) => {}
        }
    }
    blocks
}

/// Copies `from` into `to`, recursively (plain files and folders).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn the_tour_runs_as_written_after_the_set_up() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    // The set-up builds the binary the tour calls, and nothing there puts `lab` on PATH.
    let set_up = console_blocks(&readme, "## Set up and run", "## A short tour");
    assert_eq!(set_up.len(), 1);
    assert!(
        set_up[0][0].starts_with("cargo run --release --bin lab -- "),
        "{:?}",
        set_up[0]
    );
    let blocks = console_blocks(&readme, "## A short tour", "## Commands");
    assert!(blocks.len() >= 4, "{blocks:?}");

    // A scratch copy of the repository's inputs, with the binary where the set-up puts it, and
    // a PATH that holds no `lab`.
    let scratch = tempfile::tempdir().unwrap();
    for folder in ["data", "dist", "examples"] {
        copy_tree(&repo_root().join(folder), &scratch.path().join(folder));
    }
    let release = scratch.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(lab_path(), release.join("lab")).unwrap();
    let path = "/usr/bin:/bin";
    assert!(!Path::new("/usr/bin/lab").exists() && !Path::new("/bin/lab").exists());

    let mut ran = 0;
    for block in &blocks {
        let mut commands: Vec<(String, Vec<String>)> = Vec::new();
        for line in block {
            match line.strip_prefix("$ ") {
                Some(command) => commands.push((command.to_string(), Vec::new())),
                None => commands
                    .last_mut()
                    .expect("output before a command")
                    .1
                    .push(line.clone()),
            }
        }
        for (command, expected) in commands {
            assert!(
                command.starts_with("target/release/lab ") || command.starts_with("cp "),
                "a tour line a newcomer cannot run as written: {command}"
            );
            let output = Command::new("bash")
                .args(["-c", &command])
                .current_dir(scratch.path())
                .env_clear()
                .env("PATH", path)
                .env("LC_ALL", "C")
                .output()
                .unwrap();
            let mut actual = String::from_utf8(output.stdout).unwrap();
            actual.push_str(&String::from_utf8(output.stderr).unwrap());
            let actual: Vec<&str> = actual.lines().collect();
            let mut expected: Vec<&str> = expected.iter().map(String::as_str).collect();
            while expected.last() == Some(&"") {
                expected.pop();
            }
            // A block shortened with a last line `…` shows the start of the output: that
            // start must be what the command prints first.
            if expected.last() == Some(&"…") {
                expected.pop();
                assert!(actual.len() > expected.len(), "$ {command}: {actual:?}");
                assert_eq!(actual[..expected.len()], expected[..], "$ {command}");
            } else {
                assert_eq!(actual, expected, "$ {command}");
            }
            ran += 1;
        }
    }
    assert!(ran >= 5, "{ran} tour lines");
}
