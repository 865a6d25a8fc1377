//! `lab plan … --svg FILE --html FILE`: the picture holds the same points as `--json`, the files
//! follow the output rules, and hostile catalog and model names stay well-formed XML.

use crate::support::{lab, repo_root, usage_error};
use serde_json::Value;
use std::path::Path;

fn model(name: &str) -> String {
    repo_root()
        .join("examples/models")
        .join(name)
        .display()
        .to_string()
}

const SERVE: [&str; 6] = [
    "--requests",
    "20000",
    "--input-tokens",
    "512",
    "--output-tokens",
    "256",
];
const TRAIN: [&str; 6] = [
    "--mode",
    "training",
    "--train-tokens",
    "50000000",
    "--method",
    "lora",
];

/// One point as both files state it: gpu, days, setup, hours, ceiling hours, cost, factors.
type Key = (String, String, String, String, String, String, String);

fn json_points(v: &Value) -> Vec<Key> {
    let mut out = Vec::new();
    for row in v["time"]["rows"].as_array().unwrap() {
        let setups = row["setup"].as_object().into_iter();
        let alternatives = row["alternatives"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_object);
        for s in setups.chain(alternatives) {
            let Some(f) = s["finish"].as_object() else {
                continue;
            };
            out.push((
                row["gpu"].as_str().unwrap().to_string(),
                row["days"].to_string(),
                s["using"].as_str().unwrap().to_string(),
                f["hours"].as_str().unwrap().to_string(),
                f["ceiling_hours"].as_str().unwrap().to_string(),
                f["cost_usd"].as_str().unwrap().to_string(),
                row["factors"].as_str().unwrap().to_string(),
            ));
        }
    }
    out.sort();
    out
}

fn svg_points(svg: &str) -> Vec<Key> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
    let mut out: Vec<Key> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("point"))
        .map(|n| {
            let a = |k: &str| n.attribute(k).unwrap().to_string();
            (
                a("data-gpu"),
                a("data-days"),
                a("data-using"),
                a("data-hours"),
                a("data-ceiling-hours"),
                a("data-cost-usd"),
                a("data-factors"),
            )
        })
        .collect();
    out.sort();
    out
}

/// Runs `lab plan --json --svg --html` in `dir`; returns the JSON, the SVG and the page.
fn run(dir: &Path, args: &[&str]) -> (Value, String, String) {
    let (svg, html) = (dir.join("plan.svg"), dir.join("plan.html"));
    let output = lab()
        .args(args)
        .arg("--json")
        .arg("--svg")
        .arg(&svg)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        serde_json::from_slice(&output.stdout).unwrap(),
        std::fs::read_to_string(svg).unwrap(),
        std::fs::read_to_string(html).unwrap(),
    )
}

#[test]
fn the_picture_and_the_json_of_one_plan_hold_the_same_points() {
    for (name, workload) in [("llama-3.1-8b", SERVE), ("qwen2.5-0.5b", TRAIN)] {
        let dir = tempfile::tempdir().unwrap();
        let m = model(name);
        let mut args = vec!["plan", "--model", m.as_str()];
        args.extend(workload);
        let (json, svg, html) = run(dir.path(), &args);
        let from_json = json_points(&json);
        assert!(from_json.len() >= 15, "{name}: {}", from_json.len());
        assert_eq!(svg_points(&svg), from_json, "{name}");
        assert!(html.contains(svg.as_str()));
        // One table row per point, with the same cost.
        assert_eq!(html.matches("<tr").count(), from_json.len() + 1);
        for p in &from_json {
            assert!(html.contains(&format!("<td class=\"n\">{}</td>", p.5)));
        }
        // The answer line is the title: the text output's first line.
        let text = lab().args(&args).output().unwrap();
        let first = String::from_utf8(text.stdout).unwrap();
        let answer = first.lines().next().unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let title = doc
            .root_element()
            .children()
            .find(|n| n.has_tag_name("title"))
            .unwrap();
        assert_eq!(title.text(), Some(answer));
    }
}

#[test]
fn hostile_catalog_and_model_names_stay_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root().join("data");
    let long = "x".repeat(300);
    let names = [
        ("h100", "<h100>&'".to_string()),
        (
            "t4",
            "\u{5e9}\u{5dc}\u{5d5}\u{5dd}-\u{627}\u{644}\u{639}".to_string(),
        ),
        ("l4", long.clone()),
    ];
    for file in ["tarifs-forfaits.csv", "gpu-memory.csv", "gpu-perf.csv"] {
        let mut text = std::fs::read_to_string(root.join(file)).unwrap();
        for (from, to) in &names {
            text = text
                .lines()
                .map(|l| match l.strip_prefix(&format!("{from},")) {
                    Some(rest) => format!("{to},{rest}"),
                    None => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
        std::fs::write(dir.path().join(file), text + "\n").unwrap();
    }
    let folder = dir.path().join("m<&'\u{202e}>");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(
        repo_root().join("examples/models/llama-3.1-8b/config.json"),
        folder.join("config.json"),
    )
    .unwrap();
    let p = |f: &str| dir.path().join(f).display().to_string();
    let (catalog, memory, perf, m) = (
        p("tarifs-forfaits.csv"),
        p("gpu-memory.csv"),
        p("gpu-perf.csv"),
        folder.display().to_string(),
    );
    let mut args = vec![
        "plan",
        "--model",
        m.as_str(),
        "--tariffs",
        catalog.as_str(),
        "--gpu-memory",
        memory.as_str(),
        "--gpu-perf",
        perf.as_str(),
    ];
    args.extend(SERVE);
    let (json, svg, html) = run(dir.path(), &args);
    let points = svg_points(&svg);
    assert_eq!(points, json_points(&json));
    for (_, to) in &names {
        assert!(points.iter().any(|k| &k.0 == to), "{to}");
    }
    assert!(!svg.contains("<h100>") && svg.contains("&lt;h100&gt;&amp;&#39;"));
    assert!(!html.contains("<h100>") && !html.contains("m<&"));
}

#[test]
fn picture_paths_follow_the_output_rules() {
    let dir = tempfile::tempdir().unwrap();
    let m = model("llama-3.1-8b");
    let taken = dir.path().join("taken.svg");
    std::fs::write(&taken, "keep").unwrap();
    let (taken_s, new_svg, new_html) = (
        taken.display().to_string(),
        dir.path().join("new.svg").display().to_string(),
        dir.path().join("new.html").display().to_string(),
    );
    let missing = dir.path().join("no/such/plan.svg").display().to_string();
    let slash = format!("{}/", dir.path().join("x.svg").display());
    let mut base = vec!["plan", "--model", m.as_str()];
    base.extend(SERVE);
    let cases: [(Vec<&str>, &str); 6] = [
        (vec!["--svg", taken_s.as_str()], "already exists"),
        (
            vec!["--html", taken_s.as_str(), "--svg", new_svg.as_str()],
            "already exists",
        ),
        (
            vec!["--svg", new_svg.as_str(), "--html", taken_s.as_str()],
            "already exists",
        ),
        (vec!["--svg", missing.as_str()], "does not exist"),
        (vec!["--html", slash.as_str()], "ends with '/'"),
        (
            vec!["--svg", new_svg.as_str(), "--html", new_svg.as_str()],
            "both name",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = base.clone();
        args.extend(extra);
        usage_error(&args, needle);
        assert_eq!(std::fs::read_to_string(&taken).unwrap(), "keep");
        assert!(!Path::new(&new_svg).exists() && !Path::new(&new_html).exists());
    }
    // Without a workload, or with a workload no GPU runs: refused, nothing written.
    usage_error(
        &["plan", "--model", m.as_str(), "--svg", new_svg.as_str()],
        "--svg and --html draw a workload",
    );
    let mut huge = vec!["plan", "--model", m.as_str(), "--batch", "4294967296"];
    huge.extend(SERVE);
    huge.extend(["--svg", new_svg.as_str(), "--html", new_html.as_str()]);
    let out = lab().args(&huge).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!Path::new(&new_svg).exists() && !Path::new(&new_html).exists());
    // A good run writes both, once; the text still goes to stdout.
    let mut good = base.clone();
    good.extend(["--svg", new_svg.as_str(), "--html", new_html.as_str()]);
    let out = lab().args(&good).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("answer: "));
    let svg = std::fs::read_to_string(&new_svg).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    usage_error(&good, "already exists");
    assert_eq!(std::fs::read_to_string(&new_svg).unwrap(), svg);
}

/// `kill -9` at moments spread over a whole run, the write included: the folder then holds
/// nothing or the whole picture, never a part of it nor a temporary file (on Linux the file
/// has no name until it is complete; `output.rs`).
#[test]
fn a_kill_at_any_moment_leaves_the_whole_picture_or_nothing() {
    let m = model("llama-3.1-8b");
    let mut args = vec!["plan", "--model", m.as_str()];
    args.extend(SERVE);
    let dir = tempfile::tempdir().unwrap();
    // How long a whole run takes here, to spread the kills over it.
    let full = dir.path().join("full.svg");
    let started = std::time::Instant::now();
    let out = lab().args(&args).arg("--svg").arg(&full).output().unwrap();
    assert!(out.status.success());
    let whole = std::fs::read(&full).unwrap();
    let span = started.elapsed().as_micros().max(1) as u64;
    for i in 0..5u64 {
        let run = dir.path().join(format!("run{i}"));
        std::fs::create_dir(&run).unwrap();
        let target = run.join("plan.svg");
        let mut child = std::process::Command::new(crate::support::lab_path())
            .args(&args)
            .arg("--svg")
            .arg(&target)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // From early to a little past the end, denser near the end where the write is.
        let at = span * (70 + 10 * i) / 100;
        std::thread::sleep(std::time::Duration::from_micros(at));
        let _ = child.kill();
        let _ = child.wait();
        let names: Vec<String> = std::fs::read_dir(&run)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        match names.as_slice() {
            [] => {}
            [one] if one == "plan.svg" => {
                assert_eq!(std::fs::read(&target).unwrap(), whole, "kill {i}: a part")
            }
            other => panic!("kill {i} at {at} µs left {other:?}"),
        }
    }
}
