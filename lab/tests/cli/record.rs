//! `lab record` through the binary: append-only rows, duplicate and header refusals.

use super::support::{assert_refused, fake, lab};
use lab::document::{AllocatorCounters, Phase};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The kit's empty grid, byte for byte.
fn kit_grid() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../dist/resultats-bruts.csv"
    ))
    .unwrap()
}

/// A valid measurement document; `seed` makes its bytes (and hash) differ.
fn measurement(dir: &Path, name: &str, seed: u64) -> PathBuf {
    let row = |phase: Phase, rep: Option<u64>| {
        fake::row_json(phase, rep, 1, (0.001, None), AllocatorCounters::every(0))
    };
    let phases = [
        row(Phase::ModelLoad, None),
        row(Phase::Inputs, None),
        row(Phase::ColdForward, None),
        row(Phase::Warmup, None),
        row(Phase::WarmForward, Some(1)),
    ]
    .join(",");
    let text = format!(
        r#"{{"schema":"iteragpu-lab/measurement/v1",
"tool":{{"name":"iteragpu-lab","version":"1.0.0","implementation":"python"}},
"created_utc":"2026-11-30T10:00:00Z",
"environment":{{"runtime":{{"language":"Python","version":"3.12"}},"torch_version":"2.11.0",
"cuda_build_version":"13.0","hip_build_version":null,"device":"cuda:0","device_name":"NVIDIA B200",
"compute_capability":"9.0","total_memory_bytes":150109880320,"multiprocessor_count":132,
"device_count":1,"tf32_matmul_allowed":false}},
"configuration":{{"device":"cuda:0","batch":1,"context":16,"width":64,"dtype":"float32",
"warmup":1,"repeats":1,"seed":{seed}}},
"synthetic_model":{{"architecture":"MLP","width":64,"hidden":256,"parameters":33088,
"dtype_bytes":4,"parameter_bytes":132352,"input_bytes":4096,"output_bytes":4096,
"flops_per_forward":1048576}},
"phases":[{phases}]}}"#
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn sha256(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

fn record(grid: &Path, extra: &[&str]) -> std::process::Output {
    lab()
        .arg("record")
        .arg("--results")
        .arg(grid)
        .args(["--gpu", "b200", "--days", "7", "--lots", "2"])
        .args(extra)
        .output()
        .unwrap()
}

fn usage_error(output: &std::process::Output, needle: &str) {
    assert_refused(output, 2, needle);
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("resultats-bruts.csv");
    std::fs::write(&grid, kit_grid()).unwrap();
    (dir, grid)
}

#[test]
fn appends_rows_and_never_rewrites() {
    let (dir, grid) = setup();
    let m1 = measurement(dir.path(), "run1.json", 1);
    let m1_arg = m1.to_str().unwrap();
    let output = record(
        &grid,
        &[
            "--measurement",
            m1_arg,
            "--date-utc",
            "2026-10-02T14:05:00Z",
            "--quality-metric",
            "exact match",
            "--threshold",
            ">=0.92",
            "--observed",
            "0.95",
            "--accepted-results",
            "120",
            "--notes",
            "first, with a comma",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("recorded run run-1 on line 2"), "{stdout}");
    let after_first = std::fs::read_to_string(&grid).unwrap();
    let expected_row = format!(
        "run-1,2026-10-02T14:05:00Z,run1.json,{},b200,7,2,exact match,>=0.92,0.95,120,completed,\"first, with a comma\"\n",
        sha256(&m1)
    );
    assert_eq!(after_first, format!("{}{expected_row}", kit_grid()));

    // a failed run without a measurement, as JSON
    let output = record(
        &grid,
        &[
            "--outcome",
            "failed",
            "--accepted-results",
            "0",
            "--run-id",
            "2026-10-03-a",
            "--json",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["line"], 3);
    assert_eq!(v["row"]["run_id"], "2026-10-03-a");
    assert_eq!(v["row"]["measurement_file"], Value::Null);
    assert_eq!(v["row"]["accepted_results"], 0);
    assert_eq!(v["row"]["days"], 7);
    assert_eq!(v["row"]["outcome"], "failed");
    let after_second = std::fs::read_to_string(&grid).unwrap();
    assert!(
        after_second.starts_with(&after_first),
        "existing rows changed"
    );
    assert_eq!(after_second.lines().count(), 3);
    let date = v["row"]["date_utc"].as_str().unwrap();
    assert_eq!(date.len(), 20);
    assert!(date.ends_with('Z'));

    // the grid still parses with the kit's header and 13 fields per row
    let mut reader = csv::Reader::from_path(&grid).unwrap();
    assert_eq!(
        reader
            .records()
            .map(|r| r.unwrap().len())
            .collect::<Vec<_>>(),
        vec![13, 13]
    );
}

#[test]
fn same_measurement_twice_is_refused() {
    let (dir, grid) = setup();
    let m = measurement(dir.path(), "run.json", 1);
    assert!(record(&grid, &["--measurement", m.to_str().unwrap()])
        .status
        .success());
    let before = std::fs::read(&grid).unwrap();
    // the same bytes under another name are the same measurement
    let copy = dir.path().join("copy.json");
    std::fs::copy(&m, &copy).unwrap();
    let output = record(&grid, &["--measurement", copy.to_str().unwrap()]);
    usage_error(&output, "already recorded on line 2");
    assert_eq!(std::fs::read(&grid).unwrap(), before);
}

#[test]
fn run_id_is_unique() {
    let (dir, grid) = setup();
    let a = measurement(dir.path(), "a.json", 1);
    let b = measurement(dir.path(), "b.json", 2);
    assert!(record(
        &grid,
        &["--measurement", a.to_str().unwrap(), "--run-id", "x"]
    )
    .status
    .success());
    let before = std::fs::read(&grid).unwrap();
    let output = record(
        &grid,
        &["--measurement", b.to_str().unwrap(), "--run-id", "x"],
    );
    usage_error(&output, "run_id 'x' is already used on line 2");
    assert_eq!(std::fs::read(&grid).unwrap(), before);
}

#[test]
fn a_grid_that_is_not_the_kits_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let m = measurement(dir.path(), "m.json", 1);
    let m = m.to_str().unwrap();
    let cases = [
        ("renamed.csv", kit_grid().replace("observed", "observation")),
        ("reordered.csv", kit_grid().replace("gpu,days", "days,gpu")),
        ("semicolon.csv", kit_grid().replace(',', ";")),
        ("extra.csv", kit_grid().replace("notes", "notes,extra")),
        ("empty.csv", String::new()),
        ("short-row.csv", format!("{}a,b,c\n", kit_grid())),
    ];
    for (name, content) in cases {
        let grid = dir.path().join(name);
        std::fs::write(&grid, &content).unwrap();
        let output = record(&grid, &["--measurement", m]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert_eq!(
            std::fs::read_to_string(&grid).unwrap(),
            content,
            "{name} changed"
        );
    }
    // A missing grid is a file that cannot be read: runtime failure, exit 1, nothing created.
    assert_refused(
        &record(&dir.path().join("missing.csv"), &["--measurement", m]),
        1,
        "cannot open the grid",
    );
    assert!(!dir.path().join("missing.csv").exists());
    // A folder given as the grid is bad input: exit 2.
    let folder = dir.path().join("grid.d");
    std::fs::create_dir(&folder).unwrap();
    usage_error(&record(&folder, &["--measurement", m]), "is not a file");
}

#[test]
fn crlf_bom_and_missing_final_newline_are_kept() {
    let (dir, grid) = setup();
    let crlf = format!("\u{feff}{}", kit_grid().replace('\n', "\r\n"));
    std::fs::write(&grid, &crlf).unwrap();
    assert!(record(&grid, &["--run-id", "a"]).status.success());
    let text = std::fs::read_to_string(&grid).unwrap();
    assert!(text.starts_with(&crlf));
    assert!(text.ends_with(",completed,\r\n"), "{text:?}");

    let no_newline = dir.path().join("no-newline.csv");
    std::fs::write(&no_newline, kit_grid().trim_end()).unwrap();
    assert!(record(&no_newline, &["--run-id", "b"]).status.success());
    let text = std::fs::read_to_string(&no_newline).unwrap();
    assert_eq!(text.lines().count(), 2);
    assert!(text.starts_with(kit_grid().trim_end()));
    assert!(text.lines().nth(1).unwrap().starts_with("b,"));
}

#[test]
fn bad_input_is_refused_before_writing() {
    let (dir, grid) = setup();
    let m = measurement(dir.path(), "m.json", 1);
    let m = m.to_str().unwrap();
    let not_measurement = dir.path().join("notes.json");
    std::fs::write(&not_measurement, "{}").unwrap();
    let before = std::fs::read(&grid).unwrap();
    let cases: Vec<(Vec<&str>, &str)> =
        vec![
        (vec!["--gpu", "z100"], "unknown GPU 'z100'"),
        (vec!["--days", "5"], "3, 7, 30"),
        (vec!["--lots", "0"], "--lots"),
        (vec!["--accepted-results", "-1"], "--accepted-results"),
        (vec!["--accepted-results", "2.5"], "--accepted-results"),
        (vec!["--outcome", "great"], "--outcome must be one of"),
        (vec!["--date-utc", "yesterday"], "--date-utc"),
        (vec!["--notes", "two\nlines"], "--notes"),
        (vec!["--run-id", " "], "--run-id"),
        (vec!["--quality-metric", ""], "--quality-metric must not be empty"),
        (vec!["--threshold", " "], "--threshold must not be empty"),
        (vec!["--observed", ""], "--observed must not be empty"),
        (
            vec!["--measurement", not_measurement.to_str().unwrap()],
            "not a measurement document",
        ),
        (
            vec!["--measurement", dir.path().to_str().unwrap()],
            "is not a file",
        ),
        // Not on the calendar, or not UTC `Z`.
        (vec!["--date-utc", "2026-02-30T00:00:00Z"], "--date-utc"),
        (vec!["--date-utc", "2026-04-31T10:00:00Z"], "not a date"),
        (vec!["--date-utc", "2025-02-29T10:00:00Z"], "not a date"),
        (vec!["--date-utc", "2999-01-01T00:00:00Z"], "is in the future"),
        (
            vec!["--date-utc", "2026-10-02T14:05:00+02:00"],
            "--date-utc",
        ),
        (vec!["--date-utc", "2026-10-02T14:05:00.5Z"], "--date-utc"),
        // Leap seconds: none was inserted at the end of 2026, and lab refuses them all.
        (
            vec!["--date-utc", "2026-12-31T23:59:60Z"],
            "(second 60: leap seconds are refused, lab cannot tell which ones happened; write :59)",
        ),
        (
            vec!["--date-utc", "2016-12-31T23:59:60Z"],
            "leap seconds are refused",
        ),
        // Only a completed run can accept results.
        (
            vec!["--outcome", "failed", "--accepted-results", "50"],
            "--accepted-results 50 contradicts --outcome failed",
        ),
        (
            vec!["--outcome", "rejected", "--accepted-results", "1"],
            "contradicts --outcome rejected",
        ),
        (
            vec!["--outcome", "interrupted", "--accepted-results", "3"],
            "contradicts --outcome interrupted",
        ),
        // Spreadsheet formula injection in free text.
        (vec!["--notes", "=HYPERLINK(\"http://x\")"], "formula"),
        (vec!["--notes", "+1+1"], "--notes starts with '+'"),
        (vec!["--notes", "-2+3"], "--notes starts with '-'"),
        (vec!["--notes", "@SUM(A1)"], "--notes starts with '@'"),
        (vec!["--quality-metric", "=1+1"], "--quality-metric"),
        (vec!["--run-id", "=cmd|' /C calc'!A0"], "--run-id"),
        (vec!["--threshold", "=0.9"], "--threshold"),
        (vec!["--observed", "-1+cmd"], "--observed"),
        (vec!["--observed", "+"], "--observed"),
        // Signed numbers only: not a formula, not infinity, not a number followed by text.
        (
            vec!["--observed", "-1e5+A1"],
            "--observed starts with '-', which a spreadsheet would run as a formula; reword it \
             so it starts with a letter, a digit or a comparison sign (e.g. >=0.92); a signed \
             number on its own, such as -0.5, +3 or -1e5, is accepted as it is",
        ),
        (vec!["--threshold", "-inf"], "--threshold starts with '-'"),
        (vec!["--observed", "-1e999"], "--observed starts with '-'"),
        (vec!["--notes", "-1e5"], "--notes starts with '-'"),
        (vec!["--notes", "\tx"], "--notes"),
    ];
    for (args, needle) in cases {
        // defaults for the flags a case does not set
        let mut full: Vec<&str> = Vec::new();
        for (flag, default) in [
            ("--gpu", "b200"),
            ("--days", "7"),
            ("--lots", "1"),
            ("--measurement", m),
        ] {
            if !args.contains(&flag) {
                full.extend([flag, default]);
            }
        }
        full.extend(&args);
        let output = lab()
            .arg("record")
            .arg("--results")
            .arg(&grid)
            .args(&full)
            .output()
            .unwrap();
        usage_error(&output, needle);
        assert_eq!(std::fs::read(&grid).unwrap(), before, "{args:?} wrote");
    }
}

#[test]
fn missing_measurement_is_exit_1_and_writes_nothing() {
    let (dir, grid) = setup();
    let before = std::fs::read(&grid).unwrap();
    let missing = dir.path().join("gone.json");
    assert_refused(
        &record(&grid, &["--measurement", missing.to_str().unwrap()]),
        1,
        "gone.json",
    );
    assert_eq!(std::fs::read(&grid).unwrap(), before);
}

#[test]
fn consistent_rows_with_signed_numbers_and_zero_accepted_are_recorded() {
    let (dir, grid) = setup();
    let m = measurement(dir.path(), "m.json", 7);
    let output = record(
        &grid,
        &[
            "--measurement",
            m.to_str().unwrap(),
            "--outcome",
            "failed",
            "--accepted-results",
            "0",
            "--date-utc",
            "2026-11-30T23:59:59Z",
            "--threshold",
            ">=-0.5",
            "--observed",
            "+1.25",
            "--notes",
            "loss went to NaN; see run-0",
            "--json",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let row: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(row["row"]["outcome"], "failed");
    assert_eq!(row["row"]["accepted_results"], 0);
    assert_eq!(row["row"]["date_utc"], "2026-11-30T23:59:59Z");
    assert_eq!(row["row"]["threshold"], ">=-0.5");
    assert_eq!(row["row"]["observed"], "+1.25");
    let text = std::fs::read_to_string(&grid).unwrap();
    assert_eq!(
        text.lines().nth(1).unwrap(),
        format!(
            "run-1,2026-11-30T23:59:59Z,m.json,{},b200,7,2,,>=-0.5,+1.25,0,failed,loss went to NaN; see run-0",
            sha256(&m)
        )
    );
}

#[test]
fn scientific_notation_is_a_number_in_threshold_and_observed() {
    let (_dir, grid) = setup();
    let output = record(
        &grid,
        &[
            "--run-id",
            "sci",
            "--date-utc",
            "2026-01-01T00:00:00Z",
            "--threshold",
            "<-2.5E-3",
            "--observed",
            "-1e5",
            "--json",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let row: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(row["row"]["threshold"], "<-2.5E-3");
    assert_eq!(row["row"]["observed"], "-1e5");
    let text = std::fs::read_to_string(&grid).unwrap();
    assert_eq!(
        text.lines().nth(1).unwrap(),
        "sci,2026-01-01T00:00:00Z,,,b200,7,2,,<-2.5E-3,-1e5,,completed,"
    );
}

#[test]
fn default_run_id_skips_ids_already_chosen() {
    let (_dir, grid) = setup();
    // One row the user named run-2: the default for the second row is run-3, not a refusal.
    for extra in [
        &["--run-id", "run-2"][..],
        &[],
        &[],
        &["--run-id", "run-5"],
        &[],
    ] {
        let output = record(
            &grid,
            &[&["--date-utc", "2026-10-02T14:05:00Z"], extra].concat(),
        );
        assert!(
            output.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let text = std::fs::read_to_string(&grid).unwrap();
    let ids: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    // rows + 1 = 2 (taken) -> 3; then 3 (taken) -> 4; run-5 by hand; then 5 (taken) -> 6.
    assert_eq!(ids, ["run-2", "run-3", "run-4", "run-5", "run-6"]);
    // A lower free id (run-1) is not reused: the default never goes below rows + 1.
    assert!(!ids.contains(&"run-1"));
}

/// Every cell goes through one guard whatever its source: the measurement's file name (a
/// formula, a newline, a bidi override, not UTF-8), text flags with hidden characters, and a
/// GPU id that a replaced catalog allows. Each is exit 2, one line naming the source, and the
/// grid untouched.
#[test]
fn every_source_of_a_grid_cell_is_guarded() {
    use std::os::unix::ffi::OsStrExt;
    let (dir, grid) = setup();
    let before = std::fs::read(&grid).unwrap();
    let names: Vec<(&std::ffi::OsStr, &str)> = vec![
        ("=HYPERLINK(1).json".as_ref(), "starts with '='"),
        ("@SUM(1).json".as_ref(), "starts with '@'"),
        ("+1.json".as_ref(), "starts with '+'"),
        ("-x.json".as_ref(), "starts with '-'"),
        ("a\nb.json".as_ref(), r"holds the character \u{a}"),
        ("a\tb.json".as_ref(), r"holds the character \u{9}"),
        (
            "x\u{202e}nosj.json".as_ref(),
            r"holds the character \u{202e}",
        ),
        ("x\u{2028}y.json".as_ref(), r"holds the character \u{2028}"),
        (
            std::ffi::OsStr::from_bytes(b"m\xff.json"),
            "is not valid UTF-8",
        ),
    ];
    for (seed, (name, needle)) in names.into_iter().enumerate() {
        let m = measurement(dir.path(), &name.to_string_lossy(), seed as u64);
        let m = if name.to_str().is_none() {
            let raw = dir.path().join(name);
            std::fs::rename(&m, &raw).unwrap();
            raw
        } else {
            m
        };
        let output = lab()
            .arg("record")
            .arg("--results")
            .arg(&grid)
            .args([
                "--gpu",
                "b200",
                "--days",
                "7",
                "--lots",
                "2",
                "--measurement",
            ])
            .arg(&m)
            .output()
            .unwrap();
        usage_error(&output, "the measurement file name");
        usage_error(&output, needle);
        usage_error(&output, "rename the file");
        assert_eq!(std::fs::read(&grid).unwrap(), before, "{name:?} wrote");
    }
    for (flag, value, needle) in [
        (
            "--notes",
            "see \u{202e}txt.exe",
            r"--notes 'see \u{202e}txt.exe' holds",
        ),
        ("--quality-metric", "acc\u{2028}uracy", "--quality-metric"),
        (
            "--run-id",
            "r\u{1b}[2J",
            r"--run-id 'r\u{1b}[2J' holds the character \u{1b}",
        ),
        ("--threshold", ">=0.9\u{200b}", "--threshold"),
    ] {
        usage_error(&record(&grid, &[flag, value]), needle);
        assert_eq!(std::fs::read(&grid).unwrap(), before, "{flag} wrote");
    }
    // A replaced catalog may name a GPU like a formula; the grid still refuses the cell.
    let catalog = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/tarifs-forfaits.csv"
    ))
    .unwrap()
    .replace("\nt4,", "\n=t4,");
    let tariffs = dir.path().join("catalog.csv");
    std::fs::write(&tariffs, catalog).unwrap();
    let output = lab()
        .arg("record")
        .arg("--results")
        .arg(&grid)
        .arg("--tariffs")
        .arg(&tariffs)
        .args(["--gpu", "=t4", "--days", "7", "--lots", "1"])
        .output()
        .unwrap();
    usage_error(&output, "--gpu starts with '='");
    assert_eq!(std::fs::read(&grid).unwrap(), before);
}

/// The measurement's GPU must be the package's: an H200 document against a B200 package is
/// refused unless --measured-on-other-gpu records the mismatch in the notes; the flag is
/// refused where the GPUs agree or there is no measurement.
#[test]
fn the_measurements_gpu_is_the_packages_or_the_mismatch_is_recorded() {
    let (dir, grid) = setup();
    let b200 = measurement(dir.path(), "b200.json", 11);
    let h200 = dir.path().join("h200.json");
    std::fs::write(
        &h200,
        std::fs::read_to_string(measurement(dir.path(), "tmp.json", 12))
            .unwrap()
            .replace("NVIDIA B200", "NVIDIA H200"),
    )
    .unwrap();
    let before = std::fs::read(&grid).unwrap();
    usage_error(
        &record(
            &grid,
            &[
                "--measurement",
                h200.to_str().unwrap(),
                "--outcome",
                "failed",
            ],
        ),
        "was measured on NVIDIA H200, not on the package's b200 (NVIDIA B200 180 GB); record it \
         against the package of that GPU, or give --measured-on-other-gpu to record the mismatch",
    );
    usage_error(
        &record(
            &grid,
            &[
                "--measurement",
                b200.to_str().unwrap(),
                "--measured-on-other-gpu",
            ],
        ),
        "the package's b200: leave the flag out",
    );
    usage_error(
        &record(&grid, &["--measured-on-other-gpu", "--outcome", "failed"]),
        "--measured-on-other-gpu needs --measurement",
    );
    assert_eq!(std::fs::read(&grid).unwrap(), before, "nothing written");
    let output = record(
        &grid,
        &[
            "--measurement",
            h200.to_str().unwrap(),
            "--measured-on-other-gpu",
            "--outcome",
            "failed",
            "--notes",
            "rehearsal",
            "--json",
        ],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let row: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        row["row"]["notes"],
        "measured on NVIDIA H200, not on the package's GPU b200 (NVIDIA B200 180 GB); rehearsal"
    );
    assert!(record(
        &grid,
        &[
            "--measurement",
            b200.to_str().unwrap(),
            "--outcome",
            "failed"
        ]
    )
    .status
    .success());
}

/// A run observed below its own threshold has no accepted results and is not completed;
/// dates and run ids out of bounds are refused with the bound.
#[test]
fn thresholds_dates_and_run_ids_are_bounded() {
    let (_dir, grid) = setup();
    let before = std::fs::read(&grid).unwrap();
    for (args, needle) in [
        (
            vec!["--threshold", ">=0.92", "--observed", "0.10", "--accepted-results", "500"],
            "--observed 0.10 does not meet --threshold >=0.92: a run below its own threshold has no accepted result",
        ),
        (vec!["--threshold", "0.92", "--observed", "0.95"], "not a direction and a number"),
        (vec!["--date-utc", "0001-01-01T00:00:00Z"], "before 2026-01-01T00:00:00Z"),
        (vec!["--date-utc", "1969-12-31T23:59:59Z"], "before 2026-01-01T00:00:00Z"),
    ] {
        usage_error(&record(&grid, &args), needle);
    }
    let long = "r".repeat(100_000);
    usage_error(
        &record(&grid, &["--run-id", &long, "--outcome", "failed"]),
        "--run-id holds 100000 characters, more than the 128 a grid cell may hold",
    );
    assert_eq!(std::fs::read(&grid).unwrap(), before, "nothing written");
    let exact = "r".repeat(128);
    assert!(record(&grid, &["--run-id", &exact, "--outcome", "failed"])
        .status
        .success());
}
