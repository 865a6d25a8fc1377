//! `lab` through its binary: one integration-test program for the command line, one module per
//! concern, the shared helpers in [`support`].

mod catalog;
mod compare;
mod completions;
mod config_dtype;
mod estimate;
mod file_names;
mod fixed_refusal;
mod flags;
mod fleet;
mod lookalikes;
mod measure_guard;
mod measure_model;
mod messages;
mod plan;
mod plan_calibration;
mod plan_context;
mod plan_headers;
mod plan_hub;
mod plan_parallel;
mod plan_picture;
mod plan_time;
mod plan_unknown;
mod price;
mod process;
mod readme_tour;
mod record;
mod report;
mod report_inputs;
mod results;
mod stderr;
mod stdout;
mod support;
mod sweep;
mod verify_kit;
