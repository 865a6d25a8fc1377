//! Differential tests: `lab` (the reference) against the kit's Python twins.
//!
//! - `lab price --json` vs `calcul_forfaits.py --json` over all 45 catalog rows x lots
//!   {1, 2, 3, 10} x accepted results {absent, 1, 3, 7, 1000};
//! - `lab estimate --json` vs `mesure_memoire.py estimate --json` over parameters
//!   {1, 999, 7e9, 70e9, 405e9} x bits 1..=64 x reserve {0, 4, 0.5};
//! - a set of bad inputs for both commands: the same exit code on both sides, one stderr line
//!   (and, for a malformed catalog, the same line number);
//! - the `catalog` object for catalogs that are and are not the shipped one;
//! - standard output that cannot be written: exit 1 and one stderr line on both sides.
//!
//! Both sides get the catalog through `--tariffs data/tarifs-forfaits.csv`, so the `catalog`
//! objects (snapshot date, SHA-256, `embedded: false`, `illustrative`) must match too. Every `lab` call is a
//! real process. On the Python side the grids and most bad inputs run through one interpreter
//! that calls each script's `main(argv)` per case (starting 1,800 interpreters would take
//! minutes on a small CI machine); a sample of the grid and every 4th bad input
//! ([`support::REAL_PROCESS_EVERY`]) also run as real `python3 SCRIPT ...` processes, which
//! checks that the in-process driver changes nothing (the same exit code, stdout and stderr).
//! The interpreter is resolved once to its `sys.executable` ([`support::python`]).
//!
//! Needs `python3` on PATH (or the interpreter named by `$PYTHON`), standard library only.
//!
//! One module per concern: [`grids`], [`refusals`], [`catalogs`], [`output`]; what they share is
//! in [`support`].

mod catalogs;
mod grids;
mod output;
mod refusals;
mod support;
