//! A document is user input: every numeric field at its extremes must still give a
//! report, and an SVG that is well-formed XML, in bounded time.
use super::*;
use crate::document::tests::sample_json;
use serde_json::Value;

/// Every numeric field of a document, as a JSON pointer (`*`: every row; `warm`: every
/// `warm_forward` row).
const FIELDS: [&str; 27] = [
    "/environment/total_memory_bytes",
    "/environment/multiprocessor_count",
    "/environment/device_count",
    "/configuration/batch",
    "/configuration/context",
    "/configuration/width",
    "/configuration/warmup",
    "/configuration/repeats",
    "/configuration/seed",
    "/synthetic_model/width",
    "/synthetic_model/hidden",
    "/synthetic_model/parameters",
    "/synthetic_model/dtype_bytes",
    "/synthetic_model/parameter_bytes",
    "/synthetic_model/input_bytes",
    "/synthetic_model/output_bytes",
    "/synthetic_model/flops_per_forward",
    "/phases/warm/repetition",
    "/phases/*/forward_passes",
    "/phases/*/wall_seconds",
    "/phases/*/gpu_seconds",
    "/phases/*/baseline_allocated_bytes",
    "/phases/*/baseline_reserved_bytes",
    "/phases/*/end_allocated_bytes",
    "/phases/*/end_reserved_bytes",
    "/phases/*/peak_allocated_bytes",
    "/phases/*/peak_reserved_bytes",
];

/// The values every numeric field is set to: integers at their extremes, and floats from
/// the smallest subnormal to `f64::MAX`.
fn extreme_values() -> Vec<Value> {
    vec![
        Value::from(0u64),
        Value::from(1u64),
        Value::from(u64::MAX),
        serde_json::json!(5e-324),
        serde_json::json!(2.2250738585072014e-308),
        serde_json::json!(1e-300),
        serde_json::json!(1e306),
        serde_json::json!(1e308),
        serde_json::json!(f64::MAX),
    ]
}

/// Whether a timing field (its pointer ends in `seconds`, or is an element of such a list)
/// takes `value`: within [`crate::document::check_seconds`]'s bounds, 0 only for GPU times.
fn seconds_ok(pointer: &str, value: &Value) -> bool {
    let zero = pointer.contains("gpu_seconds");
    value
        .as_f64()
        .is_some_and(|v| crate::document::check_seconds("t", v, zero).is_ok())
}

/// Sets the field at `pointer` (`/phases/*/x`: every row; `/phases/warm/x`: every
/// `warm_forward` row; `/a/b/*`: every element of an array or every value of an object).
fn set(document: &mut Value, pointer: &str, value: &Value) {
    if let Some(container) = pointer.strip_suffix("/*") {
        match document.pointer_mut(container).unwrap() {
            Value::Array(items) => items.iter_mut().for_each(|v| *v = value.clone()),
            Value::Object(fields) => fields.values_mut().for_each(|v| *v = value.clone()),
            other => panic!("{container} is {other}"),
        }
    } else if let Some(field) = pointer.strip_prefix("/phases/*/") {
        for row in document["phases"].as_array_mut().unwrap() {
            row[field] = value.clone();
        }
    } else if let Some(field) = pointer.strip_prefix("/phases/warm/") {
        for row in document["phases"].as_array_mut().unwrap() {
            if row["phase"] == "warm_forward" {
                row[field] = value.clone();
            }
        }
    } else {
        *document.pointer_mut(pointer).unwrap() = value.clone();
    }
}

/// Renders all formats on another thread; a render that has not ended after two minutes
/// (a data-dependent loop that does not end: the class this test guards) fails the test
/// instead of hanging it. Not a speed test: each render takes milliseconds.
fn render_all(report: Report) -> (String, String, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let svg = render_svg(&report).expect("the chart draws");
        let _ = tx.send((render_text(&report), render_markdown(&report), svg));
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("rendering did not end")
}

#[test]
fn control_characters_in_document_text_are_escaped_everywhere() {
    let mut doc: Value = serde_json::from_str(&sample_json(64, 4)).unwrap();
    doc["environment"]["device_name"] = Value::from("GPU\u{1b}[2J\u{7}\r\nline");
    // (tool.implementation, also shown, can only be "rust" or "python": parse refuses others)
    let document = crate::document::parse(doc.to_string().as_bytes()).unwrap();
    let loaded = vec![LoadedMeasurement {
        path: "m\nn\u{1b}.json".into(),
        sha256: "0".repeat(64),
        document,
    }];
    let report = build_report(&loaded);
    let (text, markdown, svg) = render_all(report.clone());
    for output in [&text, &markdown, &svg] {
        assert!(
            !output.chars().any(|c| c.is_control() && c != '\n'),
            "{output:?}"
        );
    }
    assert!(
        text.starts_with(
            "[1] m\\nn\\u{1b}.json — rust float32 b1 c16 w64 on \
             GPU\\u{1b}[2J\\u{7}\\r\\nline (139.80 GiB)"
        ),
        "{text}"
    );
    let xml = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let legend: Vec<&str> = xml
        .descendants()
        .filter(|n| n.is_text())
        .filter_map(|n| n.text())
        .map(str::trim)
        .filter(|t| t.starts_with("[1]"))
        .collect();
    assert_eq!(legend, ["[1] rust float32 b1 c16 w64"], "{svg}");
    // The JSON keeps the text as it was; serde_json escapes it.
    let json = serde_json::to_string(&report).unwrap();
    assert!(
        json.contains(r#""device_name":"GPU\u001b[2J\u0007\r\nline""#),
        "{json}"
    );
}

#[test]
fn every_numeric_field_at_its_extremes_renders_a_well_formed_svg() {
    let base: Value = serde_json::from_str(&sample_json(64, 4)).unwrap();
    let mut rendered = 0;
    for field in FIELDS {
        for value in &extreme_values() {
            let mut doc = base.clone();
            set(&mut doc, field, value);
            // Values the field's type refuses (a float in a counter, repetition 0) are
            // refused by the reader; everything it accepts must render.
            let timing = field.ends_with("_seconds");
            let Ok(document) = crate::document::parse(doc.to_string().as_bytes()) else {
                let zeroth = (field.ends_with("repetition") || field.starts_with("/environment/"))
                    && value == &Value::from(0u64);
                assert!(
                    if timing {
                        !seconds_ok(field, value)
                    } else {
                        value.is_f64() || zeroth
                    },
                    "{field} = {value} refused"
                );
                continue;
            };
            assert!(
                !timing || seconds_ok(field, value),
                "{field} = {value} accepted"
            );
            let loaded = vec![LoadedMeasurement {
                path: "m.json".into(),
                sha256: "0".repeat(64),
                document,
            }];
            let (text, markdown, svg) = render_all(build_report(&loaded));
            assert!(text.contains("warm_forward"), "{field} = {value}");
            assert!(markdown.contains("warm_forward"), "{field} = {value}");
            if let Err(e) = roxmltree::Document::parse(&svg) {
                panic!("{field} = {value}: the SVG is not well-formed XML: {e}");
            }
            rendered += 1;
        }
    }
    // 25 count fields x 3 integers (less repetition 0 and the environment's three counts at
    // 0: the schema's minimum is 1); of the 9 values, the times take only those within
    // 1 ns to 30 days: wall_seconds 1, gpu_seconds 0 and 1 (docs/PROTOCOL.md §4.4)
    assert_eq!(rendered, 25 * 3 - 4 + 1 + 2);
}

/// `sample_json(64, 4)` with the `graph` object of
/// examples/h200/graph/rust-small-float32.json (the same configuration).
pub(super) fn graph_document() -> Value {
    let mut doc: Value = serde_json::from_str(&sample_json(64, 4)).unwrap();
    let counters = |base: u64, base_res: u64, end: u64, end_res: u64, peak: u64| {
        serde_json::json!({
            "baseline_allocated_bytes": base, "baseline_reserved_bytes": base_res,
            "end_allocated_bytes": end, "end_reserved_bytes": end_res,
            "peak_allocated_bytes": peak, "peak_reserved_bytes": end_res
        })
    };
    doc["graph"] = serde_json::json!({
        "memory_pool": "private",
        "capture_warmup_forwards": 3,
        "replays": 1000,
        "batches": 5,
        "batch_gpu_seconds_per_forward": [
            7.592991828918457e-06, 7.580480098724365e-06, 7.579328060150147e-06,
            7.580448150634766e-06, 7.579232215881348e-06
        ],
        "median_gpu_seconds_per_forward": 7.580448150634766e-06,
        "min_gpu_seconds_per_forward": 7.579232215881348e-06,
        "max_gpu_seconds_per_forward": 7.592991828918457e-06,
        "synchronised_wall_seconds_median": 1.2915e-05,
        "synchronised_wall_seconds_min": 1.2763e-05,
        "synchronised_wall_seconds_max": 2.3448e-05,
        "capture_wall_seconds": 0.008089602,
        "capture": counters(34_739_712, 35_651_584, 69_347_840, 73_400_320, 69_376_512),
        "replay": counters(69_347_840, 73_400_320, 69_347_840, 73_400_320, 69_347_840),
    });
    doc
}

/// What the reader accepts in a group of graph fields.
#[derive(Clone, Copy)]
enum Accepts {
    /// Any number (`u64` values read as floats).
    Float,
    /// An unsigned integer.
    Count,
    /// 1 to `MAX_REPLAYS`: of the extreme values, 1 only.
    Replays,
    /// Nothing else than the number of batch times (5): none of the extreme values.
    Batches,
}

/// The numeric fields of the `graph` object, in groups set together so that the reader's
/// checks (min ≤ median ≤ max, allocated ≤ reserved) still hold and the value reaches the
/// report.
const GRAPH_FIELDS: [(&[&str], Accepts); 8] = [
    (&["/graph/capture_warmup_forwards"], Accepts::Count),
    (&["/graph/replays"], Accepts::Replays),
    (&["/graph/batches"], Accepts::Batches),
    (
        &[
            "/graph/batch_gpu_seconds_per_forward/*",
            "/graph/median_gpu_seconds_per_forward",
            "/graph/min_gpu_seconds_per_forward",
            "/graph/max_gpu_seconds_per_forward",
        ],
        Accepts::Float,
    ),
    (
        &[
            "/graph/synchronised_wall_seconds_median",
            "/graph/synchronised_wall_seconds_min",
            "/graph/synchronised_wall_seconds_max",
        ],
        Accepts::Float,
    ),
    (&["/graph/capture_wall_seconds"], Accepts::Float),
    (&["/graph/capture/*"], Accepts::Count),
    (&["/graph/replay/*"], Accepts::Count),
];

/// The graph section of a rendered report: the lines after its title.
fn graph_section<'a>(output: &'a str, title: &str) -> Vec<&'a str> {
    output
        .split_once(title)
        .map_or_else(Vec::new, |(_, rest)| rest.lines().collect())
}

#[test]
fn graph_fields_at_their_extremes_render_one_line_each() {
    let base = graph_document();
    // The graph fields, and the phase fields too (the eager time is the warm_forward
    // rows' median GPU time), each group at every extreme value.
    let groups = GRAPH_FIELDS.iter().copied().chain(FIELDS.iter().map(|f| {
        let accepts = if f.ends_with("_seconds") {
            Accepts::Float
        } else {
            Accepts::Count
        };
        (std::slice::from_ref(f), accepts)
    }));
    let mut rendered = 0;
    for (fields, accepts) in groups {
        for value in &extreme_values() {
            let mut doc = base.clone();
            for field in fields {
                set(&mut doc, field, value);
            }
            let zeroth = (fields[0].ends_with("repetition")
                || fields[0].starts_with("/environment/"))
                && value == &Value::from(0u64);
            let expected = match accepts {
                Accepts::Float => seconds_ok(fields[0], value),
                Accepts::Count => !value.is_f64() && !zeroth,
                Accepts::Replays => value == &Value::from(1u64),
                Accepts::Batches => false,
            };
            let parsed = crate::document::parse(doc.to_string().as_bytes());
            assert_eq!(parsed.is_ok(), expected, "{fields:?} = {value}: {parsed:?}");
            let Ok(document) = parsed else { continue };
            let graph = document.graph.clone().expect("a graph object");
            let loaded = vec![LoadedMeasurement {
                path: "m.json".into(),
                sha256: "0".repeat(64),
                document,
            }];
            let (text, markdown, svg) = render_all(build_report(&loaded));
            // One line per summary line, in order; the achieved line only with a
            // positive graph time.
            let mut starts = vec!["[1] graph floor: ", "[1] eager vs graph: "];
            if graph.median_gpu_seconds_per_forward > 0.0 {
                starts.push("[1] achieved by graph time: ");
            }
            starts.push("[1] graph memory: ");
            for (output, title, indent) in [
                (&text, "\nCUDA graph (docs/PROTOCOL.md §4.6)\n", "  "),
                (
                    &markdown,
                    "\n### CUDA graph (docs/PROTOCOL.md §4.6)\n\n",
                    "- ",
                ),
            ] {
                let lines = graph_section(output, title);
                assert_eq!(lines.len(), starts.len(), "{fields:?} = {value}: {output}");
                for (line, start) in lines.iter().zip(&starts) {
                    assert!(
                        line.starts_with(&format!("{indent}{start}")),
                        "{fields:?} = {value}: {line}"
                    );
                    assert!(!line.chars().any(char::is_control), "{line:?}");
                }
            }
            assert!(
                roxmltree::Document::parse(&svg).is_ok(),
                "{fields:?} = {value}"
            );
            rendered += 1;
        }
    }
    // graph: warm-up forwards and the two counter groups 3 integers each, replays 1,
    // batches none; of the three time groups, the GPU times take 0 and 1, the two wall
    // times 1 only; phases as in the test above
    assert_eq!(rendered, 3 * 3 + 1 + (2 + 1 + 1) + (25 * 3 - 4 + 1 + 2));
}
