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
///
/// Never a float: a floating-point value (a time read from a measurement document) is written
/// as a string holding its shortest exact decimal, the digits the document itself holds
/// (`"0.000091008"`; [`DecimalFloats`]), as every exact value of `lab`'s JSON is.
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    // Streamed through one buffer (a report of 100,000 rows is tens of MB: no copy of it is
    // held), flushed at the end; a closed pipe ends quietly as in [`print`].
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, DecimalFloats::new());
    let written = value
        .serialize(&mut serializer)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            // Drop what is left in the buffer: its reader is gone.
            let _ = out.into_parts();
            Ok(())
        }
        Err(e) => {
            let _ = out.into_parts();
            Err(Error::runtime(format!(
                "cannot write to standard output: {e}"
            )))
        }
    }
}

/// serde_json's pretty layout (two-space indent), hidden characters in strings (control and
/// format characters from a catalog or a file, [`crate::text::is_hidden`]) written as JSON
/// escapes as [`crate::text::json_visible`] does, and every `f32`/`f64` written as a JSON
/// string of its shortest round-trip decimal (Rust's `Display`: no exponent, e.g.
/// `"0.00009100800007581713"`, `"1e21"` as `"1000000000000000000000"`). A non-finite value
/// never reaches it: serde_json writes `null` for those.
pub struct DecimalFloats(serde_json::ser::PrettyFormatter<'static>);

impl DecimalFloats {
    /// The formatter, two-space indent.
    pub fn new() -> Self {
        DecimalFloats(serde_json::ser::PrettyFormatter::new())
    }
}

impl Default for DecimalFloats {
    fn default() -> Self {
        Self::new()
    }
}

impl serde_json::ser::Formatter for DecimalFloats {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        write!(w, "\"{value}\"")
    }
    fn write_f32<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f32,
    ) -> std::io::Result<()> {
        write!(w, "\"{value}\"")
    }
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        // serde_json escapes U+0000..U+001F itself; the other hidden characters are not ASCII
        // but DEL, so ASCII below DEL goes out as it is.
        if fragment.bytes().all(|b| b < 0x7f) {
            return w.write_all(fragment.as_bytes());
        }
        w.write_all(crate::text::json_visible(fragment).as_bytes())
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
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
