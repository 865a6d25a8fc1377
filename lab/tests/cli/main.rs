//! `lab` through its binary: one integration-test program for the command line, one module per
//! concern, the shared helpers in [`support`].

mod completions;
mod flags;
mod stdout;
mod support;
