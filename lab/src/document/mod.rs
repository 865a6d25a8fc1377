//! The measurement document, schema `iteragpu-lab/measurement/v1`
//! (`lab/schema/measurement.schema.json`; `docs/PROTOCOL.md §4.4`): its types, reading (with a
//! size cap), checking and writing. This module is the document's only owner: `lab measure`
//! and `lab sweep` write it, `lab report` and `lab record` read it, and both twins (`lab` and
//! `mesure_memoire.py`) write the same shape.
//!
//! The document holds:
//! - `tool` ([`Tool`]) and `created_utc`;
//! - `environment` ([`MeasurementEnvironment`]): libtorch's facts ([`LibtorchFacts`]), the GPU,
//!   the driver;
//! - `configuration` ([`Configuration`]): what was asked (device, sizes, [`Dtype`], passes,
//!   seed);
//! - `synthetic_model` ([`SyntheticModel`]): the analytic sizes of the MLP, nothing measured;
//! - `phases` ([`PhaseRow`], one per protocol step, named by [`Phase`]);
//! - `graph` ([`graph::GraphSection`]), optional: the CUDA-graph floor (`--graph-replays`).
//!
//! [`model_run`] holds the sibling document of `lab measure --model` (a real decoder).
//!
//! It depends on no other measurement module (not on the worker, the measurement run or the
//! report), so that every one of them can depend on it.

mod configuration;
mod counters;
mod environment;
mod file;
pub mod graph;
mod model;
pub mod model_run;
mod phase;
pub mod schema;

pub use configuration::{Configuration, Dtype};
pub use counters::AllocatorCounters;
pub use environment::{Driver, LibtorchFacts, MeasurementEnvironment, Runtime, RUSTC_VERSION};
pub use file::{
    check, encode, from_bytes, parse, read, read_bytes, write_new, LoadedMeasurement,
    MAX_DOCUMENT_BYTES,
};
pub use model::{round_to_block, SyntheticModel, ALLOCATOR_BLOCK_BYTES, AUTOGRAD_MODE};
pub use phase::{check_seconds, Phase, PhaseRow, MAX_SECONDS, MIN_SECONDS};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `schema` value of every measurement document.
pub const SCHEMA_ID: &str = "iteragpu-lab/measurement/v1";

/// The `tool.name` value of every measurement document.
pub const TOOL_NAME: &str = "iteragpu-lab";

/// `tool` in the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    /// Always [`TOOL_NAME`].
    #[schemars(extend("const" = TOOL_NAME))]
    pub name: String,
    /// The crate version of `lab`.
    #[schemars(length(min = 1))]
    pub version: String,
    /// `rust` for `lab`, `python` for `mesure_memoire.py`.
    #[schemars(extend("enum" = ["rust", "python"]))]
    pub implementation: String,
}

impl Tool {
    /// The `tool` object written by `lab`.
    pub fn rust() -> Self {
        Tool {
            name: TOOL_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            implementation: "rust".to_owned(),
        }
    }
}

/// A whole measurement document (schema `iteragpu-lab/measurement/v1`). Unknown fields are
/// ignored when reading, so documents that gained fields still read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Document {
    /// Always [`SCHEMA_ID`].
    #[schemars(extend("const" = SCHEMA_ID))]
    pub schema: String,
    /// Who wrote it.
    pub tool: Tool,
    /// UTC time the measurement started, `YYYY-MM-DDTHH:MM:SSZ`.
    #[schemars(regex(
        pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$"
    ))]
    pub created_utc: String,
    /// Software and GPU the numbers come from.
    pub environment: MeasurementEnvironment,
    /// What was asked.
    pub configuration: Configuration,
    /// Analytic sizes of the model.
    pub synthetic_model: SyntheticModel,
    /// One row per step, in order (at least one per phase).
    #[schemars(length(min = 5))]
    pub phases: Vec<PhaseRow>,
    /// The CUDA-graph floor (`--graph-replays`); absent (or null) when not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<graph::GraphSection>,
}

impl Document {
    /// Rows of one phase, in document order.
    pub fn rows_of(&self, phase: Phase) -> impl Iterator<Item = &PhaseRow> {
        self.phases.iter().filter(move |r| r.phase == phase)
    }

    /// The first row of `phase`, if any.
    pub fn first_row(&self, phase: Phase) -> Option<&PhaseRow> {
        self.rows_of(phase).next()
    }

    /// Largest peak reserved over all phases, bytes (0 without rows).
    pub fn peak_reserved_bytes(&self) -> u64 {
        self.phases
            .iter()
            .map(|r| r.counters.peak_reserved_bytes)
            .max()
            .unwrap_or(0)
    }

    /// Largest peak allocated over all phases, bytes (0 without rows).
    pub fn peak_allocated_bytes(&self) -> u64 {
        self.phases
            .iter()
            .map(|r| r.counters.peak_allocated_bytes)
            .max()
            .unwrap_or(0)
    }

    /// Median wall time of the `warm_forward` rows, seconds (`None` without such rows).
    pub fn warm_forward_median_wall_seconds(&self) -> Option<f64> {
        let walls: Vec<f64> = self
            .rows_of(Phase::WarmForward)
            .map(|r| r.wall_seconds)
            .collect();
        median(&walls)
    }
}

/// Median of the finite `values` (mean of the two middle values for an even count); `None`
/// when there is none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        let (a, b) = (sorted[mid - 1], sorted[mid]);
        // Halves first only when the sum overflows (two values near f64::MAX).
        if (a + b).is_finite() {
            (a + b) / 2.0
        } else {
            a / 2.0 + b / 2.0
        }
    } else {
        sorted[mid]
    })
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ` (the document's `created_utc`).
pub fn utc_now() -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::now_utc()
        .format(&format)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// Whether `text` is a `created_utc` as the schema defines it: `YYYY-MM-DDTHH:MM:SSZ`, seconds
/// optionally with a fraction (`.123`), and a real date and time (RFC 3339: no month 13, no
/// February 30).
///
/// # Errors
/// One line quoting the value (escaped).
pub fn check_created_utc(text: &str) -> std::result::Result<(), String> {
    let b = text.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let shaped = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[b.len() - 1] == b'Z'
        && (b.len() == 20 || (b[19] == b'.' && b.len() > 21 && digits(20..b.len() - 1)));
    let real = shaped
        && time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .is_ok();
    if real {
        Ok(())
    } else {
        Err(format!(
            "created_utc {} is not a UTC time YYYY-MM-DDTHH:MM:SSZ",
            crate::text::ascii(&format!("{text:?}"))
        ))
    }
}

#[cfg(test)]
pub(crate) mod tests;
