//! One flag grammar: every command that takes a kind of value accepts and refuses exactly the
//! same spellings (a table of spellings x commands). Whole numbers are plain ASCII digits —
//! no sign, no `+`, no spaces, no decimal point, exponent or separator; a device is `cuda:N`
//! with N written without leading zeros, at most 2147483647. A refused spelling is one line,
//! exit 2, naming the flag (clap adds it) and quoting the value.

use super::support::{fake_worker, lab, repo_root};
use std::path::Path;

/// Where a value goes: a command line with `{}` in place of the value, and the flag's name.
struct Slot {
    args: Vec<String>,
    flag: &'static str,
}

/// Every flag that takes a whole number (or a duration), in every command that has it. Files
/// the commands might write go under `dir`; measurements use a worker that is not there, so
/// nothing runs on a GPU.
fn whole_number_slots(dir: &Path) -> Vec<Slot> {
    let missing_worker = dir.join("no-worker").display().to_string();
    let out = dir.join("never.json").display().to_string();
    let out_dir = dir.join("never").display().to_string();
    let grid = dir.join("grid.csv").display().to_string();
    let slot = |flag: &'static str, args: &[&str]| Slot {
        args: args
            .iter()
            .map(|a| {
                a.replace("{worker}", &missing_worker)
                    .replace("{out}", &out)
                    .replace("{dir}", &out_dir)
                    .replace("{grid}", &grid)
            })
            .collect(),
        flag,
    };
    let measure = |flag: &'static str| {
        let mut args = vec![
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            "1",
            "--context",
            "16",
            "--width",
            "64",
            "--output",
            "{out}",
            "--worker",
            "{worker}",
        ];
        match args.iter().position(|a| *a == flag) {
            Some(i) => args[i + 1] = "{}",
            None => args.extend([flag, "{}"]),
        }
        slot(flag, &args)
    };
    let sweep = |flag: &'static str| {
        let mut args = vec![
            "sweep",
            "--device",
            "cuda:0",
            "--vary",
            "batch",
            "--from",
            "1",
            "--to",
            "2",
            "--output-dir",
            "{dir}",
            "--worker",
            "{worker}",
        ];
        match args.iter().position(|a| *a == flag) {
            Some(i) => args[i + 1] = "{}",
            None => args.extend([flag, "{}"]),
        }
        slot(flag, &args)
    };
    let llama = repo_root()
        .join("examples/models/llama-3.1-8b")
        .display()
        .to_string();
    let plan = |flag: &'static str| slot(flag, &["plan", "--model", &llama, flag, "{}"]);
    vec![
        plan("--tensor-parallel"),
        plan("--gpus"),
        slot(
            "--parameters",
            &["estimate", "--parameters", "{}", "--bits", "16"],
        ),
        slot("--bits", &["estimate", "--parameters", "7", "--bits", "{}"]),
        slot(
            "--lots",
            &["price", "--gpu", "b200", "--days", "7", "--lots", "{}"],
        ),
        slot(
            "--accepted-results",
            &[
                "price",
                "--gpu",
                "b200",
                "--days",
                "7",
                "--lots",
                "1",
                "--accepted-results",
                "{}",
            ],
        ),
        slot("--gpus", &["compare", "--gpus", "{}", "--days", "7"]),
        slot(
            "--accepted-results",
            &[
                "compare",
                "--gpus",
                "2",
                "--days",
                "7",
                "--accepted-results",
                "{}",
            ],
        ),
        slot(
            "--lots",
            &[
                "record",
                "--results",
                "{grid}",
                "--gpu",
                "b200",
                "--days",
                "7",
                "--lots",
                "{}",
                "--outcome",
                "failed",
            ],
        ),
        slot(
            "--accepted-results",
            &[
                "record",
                "--results",
                "{grid}",
                "--gpu",
                "b200",
                "--days",
                "7",
                "--lots",
                "1",
                "--accepted-results",
                "{}",
            ],
        ),
        measure("--batch"),
        measure("--context"),
        measure("--width"),
        measure("--warmup"),
        measure("--repeats"),
        measure("--seed"),
        sweep("--from"),
        sweep("--to"),
        sweep("--resolution"),
        sweep("--context"),
        sweep("--width"),
        sweep("--warmup"),
        sweep("--repeats"),
        sweep("--seed"),
    ]
}

/// Every `--days`, in every command that has it.
fn days_slots(dir: &Path) -> Vec<Slot> {
    let grid = dir.join("grid.csv").display().to_string();
    let slot = |args: &[&str]| Slot {
        args: args.iter().map(|a| a.replace("{grid}", &grid)).collect(),
        flag: "--days",
    };
    vec![
        slot(&["price", "--gpu", "b200", "--days", "{}", "--lots", "1"]),
        slot(&["tariffs", "--days", "{}"]),
        slot(&["compare", "--gpus", "2", "--days", "{}"]),
        slot(&[
            "record",
            "--results",
            "{grid}",
            "--gpu",
            "b200",
            "--days",
            "{}",
            "--lots",
            "1",
            "--outcome",
            "failed",
        ]),
    ]
}

/// Every `--device` a measurement takes.
fn device_slots(dir: &Path) -> Vec<Slot> {
    let worker = dir.join("no-worker").display().to_string();
    let out = dir.join("never.json").display().to_string();
    let out_dir = dir.join("never").display().to_string();
    vec![
        Slot {
            args: [
                "measure",
                "--device",
                "{}",
                "--batch",
                "1",
                "--context",
                "16",
                "--width",
                "64",
                "--output",
                &out,
                "--worker",
                &worker,
            ]
            .map(String::from)
            .to_vec(),
            flag: "--device",
        },
        Slot {
            args: [
                "sweep",
                "--device",
                "{}",
                "--vary",
                "width",
                "--from",
                "64",
                "--to",
                "128",
                "--output-dir",
                &out_dir,
                "--worker",
                &worker,
            ]
            .map(String::from)
            .to_vec(),
            flag: "--device",
        },
    ]
}

/// Spellings refused for every whole-number flag (none of them has a control character, so
/// the message quotes them as typed).
const REFUSED_NUMBERS: [&str; 16] = [
    "+3",
    "-3",
    " 3",
    "3 ",
    "3.0",
    "3e0",
    "1_000",
    "1,000",
    "0x3",
    "",
    "three",
    "٣",
    "３",
    "3\u{200b}",
    "- 3",
    "++3",
];

fn with_value(slot: &Slot, value: &str) -> Vec<String> {
    slot.args
        .iter()
        .map(|a| {
            if a == "{}" {
                value.to_owned()
            } else {
                a.clone()
            }
        })
        .collect()
}

/// Runs `slot` with `value` and says whether the value was refused; a refusal must be one
/// line, exit 2, naming the flag and quoting the value.
fn refused(slot: &Slot, value: &str) -> bool {
    let args = with_value(slot, value);
    let output = lab().args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let marker = format!("for '{} <", slot.flag);
    if !stderr.contains(&marker) {
        return false;
    }
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        // The value is quoted as typed, hidden and non-ASCII characters escaped
        // (lab::text::ascii), so that a look-alike digit shows as what it is.
        stderr.starts_with(&format!(
            "lab: error: invalid value '{}' {marker}",
            lab::text::ascii(value)
        )),
        "{args:?}: {stderr}"
    );
    true
}

#[test]
fn whole_numbers_are_spelt_the_same_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo_root().join("dist/resultats-bruts.csv"),
        dir.path().join("grid.csv"),
    )
    .unwrap();
    let slots = whole_number_slots(dir.path());
    for slot in &slots {
        for value in REFUSED_NUMBERS {
            assert!(refused(slot, value), "{:?} accepted {value:?}", slot.args);
        }
    }
    // The refusals wrote nothing: the grid is still the kit's, no measurement, no sweep.
    assert_eq!(
        std::fs::read(dir.path().join("grid.csv")).unwrap(),
        std::fs::read(repo_root().join("dist/resultats-bruts.csv")).unwrap()
    );
    assert!(!dir.path().join("never.json").exists());
    assert!(!dir.path().join("never").exists());
    for slot in &slots {
        for value in ["2", "02", "0000000002"] {
            assert!(!refused(slot, value), "{:?} refused {value:?}", slot.args);
        }
    }
}

#[test]
fn durations_are_spelt_the_same_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo_root().join("dist/resultats-bruts.csv"),
        dir.path().join("grid.csv"),
    )
    .unwrap();
    for slot in days_slots(dir.path()) {
        for value in REFUSED_NUMBERS
            .iter()
            .chain(&["5", "0", "7.0", "4294967303"])
        {
            assert!(refused(&slot, value), "{:?} accepted {value:?}", slot.args);
        }
        for value in ["3", "7", "07", "30"] {
            assert!(!refused(&slot, value), "{:?} refused {value:?}", slot.args);
        }
        // The refusal lists the durations.
        let output = lab().args(with_value(&slot, "5")).output().unwrap();
        assert!(String::from_utf8_lossy(&output.stderr).contains("3, 7, 30"));
    }
}

#[test]
fn devices_are_spelt_the_same_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    for slot in device_slots(dir.path()) {
        for value in [
            "cuda:00",
            "cuda:01",
            "cuda:+1",
            "cuda:-1",
            "cuda: 1",
            " cuda:0",
            "cuda:0 ",
            "cuda:2147483648",
            "cuda:",
            "cuda:x",
            "CUDA:0",
            "cuda",
            "cpu",
            "mps",
            "mps:0",
            "",
            "cuda:٣",
        ] {
            assert!(refused(&slot, value), "{:?} accepted {value:?}", slot.args);
        }
        for value in ["cuda:0", "cuda:7", "cuda:10", "cuda:2147483647"] {
            assert!(!refused(&slot, value), "{:?} refused {value:?}", slot.args);
        }
    }
    // `lab environment` is a diagnostic: it reports the same refusal and still exits 0.
    for (value, refused) in [("cuda:01", true), ("cuda:+1", true), ("cuda:0", false)] {
        let output = lab()
            .args(["environment", "--device", value])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            stdout.contains(&format!("note: device '{value}': ")),
            refused,
            "{value:?}: {stdout}"
        );
    }
}

/// A fake worker is not needed to refuse: a bad value is refused before anything starts,
/// even with a worker that would succeed.
#[test]
fn refusals_come_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let worker = fake_worker(dir.path(), "w", "", "{}", 0);
    let out = dir.path().join("m.json");
    let output = lab()
        .args([
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            "+1",
            "--context",
            "16",
        ])
        .args(["--width", "64", "--output"])
        .arg(&out)
        .arg("--worker")
        .arg(&worker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(!out.exists());
}
