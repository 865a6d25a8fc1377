//! Tests of the document: the analytic model, reading, checking, extremes.

use super::*;

/// A document shaped like `lab measure`'s output for batch 1, context 16, warmup 1,
/// repeats 2, with the given width and dtype, on an H200.
pub(crate) fn sample_json(width: u64, dtype_bytes: u64) -> String {
    let hidden = 4 * width;
    let parameters = 2 * width * hidden + hidden + width;
    let input = 16 * width * dtype_bytes;
    let p = parameters * dtype_bytes;
    let row = |phase: &str, rep: Option<u64>, passes: u64, base: u64, end: u64, peak: u64| {
        format!(
            r#"{{"phase":"{phase}","repetition":{},"forward_passes":{passes},"wall_seconds":0.001{rep_digit},
"gpu_seconds":0.0005,"baseline_allocated_bytes":{base},"baseline_reserved_bytes":2097152,
"end_allocated_bytes":{end},"end_reserved_bytes":2097152,"peak_allocated_bytes":{peak},
"peak_reserved_bytes":2097152}}"#,
            rep.map_or("null".to_string(), |r| r.to_string()),
            rep_digit = rep.unwrap_or(0)
        )
    };
    let phases = [
        row("model_load", None, 0, 0, p, p),
        row("inputs", None, 0, p, p + input, p + input),
        row(
            "cold_forward",
            None,
            1,
            p + input,
            p + 2 * input,
            p + 6 * input,
        ),
        row("warmup", None, 1, p + input, p + 2 * input, p + 7 * input),
        row(
            "warm_forward",
            Some(1),
            1,
            p + input,
            p + 2 * input,
            p + 6 * input,
        ),
        row(
            "warm_forward",
            Some(2),
            1,
            p + input,
            p + 2 * input,
            p + 6 * input,
        ),
    ]
    .join(",");
    let dtype = if dtype_bytes == 4 {
        "float32"
    } else {
        "bfloat16"
    };
    format!(
        r#"{{"schema":"iteragpu-lab/measurement/v1","tool":{{"name":"iteragpu-lab","version":"1.0.0","implementation":"rust"}},
"created_utc":"2026-11-30T10:00:00Z",
"environment":{{"runtime":{{"language":"Rust","version":"1.95"}},"torch_version":"2.11.0","cuda_build_version":"13.0","hip_build_version":null,
"device":"cuda:0","device_name":"NVIDIA H200","compute_capability":"9.0","total_memory_bytes":150109880320,"multiprocessor_count":132,"device_count":1,"tf32_matmul_allowed":false}},
"configuration":{{"device":"cuda:0","batch":1,"context":16,"width":{width},"dtype":"{dtype}","warmup":1,"repeats":2,"seed":0}},
"synthetic_model":{{"architecture":"Linear-GELU-Linear","width":{width},"hidden":{hidden},"parameters":{parameters},"dtype_bytes":{dtype_bytes},
"parameter_bytes":{p},"input_bytes":{input},"output_bytes":{input},"flops_per_forward":{}}},
"phases":[{phases}]}}"#,
        2 * 16 * 2 * width * hidden
    )
}

#[test]
fn small_model_numbers() {
    let m = SyntheticModel::new(1, 16, 64, Dtype::Float32).unwrap();
    assert_eq!(m.hidden, 256);
    assert_eq!(m.parameters, 64 * 256 + 256 + 256 * 64 + 64);
    assert_eq!(m.parameters, 33_088);
    assert_eq!(m.autograd.as_deref(), Some("inference_mode"));
    assert_eq!(m.parameter_bytes, 132_352);
    assert_eq!(m.input_bytes, 4_096);
    assert_eq!(m.output_bytes, 4_096);
    assert_eq!(m.flops_per_forward, 2 * 16 * (64 * 256 * 2));
    assert_eq!(m.flops_per_forward, 1_048_576);
    assert_eq!(
        m.architecture,
        "Linear(64->256, bias) -> GELU(erf) -> Linear(256->64, bias)"
    );
}

#[test]
fn large_model_numbers() {
    let m = SyntheticModel::new(2, 128, 1024, Dtype::Bfloat16).unwrap();
    assert_eq!(m.hidden, 4096);
    assert_eq!(m.parameters, 8_393_728);
    assert_eq!(m.dtype_bytes, 2);
    assert_eq!(m.parameter_bytes, 16_787_456);
    assert_eq!(m.input_bytes, 2 * 128 * 1024 * 2);
    assert_eq!(m.flops_per_forward, 2 * 256 * 2 * 1024 * 4096);
    assert_eq!(m.flops_per_forward, 4_294_967_296);
}

#[test]
fn predicted_allocations_round_to_blocks() {
    let m = SyntheticModel::new(1, 16, 64, Dtype::Float32).unwrap();
    // 65536 + 1024 + 65536 + 256 -> 256 rounds up to 512.
    assert_eq!(
        m.predicted_weight_allocation(),
        65_536 + 1_024 + 65_536 + 512
    );
    assert_eq!(m.predicted_input_allocation(), 4_096);
    // hidden activation 16 × 256 × 4 = 16384; twice that beats 16384 + 4096.
    assert_eq!(m.predicted_forward_peak_extra(), 32_768);
    assert_eq!(round_to_block(1), 512);
    assert_eq!(round_to_block(512), 512);
    assert_eq!(round_to_block(0), 0);
    assert_eq!(round_to_block(u64::MAX), u64::MAX);
}

#[test]
fn overflow_is_none() {
    assert!(SyntheticModel::new(u64::MAX, 2, 2, Dtype::Float32).is_none());
    assert!(SyntheticModel::new(1, 1, u64::MAX / 2, Dtype::Float32).is_none());
}

#[test]
fn medians() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
}
#[test]
fn rejects_bad_documents() {
    let good = sample_json(64, 4);
    let wrong_schema = good.replace("measurement/v1", "measurement/v0");
    assert!(parse(wrong_schema.as_bytes())
        .unwrap_err()
        .contains("schema"));
    let no_rep = good.replace(r#""repetition":1"#, r#""repetition":null"#);
    assert!(parse(no_rep.as_bytes()).unwrap_err().contains("repetition"));
    let no_inputs = good.replace(r#""phase":"inputs""#, r#""phase":"model_load""#);
    assert!(parse(no_inputs.as_bytes()).unwrap_err().contains("inputs"));
    let unknown = good.replace(r#""phase":"inputs""#, r#""phase":"input""#);
    assert!(parse(unknown.as_bytes())
        .unwrap_err()
        .contains("unknown variant `input`"));
    let negative = good.replace(r#""wall_seconds":0.0010"#, r#""wall_seconds":-1"#);
    assert!(parse(negative.as_bytes()).unwrap_err().contains("time"));
    // The tool is one of the twins, named as the schema says.
    for (from, to, needle) in [
        (
            r#""implementation":"rust""#,
            r#""implementation":"cobol""#,
            "tool.implementation",
        ),
        (
            r#""implementation":"rust""#,
            r#""implementation":"Rust""#,
            "tool.implementation",
        ),
        (
            r#""name":"iteragpu-lab""#,
            r#""name":"other-lab""#,
            "tool.name",
        ),
        (r#""version":"1.0.0""#, r#""version":"""#, "tool.version"),
    ] {
        let bad = good.replace(from, to);
        assert_ne!(bad, good, "{from}");
        assert!(parse(bad.as_bytes()).unwrap_err().contains(needle), "{to}");
    }
    assert!(parse(good.replace("\"rust\"", "\"python\"").as_bytes()).is_ok());
    assert!(parse(b"{}").is_err());
    assert!(parse(b"\xff").is_err());
    let bom = [b"\xEF\xBB\xBF".as_slice(), good.as_bytes()].concat();
    assert!(parse(&bom).is_ok());
}

#[test]
fn sample_matches_schema() {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../schema/measurement.schema.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&sample_json(64, 4)).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// A document of the most repetitions `lab measure` accepts, every number at its longest
/// spelling, is still one `lab report` reads (with room left for the graph object).
#[test]
fn the_longest_document_fits_the_reader() {
    let mut doc: Document = serde_json::from_str(&sample_json(64, 4)).unwrap();
    let mut row = doc
        .phases
        .iter()
        .find(|r| r.phase == Phase::WarmForward)
        .unwrap()
        .clone();
    row.forward_passes = u64::MAX;
    row.wall_seconds = -2.2250738585072014e-308;
    row.gpu_seconds = Some(-2.2250738585072014e-308);
    for bytes in [
        &mut row.counters.baseline_allocated_bytes,
        &mut row.counters.baseline_reserved_bytes,
        &mut row.counters.end_allocated_bytes,
        &mut row.counters.end_reserved_bytes,
        &mut row.counters.peak_allocated_bytes,
        &mut row.counters.peak_reserved_bytes,
    ] {
        *bytes = u64::MAX;
    }
    doc.phases.retain(|r| r.phase != Phase::WarmForward);
    let max = crate::values::MAX_REPETITIONS;
    doc.phases.extend((1..=max).map(|r| PhaseRow {
        repetition: Some(r),
        ..row.clone()
    }));
    doc.configuration.repeats = max;
    let bytes = encode(&doc).unwrap().len() as u64;
    assert!(
        bytes > 50 * 1024 * 1024,
        "{bytes}: the rows got shorter, lower the cap"
    );
    assert!(bytes + (4 << 20) <= MAX_DOCUMENT_BYTES, "{bytes}");
    assert!(crate::values::repetitions(&(max + 1).to_string()).is_err());
}

/// The environment of [`sample_json`] (an H200), for documents built in tests.
pub(crate) fn sample_environment() -> MeasurementEnvironment {
    parse(sample_json(64, 4).as_bytes()).unwrap().environment
}

/// The row as serde's derive reads it (`#[serde(flatten)]` counters): the oracle of the
/// hand-written [`PhaseRow`] reader.
#[derive(Debug, serde::Deserialize)]
struct DerivedRow {
    phase: Phase,
    repetition: Option<u64>,
    forward_passes: u64,
    wall_seconds: f64,
    gpu_seconds: Option<f64>,
    #[serde(flatten)]
    counters: AllocatorCounters,
}

/// Every mutation of a row of one class (each key missing, given twice, null, of each wrong
/// JSON type, out of range; unknown keys; not an object) reads the same through the
/// hand-written reader as through serde's derive: the same row, or an error with the same
/// words, at the same place (or, for
/// the flattened counters, which the derive judges only at the row's end, sooner).
#[test]
fn hand_written_row_reader_agrees_with_the_derive() {
    let keys = [
        ("phase", r#""warm_forward""#),
        ("repetition", "3"),
        ("forward_passes", "1"),
        ("wall_seconds", "0.0015"),
        ("gpu_seconds", "0.0005"),
        ("baseline_allocated_bytes", "1024"),
        ("baseline_reserved_bytes", "2097152"),
        ("end_allocated_bytes", "2048"),
        ("end_reserved_bytes", "2097152"),
        ("peak_allocated_bytes", "4096"),
        ("peak_reserved_bytes", "2097152"),
    ];
    let object = |pairs: &[(String, String)]| {
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", body.join(","))
    };
    let full: Vec<(String, String)> = keys
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Each text with whether its change is to one of the six counters.
    let mut texts = vec![(object(&full), false)];
    let replacements = [
        "null",
        "true",
        "\"text\"",
        "-1",
        "1.5",
        "18446744073709551616",
        "1e400",
        "[]",
        "{}",
        "\"model_load\"",
        "\"cold_forwards\"",
    ];
    for i in 0..full.len() {
        let mut without = full.clone();
        without.remove(i);
        let counter = i >= 5;
        texts.push((object(&without), counter));
        let mut twice = full.clone();
        twice.push(full[i].clone());
        texts.push((object(&twice), counter));
        for value in replacements {
            let mut changed = full.clone();
            changed[i].1 = value.to_string();
            texts.push((object(&changed), counter));
        }
    }
    let mut extra = full.clone();
    extra.insert(
        3,
        (
            "later_field".into(),
            r#"{"nested":[1,2,{"x":null}]}"#.into(),
        ),
    );
    extra.push(("counters".into(), "7".into()));
    texts.push((object(&extra), false));
    texts.extend(
        ["[]", "[\"warm_forward\",1]", "null", "7", "{}", "\"row\""]
            .map(|t| (t.to_string(), false)),
    );
    let mut agreed = 0;
    for (text, counter_key) in &texts {
        let ours = serde_json::from_str::<PhaseRow>(text).map_err(|e| e.to_string());
        // (The derive names the struct it reads: the oracle's name is not the row's.)
        let derived = serde_json::from_str::<DerivedRow>(text).map_err(|e| {
            e.to_string()
                .replace("struct DerivedRow", "struct PhaseRow")
        });
        match (&ours, &derived) {
            (Ok(row), Ok(d)) => {
                assert_eq!(
                    (row.phase, row.repetition, row.forward_passes),
                    (d.phase, d.repetition, d.forward_passes),
                    "{text}"
                );
                assert_eq!(
                    row.wall_seconds.to_bits(),
                    d.wall_seconds.to_bits(),
                    "{text}"
                );
                assert_eq!(
                    row.gpu_seconds.map(f64::to_bits),
                    d.gpu_seconds.map(f64::to_bits)
                );
                assert_eq!(row.counters, d.counters, "{text}");
                agreed += 1;
            }
            (Err(a), Err(b)) => {
                // "WORDS at line 1 column N": the same words; the same column, except where
                // the derive buffers (the six flattened counters, judged only once the row's
                // `}` is read): there the hand-written reader names the key or value itself.
                let split = |m: &str| {
                    let (words, at) = m.rsplit_once(" at line 1 column ").expect(m);
                    (words.to_string(), at.parse::<usize>().expect(m))
                };
                // The two times name their field where the derive says `f64`.
                let a = &a
                    .replace("wall_seconds: a number of seconds", "f64")
                    .replace("gpu_seconds: a number of seconds", "f64");
                let ((ours_words, ours_at), (derived_words, derived_at)) = (split(a), split(b));
                assert_eq!(ours_words, derived_words, "{text}");
                if *counter_key {
                    assert!(ours_at <= derived_at, "{text}: {a} / {b}");
                } else {
                    assert_eq!(ours_at, derived_at, "{text}: {a} / {b}");
                }
            }
            _ => panic!("{text}: ours {ours:?}, derived {derived:?}"),
        }
    }
    // The class holds accepted rows too (nulls of the two optional keys, their absence, extra
    // keys), not only refusals.
    assert!(agreed >= 6, "{agreed} rows read on both sides");
}

/// The schema's rules on `created_utc` and `environment` that serde's types do not hold are
/// checked when a document is read, and the generated schema refuses the same values: each
/// field at an empty, mistyped-in-a-string, zero or out-of-grammar value.
#[test]
fn created_utc_and_environment_follow_the_schema() {
    let good = sample_json(64, 4);
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../schema/measurement.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let valid = |text: &str| validator.is_valid(&serde_json::from_str(text).unwrap());
    let created = r#""created_utc":"2026-11-30T10:00:00Z""#;
    let name = r#""device_name":"NVIDIA H200""#;
    let capability = r#""compute_capability":"9.0""#;
    let bad = [
        (created, r#""created_utc":"x""#, "created_utc"),
        (
            created,
            r#""created_utc":"2026-11-30 10:00:00Z""#,
            "created_utc",
        ),
        (
            created,
            r#""created_utc":"2026-11-30T10:00:00+00:00""#,
            "created_utc",
        ),
        (
            created,
            r#""created_utc":"2026-11-30T10:00:00.Z""#,
            "created_utc",
        ),
        (
            created,
            r#""created_utc":"26-11-30T10:00:00Z""#,
            "created_utc",
        ),
        (
            capability,
            r#""compute_capability":"banana""#,
            "compute_capability",
        ),
        (
            capability,
            r#""compute_capability":"9""#,
            "compute_capability",
        ),
        (
            capability,
            r#""compute_capability":"9.""#,
            "compute_capability",
        ),
        (
            capability,
            r#""compute_capability":"""#,
            "compute_capability",
        ),
        (
            r#""total_memory_bytes":150109880320"#,
            r#""total_memory_bytes":0"#,
            "total_memory_bytes",
        ),
        (
            r#""multiprocessor_count":132"#,
            r#""multiprocessor_count":0"#,
            "multiprocessor_count",
        ),
        (r#""device_count":1"#, r#""device_count":0"#, "device_count"),
    ];
    for (from, to, field) in bad {
        let text = good.replace(from, to);
        assert_ne!(text, good, "{to}");
        let e = parse(text.as_bytes()).unwrap_err();
        assert!(e.contains(field), "{to}: {e}");
        assert!(!valid(&text), "the schema accepts {to}");
    }
    // What the v1 schema allows and the reader refuses: an empty device name (the schema
    // cannot tighten without a new id), a date the pattern allows but the calendar does not.
    let text = good.replace(name, r#""device_name":" ""#);
    assert!(parse(text.as_bytes()).unwrap_err().contains("device_name"));
    assert!(valid(&text));
    let text = good.replace(created, r#""created_utc":"2026-02-30T10:00:00Z""#);
    assert!(parse(text.as_bytes()).unwrap_err().contains("created_utc"));
    // What both accept: fractional seconds, a two-digit major.
    for (from, to) in [
        (created, r#""created_utc":"2026-11-30T10:00:00.125Z""#),
        (capability, r#""compute_capability":"10.0""#),
    ] {
        let text = good.replace(from, to);
        assert!(parse(text.as_bytes()).is_ok(), "{to}");
        assert!(valid(&text), "{to}");
    }
}
