//! IteraGPU Lab: the arithmetic and the measurement behind the `lab` command (`docs/PROTOCOL.md`).
//!
//! One module per concept:
//! - [`estimate`]: weight memory from a parameter count and a storage width (no GPU);
//! - [`catalog`]: the package price list, validated; [`pricing`]: package totals and cost per
//!   result; [`compare`]: the packages that meet a need, cheapest first;
//! - [`environment`]: what libtorch and the GPU report; [`measure`]: the measurement's flags,
//!   analytic model, document and summary; [`worker`]: starting the libtorch worker and its
//!   JSON protocol;
//! - [`report`]: reading measurement documents back (tables, Markdown, SVG); [`sweep`]: growing
//!   one dimension up to the memory limit; [`record`]: appending a run to the results grid;
//! - [`kit`]: the release archive, its manifest and its verifier;
//! - shared helpers: [`digest`] (SHA-256), [`output`] (new files, never overwritten),
//!   [`units`] (exact MiB and GiB), [`table`] (aligned text tables), [`text`] (user input
//!   printed back with control characters escaped), [`error`] (the two kinds of failure and
//!   their exit codes).

pub mod catalog;
pub mod compare;
pub mod digest;
pub mod environment;
pub mod error;
pub mod estimate;
pub mod kit;
pub mod measure;
pub mod output;
pub mod pricing;
pub mod record;
pub mod report;
pub mod sweep;
pub mod table;
pub mod text;
pub mod units;
pub mod worker;

pub use error::{Error, Result};
