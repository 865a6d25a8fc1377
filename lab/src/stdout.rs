//! Standard output: the one way `lab` and `xtask` print (results, tables, help, version).
//!
//! Two failures, two answers:
//! - a closed pipe (`lab tariffs | head -1`): a quiet end. The reader has what it wanted; the
//!   write is dropped, every later write too, and the command still exits 0;
//! - any other failed write (a full disk, `lab tariffs > /dev/full`): [`Error::Runtime`], so
//!   the command exits 1 with one line on standard error.
//!
//! Each call writes and flushes at once, so a failure is seen by the call that caused it (not
//! lost in a buffer dropped at exit). Progress and diagnostics go to standard error, not here.

use crate::{Error, Result};
use std::io::{ErrorKind, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once the reader of standard output has gone away.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` exactly as given (no newline added) and flushes.
///
/// # Errors
/// [`Error::Runtime`] ("cannot write to standard output: ...") for a failed write other than
/// a closed pipe.
pub fn print(text: &str) -> Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(Error::runtime(format!(
            "cannot write to standard output: {e}"
        ))),
    }
}

/// Writes each of `lines` followed by a newline, in one write.
///
/// # Errors
/// As [`print`].
pub fn lines<S: AsRef<str>>(lines: &[S]) -> Result<()> {
    let mut text = String::new();
    for line in lines {
        text.push_str(line.as_ref());
        text.push('\n');
    }
    print(&text)
}

/// Writes `value` as one JSON object (pretty, two-space indent, keys in the order the type
/// declares them) followed by a newline.
///
/// # Errors
/// [`Error::Runtime`] when `value` cannot be encoded, else as [`print`].
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::runtime(format!("cannot encode the JSON output: {e}")))?;
    text.push('\n');
    // Control and format characters from a catalog or a file become JSON escapes.
    print(&crate::text::json_visible(&text))
}

/// Whether the reader of standard output has gone away (a closed pipe was met).
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Prints clap's `--help` or `--version` text through [`print`], when `error` is one of
/// those; `None` for a real usage error, left to the caller.
///
/// Returns the exit status: 0 when printed (or the pipe was closed), 1 with one line on
/// standard error (prefixed `program: error:`) when the write failed.
pub fn help_or_version(program: &str, error: &clap::Error) -> Option<std::process::ExitCode> {
    use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
    if !matches!(error.kind(), DisplayHelp | DisplayVersion) {
        return None;
    }
    let mut text = error.render().to_string();
    // clap ends some help texts with a newline and not others; a terminal wants exactly one.
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Some(match print(&text) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            crate::errln!("{program}: error: {e}");
            std::process::ExitCode::FAILURE
        }
    })
}

/// `outln!("...", args)`: one formatted line through [`print`]; evaluates to its
/// [`Result`](crate::Result), for `?`.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdout::print(&format!("{}\n", format_args!($($arg)*)))
    };
}
