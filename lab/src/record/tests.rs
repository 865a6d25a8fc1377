//! Unit tests of the record: the cell guard, the row encoding and the grid checks.

use super::grid::check_grid;
use super::*;

#[test]
fn a_run_date_in_the_future_is_refused() {
    let now = time::macros::datetime!(2026-11-29 15:00:00 UTC);
    assert!(check_not_in_future("2026-11-29T15:00:00Z", now).is_ok());
    assert!(check_not_in_future("2026-11-29T16:00:00Z", now).is_ok()); // clock skew
    let e = check_not_in_future("2026-11-29T16:00:01Z", now).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("is in the future"), "{e}");
    assert!(check_not_in_future("2062-11-29T15:00:00Z", now).is_err());
}

fn row() -> GridRow {
    GridRow {
        run_id: "run-1".into(),
        date_utc: "2026-10-02T14:05:00Z".into(),
        measurement_file: Some("m.json".into()),
        measurement_sha256: Some("ab".repeat(32)),
        gpu: "b200".into(),
        days: 7,
        lots: 2,
        quality_metric: Some("accuracy".into()),
        threshold: Some(">=0.92".into()),
        observed: Some("-0.5".into()),
        accepted_results: Some(3),
        outcome: "completed".into(),
        notes: None,
    }
}

#[test]
fn grid_row_fields_are_the_kit_header_in_order() {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.serialize(row()).unwrap();
    let text = String::from_utf8(writer.into_inner().unwrap()).unwrap();
    let header = text.lines().next().unwrap();
    assert_eq!(header, KIT_GRID.lines().next().unwrap());
    assert_eq!(header.split(',').collect::<Vec<_>>(), kit_header());
    // The JSON of `lab record --json` follows the same order, values typed.
    let json = serde_json::to_string(&row()).unwrap();
    let keys: Vec<usize> = kit_header()
        .iter()
        .map(|k| json.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{json}");
    assert!(json.contains("\"days\":7,\"lots\":2"), "{json}");
    assert!(json.ends_with("\"notes\":null}"), "{json}");
}

#[test]
fn encoded_row_is_one_line_with_empty_cells_for_absent_values() {
    let encoded = encode_row(&row(), false).unwrap();
    assert_eq!(
        String::from_utf8(encoded).unwrap(),
        format!(
            "run-1,2026-10-02T14:05:00Z,m.json,{},b200,7,2,accuracy,>=0.92,-0.5,3,completed,\n",
            "ab".repeat(32)
        )
    );
    assert!(encode_row(&row(), true).unwrap().ends_with(b",\r\n"));
}

/// Every column, whatever fills it, goes through the same guard on the encoded row.
#[test]
fn every_cell_goes_through_the_guard() {
    type Edit = fn(&mut GridRow, String);
    let columns: [(&str, Edit); 10] = [
        ("--run-id", |r, v| r.run_id = v),
        ("--date-utc", |r, v| r.date_utc = v),
        ("the measurement file name", |r, v| {
            r.measurement_file = Some(v)
        }),
        ("the measurement's SHA-256", |r, v| {
            r.measurement_sha256 = Some(v)
        }),
        ("--gpu", |r, v| r.gpu = v),
        ("--quality-metric", |r, v| r.quality_metric = Some(v)),
        ("--threshold", |r, v| r.threshold = Some(v)),
        ("--observed", |r, v| r.observed = Some(v)),
        ("--outcome", |r, v| r.outcome = v),
        ("--notes", |r, v| r.notes = Some(v)),
    ];
    let formulas = ["=HYPERLINK(1)", "@SUM(1)", "+cmd", "-x", "\tx", "\rx"];
    let hidden = [
        "a\nb",
        "a\r",
        "x\u{1b}[2J",
        "x\u{202e}y",
        "x\u{200b}",
        "x\u{2028}y",
        "\u{feff}x",
    ];
    for (source, edit) in columns {
        for bad in formulas.iter().chain(&hidden) {
            let mut r = row();
            edit(&mut r, bad.to_string());
            let e = encode_row(&r, false).expect_err(&format!("{source}: {bad:?} accepted"));
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().starts_with(source), "{source} {bad:?}: {e}");
        }
        // Only the first character makes a formula; hidden characters count anywhere.
        for text in formulas {
            let mut r = row();
            edit(&mut r, format!("ok{text}"));
            assert_eq!(
                encode_row(&r, false).is_ok(),
                !text.starts_with(['\t', '\r']),
                "{source} ok{text:?}"
            );
        }
    }
    let mut file = row();
    file.measurement_file = Some("=HYPERLINK(1).json".into());
    assert_eq!(
        encode_row(&file, false).unwrap_err().to_string(),
        "the measurement file name '=HYPERLINK(1).json' starts with '=', which a spreadsheet \
         would run as a formula; rename the file so that its name starts with a letter or a \
         digit"
    );
    file.measurement_file = Some("a\nb.json".into());
    assert_eq!(
        encode_row(&file, false).unwrap_err().to_string(),
        r"the measurement file name 'a\nb.json' holds the character \u{a}, which a grid cell must not; rename the file so that it is one line of visible text"
    );
    // Signed numbers only in the numeric columns; joiners are text.
    let mut ok = row();
    ok.threshold = Some("+3".into());
    ok.notes = Some("👩\u{200d}💻 run".into());
    assert!(encode_row(&ok, false).is_ok());
    ok.notes = Some("-0.5".into());
    assert!(encode_row(&ok, false).is_err());
}

#[test]
fn kit_header_is_the_grid_header() {
    let header = kit_header();
    assert_eq!(header.first(), Some(&"run_id"));
    assert!(header.contains(&"measurement_sha256"));
    assert!(header.contains(&"accepted_results"));
    assert_eq!(header.len(), 13);
}

#[test]
fn dates() {
    assert!(check_date_utc("2026-10-02T14:05:00Z").is_ok());
    for bad in [
        "2026-10-02 14:05:00Z",
        "2026-13-02T14:05:00Z",
        "2026-10-02T24:05:00Z",
        "2026-10-02T14:05:00",
        "2026-10-02T14:05:00+00:00",
        "",
        "２026-10-02T14:05:00Z",
        "2026-02-30T00:00:00Z",
        "2026-04-31T10:00:00Z",
        "2025-02-29T10:00:00Z",
        "2026-10-02T14:05:00z",
        "2026-10-02t14:05:00Z",
    ] {
        assert!(check_date_utc(bad).is_err(), "{bad}");
    }
    assert!(check_date_utc("2028-02-29T23:59:59Z").is_ok());
    // Leap seconds: all refused, the real one of 2016 too, and said so.
    for leap in [
        "2026-12-31T23:59:60Z",
        "2016-12-31T23:59:60Z",
        "2026-06-30T23:59:60Z",
        "2026-10-02T14:05:60Z",
    ] {
        let e = check_date_utc(leap).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{leap}");
        assert_eq!(
            e.to_string(),
            format!(
                "--date-utc must be a real UTC time written like 2026-10-02T14:05:00Z, got \
                 '{leap}' (second 60: leap seconds are refused, lab cannot tell which ones \
                 happened; write :59)"
            )
        );
    }
    assert!(check_date_utc("2026-12-31T23:59:59Z").is_ok());
    assert!(check_date_utc("2026-12-31T23:59:61Z").is_err());
    let e = check_date_utc("2026-02-30T00:00:00Z").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("not a date on the calendar"), "{e}");
}

#[test]
fn formulas_are_refused_numbers_are_not() {
    for (value, numeric) in [
        ("=1+1", false),
        ("+33", false),
        ("-x", false),
        ("@SUM(A1)", false),
        ("\tx", false),
        ("\rx", false),
        ("=0.9", true),
        ("-1+2", true),
        ("+", true),
        ("-.", true),
        ("--1", true),
        ("-1e5", false),
        ("-inf", true),
        ("-infinity", true),
        ("+NaN", true),
        ("-1e999", true),
        ("-1e", true),
        ("-e5", true),
        ("-1e5x", true),
        ("- 1", true),
        ("-1 ", true),
        ("-0x10", true),
        ("-1,5", true),
        ("+1e5+1", true),
    ] {
        let e = check_formula("--notes", value, numeric).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{value}");
        assert!(e.to_string().contains("formula"), "{value}: {e}");
    }
    for (value, numeric) in [
        ("", false),
        ("accuracy", false),
        ("run 2 = run 1 again", false),
        (">=0.92", true),
        ("<= -0.1", true),
        ("-0.5", true),
        ("+3", true),
        ("-.5", true),
        ("7.", true),
        ("-1e5", true),
        ("+1E5", true),
        ("-2.5e-3", true),
        ("+2.5E+3", true),
        ("-0", true),
        ("1e5", false),
    ] {
        assert!(check_formula("--x", value, numeric).is_ok(), "{value}");
    }
    let e = check_formula("--observed", "-x", true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--observed starts with '-', which a spreadsheet would run as a formula; reword it so \
         it starts with a letter, a digit or a comparison sign (e.g. >=0.92); a signed number on \
         its own, such as -0.5, +3 or -1e5, is accepted as it is"
    );
    let e = check_formula("--notes", "-1e5", false).unwrap_err();
    assert!(!e.to_string().contains("signed number"), "{e}");
}

#[test]
fn only_completed_runs_accept_results() {
    for outcome in OUTCOMES {
        assert!(check_outcome_and_accepted(outcome, None).is_ok());
        assert!(check_outcome_and_accepted(outcome, Some(0)).is_ok());
    }
    assert!(check_outcome_and_accepted("completed", Some(50)).is_ok());
    for outcome in ["failed", "interrupted", "rejected"] {
        let e = check_outcome_and_accepted(outcome, Some(50)).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(outcome), "{e}");
    }
}

#[test]
fn grid_checks() {
    let p = Path::new("g.csv");
    let ok = check_grid(p, KIT_GRID.as_bytes()).unwrap();
    assert!(ok.rows.is_empty());
    assert_eq!(ok.lines, 1);
    assert!(!ok.crlf);
    let crlf = KIT_GRID.replace('\n', "\r\n");
    assert!(check_grid(p, crlf.as_bytes()).unwrap().crlf);
    let bom = format!("\u{feff}{KIT_GRID}");
    assert!(check_grid(p, bom.as_bytes()).is_ok());
    let renamed = KIT_GRID.replace("observed", "obs");
    assert!(check_grid(p, renamed.as_bytes())
        .unwrap_err()
        .to_string()
        .contains("header"));
    let short = format!("{KIT_GRID}a,b\n");
    assert!(check_grid(p, short.as_bytes())
        .unwrap_err()
        .to_string()
        .contains("line 2 has 2 fields"));
    assert!(check_grid(p, b"").is_err());
    assert!(check_grid(p, b"\xff\xfe").is_err());
}
