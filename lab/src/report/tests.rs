//! Unit tests of the report: the prediction, the tables and the chart.

use super::*;
use crate::document::parse as parse_document;
use crate::document::tests::sample_json;
use serde_json::Value;
use std::path::PathBuf;

#[test]
fn parses_and_predicts() {
    let doc = parse_document(sample_json(64, 4).as_bytes()).expect("valid");
    let model = &doc.synthetic_model;
    assert_eq!(model.parameter_bytes, 132_352);
    let load = predict(model, Phase::ModelLoad, 0);
    // the four tensors each rounded to 512 bytes: the 256-byte bias becomes 512
    assert_eq!(load.end_allocated_bytes, 65_536 + 1_024 + 65_536 + 512);
    let inputs = predict(model, Phase::Inputs, 1_000);
    assert_eq!(inputs.end_allocated_bytes, 1_000 + 4_096);
    let forward = predict(model, Phase::WarmForward, 10_000);
    assert_eq!(forward.end_allocated_bytes, 10_000 + 4_096);
    assert_eq!(forward.peak_allocated_bytes, 10_000 + 2 * 16 * 256 * 4);
    assert_eq!(doc.peak_reserved_bytes(), 2_097_152);
    assert_eq!(doc.peak_allocated_bytes(), 132_352 + 7 * 4096);
    let median = doc.warm_forward_median_wall_seconds().unwrap();
    assert!((median - 0.00115).abs() < 1e-12, "{median}");
    assert_eq!(label(&doc), "rust float32 b1 c16 w64");
}

#[test]
fn absurd_sizes_in_a_document_saturate() {
    // A document is user input: sizes no GPU could hold must not panic or wrap.
    let mut doc = parse_document(sample_json(64, 4).as_bytes()).unwrap();
    doc.synthetic_model.width = u64::MAX / 2;
    doc.synthetic_model.hidden = u64::MAX / 2;
    doc.synthetic_model.input_bytes = u64::MAX;
    doc.synthetic_model.output_bytes = u64::MAX;
    for phase in Phase::ALL {
        let p = predict(&doc.synthetic_model, phase, u64::MAX - 1);
        assert_eq!(p.peak_allocated_bytes, u64::MAX, "{phase:?}");
    }
    let report = build_report(&loaded(vec![doc]));
    assert!(render_text(&report).contains("model_load"));
}

fn loaded(docs: Vec<Document>) -> Vec<LoadedMeasurement> {
    docs.into_iter()
        .enumerate()
        .map(|(i, document)| LoadedMeasurement {
            path: PathBuf::from(format!("m{i}.json")),
            sha256: "0".repeat(64),
            document,
        })
        .collect()
}

#[test]
fn renders_text_markdown_and_svg() {
    let a = parse_document(sample_json(64, 4).as_bytes()).unwrap();
    let b = parse_document(sample_json(64, 2).as_bytes()).unwrap();
    let report = build_report(&loaded(vec![a, b]));
    assert_eq!(report.phases.len(), 5);
    assert_eq!(report.phases[4].rows.len(), 4);
    assert_eq!(report.phases[0].rows[0].achieved_flops_per_second, None);
    let flops = report.phases[2].rows[0].achieved_flops_per_second.unwrap();
    // 1,048,576 FLOP in 0.0005 s, exactly.
    assert_eq!(flops.to_string(), "2097152000");
    let text = render_text(&report);
    assert!(text.contains("warm_forward"));
    assert!(text.contains("[2] m1.json"));
    let md = render_markdown(&report);
    assert!(md.contains("### `cold_forward`"));
    assert!(md.contains("| file | rep |"));
    let svg = render_svg(&report).unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("model_load"));
    // one legend for both charts, in configuration order: bfloat16 before float32
    let legend = legend_entries(&svg);
    assert_eq!(
        legend,
        [
            "[2] rust bfloat16 b1 c16 w64",
            "[1] rust float32 b1 c16 w64"
        ]
    );
}

/// The text of every `<text>` element of an SVG, unescaped.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| {
            let start = rest.find('>')? + 1;
            let end = rest.find("</text>")?;
            Some(
                rest[start..end]
                    .trim()
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&amp;", "&"),
            )
        })
        .collect()
}

/// The legend's file lines (`[i] label`) and its overflow line, in drawing order.
fn legend_entries(svg: &str) -> Vec<String> {
    svg_texts(svg)
        .into_iter()
        .filter(|t| t.starts_with('[') || t.starts_with('…'))
        .collect()
}

/// The numeric tick labels of an SVG (commas removed).
fn numeric_labels(svg: &str) -> Vec<(String, f64)> {
    svg_texts(svg)
        .into_iter()
        .filter_map(|t| t.replace(',', "").parse::<f64>().ok().map(|v| (t, v)))
        .collect()
}

/// Largest peak (allocated or reserved) of a report, MiB.
fn data_max_mib(report: &Report) -> f64 {
    report
        .phases
        .iter()
        .flat_map(|t| t.rows.iter())
        .map(|r| {
            r.measured
                .counters
                .peak_allocated_bytes
                .max(r.measured.counters.peak_reserved_bytes)
        })
        .max()
        .unwrap() as f64
        / 1_048_576.0
}

#[test]
fn memory_axis_ends_just_above_the_data() {
    // 24 small files: 0.06 MiB to 34 MiB, log scale from 0.01 to 1.2 x 34
    let (low, high, log) = memory_axis(&[0.0625, 2.0, 34.0, 0.0]);
    assert!(log);
    assert!((low - 0.01).abs() < 1e-12, "{low}");
    assert!((high - 40.8).abs() < 1e-9, "{high}");
    // a sweep: 16 MiB to 140,000 MiB; a smallest bar on a power of ten keeps a height
    assert_eq!(memory_axis(&[10.0, 140_000.0]), (1.0, 168_000.0, true));
    // within a factor 50: linear from 0
    assert_eq!(memory_axis(&[10.0, 20.0]), (0.0, 24.0, false));
    assert_eq!(memory_axis(&[0.0, 0.0]), (0.0, 1.0, false));
    assert_eq!(memory_axis(&[]), (0.0, 1.0, false));
}

#[test]
fn tick_labels_are_plain() {
    for (value, text) in [
        (0.0, "0"),
        (0.1, "0.1"),
        (0.01, "0.01"),
        (0.30000000000000004, "0.3"),
        (0.125, "0.125"),
        (1.0, "1"),
        (1.5, "1.5"),
        (10.0, "10"),
        (250.0, "250"),
        (1000.0, "1,000"),
        (100_000.0, "100,000"),
        (12_345_678.0, "12,345,678"),
        (-2500.0, "-2,500"),
        (-0.0, "0"),
    ] {
        assert_eq!(tick_label(value), text, "{value}");
    }
}

#[test]
fn svg_axis_and_labels_follow_the_data() {
    for widths in [
        vec![64, 64],
        vec![16, 4096],
        vec![16, 64, 256, 1024, 4096, 8192],
    ] {
        let docs = widths
            .iter()
            .map(|w| parse_document(sample_json(*w, 4).as_bytes()).unwrap())
            .collect();
        let report = build_report(&loaded(docs));
        let svg = render_svg(&report).unwrap();
        let max = data_max_mib(&report);
        let labels = numeric_labels(&svg);
        let top = labels.iter().map(|(_, v)| *v).fold(0.0, f64::max);
        // the memory axis ends at 1.2 x the data: no label far above it, one not far below
        assert!(
            top <= 1.2 * max,
            "{widths:?}: label {top} above 1.2 x {max}"
        );
        assert!(
            top >= max / 10.0,
            "{widths:?}: top label {top} for data up to {max}"
        );
        for (text, _) in &labels {
            assert!(!text.ends_with(".0"), "{widths:?}: label {text}");
            assert!(text.chars().count() <= 9, "{widths:?}: label {text}");
        }
        assert_eq!(legend_entries(&svg).len(), widths.len());
    }
}

#[test]
fn svg_series_follow_configuration_size_not_text_order() {
    // given in text order, as a shell glob gives them
    let widths = [1024, 128, 16384, 256, 64];
    let docs = widths
        .iter()
        .map(|w| parse_document(sample_json(*w, 4).as_bytes()).unwrap())
        .collect();
    let report = build_report(&loaded(docs));
    assert_eq!(chart_order(&report), [4, 1, 3, 0, 2]);
    let svg = render_svg(&report).unwrap();
    assert_eq!(
        legend_entries(&svg),
        [
            "[5] rust float32 b1 c16 w64",
            "[2] rust float32 b1 c16 w128",
            "[4] rust float32 b1 c16 w256",
            "[1] rust float32 b1 c16 w1024",
            "[3] rust float32 b1 c16 w16384",
        ]
    );
}

#[test]
fn a_long_legend_is_capped_beside_the_plots() {
    let count = SVG_LEGEND_MAX + 10;
    let docs = (0..count)
        .map(|i| parse_document(sample_json(64 + i as u64, 4).as_bytes()).unwrap())
        .collect();
    let svg = render_svg(&build_report(&loaded(docs))).unwrap();
    let legend = legend_entries(&svg);
    assert_eq!(legend.len(), SVG_LEGEND_MAX);
    assert_eq!(legend[0], "[1] rust float32 b1 c16 w64");
    assert_eq!(
        legend[SVG_LEGEND_MAX - 1],
        "… and 11 more (all in the text report)"
    );
    // the legend has its own column right of the 1100 px plots
    let width: u32 = svg
        .split("width=\"")
        .nth(1)
        .and_then(|w| w.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap();
    assert!(width >= 1100 + 240, "{width}");
    let xs: Vec<f64> = svg
        .split("<text")
        .skip(1)
        .filter(|t| t.contains(">[") || t.contains(">…"))
        .map(|t| {
            t.split("x=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(xs.iter().all(|x| *x >= 1100.0), "{xs:?}");
}

#[test]
fn svg_switches_to_log_scale_for_wide_ranges() {
    let small = parse_document(sample_json(16, 4).as_bytes()).unwrap();
    let large = parse_document(sample_json(4096, 4).as_bytes()).unwrap();
    let svg = render_svg(&build_report(&loaded(vec![small, large]))).unwrap();
    assert!(svg.contains("log scale"));
}

/// The row's JSON keys: `file_index`, every key of the measured row in its own order (a key
/// added to `PhaseRow` must be added to the row's `Serialize` too), then the prediction's; no
/// float among the values.
#[test]
fn report_row_json_keeps_the_measured_rows_keys_in_order() {
    let a = parse_document(sample_json(64, 2).as_bytes()).unwrap();
    let report = build_report(&loaded(vec![a]));
    let row = &report.phases[4].rows[0];
    let json = serde_json::to_value(row).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let measured = serde_json::to_value(&row.measured).unwrap();
    let mut want = vec!["file_index"];
    want.extend(measured.as_object().unwrap().keys().map(String::as_str));
    want.extend([
        "predicted_end_allocated_bytes",
        "predicted_peak_allocated_bytes",
        "peak_allocated_minus_predicted_bytes",
        "achieved_flops_per_second",
    ]);
    assert_eq!(keys, want);
    assert_eq!(json["achieved_flops_per_second"], "2097152000");
}

#[test]
fn achieved_flops_are_exact_decimals() {
    use super::achieved_flops_per_second as f;
    assert_eq!(
        f(1_048_576, 1, Some(0.0005)).unwrap().to_string(),
        "2097152000"
    );
    // 3 FLOP in 0.7 s = 4.2857142857... -> 4; 5 in 2 s = 2.5 -> 2 (half to even).
    assert_eq!(f(3, 1, Some(0.7)).unwrap().to_string(), "4");
    assert_eq!(f(5, 1, Some(2.0)).unwrap().to_string(), "2");
    assert_eq!(f(7, 3, Some(1.0)).unwrap().to_string(), "21");
    assert_eq!(f(1, 0, Some(1.0)), None);
    assert_eq!(f(1, 1, Some(0.0)), None);
    assert_eq!(f(1, 1, None), None);
    assert_eq!(f(u64::MAX, u64::MAX, Some(1e-300)), None);
}

/// The report as serde writes it through `lab`'s JSON layout: the definition the hand-written
/// `--json` writer must match byte for byte.
fn serde_json_text(report: &Report) -> String {
    let mut out = Vec::new();
    crate::stdout::json_at(&mut out, report, 0).unwrap();
    String::from_utf8(out).unwrap()
}

fn hand_json_text(report: &Report) -> String {
    let mut out = Vec::new();
    write_json(&mut out, report).unwrap();
    String::from_utf8(out).unwrap()
}

/// `write_json` gives serde's bytes over every class of row value: times of every decimal
/// form (tiny, huge, exponent-free, minus zero, non-finite), absent GPU times and repetitions,
/// counters at 0 and `u64::MAX`, differences below zero and beyond 64 bits, FLOP/s absent and
/// present; files with hidden characters and a graph section; several files; empty tables and
/// an empty report.
#[test]
fn hand_written_json_is_serdes_layout_byte_for_byte() {
    let mut graph_doc = super::extremes::graph_document();
    graph_doc["environment"]["device_name"] = Value::from("GPU\u{1b}[2J \u{202e}é\"\\");
    let docs = vec![
        parse_document(sample_json(64, 4).as_bytes()).unwrap(),
        parse_document(graph_doc.to_string().as_bytes()).unwrap(),
        parse_document(sample_json(128, 2).as_bytes()).unwrap(),
    ];
    assert!(docs[1].graph.is_some());
    let measurements = loaded(docs);
    let mut report = build_report(&measurements);
    assert_eq!(hand_json_text(&report), serde_json_text(&report));
    // What `lab report --json` writes: the same, from the measurements.
    let mut of = Vec::new();
    write_json_of(&mut of, &measurements).unwrap();
    assert_eq!(String::from_utf8(of).unwrap(), serde_json_text(&report));
    let times = [
        0.0,
        -0.0,
        5e-324,
        1e-7,
        0.000_091_008,
        0.161_348_406,
        3.0,
        1e16,
        1e21,
        f64::MAX,
        f64::NAN,
        f64::INFINITY,
    ];
    let template = report.phases[4].rows[0].clone();
    let mut rows = Vec::new();
    for (i, &time) in times.iter().enumerate() {
        let mut row = template.clone();
        row.file_index = i;
        row.measured.wall_seconds = time;
        row.measured.gpu_seconds = (i % 3 != 0).then_some(times[times.len() - 1 - i]);
        row.measured.repetition = (i % 2 == 0).then_some(u64::MAX - i as u64);
        row.measured.forward_passes = [0, 1, u64::MAX][i % 3];
        row.measured.counters = crate::document::AllocatorCounters::every([0, 7, u64::MAX][i % 3]);
        row.predicted_end_allocated_bytes = u64::MAX - (i as u64);
        row.predicted_peak_allocated_bytes = i as u64;
        row.peak_allocated_minus_predicted_bytes = [
            -1,
            0,
            i128::from(u64::MAX) + 1,
            -i128::from(u64::MAX) - 5,
            i128::MIN + 1,
        ][i % 5];
        row.achieved_flops_per_second = match i % 3 {
            0 => None,
            1 => Some(Decimal::new(-12_345, 2)),
            _ => Some(Decimal::MAX),
        };
        rows.push(row);
    }
    report.phases[4].rows = rows;
    report.phases[1].rows.clear();
    assert_eq!(hand_json_text(&report), serde_json_text(&report));
    report.phases.clear();
    report.files.clear();
    assert_eq!(hand_json_text(&report), serde_json_text(&report));
}
