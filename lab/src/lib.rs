//! IteraGPU Lab: the arithmetic and the measurement behind the `lab` command (`docs/PROTOCOL.md`).
//!
//! One module per concept:
//! - [`estimate`]: weight memory from a parameter count and a storage width (no GPU);
//! - [`catalog`]: the package price list, validated; [`pricing`]: package totals and cost per
//!   result; [`compare`]: the packages that meet a need, cheapest first;
//! - [`device`]: the GPU a command names (`cuda:N`, `all`, a list), parsed once from the flag;
//! - [`document`]: the measurement document (its types, reading, checking, writing);
//!   [`environment`]: what libtorch and the GPU report; [`measure`]: the measurement's flags,
//!   one run through the worker, and its summary; [`worker`]: starting the libtorch worker and
//!   its JSON protocol;
//! - [`report`]: measurement documents rendered (tables, Markdown, SVG); [`sweep`]: growing
//!   one dimension up to the memory limit; [`record`]: appending a run to the results grid;
//! - [`plan`]: which package fits a model folder or `config.json`, and what it costs;
//! - [`decoder`]: the decoder `lab measure --model` runs (architecture facts, tensors in
//!   materialisation order, safetensors byte ranges); [`measure_model`]: that measurement's
//!   checks, run and document with `lab plan`'s prediction beside it;
//! - shared helpers: [`digest`] (SHA-256), [`input`] (bounded reads of files and standard
//!   input), [`output`] (new files, never overwritten),
//!   [`units`] (exact MiB and GiB), [`table`] (aligned text tables), [`text`] (user input
//!   printed back with control characters escaped), [`error`] (the kinds of failure and
//!   their exit codes).
//!
//! Where text rendering lives, one rule: a rendering with logic of its own (which rows, how
//! grouped or rounded, a chart) belongs to its concept's module, as a function that returns a
//! `String` and is tested there; `cli/<command>.rs` only lays an already computed value's
//! fields out on lines. For `report`, `record` and `sweep` all of the command's text lives in
//! the domain's folder (`record/render.rs`, `sweep/render.rs`, the report's tables and chart);
//! their `cli/` file holds the flags and the glue only. Either way no library function writes
//! to standard output itself: the command prints the text through [`stdout`], which treats a
//! closed pipe as a quiet end (exit 0) and a failed write as exit 1. Diagnostics go through [`stderr`], which never
//! panics on a failed write (the exit code stays the command's own).

// Diagnostics go through `lab::stderr` (a failed write is ignored): `eprintln!` panics, exit 101.
#![deny(clippy::print_stderr)]

pub mod catalog;
#[doc(hidden)]
pub mod cli;
pub mod compare;
pub mod decoder;
pub mod device;
pub mod digest;
pub mod document;
pub mod environment;
pub mod error;
pub mod estimate;
pub mod fleet;
pub mod gpu_name;
pub mod input;
pub mod kit;
pub mod measure;
pub mod measure_model;
pub mod output;
pub mod plan;
pub mod pricing;
pub mod record;
pub mod report;
pub mod results;
pub mod stderr;
pub mod stdout;
pub mod sweep;
pub mod table;
pub mod text;
pub mod timing;
pub mod units;
pub mod values;
pub mod worker;

pub use error::{Error, Result};

// `lab::...` paths in the `cli` module name this crate (they were written for the binary).
extern crate self as lab;
