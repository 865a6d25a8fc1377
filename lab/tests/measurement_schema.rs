//! Every measurement document in the repository (`examples/h200/*.json`, written on the H200 by
//! `lab measure` and `mesure_memoire.py measure`) and a document built from `lab`'s own types
//! validate against `lab/schema/measurement.schema.json`; the committed files also keep the
//! protocol's invariants (row counts, allocated <= reserved, Rust and Python counters equal).

use lab::document::{
    AllocatorCounters, Configuration, Document, Dtype, LibtorchFacts, MeasurementEnvironment,
    Phase, PhaseRow, Runtime, SyntheticModel, Tool, SCHEMA_ID,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn validator() -> jsonschema::Validator {
    let path = root().join("lab/schema/measurement.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn errors(validator: &jsonschema::Validator, document: &Value) -> Vec<String> {
    validator
        .iter_errors(document)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

fn synthetic_document() -> Document {
    let configuration = Configuration {
        device: lab::device::Device::FIRST,
        batch: 2,
        context: 128,
        width: 1024,
        dtype: Dtype::Bfloat16,
        warmup: 3,
        repeats: 5,
        seed: 0,
    };
    let row = |phase: Phase, repetition: Option<u64>| PhaseRow {
        phase,
        repetition,
        forward_passes: 1,
        wall_seconds: 1e-4,
        gpu_seconds: None,
        counters: AllocatorCounters {
            baseline_allocated_bytes: 0,
            baseline_reserved_bytes: 0,
            end_allocated_bytes: 512,
            end_reserved_bytes: 2_097_152,
            peak_allocated_bytes: 512,
            peak_reserved_bytes: 2_097_152,
        },
    };
    let mut phases = vec![
        row(Phase::ModelLoad, None),
        row(Phase::Inputs, None),
        row(Phase::ColdForward, None),
    ];
    phases.push(row(Phase::Warmup, None));
    phases.extend((1..=5).map(|r| row(Phase::WarmForward, Some(r))));
    Document {
        schema: SCHEMA_ID.into(),
        tool: Tool::rust(),
        created_utc: lab::document::utc_now(),
        environment: MeasurementEnvironment {
            runtime: Runtime::rust(),
            libtorch: LibtorchFacts {
                torch_version: "2.11.0".into(),
                cuda_build_version: Some("13.0".into()),
                hip_build_version: None,
            },
            device: lab::device::Device::FIRST,
            device_name: "NVIDIA H200".into(),
            compute_capability: "9.0".into(),
            total_memory_bytes: 150_109_880_320,
            multiprocessor_count: 132,
            device_count: 1,
            tf32_matmul_allowed: false,
            driver: None,
        },
        synthetic_model: SyntheticModel::new(2, 128, 1024, Dtype::Bfloat16).unwrap(),
        configuration,
        phases,
        graph: None,
    }
}

#[test]
fn synthetic_document_is_valid_and_round_trips() {
    let validator = validator();
    let document = synthetic_document();
    let value = serde_json::to_value(&document).unwrap();
    assert_eq!(errors(&validator, &value), Vec::<String>::new());
    let back: Document = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(back, document);
    // The libtorch facts are flattened: the environment keeps its flat keys, in order.
    let environment = serde_json::to_string(&document.environment).unwrap();
    assert!(
        environment.starts_with(
            r#"{"runtime":{"language":"Rust","version":"#
        ) && environment.contains(
            r#"},"torch_version":"2.11.0","cuda_build_version":"13.0","hip_build_version":null,"device":"cuda:0","#
        ),
        "{environment}"
    );
    assert!(value["environment"].get("libtorch").is_none());
    // The schema rejects what it should: a repetition on a non-warm row, a negative counter.
    let mut bad = value.clone();
    bad["phases"][0]["repetition"] = Value::from(1);
    assert!(!errors(&validator, &bad).is_empty());
    let mut bad = value;
    bad["phases"][1]["end_allocated_bytes"] = Value::from(-1);
    assert!(!errors(&validator, &bad).is_empty());
}

/// Measurement documents under examples/h200/ and its run folders (`bench/` of run 1, `run3/`,
/// `sweep/`); the environment answers and the benchmark summaries are other kinds of files.
fn example_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in [
        root().join("examples/h200"),
        root().join("examples/h200/bench"),
        root().join("examples/h200/run3"),
        root().join("examples/h200/sweep"),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        files.extend(entries.map(|e| e.unwrap().path()).filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".json")
                && (name.starts_with("rust-")
                    || name.starts_with("python-")
                    || name.starts_with("bench-rust-")
                    || name.starts_with("bench-python-")
                    || name.starts_with("context-"))
        }));
    }
    files.sort();
    files
}

#[test]
fn the_h200_examples_are_there() {
    let names: Vec<String> = example_files()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for implementation in ["rust", "python"] {
        for config in ["small", "large"] {
            for dtype in ["float32", "float16", "bfloat16"] {
                let name = format!("{implementation}-{config}-{dtype}.json");
                assert!(names.contains(&name), "missing examples/h200/{name}");
            }
        }
    }
}

#[test]
fn every_committed_h200_measurement_is_valid() {
    let validator = validator();
    for path in example_files() {
        let document: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let problems = errors(&validator, &document);
        assert!(problems.is_empty(), "{}: {problems:?}", path.display());
        let config = &document["configuration"];
        let rows = document["phases"].as_array().unwrap();
        assert_eq!(
            rows.len() as u64,
            4 + config["repeats"].as_u64().unwrap(),
            "{}",
            path.display()
        );
        for row in rows {
            for (a, r) in [
                ("baseline_allocated_bytes", "baseline_reserved_bytes"),
                ("end_allocated_bytes", "end_reserved_bytes"),
                ("peak_allocated_bytes", "peak_reserved_bytes"),
            ] {
                let (allocated, reserved) = (row[a].as_u64(), row[r].as_u64());
                assert!(
                    allocated.is_some() && allocated <= reserved,
                    "{}: {row}",
                    path.display()
                );
            }
        }
    }
}

/// Whether every key of `part` is in `whole` with an equal value (recursively).
fn is_part_of(part: &Value, whole: &Value) -> bool {
    match (part, whole) {
        (Value::Object(p), Value::Object(w)) => p
            .iter()
            .all(|(k, v)| w.get(k).is_some_and(|wv| is_part_of(v, wv))),
        (Value::Array(p), Value::Array(w)) => {
            p.len() == w.len() && p.iter().zip(w).all(|(a, b)| is_part_of(a, b))
        }
        (p, w) => p == w,
    }
}

#[test]
fn every_committed_h200_measurement_reads_back_unchanged() {
    // lab's one reader accepts every committed document (Rust and Python), and what it keeps
    // re-encodes to the same JSON: the types (flattened libtorch facts, the Phase enum) do not
    // change the format.
    let files = example_files();
    assert!(files.len() >= 12, "{files:?}");
    for path in files {
        let loaded =
            lab::document::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let original: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let again = serde_json::to_value(&loaded.document).unwrap();
        assert!(is_part_of(&again, &original), "{}", path.display());
    }
}

#[test]
fn rust_and_python_counters_match_on_the_h200() {
    // Group the committed files by configuration; every allocated counter must be identical
    // between the Rust and the Python document of the same configuration.
    let mut by_config: BTreeMap<String, Vec<(String, Vec<Value>)>> = BTreeMap::new();
    for path in example_files() {
        let document: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let key = document["configuration"].to_string();
        let implementation = document["tool"]["implementation"]
            .as_str()
            .unwrap()
            .to_owned();
        let counters = document["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let mut kept = serde_json::Map::new();
                for name in [
                    "phase",
                    "repetition",
                    "baseline_allocated_bytes",
                    "end_allocated_bytes",
                    "peak_allocated_bytes",
                ] {
                    kept.insert(name.into(), row[name].clone());
                }
                Value::Object(kept)
            })
            .collect();
        by_config
            .entry(key)
            .or_default()
            .push((implementation, counters));
    }
    let mut compared = 0;
    for (config, documents) in by_config {
        let rust: Vec<_> = documents.iter().filter(|d| d.0 == "rust").collect();
        let python: Vec<_> = documents.iter().filter(|d| d.0 == "python").collect();
        for r in &rust {
            for p in &python {
                assert_eq!(r.1, p.1, "allocated counters differ for {config}");
            }
        }
        if !rust.is_empty() && !python.is_empty() {
            compared += 1;
        }
    }
    // At least the six committed pairs (small and large x three dtypes): a grouping that
    // matched nothing would otherwise pass without comparing a single counter.
    assert!(
        compared >= 6,
        "only {compared} configurations have both a Rust and a Python file"
    );
}

#[test]
fn the_graph_section_is_optional_and_checked() {
    use lab::document::graph::{GraphSection, GraphTimings};
    let validator = validator();
    let counters = AllocatorCounters {
        baseline_allocated_bytes: 51_000_000,
        baseline_reserved_bytes: 62_914_560,
        end_allocated_bytes: 85_000_000,
        end_reserved_bytes: 100_663_296,
        peak_allocated_bytes: 85_100_000,
        peak_reserved_bytes: 100_663_296,
    };
    let timings = GraphTimings {
        replays: 1000,
        batch_seconds: vec![0.0076; 5],
        single_wall_seconds: vec![14e-6; 1000],
        capture_wall_seconds: 0.2,
    };
    let mut document = synthetic_document();
    document.graph = GraphSection::from_timings(&timings, counters, counters);
    let value = serde_json::to_value(&document).unwrap();
    assert_eq!(errors(&validator, &value), Vec::<String>::new());
    let back: Document = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(back, document);
    // Absent (v1 documents) and null are both valid and read as no graph.
    let mut absent = value.clone();
    absent.as_object_mut().unwrap().remove("graph");
    assert_eq!(errors(&validator, &absent), Vec::<String>::new());
    let mut null = value.clone();
    null["graph"] = Value::Null;
    assert_eq!(errors(&validator, &null), Vec::<String>::new());
    assert_eq!(
        serde_json::from_value::<Document>(null).unwrap().graph,
        None
    );
    assert!(!serde_json::to_string(&synthetic_document())
        .unwrap()
        .contains("\"graph\""));
    // What the schema refuses: zero replays, a missing counter, another pool.
    for (pointer, bad) in [
        ("/graph/replays", Value::from(0)),
        ("/graph/memory_pool", Value::from("shared")),
        ("/graph/capture/end_reserved_bytes", Value::from(-1)),
    ] {
        let mut wrong = value.clone();
        *wrong.pointer_mut(pointer).unwrap() = bad;
        assert!(!errors(&validator, &wrong).is_empty(), "{pointer}");
    }
    let mut wrong = value;
    wrong["graph"]
        .as_object_mut()
        .unwrap()
        .remove("median_gpu_seconds_per_forward");
    assert!(!errors(&validator, &wrong).is_empty());
}

/// The graph-floor documents of examples/h200/graph/ (both twins, small and large, three
/// dtypes) and the two-GPU documents of examples/h200x2/: valid, with a graph, the twins'
/// graph counters identical, the two GPUs' counters identical, and the small float32 floor
/// within ±30 % of the 7.6 µs measured before with torch.cuda.CUDAGraph (BENCHMARKS.md).
#[test]
fn graph_and_two_gpu_examples_agree() {
    let validator = validator();
    let read = |path: PathBuf| -> (Value, Document) {
        let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let value: Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            errors(&validator, &value),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        (value, lab::document::parse(&text).unwrap())
    };
    let folder = root().join("examples/h200/graph");
    for config in ["small", "large"] {
        for dtype in ["float32", "float16", "bfloat16"] {
            let (_, rust) = read(folder.join(format!("rust-{config}-{dtype}.json")));
            let (_, python) = read(folder.join(format!("python-{config}-{dtype}.json")));
            assert_eq!(rust.tool.implementation, "rust");
            assert_eq!(python.tool.implementation, "python");
            let (r, p) = (rust.graph.unwrap(), python.graph.unwrap());
            assert_eq!(r.capture, p.capture, "{config} {dtype}");
            assert_eq!(r.replay, p.replay, "{config} {dtype}");
            assert_eq!((r.replays, r.batches), (p.replays, p.batches));
            // A graph keeps its own pool: capture reserves more; replays allocate nothing.
            assert!(r.capture.end_reserved_bytes > r.capture.baseline_reserved_bytes);
            assert_eq!(
                r.replay.end_allocated_bytes,
                r.replay.baseline_allocated_bytes
            );
            assert_eq!(
                r.replay.end_reserved_bytes,
                r.replay.baseline_reserved_bytes
            );
            for (a, b) in rust.phases.iter().zip(&python.phases) {
                assert_eq!(
                    a.counters.peak_allocated_bytes,
                    b.counters.peak_allocated_bytes
                );
                assert_eq!(a.counters.end_reserved_bytes, b.counters.end_reserved_bytes);
            }
            if (config, dtype) == ("small", "float32") {
                for floor in [
                    r.median_gpu_seconds_per_forward,
                    p.median_gpu_seconds_per_forward,
                ] {
                    assert!((floor - 7.6e-6).abs() <= 0.3 * 7.6e-6, "{floor}");
                }
            }
        }
    }
    let pair = root().join("examples/h200x2");
    let (_, first) = read(pair.join("cuda-0.json"));
    let (_, second) = read(pair.join("cuda-1.json"));
    assert_eq!(first.configuration.device.to_string(), "cuda:0");
    assert_eq!(second.configuration.device.to_string(), "cuda:1");
    assert_eq!(first.environment.device_count, 2);
    let counters = |d: &Document| -> Vec<u64> {
        d.phases
            .iter()
            .flat_map(|r| {
                [
                    r.counters.peak_allocated_bytes,
                    r.counters.peak_reserved_bytes,
                    r.counters.end_allocated_bytes,
                ]
            })
            .collect()
    };
    assert_eq!(counters(&first), counters(&second));
    let comparison: Value =
        serde_json::from_slice(&std::fs::read(pair.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(comparison["flagged"], false);
    assert_eq!(comparison["gpus"][1]["counters_match"], true);
}

/// The sweep speed-up on the H200 (examples/h200/sweep-speed, BENCHMARKS.md "Sweep speed"):
/// the previous search, the model-guided one, and the model-guided one on two GPUs all find
/// batch 492 (493 out of memory), with 14, 2 and 4 fitted documents, each valid.
#[test]
fn the_sweep_speed_examples_find_the_same_limit() {
    let validator = validator();
    let folder = root().join("examples/h200/sweep-speed");
    for (run, fitted) in [("before", 14), ("after", 2), ("after-two-gpus", 4)] {
        let dir = folder.join(run);
        let mut documents = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                assert_eq!(
                    errors(&validator, &value),
                    Vec::<String>::new(),
                    "{}",
                    path.display()
                );
                documents += 1;
            }
        }
        assert_eq!(documents, fitted, "{run}");
        let mut reader = csv::Reader::from_path(dir.join("summary.csv")).unwrap();
        let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
        let largest = rows
            .iter()
            .filter(|r| &r[7] == "fitted")
            .map(|r| r[2].parse::<u64>().unwrap())
            .max();
        let smallest_oom = rows
            .iter()
            .filter(|r| &r[7] == "out_of_memory")
            .map(|r| r[2].parse::<u64>().unwrap())
            .min();
        assert_eq!((largest, smallest_oom), (Some(492), Some(493)), "{run}");
        assert!(rows.iter().all(|r| &r[16] == "completed"), "{run}");
    }
}

/// Every JSON pointer inside `value` (objects' keys and arrays' items), depth first.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let here = format!("{at}/{key}");
                out.push(here.clone());
                pointers(inner, here, out);
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                let here = format!("{at}/{index}");
                out.push(here.clone());
                pointers(inner, here, out);
            }
        }
        _ => {}
    }
}

/// The committed schema is the one generated from lab's types (`cargo xtask codegen` writes
/// it), and it means what the hand-written v1 schema it replaced meant
/// (`tests/data/measurement-v1-hand-written.schema.json`): for a document with every optional
/// part present, each key removed, each value replaced by values of every kind and edge, and
/// a key added anywhere, both schemas give the same verdict.
#[test]
fn the_generated_schema_accepts_what_the_hand_written_one_did() {
    let committed =
        std::fs::read_to_string(root().join(lab::document::schema::SCHEMA_FILE)).unwrap();
    assert_eq!(committed, lab::document::schema::measurement_schema_text());
    let generated = validator();
    let hand: Value = serde_json::from_str(
        &std::fs::read_to_string(
            root().join("lab/tests/data/measurement-v1-hand-written.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let hand = jsonschema::validator_for(&hand).unwrap();
    use lab::document::graph::{GraphSection, GraphTimings};
    let counters = AllocatorCounters {
        baseline_allocated_bytes: 1,
        baseline_reserved_bytes: 2,
        end_allocated_bytes: 3,
        end_reserved_bytes: 4,
        peak_allocated_bytes: 5,
        peak_reserved_bytes: 6,
    };
    let timings = GraphTimings {
        replays: 10,
        batch_seconds: vec![0.001; 3],
        single_wall_seconds: vec![1e-5; 10],
        capture_wall_seconds: 0.2,
    };
    let mut document = synthetic_document();
    document.graph = GraphSection::from_timings(&timings, counters, counters);
    document.synthetic_model.autograd = Some("inference_mode".into());
    document.environment.driver = Some(lab::document::Driver {
        version: "580.1".into(),
        source: "nvidia-smi".into(),
    });
    document.phases[5].gpu_seconds = Some(2e-5);
    let base = serde_json::to_value(&document).unwrap();
    assert!(generated.is_valid(&base) && hand.is_valid(&base));
    let replacements: Vec<Value> = serde_json::from_str(
        r#"[null, -1, 0, 1, 2, 3, 4, 5, 1.5, -0.5, 1000000, 1000001, 18446744073709551615,
            "", "x", "cuda:0", "cuda:00", "cuda:x", "CUDA:0", "9.0", "9", "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00.5Z", "2026-01-01 00:00:00", "rust", "python", "Rust", "Python",
            "float16", "float64", "model_load", "warm_forward", "warmup", "private", "shared",
            "inference_mode", "no_grad", "training", "iteragpu-lab", "other",
            "iteragpu-lab/measurement/v1", "iteragpu-lab/measurement/v2", true, false, [], [1],
            [-1], {}, {"version": "1", "source": "x"}]"#,
    )
    .unwrap();
    let mut paths = Vec::new();
    pointers(&base, String::new(), &mut paths);
    let mut compared = 0;
    let mut differ = Vec::new();
    let mut judge = |label: String, candidate: &Value| {
        compared += 1;
        let (g, h) = (generated.is_valid(candidate), hand.is_valid(candidate));
        if g != h {
            differ.push(format!("{label}: generated {g}, hand-written {h}"));
        }
    };
    for path in &paths {
        let (parent, key) = path.rsplit_once('/').unwrap();
        let mut removed = base.clone();
        match removed.pointer_mut(parent).unwrap() {
            Value::Object(map) => {
                map.remove(key);
            }
            Value::Array(items) => {
                items.remove(key.parse::<usize>().unwrap());
            }
            _ => unreachable!(),
        }
        judge(format!("{path} removed"), &removed);
        for replacement in &replacements {
            let mut changed = base.clone();
            *changed.pointer_mut(path).unwrap() = replacement.clone();
            judge(format!("{path} = {replacement}"), &changed);
        }
        if let Some(Value::Object(_)) = base.pointer(path) {
            let mut added = base.clone();
            if let Some(Value::Object(map)) = added.pointer_mut(path) {
                map.insert("added_later".into(), Value::from(1));
            }
            judge(format!("{path} + added_later"), &added);
        }
    }
    assert!(compared > 5000, "{compared}");
    assert!(
        differ.is_empty(),
        "{} of {compared} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // And the committed documents, both twins: the same verdict (valid) from both.
    for path in example_files() {
        let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(
            generated.is_valid(&value) && hand.is_valid(&value),
            "{}",
            path.display()
        );
    }
}
