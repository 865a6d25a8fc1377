//! `lab results` through the binary: a grid written by `lab record` read back, text and JSON,
//! with real catalog values; bad grids refused by line.

use super::support::lab;
use serde_json::Value;

fn kit_grid() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../dist/resultats-bruts.csv"
    ))
    .unwrap()
}

fn example(name: &str) -> String {
    format!("{}/../examples/h200/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Three runs recorded by `lab record` (two on one h200 purchase, one failed b200 run with no
/// measurement), read back by `lab results`.
#[test]
fn what_record_writes_results_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.csv");
    std::fs::write(&grid, kit_grid()).unwrap();
    let grid_arg = grid.to_str().unwrap();
    let record = |args: &[&str]| {
        let out = lab()
            .args(["record", "--results", grid_arg])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let common = ["--quality-metric", "exact match", "--threshold", ">=0.92"];
    record(
        &[
            &[
                "--measurement",
                &example("rust-small-float32.json"),
                "--gpu",
                "h200",
                "--days",
                "7",
                "--lots",
                "1",
                "--run-id",
                "a",
                "--date-utc",
                "2026-11-20T10:00:00Z",
                "--observed",
                "0.95",
                "--accepted-results",
                "120",
            ][..],
            &common,
        ]
        .concat(),
    );
    record(
        &[
            &[
                "--gpu",
                "h200",
                "--days",
                "7",
                "--lots",
                "1",
                "--run-id",
                "b",
                "--date-utc",
                "2026-11-22T10:00:00Z",
                "--observed",
                "0.97",
                "--accepted-results",
                "80",
            ][..],
            &common,
        ]
        .concat(),
    );
    record(&[
        "--gpu",
        "b200",
        "--days",
        "3",
        "--lots",
        "1",
        "--run-id",
        "c",
        "--date-utc",
        "2026-11-25T10:00:00Z",
        "--outcome",
        "failed",
    ]);

    let out = lab()
        .args(["results", "--results", grid_arg, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runs"], 3);
    assert_eq!(v["packages"][0]["gpu"], "h200");
    assert_eq!(v["packages"][0]["runs"], 2);
    assert_eq!(v["packages"][0]["purchases"], 1);
    // The catalog's h200 7-day lot: 510.72 USD; 200 accepted -> 2.5536 USD each.
    assert_eq!(v["packages"][0]["spent_usd"], "510.72");
    assert_eq!(v["packages"][0]["unit_cost_usd"], "2.553600");
    // b200 3-day lot: 691.20 USD, no accepted result.
    assert_eq!(v["packages"][1]["spent_usd"], "691.20");
    assert_eq!(v["packages"][1]["unit_cost_usd"], Value::Null);
    assert_eq!(v["spent_cents"], 51072 + 69120);
    assert_eq!(v["spent_usd"], "1201.92");
    assert_eq!(v["accepted_results"], 200);
    assert_eq!(v["unit_cost_usd"], "6.009600");
    assert_eq!(v["runs_without_measurement"], serde_json::json!(["b", "c"]));
    // No float anywhere: every number is an integer.
    fn no_float(v: &Value) -> bool {
        match v {
            Value::Number(n) => n.is_u64() || n.is_i64(),
            Value::Array(a) => a.iter().all(no_float),
            Value::Object(o) => o.values().all(no_float),
            _ => true,
        }
    }
    assert!(no_float(&v));

    let out = lab()
        .args(["results", "--results", grid_arg])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        format!("results grid {grid_arg}: 3 runs on 2 package(s)")
    );
    assert_eq!(
        lines[2],
        "  h200 x 1 lot(s), 7 days     2          1     510.72       200    2.553600"
    );
    assert_eq!(
        lines[4],
        "  all runs                    3          2    1201.92       200    6.009600"
    );
    assert_eq!(lines[5], "runs without a measurement: b, c");
}

/// A row appended by hand that breaks a rule `lab record` enforces is refused by line, exit 2.
#[test]
fn a_hand_written_row_that_breaks_a_rule_is_refused_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.csv");
    for (row, needle) in [
        (
            "x,2026-11-01T10:00:00Z,,,h200,7,1,em,>=0.92,0.10,500,completed,",
            "does not meet --threshold >=0.92",
        ),
        (
            "x,0001-01-01T00:00:00Z,,,h200,7,1,,,,,failed,",
            "before 2026-01-01T00:00:00Z",
        ),
        ("x,2026-11-01T10:00:00Z,,,b300,7,1,,,,,failed,", "b300"),
    ] {
        std::fs::write(&grid, format!("{}{row}\n", kit_grid())).unwrap();
        let out = lab()
            .args(["results", "--results"])
            .arg(&grid)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("line 2: ") && err.contains(needle),
            "{needle}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

/// A run is recorded once: a grid edited by hand so that two rows share a run id, or name the
/// same measurement, is refused by line by `lab results`, and
/// `lab record` refuses to append to it (nothing written).
#[test]
fn a_run_recorded_twice_is_refused_by_results_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.csv");
    let sha = "ab".repeat(32);
    let row = |id: &str, sha: &str| {
        let file = if sha.is_empty() { "" } else { "m.json" };
        format!("{id},2026-11-01T10:00:00Z,{file},{sha},h200,7,1,,,,3,completed,\n")
    };
    for (rows, needle) in [
        (
            row("r1", "") + &row("r1", ""),
            "line 3: run_id 'r1' is already used on line 2",
        ),
        (
            row("r1", &sha) + &row("r2", &sha),
            "line 3: measurement_sha256 ababababab",
        ),
    ] {
        let text = format!("{}{rows}", kit_grid());
        std::fs::write(&grid, &text).unwrap();
        let out = lab()
            .args(["results", "--results"])
            .arg(&grid)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(needle), "{needle}: {err}");
        assert!(err.contains("a run is recorded once"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        let out = lab()
            .args(["record", "--results"])
            .arg(&grid)
            .args(["--gpu", "h200", "--days", "7", "--lots", "1"])
            .args(["--outcome", "failed"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains(needle) && err.contains("fix the grid by hand first"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&grid).unwrap(),
            text,
            "record wrote"
        );
    }
}

/// The bounds of `lab record`'s amounts, at their edges: the most accepted results a row may
/// hold (10^12), one less, 0, and the most lots an h200 7-day package may have (19,580,200 x
/// 510.72 USD = 9,999,999,744.00 USD, under the 10,000,000,000.00 USD bound) are recorded and
/// read back by `lab results`, text and JSON, with exact totals; one past each bound (and
/// u64::MAX) is refused in one line naming the field, exit 2, the grid untouched.
#[test]
fn record_bounds_every_amount_so_results_can_total_the_grid() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.csv");
    std::fs::write(&grid, kit_grid()).unwrap();
    let record = |lots: &str, accepted: &str, outcome: &str, date: &str| {
        lab()
            .args(["record", "--results"])
            .arg(&grid)
            .args(["--gpu", "h200", "--days", "7", "--lots", lots])
            .args(["--accepted-results", accepted, "--outcome", outcome])
            .args(["--date-utc", date])
            .output()
            .unwrap()
    };
    for (lots, accepted, outcome, date) in [
        ("1", "1000000000000", "completed", "2026-11-20T10:00:00Z"),
        ("1", "999999999999", "completed", "2026-11-21T10:00:00Z"),
        ("1", "0", "completed", "2026-11-22T10:00:00Z"),
        ("19580200", "0", "failed", "2026-11-23T10:00:00Z"),
    ] {
        let out = record(lots, accepted, outcome, date);
        assert!(
            out.status.success(),
            "{lots} {accepted}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let written = std::fs::read_to_string(&grid).unwrap();
    for (lots, accepted, needle) in [
        (
            "1",
            "1000000000001",
            "accepted_results (--accepted-results) is 1000000000001, more than 1000000000000",
        ),
        (
            "1",
            "18446744073709551615",
            "accepted_results (--accepted-results) is 18446744073709551615, more than 1000000000000",
        ),
        (
            "19580201",
            "0",
            "lots (--lots) is 19580201: the package h200 x 19580201 lot(s), 7 days costs \
             10000000254.72 USD, more than the 10000000000.00 USD",
        ),
        ("18446744073709551615", "0", "does not fit in a signed 64-bit cent count"),
    ] {
        let out = record(lots, accepted, "completed", "2026-11-24T10:00:00Z");
        super::support::assert_refused(&out, 2, needle);
        assert_eq!(std::fs::read_to_string(&grid).unwrap(), written, "{needle}");
    }
    let out = lab()
        .args(["results", "--results"])
        .arg(&grid)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1..5],
        [
            "  package                         runs  purchases       spent USD       accepted  USD/result",
            "  h200 x 1 lot(s), 7 days            3          1          510.72  1999999999999    0.000000",
            "  h200 x 19580200 lot(s), 7 days     1          1   9999999744.00              0           -",
            "  all runs                           4          2  10000000254.72  1999999999999    0.005000",
        ]
    );
    let out = lab()
        .args(["results", "--json", "--results"])
        .arg(&grid)
        .output()
        .unwrap();
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["accepted_results"], 1_999_999_999_999_u64);
    assert_eq!(json["spent_cents"], 1_000_000_025_472_i64);
    assert_eq!(json["spent_usd"], "10000000254.72");
    // 10000000254.72 / 1999999999999 = 0.0050000001..., half-to-even to 6 decimals.
    assert_eq!(json["unit_cost_usd"], "0.005000");
    assert_eq!(
        json["packages"][0]["accepted_results"],
        1_999_999_999_999_u64
    );
    assert_eq!(json["packages"][0]["unit_cost_usd"], "0.000000");
    assert_eq!(json["packages"][1]["spent_cents"], 999_999_974_400_i64);
    assert_eq!(json["packages"][1]["unit_cost_usd"], Value::Null);
}

/// A grid edited by hand past the bounds of `lab record` (an amount that would make a total
/// overflow, or does not fit at all) is refused by `lab results` in one line naming the line
/// and the field, exit 2, text and JSON alike: never a panic, never a wrapped total.
#[test]
fn a_hand_written_amount_past_the_bounds_is_refused_by_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.csv");
    let good = "a,2026-11-01T10:00:00Z,,,h200,7,1,,,,1000000000000,completed,\n";
    for (row, needle) in [
        (
            "x,2026-11-02T10:00:00Z,,,h200,7,1,,,,18446744073709551615,completed,",
            "line 3: accepted_results (--accepted-results) is 18446744073709551615",
        ),
        (
            "x,2026-11-02T10:00:00Z,,,h200,7,1,,,,1000000000001,completed,",
            "line 3: accepted_results (--accepted-results) is 1000000000001",
        ),
        (
            "x,2026-11-02T10:00:00Z,,,h200,7,1,,,,18446744073709551616,completed,",
            "line 3: accepted_results '18446744073709551616' is not a whole number",
        ),
        (
            "x,2026-11-02T10:00:00Z,,,h200,7,19580201,,,,,failed,",
            "line 3: lots (--lots) is 19580201",
        ),
        (
            "x,2026-11-02T10:00:00Z,,,h200,7,9223372036854775807,,,,,failed,",
            "line 3: 9223372036854775807 lots x 51072 cents does not fit",
        ),
        (
            "x,2026-11-02T10:00:00Z,,,h200,7,18446744073709551615,,,,,failed,",
            "line 3: 18446744073709551615 lots x 51072 cents does not fit",
        ),
    ] {
        std::fs::write(&grid, format!("{}{good}{row}\n", kit_grid())).unwrap();
        for json in [false, true] {
            let mut command = lab();
            command.args(["results", "--results"]).arg(&grid);
            if json {
                command.arg("--json");
            }
            let out = command.output().unwrap();
            super::support::assert_refused(&out, 2, needle);
        }
    }
}
