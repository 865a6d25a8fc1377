//! `lab price` and `lab tariffs` through the binary: output values, exit codes, messages.

use super::support::{json, lab, usage_error};
use predicates::prelude::*;
use predicates::str::contains;
use serde_json::Value;

#[test]
fn two_b200_lots_for_seven_days_json() {
    let v = json(&[
        "price", "--gpu", "b200", "--days", "7", "--lots", "2", "--json",
    ]);
    assert_eq!(v["gpu"], "b200");
    assert_eq!(v["model"], "NVIDIA B200 180 GB");
    assert_eq!(v["days"], 7);
    assert_eq!(v["lots"], 2);
    assert_eq!(v["gpus_per_lot"], 2);
    assert_eq!(v["gpus"], 4);
    assert_eq!(v["lot_price_cents"], 153_216);
    assert_eq!(v["total_cents"], 306_432);
    assert_eq!(v["total_usd"], "3064.32");
    assert_eq!(v["accepted_results"], Value::Null);
    assert_eq!(v["unit_cost_usd"], Value::Null);
    assert_eq!(v["catalog"]["snapshot_date"], "2026-09-24");
    assert_eq!(v["catalog"]["embedded"], true);
    assert_eq!(v["catalog"]["illustrative"], true);
    assert_eq!(v["catalog"]["sha256"].as_str().unwrap().len(), 64);
    // The keys in the documented order (lab::pricing::Quote, then the catalog).
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let expected = vec![
        "gpu",
        "model",
        "days",
        "lots",
        "gpus_per_lot",
        "gpus",
        "lot_price_cents",
        "total_cents",
        "total_usd",
        "accepted_results",
        "unit_cost_usd",
        "catalog",
    ];
    assert_eq!(keys, expected);
}

#[test]
fn unit_cost_rounds_half_to_even() {
    // 153,216 cents / 2,560,000 results = 598.5 micro-dollars -> 598.
    let v = json(&[
        "price",
        "--gpu",
        "b200",
        "--days",
        "7",
        "--lots",
        "1",
        "--accepted-results",
        "2560000",
        "--json",
    ]);
    assert_eq!(v["accepted_results"], 2_560_000);
    assert_eq!(v["unit_cost_usd"], "0.000598");
    // 306,432 cents / 1,000 = 3.06432 USD.
    let v = json(&[
        "price",
        "--gpu",
        "b200",
        "--days",
        "7",
        "--lots",
        "2",
        "--accepted-results",
        "1000",
        "--json",
    ]);
    assert_eq!(v["unit_cost_usd"], "3.064320");
}

#[test]
fn human_summary() {
    lab()
        .args([
            "price",
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "2",
            "--accepted-results",
            "3",
        ])
        .assert()
        .success()
        .stdout(contains("2 lots x 2 GPUs per lot = 4 GPUs"))
        .stdout(contains("3064.32 USD"))
        .stdout(contains("1021.440000 USD per accepted result"))
        .stdout(contains(
            "embedded catalog, illustrative prices (stand-ins for the 2026-09-24 snapshot)",
        ));
}

#[test]
fn singular_and_plural_gpu_counts() {
    let text = |gpu: &str, lots: &str| {
        let output = lab()
            .args(["price", "--gpu", gpu, "--days", "7", "--lots", lots])
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(text("t4", "1").contains("1 lot x 1 GPU per lot = 1 GPU\n"));
    assert!(text("t4", "3").contains("3 lots x 1 GPU per lot = 3 GPUs\n"));
    assert!(text("b200", "1").contains("1 lot x 2 GPUs per lot = 2 GPUs\n"));
}

#[test]
fn lots_hint_fits_the_flag() {
    usage_error(
        &["price", "--gpu", "b200", "--days", "7", "--lots", "1.5"],
        "invalid value '1.5' for '--lots <N>': must be a whole number of at least 1, written with the digits 0-9 only (write all the digits: no decimal point, exponent or separator)",
    );
    let output = lab()
        .args(["price", "--gpu", "b200", "--days", "7", "--lots", "1.5"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&output.stderr).contains("7000000000"));
}

#[test]
fn abbreviated_flags_are_refused() {
    for args in [
        ["price", "--gpu", "b200", "--day", "7", "--lots", "1"],
        ["price", "--gpu", "b200", "--days", "7", "--lot", "1"],
    ] {
        let output = lab().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

/// Runs `lab price` and `lab tariffs` on `--tariffs path`: exit `code`, one stderr line
/// containing `needle`, nothing on stdout.
fn tariffs_refused(path: &std::ffi::OsStr, code: i32, needle: &str) {
    for command in [
        &[
            "price",
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "1",
            "--tariffs",
        ][..],
        &["tariffs", "--tariffs"][..],
    ] {
        let output = lab().args(command).arg(path).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{path:?}: {stderr}");
        assert!(output.stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(needle),
            "{path:?}: expected '{needle}' in {stderr}"
        );
    }
}

#[test]
fn catalog_reads_are_bounded() {
    // A device that never ends, a folder: not a regular file, refused unread (bad input, 2).
    #[cfg(unix)]
    tariffs_refused("/dev/zero".as_ref(), 2, "/dev/zero: not a regular file");
    let dir = tempfile::tempdir().unwrap();
    tariffs_refused(dir.path().as_os_str(), 2, "not a regular file");
    // Over 1 MiB: refused (2), whatever it holds.
    let big = dir.path().join("big.csv");
    let catalog = include_str!("../../data/tarifs-forfaits.csv");
    let padding = "\n".repeat((1 << 20) - catalog.len() + 1);
    std::fs::write(&big, format!("{catalog}{padding}")).unwrap();
    tariffs_refused(big.as_os_str(), 2, "larger than 1048576 bytes (1 MiB)");
    // Exactly 1 MiB is still read (and valid: trailing blank lines are accepted).
    let edge = dir.path().join("edge.csv");
    std::fs::write(&edge, format!("{catalog}{}", &padding[1..])).unwrap();
    lab()
        .args(["tariffs", "--tariffs"])
        .arg(&edge)
        .assert()
        .success();
    // An empty path is bad input (2); a missing file is a runtime failure (1).
    tariffs_refused("".as_ref(), 2, "--tariffs");
    tariffs_refused(
        dir.path().join("missing.csv").as_os_str(),
        1,
        "cannot read catalog",
    );
}

#[test]
fn catalog_label_follows_the_content_not_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = include_str!("../../data/tarifs-forfaits.csv");
    let price = |path: &std::path::Path| {
        let output = lab()
            .args([
                "price",
                "--gpu",
                "t4",
                "--days",
                "3",
                "--lots",
                "1",
                "--json",
                "--tariffs",
            ])
            .arg(path)
            .output()
            .unwrap();
        assert!(output.status.success());
        serde_json::from_slice::<Value>(&output.stdout).unwrap()["catalog"].clone()
    };
    // A CRLF copy of the shipped prices is still the shipped (illustrative) catalog.
    let crlf = dir.path().join("crlf.csv");
    std::fs::write(&crlf, catalog.replace('\n', "\r\n")).unwrap();
    let info = price(&crlf);
    assert_eq!(info["snapshot_date"], "2026-09-24");
    assert_eq!(info["illustrative"], true);
    assert_eq!(info["embedded"], false);
    assert_eq!(
        info["sha256"],
        lab::digest::sha256_hex(catalog.replace('\n', "\r\n").as_bytes())
    );
    // Other prices: no date, not illustrative, in JSON and in text.
    let other = dir.path().join("other.csv");
    std::fs::write(&other, catalog.replacen(",2520\n", ",2999\n", 1)).unwrap();
    let info = price(&other);
    assert_eq!(info["snapshot_date"], Value::Null);
    assert_eq!(info["illustrative"], false);
    let keys: Vec<&str> = info
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 4, "{keys:?}");
    for command in [
        &[
            "price",
            "--gpu",
            "t4",
            "--days",
            "3",
            "--lots",
            "1",
            "--tariffs",
        ][..],
        &["tariffs", "--tariffs"][..],
    ] {
        let output = lab().args(command).arg(&other).output().unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(
            text.contains(&format!(
                "catalog from {} (snapshot date unknown)",
                other.display()
            )),
            "{text}"
        );
        assert!(!text.contains("illustrative"), "{text}");
        assert!(!text.contains("2026-09-24"), "{text}");
    }
}

#[test]
fn unknown_gpu_lists_valid_ids() {
    usage_error(
        &["price", "--gpu", "x100", "--days", "7", "--lots", "1"],
        "unknown GPU 'x100'; valid ids: t4, l4,",
    );
}

#[test]
fn wrong_duration_lists_valid_ones() {
    for days in ["5", "0", "-7", "7.5", "seven", "14"] {
        usage_error(
            &["price", "--gpu", "b200", "--days", days, "--lots", "1"],
            "3, 7, 30",
        );
    }
}

#[test]
fn bad_lots_are_rejected() {
    for lots in [
        "0",
        "-1",
        "1.5",
        "abc",
        "",
        "1e3",
        "99999999999999999999999",
    ] {
        usage_error(
            &["price", "--gpu", "b200", "--days", "7", "--lots", lots],
            "for '--lots <N>': must be a whole number",
        );
    }
}

#[test]
fn bad_accepted_results_are_rejected() {
    for k in ["0", "-3", "2.5", "ten"] {
        usage_error(
            &[
                "price",
                "--gpu",
                "b200",
                "--days",
                "7",
                "--lots",
                "1",
                "--accepted-results",
                k,
            ],
            "for '--accepted-results <K>': must be a whole number of at least 1",
        );
    }
}

#[test]
fn overflowing_total_is_rejected() {
    // 587,520 cents x 10^16 lots > 2^63 - 1 cents.
    usage_error(
        &[
            "price",
            "--gpu",
            "b200",
            "--days",
            "30",
            "--lots",
            "10000000000000000",
        ],
        "does not fit in a signed 64-bit cent count",
    );
}

#[test]
fn unreadable_tariffs_file_is_a_runtime_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.csv");
    lab()
        .args([
            "price",
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "1",
            "--tariffs",
        ])
        .arg(&missing)
        .assert()
        .code(1)
        .stderr(contains("cannot read catalog"))
        .stderr(predicate::function(|s: &str| s.lines().count() == 1));
}

#[test]
fn tariffs_table_is_sorted_by_price_per_gpu_day() {
    let v = json(&["tariffs", "--json"]);
    let packages = v["packages"].as_array().unwrap();
    assert_eq!(packages.len(), 45);
    assert_eq!(v["days"], Value::Null);
    let per_day: Vec<rust_decimal::Decimal> = packages
        .iter()
        .map(|p| p["usd_per_gpu_day"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(per_day.windows(2).all(|w| w[0] <= w[1]), "{per_day:?}");
    let b200 = packages
        .iter()
        .find(|p| p["gpu"] == "b200" && p["days"] == 7)
        .unwrap();
    assert_eq!(b200["usd_per_gpu_day"], "109.440000");
    assert_eq!(b200["lot_price_usd"], "1532.16");
    assert_eq!(b200["lot_price_cents"], 153_216);
    assert_eq!(b200["gpus_per_lot"], 2);
    let keys: Vec<&str> = b200
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "gpu",
            "model",
            "days",
            "gpus_per_lot",
            "lot_price_cents",
            "lot_price_usd",
            "usd_per_gpu_day"
        ]
    );

    let v = json(&["tariffs", "--days", "30", "--json"]);
    assert_eq!(v["days"], 30);
    let packages = v["packages"].as_array().unwrap();
    assert_eq!(packages.len(), 15);
    assert!(packages.iter().all(|p| p["days"] == 30));
}

#[test]
fn tariffs_table_text_and_bad_days() {
    lab()
        .args(["tariffs", "--days", "7"])
        .assert()
        .success()
        .stdout(contains("USD per GPU-day"))
        .stdout(contains("15 packages, cheapest per GPU-day first"));
    usage_error(
        &["tariffs", "--days", "10"],
        "for '--days <D>': must be one of 3, 7, 30",
    );
}
