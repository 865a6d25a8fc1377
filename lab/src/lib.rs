//! IteraGPU Lab: the arithmetic and the measurement behind the `lab` command.
//!
//! One module per concept: [`estimate`] (weight memory), [`catalog`] (the package price list),
//! [`pricing`] (package totals and unit cost), [`environment`] and [`measure`] (the libtorch
//! worker and its protocol), [`worker`] (starting the worker and its JSON), [`report`]
//! (reading measurement files back), [`kit`] (the release archive and its manifest).
//! See `SPEC.md`-derived docs in README.md.

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
pub mod units;
pub mod worker;

pub use error::{Error, Result};
