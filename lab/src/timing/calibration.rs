//! `lab plan --calibration DOC…`: measured step times of lab's own worker
//! (`lab measure --model` documents, `iteragpu-lab/model-measurement/v1`) scale the expected
//! figures of the GPU model they were measured on (`docs/PLANNING.md`, "Calibration").
//!
//! For each document: the measured decode step (median `gpu_seconds` of the `decode` rows
//! for `--profile eager`, of the `graph_decode` rows for `cuda-graphs`) and prefill (median
//! of the `warm_prefill` rows) over the time model's expected figures for the same model,
//! batch, prompt and output length on one GPU; the ratio (4 decimals, half-to-even) scales
//! that GPU's expected decode and prefill times in every setup of the plan. Several
//! documents for one GPU model: the median ratio per phase. A document faster than the
//! ceiling of its own workload is refused; a row outside the measured workloads is marked
//! extrapolated, and a phase the ratio would push below the ceiling of its setup is held at
//! it and named ([`super::decision`]: the ceiling stays a bound).

use crate::catalog::Catalog;
use crate::document::model_run::{self, ModelDocument, ModelPhase, MODEL_SCHEMA_ID};
use crate::document::Dtype;
use crate::units::round;
use crate::{Error, Result};
use rust_decimal::Decimal;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One calibration document, read and checked.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The file name as given on the command line (shown in the label).
    pub file: String,
    /// Catalog GPU id of the document's GPU model.
    pub gpu: String,
    /// Sequences per batch.
    pub batch: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Output tokens (decode steps).
    pub output_tokens: u64,
    /// The document's element type.
    pub dtype: Dtype,
    /// Median measured decode step, seconds.
    pub decode_s: Decimal,
    /// Median measured prefill of the batch, seconds (`None` without warm prefills).
    pub prefill_s: Option<Decimal>,
}

/// A phase of an inference batch that a calibration scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The prompt's prefill (TTFT).
    Prefill,
    /// One decode step (TPOT).
    Decode,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Prefill => "prefill",
            Phase::Decode => "decode",
        })
    }
}

/// The calibration of one GPU model (`calibration` on a row of `lab plan --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Calibrated {
    /// Catalog GPU id.
    pub gpu: String,
    /// The documents used, as given.
    pub files: Vec<String>,
    /// Measured over expected decode step time (the median over the documents), 4 decimals.
    #[serde(with = "rust_decimal::serde::str")]
    pub decode_ratio: Decimal,
    /// Measured over expected prefill time, 4 decimals; null when no document timed one.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub prefill_ratio: Option<Decimal>,
    /// In words, as the text shows it.
    pub label: String,
    /// The documents' batches, least and most (each measured on one GPU).
    pub measured_batch: [u64; 2],
    /// Their prompt lengths, least and most.
    pub measured_input_tokens: [u64; 2],
    /// Their output lengths, least and most.
    pub measured_output_tokens: [u64; 2],
    /// On a row: true when its setup runs outside what was measured (a batch, prompt or
    /// output length outside those ranges, or more than one GPU per replica), so that the
    /// ratios are extrapolated there; the row's notes say so.
    pub extrapolated: bool,
}

impl Calibrated {
    /// Whether a replica of `t` GPUs over `p` lots at `batch` sequences of `input` + `output`
    /// tokens runs outside the measured ranges.
    pub fn extrapolates(&self, t: u64, p: u64, batch: u64, input: u64, output: u64) -> bool {
        let within = |[lo, hi]: [u64; 2], x: u64| lo <= x && x <= hi;
        t * p != 1
            || !within(self.measured_batch, batch)
            || !within(self.measured_input_tokens, input)
            || !within(self.measured_output_tokens, output)
    }

    /// The measured workloads in words: `batch 1 x (128 + 128) tokens`, ranges as `1-16`.
    pub fn measured(&self) -> String {
        let r = |[lo, hi]: [u64; 2]| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        };
        format!(
            "batch {} x ({} + {}) tokens on one GPU",
            r(self.measured_batch),
            r(self.measured_input_tokens),
            r(self.measured_output_tokens)
        )
    }
}

fn refuse(file: &Path, why: impl std::fmt::Display) -> Error {
    Error::usage(format!("--calibration {}: {why}", file.display()))
}

/// Reads the documents for a plan of the model whose `config.json` text is `config_text`
/// under `profile`.
///
/// # Errors
/// [`Error::Runtime`] (exit 1) when a file cannot be read (missing, permissions);
/// [`Error::Usage`] (exit 2), naming the file: not a regular file, larger than
/// [`crate::document::MAX_DOCUMENT_BYTES`]; not a `lab measure --model`
/// document (another schema, a synthetic `lab measure` document, a comparison); rows of a
/// failed or incomplete run; another model (both digests named); a GPU model not in the
/// catalog; no `graph_decode` rows under `--profile cuda-graphs`; the same document twice.
pub fn read(
    paths: &[PathBuf],
    config_text: &str,
    catalog: &Catalog,
    profile: super::roofline::Profile,
) -> Result<Vec<Measured>> {
    let wanted = crate::digest::sha256_hex(config_text.as_bytes());
    let mut seen: Vec<(String, &Path)> = Vec::new();
    let mut out = Vec::new();
    for path in paths {
        use crate::input::ReadFailure;
        let cap = crate::document::MAX_DOCUMENT_BYTES;
        let bytes = crate::input::file(path, cap).map_err(|failure| match failure {
            ReadFailure::Io(e) => Error::runtime(format!(
                "--calibration {}: cannot be read ({e})",
                path.display()
            )),
            ReadFailure::NotAFile => {
                refuse(path, "is not a file; give a lab measure --model document")
            }
            ReadFailure::TooLarge { bytes } => refuse(
                path,
                format!("is {bytes} bytes, more than a measurement document's {cap}"),
            ),
        })?;
        let digest = crate::digest::sha256_hex(&bytes);
        if let Some((_, first)) = seen.iter().find(|(d, _)| *d == digest) {
            return Err(refuse(
                path,
                format!(
                    "the same document as {} was given already: give each measurement once",
                    first.display()
                ),
            ));
        }
        seen.push((digest, path));
        out.push(one(path, &bytes, &wanted, catalog, profile)?);
    }
    Ok(out)
}

fn one(
    path: &Path,
    bytes: &[u8],
    wanted: &str,
    catalog: &Catalog,
    profile: super::roofline::Profile,
) -> Result<Measured> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| {
        refuse(
            path,
            "is not JSON: give a document lab measure --model wrote",
        )
    })?;
    let schema = value.get("schema").and_then(serde_json::Value::as_str);
    match schema {
        Some(MODEL_SCHEMA_ID) => {}
        Some("iteragpu-lab/measurement/v1") => {
            return Err(refuse(
                path,
                "is a synthetic lab measure document (no model): give one lab measure --model wrote",
            ))
        }
        Some(other) => {
            return Err(refuse(
                path,
                format!(
                    "has schema '{}', not {MODEL_SCHEMA_ID}: give a document lab measure --model wrote",
                    crate::text::excerpt(other)
                ),
            ))
        }
        None if value.get("gpus").is_some() && value.get("basis").is_some() => {
            return Err(refuse(
                path,
                "is the comparison of lab measure --device (comparison.json): give one GPU's lab measure --model document",
            ))
        }
        None => {
            return Err(refuse(
                path,
                format!("has no schema (a comparison or another tool's file?), not {MODEL_SCHEMA_ID}: give a document lab measure --model wrote"),
            ))
        }
    }
    let doc: ModelDocument = serde_json::from_value(value).map_err(|e| {
        refuse(
            path,
            format!("is an incomplete model measurement ({e}): measure again"),
        )
    })?;
    model_run::check_rows(&doc).map_err(|e| {
        refuse(
            path,
            format!("is from a failed or incomplete run ({e}): measure again"),
        )
    })?;
    let w = &doc.workload;
    if w.batch == 0
        || w.input_tokens == 0
        || w.output_tokens == 0
        || Some(w.context) != w.input_tokens.checked_add(w.output_tokens)
    {
        return Err(refuse(
            path,
            "has a workload lab measure --model does not write (batch, tokens at least 1; context = input + output): measure again",
        ));
    }
    if doc.model.config_sha256 != wanted {
        return Err(refuse(
            path,
            format!(
                "measures another model (config digest {}; the plan's config.json has {wanted}): give a measurement of this model",
                crate::text::excerpt(&doc.model.config_sha256)
            ),
        ));
    }
    let name = &doc.environment.device_name;
    let gpu = crate::gpu_name::catalog_gpu(catalog, name).ok_or_else(|| {
        refuse(
            path,
            format!(
                "GPU model '{}' is not one catalog GPU (its GPUs: {}; a PCIe or NVL board is not its SXM namesake)",
                crate::text::ascii(name),
                catalog.gpu_ids().join(", ")
            ),
        )
    })?;
    let decode_phase = match profile {
        super::roofline::Profile::Eager => ModelPhase::Decode,
        super::roofline::Profile::CudaGraphs => ModelPhase::GraphDecode,
    };
    let decode_s = median(&doc, decode_phase).ok_or_else(|| {
        refuse(
            path,
            format!(
                "has no {decode_phase} rows for --profile {}: measure with --graph, or plan with --profile eager",
                profile.name()
            ),
        )
    })?;
    Ok(Measured {
        file: path.display().to_string(),
        gpu,
        batch: w.batch,
        input_tokens: w.input_tokens,
        output_tokens: w.output_tokens,
        dtype: w.dtype,
        decode_s,
        prefill_s: median(&doc, ModelPhase::WarmPrefill),
    })
}

/// Median `gpu_seconds` (wall seconds where the row has none) of the rows of `phase`; the
/// one median rule of a model document's step times (`lab plan --calibration` and the
/// document's own `prediction.time`). `None` without rows.
pub fn median(doc: &ModelDocument, phase: ModelPhase) -> Option<Decimal> {
    let mut v: Vec<Decimal> = doc
        .phases
        .iter()
        .filter(|r| r.phase == phase)
        .filter_map(|r| Decimal::try_from(r.gpu_seconds.unwrap_or(r.wall_seconds)).ok())
        .collect();
    median_of(&mut v)
}

/// The median (the mean of the two middle values for an even count).
pub fn median_of(v: &mut [Decimal]) -> Option<Decimal> {
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / Decimal::TWO),
    }
}

/// The ratio measured / expected, 4 decimals half-to-even.
pub fn ratio(measured: Decimal, expected: Decimal) -> Option<Decimal> {
    (expected > Decimal::ZERO).then(|| round(measured / expected, 4))
}

/// The label of a calibrated GPU's rows.
pub fn label(files: &[String], decode: Decimal, prefill: Option<Decimal>) -> String {
    let names = files
        .iter()
        .map(|f| {
            Path::new(f)
                .file_name()
                .map_or_else(|| f.clone(), |n| n.to_string_lossy().into_owned())
        })
        .collect::<Vec<_>>()
        .join(", ");
    let median = if files.len() > 1 { "median " } else { "" };
    match prefill {
        Some(p) => format!(
            "calibrated from your measurement ({names}, {median}ratio {} decode, {} prefill)",
            round(decode, 2),
            round(p, 2)
        ),
        None => format!(
            "calibrated from your measurement ({names}, {median}ratio {} decode; prefill not measured)",
            round(decode, 2)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_odd_and_even_counts() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(median_of(&mut []), None);
        assert_eq!(median_of(&mut [d("3"), d("1"), d("2")]), Some(d("2")));
        assert_eq!(
            median_of(&mut [d("4"), d("1"), d("2"), d("3")]),
            Some(d("2.5"))
        );
    }

    #[test]
    fn ratios_round_half_to_even_and_need_an_expected_time() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert_eq!(ratio(d("1"), d("3")), Some(d("0.3333")));
        assert_eq!(ratio(d("0.000025"), d("0.0001")), Some(d("0.25")));
        assert_eq!(ratio(d("1"), Decimal::ZERO), None);
    }
}
