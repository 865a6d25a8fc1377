//! The ceiling is a bound (`docs/PLANNING.md`, "Two figures, never mixed"): over a grid of the
//! shipped models, batches 1 to 4096, prompt and output lengths, both profiles, every catalog
//! GPU, without calibration and with every committed `lab measure --model` document of the
//! model, no expected figure beats its ceiling. With `--batch` both figures run at that batch,
//! so each phase compares directly: TTFT and TPOT, prefill and decode tokens per second, the
//! workload's tokens per second and hours, and each finish's hours against the same lots at
//! the ceiling. A document refused (its measurement beats the ceiling at its own workload)
//! must be refused by name; none of the committed ones is.

use super::decision::{Row, Setup};
use super::roofline::Profile;
use super::workload::{Method, Targets, Workload};
use super::{estimate_calibrated, gpu_perf, Ask};
use crate::catalog::Catalog;
use crate::plan::{gpu_memory, Mode, Request, WeightsFormat};
use rust_decimal::Decimal;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every shipped model folder.
fn models() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("examples/models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("config.json").is_file())
        .collect();
    v.sort();
    v
}

/// Every committed `lab measure --model` document under `examples/`, with the digest of the
/// `config.json` it measured.
fn documents() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root().join("examples"), &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            (v["schema"] == crate::document::model_run::MODEL_SCHEMA_ID).then(|| {
                let digest = v["model"]["config_sha256"].as_str().unwrap().to_string();
                (p, digest)
            })
        })
        .collect()
}

fn digest(model: &Path) -> String {
    crate::digest::sha256_hex(&std::fs::read(model.join("config.json")).unwrap())
}

struct Grid {
    catalog: Catalog,
    memory: Vec<gpu_memory::GpuMemory>,
    perf: Vec<gpu_perf::GpuPerf>,
    checked: usize,
}

impl Grid {
    fn new() -> Self {
        let catalog = Catalog::embedded().unwrap();
        let memory = gpu_memory::load(None, &catalog).unwrap();
        let perf = gpu_perf::load(None, &catalog).unwrap();
        Grid {
            catalog,
            memory,
            perf,
            checked: 0,
        }
    }

    /// The plan's rows, or the usage error's text.
    fn rows(
        &self,
        model: &Path,
        workload: Workload,
        batch: Option<u64>,
        profile: Profile,
        docs: &[PathBuf],
    ) -> Result<Vec<Row>, String> {
        let ask = Ask {
            request: Request {
                model: model.to_path_buf(),
                batch: 1,
                context: 1,
                weights: WeightsFormat::Stored,
                kv_dtype: None,
                mode: Mode::Inference,
                checkpointing: false,
                fixed: Default::default(),
            },
            workload,
            batch,
            days: vec![7],
            gpus: Vec::new(),
            profile,
            network_gb_s: Decimal::new(125, 1),
        };
        let mut ask = ask;
        let got = estimate_calibrated(&ask, &self.catalog, &self.memory, &self.perf, docs);
        let got = match got {
            // An fp32 checkpoint (Gemma 2's config) or one stating no dtype (OLMo 2's) is
            // planned in bf16, as the refusal asks.
            Err(e) if e.to_string().contains("--weights-dtype") => {
                ask.request.weights = WeightsFormat::Named("bf16".into());
                estimate_calibrated(&ask, &self.catalog, &self.memory, &self.perf, docs)
            }
            other => other,
        };
        got.map(|(_, t)| t.rows).map_err(|e| e.to_string())
    }

    /// Every setup of every row: the expected figure never beats the ceiling.
    fn check(&mut self, what: &str, rows: &[Row], same_batch: bool) {
        for r in rows {
            for s in r.setup.iter().chain(&r.alternatives) {
                self.checked += 1;
                bound(&format!("{what} {} {}", r.gpu, s.using), s, same_batch);
            }
        }
    }
}

fn bound(what: &str, s: &Setup, same_batch: bool) {
    let (e, c) = (&s.expected, &s.ceiling);
    let at_most = |name: &str, fast: Decimal, slow: Decimal| {
        assert!(
            fast <= slow,
            "{what} at batch {} (ceiling batch {}): the ceiling's {name} {} is above the expected {} — expected beats the ceiling",
            s.batch,
            s.ceiling_batch,
            if name.ends_with("_s") || name == "hours" { fast } else { slow },
            if name.ends_with("_s") || name == "hours" { slow } else { fast },
        )
    };
    if same_batch {
        assert_eq!(s.batch, s.ceiling_batch, "{what}");
        at_most("ttft_s", c.ttft_s, e.ttft_s);
        at_most("tpot_s", c.tpot_s, e.tpot_s);
    }
    at_most(
        "prefill_tokens_per_s",
        e.prefill_tokens_per_s,
        c.prefill_tokens_per_s,
    );
    at_most(
        "decode_tokens_per_s",
        e.decode_tokens_per_s,
        c.decode_tokens_per_s,
    );
    at_most(
        "workload_tokens_per_s",
        e.workload_tokens_per_s,
        c.workload_tokens_per_s,
    );
    at_most("seconds_s", c.seconds, e.seconds);
    at_most("hours", c.hours, e.hours);
    if let Some(f) = &s.finish {
        at_most("hours", f.ceiling_hours, f.hours);
    }
}

const BATCHES: [u64; 5] = [1, 16, 128, 1000, 4096];
const LENGTHS: [(u64, u64); 3] = [(128, 128), (1024, 64), (4096, 1024)];
const PROFILES: [Profile; 2] = [Profile::Eager, Profile::CudaGraphs];

fn inference(batch: u64, (i, o): (u64, u64)) -> Workload {
    Workload::Inference {
        requests: batch,
        input_tokens: i,
        output_tokens: o,
    }
}

#[test]
fn no_expected_figure_beats_the_ceiling_without_calibration() {
    let mut g = Grid::new();
    for m in models() {
        let name = m.file_name().unwrap().to_string_lossy().into_owned();
        for &profile in &PROFILES {
            for &len in &LENGTHS {
                for &b in &BATCHES {
                    let what = format!("{name} {} {}+{} b{b}", profile.name(), len.0, len.1);
                    match g.rows(&m, inference(b, len), Some(b), profile, &[]) {
                        Ok(rows) => g.check(&what, &rows, true),
                        Err(e) => {
                            assert!(e.contains("no GPU of the catalog can run"), "{what}: {e}")
                        }
                    }
                }
                // The batch the memory model picks (the ceiling's own, larger batch).
                let what = format!(
                    "{name} {} {}+{} 1000 requests",
                    profile.name(),
                    len.0,
                    len.1
                );
                let rows = g
                    .rows(&m, inference(1000, len), None, profile, &[])
                    .unwrap();
                g.check(&what, &rows, false);
            }
        }
        for (method, seq, b) in [
            (Method::Full, 2048, Some(1)),
            (Method::Full, 4096, None),
            (Method::Lora, 4096, Some(4)),
            (Method::Qlora, 1024, None),
        ] {
            let w = Workload::Training {
                tokens: 100_000_000,
                sequence: seq,
                method,
                rank: 16,
                targets: Targets::All,
            };
            let what = format!("{name} training {method:?} {seq} {b:?}");
            match g.rows(&m, w, b, Profile::Eager, &[]) {
                Ok(rows) => g.check(&what, &rows, b.is_some()),
                Err(e) => assert!(
                    e.contains("no GPU of the catalog can run")
                        || e.contains("QLoRA")
                        || e.contains("int4"),
                    "{what}: {e}"
                ),
            }
        }
    }
    assert!(g.checked > 10_000, "{}", g.checked);
}

#[test]
fn no_calibrated_figure_beats_the_ceiling() {
    let mut g = Grid::new();
    let docs = documents();
    assert!(docs.len() >= 40, "{}", docs.len());
    let mut refused = 0;
    for m in models() {
        let mine: Vec<PathBuf> = docs
            .iter()
            .filter(|(_, d)| *d == digest(&m))
            .map(|(p, _)| p.clone())
            .collect();
        if mine.is_empty() {
            continue;
        }
        let name = m.file_name().unwrap().to_string_lossy().into_owned();
        for &profile in &PROFILES {
            // Each document alone, then every one of them that is accepted, together.
            let mut accepted = Vec::new();
            for d in &mine {
                let one = [d.clone()];
                let probe = g.rows(&m, inference(1, (128, 128)), Some(1), profile, &one);
                match probe {
                    Err(e) if e.contains("faster than the ceiling") => {
                        assert!(e.contains(&d.display().to_string()), "{e}");
                        refused += 1;
                        continue;
                    }
                    Err(e) if e.contains("has no graph_decode rows") => continue,
                    _ => accepted.push(d.clone()),
                }
                for &len in &LENGTHS[..2] {
                    for &b in &[1, 1000, 4096] {
                        let what = format!(
                            "{name} {} {}+{} b{b} {}",
                            profile.name(),
                            len.0,
                            len.1,
                            d.display()
                        );
                        match g.rows(&m, inference(b, len), Some(b), profile, &one) {
                            Ok(rows) => g.check(&what, &rows, true),
                            Err(e) => {
                                assert!(e.contains("no GPU of the catalog can run"), "{what}: {e}")
                            }
                        }
                    }
                }
            }
            if accepted.len() > 1 {
                for &b in &BATCHES {
                    let what = format!("{name} {} all documents b{b}", profile.name());
                    match g.rows(&m, inference(b, (128, 128)), Some(b), profile, &accepted) {
                        Ok(rows) => g.check(&what, &rows, true),
                        Err(e) => {
                            assert!(e.contains("no GPU of the catalog can run"), "{what}: {e}")
                        }
                    }
                }
                let rows = g
                    .rows(&m, inference(1000, (128, 128)), None, profile, &accepted)
                    .unwrap();
                g.check(
                    &format!("{name} {} all documents", profile.name()),
                    &rows,
                    false,
                );
            }
        }
    }
    assert!(g.checked > 1000, "{}", g.checked);
    // Every committed document is plausible at its own workload (docs/PLANNING.md says so).
    assert_eq!(
        refused, 0,
        "committed documents refused as faster than the ceiling"
    );
}
