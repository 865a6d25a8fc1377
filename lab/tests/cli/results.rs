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
