//! Standard error: the one way `lab`, `lab-torch-worker` and `xtask` print diagnostics (error
//! lines, warnings, progress).
//!
//! A diagnostic that cannot be written (`lab ... 2>/dev/full`, a closed stderr) is dropped:
//! there is nowhere left to say anything, and the command must still exit with the code of
//! its own outcome (2 for bad input, 1 for a failure), never the panic code 101 that
//! `eprintln!` gives when its write fails. Each call writes one whole line and flushes it.

use std::io::Write as _;

/// Writes `text` followed by a newline on standard error, in one write; a failed write is
/// ignored (see the module documentation).
pub fn line(text: &str) {
    let mut bytes = Vec::with_capacity(text.len() + 1);
    bytes.extend_from_slice(text.as_bytes());
    bytes.push(b'\n');
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(&bytes).and_then(|()| err.flush());
}

/// `errln!("...", args)`: one formatted line through [`line`]; a failed write is ignored.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stderr::line(&format!($($arg)*))
    };
}
