//! `lab compare` through the binary: ranking, lots rounded up, JSON, errors.

use super::support::{json, lab, usage_error};
use serde_json::Value;

fn price(gpu: &str, days: &str, lots: &str, accepted: &str) -> Value {
    json(&[
        "price",
        "--gpu",
        gpu,
        "--days",
        days,
        "--lots",
        lots,
        "--accepted-results",
        accepted,
        "--json",
    ])
}

#[test]
fn three_gpus_for_seven_days_matches_lab_price() {
    let v = json(&[
        "compare",
        "--gpus",
        "3",
        "--days",
        "7",
        "--accepted-results",
        "1000",
        "--json",
    ]);
    assert_eq!(v["gpus_needed"], 3);
    assert_eq!(v["days"], 7);
    let packages = v["packages"].as_array().unwrap();
    assert_eq!(packages.len(), 15);
    let mut last = 0i64;
    for (i, p) in packages.iter().enumerate() {
        assert_eq!(p["rank"], i + 1);
        let total = p["total_cents"].as_i64().unwrap();
        assert!(total >= last, "not sorted at {i}");
        last = total;
        let per_lot = p["gpus_per_lot"].as_u64().unwrap();
        let lots = p["lots"].as_u64().unwrap();
        assert_eq!(lots, 3u64.div_ceil(per_lot));
        assert_eq!(p["gpus"].as_u64().unwrap(), lots * per_lot);
        assert_eq!(p["extra_gpus"].as_u64().unwrap(), lots * per_lot - 3);
        // the same numbers as `lab price` for that package
        let q = price(p["gpu"].as_str().unwrap(), "7", &lots.to_string(), "1000");
        for key in [
            "total_cents",
            "total_usd",
            "unit_cost_usd",
            "lot_price_cents",
            "model",
        ] {
            assert_eq!(p[key], q[key], "{key} of {}", p["gpu"]);
        }
        assert!(p["usd_per_gpu_day"].as_str().unwrap().contains('.'));
    }
    // One catalog object for the whole answer, none per package; keys in the documented order.
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "gpus_needed",
            "days",
            "accepted_results",
            "packages",
            "catalog"
        ]
    );
    let keys: Vec<&str> = packages[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "rank",
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
            "extra_gpus",
            "usd_per_gpu_day"
        ]
    );
    let b200 = packages.iter().find(|p| p["gpu"] == "b200").unwrap();
    assert_eq!(b200["lots"], 2);
    assert_eq!(b200["gpus"], 4);
}

#[test]
fn per_gpu_day_is_lot_price_over_gpu_days() {
    let v = json(&["compare", "--gpus", "1", "--days", "30", "--json"]);
    for p in v["packages"].as_array().unwrap() {
        assert_eq!(p["accepted_results"], Value::Null);
        assert_eq!(p["unit_cost_usd"], Value::Null);
        assert_eq!(p["lots"], 1);
        let cents = p["lot_price_cents"].as_i64().unwrap() as i128;
        let gpu_days = p["gpus_per_lot"].as_i64().unwrap() as i128 * 30;
        // usd_per_gpu_day has 6 decimals: compare in micro-dollars within half a unit
        let shown: String = p["usd_per_gpu_day"].as_str().unwrap().replace('.', "");
        let micro: i128 = shown.parse().unwrap();
        assert!((micro * gpu_days - cents * 10_000).abs() * 2 <= gpu_days);
    }
}

#[test]
fn text_table() {
    let output = lab()
        .args(["compare", "--gpus", "4", "--days", "3"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.starts_with("packages giving at least 4 GPUs for 3 days, cheapest first:"));
    assert!(text.contains("USD/GPU-day"));
    assert!(text.contains("give --accepted-results K"));
    assert!(text.contains("illustrative prices"));
    assert_eq!(text.lines().count(), 1 + 1 + 15 + 2);
}

#[test]
fn bad_input() {
    usage_error(&["compare", "--gpus", "0", "--days", "7"], "--gpus");
    usage_error(&["compare", "--gpus", "-2", "--days", "7"], "--gpus");
    usage_error(&["compare", "--gpus", "1.5", "--days", "7"], "--gpus");
    usage_error(&["compare", "--gpus", "2", "--days", "5"], "3, 7, 30");
    usage_error(
        &[
            "compare",
            "--gpus",
            "2",
            "--days",
            "7",
            "--accepted-results",
            "0",
        ],
        "--accepted-results",
    );
    usage_error(
        &["compare", "--gpus", "18446744073709551615", "--days", "30"],
        "64-bit",
    );
    // The overflow speaks of the GPUs the user asked for, never of lots they did not type.
    let stderr = usage_error(
        &["compare", "--gpus", "9223372036854775807", "--days", "7"],
        "9223372036854775807 GPUs is too many",
    );
    assert!(stderr.contains("ask for fewer GPUs"), "{stderr}");
    assert!(!stderr.contains("buy fewer lots"), "{stderr}");
}

#[test]
fn another_catalog_goes_through_the_validator() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("t.csv");
    std::fs::write(&bad, "gpu;model;gpus_per_lot;days;price_cents\n").unwrap();
    let output = lab()
        .args(["compare", "--gpus", "1", "--days", "7", "--tariffs"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let missing = dir.path().join("none.csv");
    let output = lab()
        .args(["compare", "--gpus", "1", "--days", "7", "--tariffs"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
}
