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
    stream(|out| json_at(out, value, 0))
}

/// Writes what `write` writes, then a newline, through one buffer flushed at the end (a
/// report of 100,000 rows is tens of MB: no copy of it is held); for a JSON writer of its
/// own ([`crate::report::write_json`]) that must read as [`json`] writes.
///
/// # Errors
/// As [`print`]: a closed pipe ends quietly (what is left in the buffer is dropped).
pub fn stream<F>(write: F) -> Result<()>
where
    F: FnOnce(&mut std::io::BufWriter<std::io::StdoutLock<'static>>) -> std::io::Result<()>,
{
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout);
    let written = write(&mut out)
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

/// Writes `value` in [`json`]'s layout as if nested `depth` levels deep (a value inside one
/// object is at depth 1: its inner lines are indented by 4 spaces, its closing bracket by
/// 2), so that a writer of its own can put a serde value in its place; no newline after.
///
/// # Errors
/// A failed write, or a value serde cannot encode (a map with non-string keys).
pub fn json_at<W: std::io::Write, T: serde::Serialize + ?Sized>(
    out: &mut W,
    value: &T,
    depth: usize,
) -> std::io::Result<()> {
    let mut formatter = DecimalFloats::new();
    formatter.depth = depth;
    let mut serializer = serde_json::Serializer::with_formatter(out, formatter);
    value
        .serialize(&mut serializer)
        .map_err(std::io::Error::from)
}

/// Appends `value` as [`json`] writes an `f64`: a JSON string of its shortest round-trip
/// decimal in plain notation ([`plain_decimal`]), or `null` when not finite (as serde_json
/// writes a non-finite float).
pub fn push_json_f64(out: &mut Vec<u8>, value: f64) {
    if !value.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(value);
    out.push(b'"');
    if text.contains('e') {
        out.extend_from_slice(plain_decimal(value).as_bytes());
    } else {
        out.extend_from_slice(text.strip_suffix(".0").unwrap_or(text).as_bytes());
    }
    out.push(b'"');
}

/// serde_json's pretty layout (two-space indent, `"key": value`, `[]` and `{}` for empty
/// ones), hidden characters in strings (control and format characters from a catalog or a
/// file, [`crate::text::is_hidden`]) written as JSON escapes as [`crate::text::json_visible`]
/// does, and every `f32`/`f64` written as a JSON string of its shortest round-trip decimal in
/// plain notation ([`plain_decimal`]: `"0.00009100800007581713"`, never an exponent). A
/// non-finite value never reaches it: serde_json writes `null` for those. The indentation is
/// written in one piece per line (a report of 100,000 rows has about two million lines).
pub struct DecimalFloats {
    depth: usize,
    has_value: bool,
}

impl DecimalFloats {
    /// The formatter, at the top level.
    pub fn new() -> Self {
        DecimalFloats {
            depth: 0,
            has_value: false,
        }
    }

    fn newline_indent<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        const SPACES: &[u8] = b"\n                                                                ";
        let mut wanted = 1 + 2 * self.depth;
        if wanted <= SPACES.len() {
            return w.write_all(&SPACES[..wanted]);
        }
        w.write_all(SPACES)?;
        wanted -= SPACES.len();
        while wanted > 0 {
            let n = wanted.min(SPACES.len() - 1);
            w.write_all(&SPACES[1..=n])?;
            wanted -= n;
        }
        Ok(())
    }
}

impl Default for DecimalFloats {
    fn default() -> Self {
        Self::new()
    }
}

/// `value` (finite) as its shortest round-trip decimal (the Ryū algorithm, which serde_json
/// also writes documents with) in plain notation, without an exponent: `0.000091008`,
/// `1000000000000000000000` for 1e21, `-0` for minus zero, `3` for 3.0. It parses back to the
/// same `f64`.
pub fn plain_decimal(value: f64) -> String {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(value);
    // Ryū writes 1e-5 <= |v| < 1e16 in plain notation already ("0.161348406", "3.0").
    if !text.contains('e') {
        return text.strip_suffix(".0").unwrap_or(text).to_string();
    }
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match text.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let frac_part = if frac_part == "0" { "" } else { frac_part };
    let digits = format!("{int_part}{frac_part}");
    // Position of the decimal point within `digits`.
    let point = i64::try_from(int_part.len()).unwrap_or(0) + i64::from(exponent);
    let digits = digits.trim_start_matches('0');
    let leading_zeros =
        i64::try_from(format!("{int_part}{frac_part}").len() - digits.len()).unwrap_or(0);
    let point = point - leading_zeros;
    let mut out = String::with_capacity(digits.len() + 24);
    if negative {
        out.push('-');
    }
    if digits.is_empty() {
        out.push('0');
        return out;
    }
    let len = i64::try_from(digits.len()).unwrap_or(0);
    if point <= 0 {
        out.push_str("0.");
        for _ in 0..-point {
            out.push('0');
        }
        out.push_str(digits);
    } else if point >= len {
        out.push_str(digits);
        for _ in 0..(point - len) {
            out.push('0');
        }
    } else {
        let (a, b) = digits.split_at(usize::try_from(point).unwrap_or(0));
        out.push_str(a);
        out.push('.');
        out.push_str(b);
    }
    out
}

impl serde_json::ser::Formatter for DecimalFloats {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        // serde_json gives only finite values here (it writes `null` for the others).
        let mut text = Vec::with_capacity(32);
        push_json_f64(&mut text, value);
        w.write_all(&text)
    }
    fn write_f32<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f32,
    ) -> std::io::Result<()> {
        // Through its own shortest digits, not f64's longer expansion of the same value.
        let text: f64 = value.to_string().parse().unwrap_or(f64::from(value));
        self.write_f64(w, text)
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
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.newline_indent(w)?;
        }
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline_indent(w)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.newline_indent(w)?;
        }
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline_indent(w)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Same layout as serde_json's own pretty printer, floats aside.
    #[test]
    fn layout_is_serde_json_pretty() {
        let mut deep = serde_json::json!(1);
        for _ in 0..40 {
            deep = serde_json::json!([deep]);
        }
        let value = serde_json::json!({
            "a": [], "b": {}, "c": [1, [2, {"d": null}], {"e": "x\u{202e}y"}], "deep": deep
        });
        let mut bytes = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut bytes, DecimalFloats::new());
        serde::Serialize::serialize(&value, &mut ser).unwrap();
        let ours = String::from_utf8(bytes).unwrap();
        let theirs = crate::text::json_visible(&serde_json::to_string_pretty(&value).unwrap());
        assert_eq!(ours, theirs);
    }

    /// Over many values, the plain decimal parses back to the same value, has no exponent, and
    /// is as short as Rust's `Display` (the same digits but for rare last-digit ties).
    #[test]
    fn plain_decimal_is_the_shortest_round_trip_in_plain_notation() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            3.0,
            0.5,
            1e21,
            1e-7,
            9.100800007581713e-5,
            0.161348406,
            123456789.125,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            1e16,
            1e15,
            0.1,
        ];
        for _ in 0..20_000 {
            let v = f64::from_bits(next());
            if v.is_finite() {
                values.push(v);
            }
            values.push((next() % 1_000_000) as f64 / 1e9);
        }
        let significant = |t: &str| {
            t.trim_start_matches('-')
                .replace('.', "")
                .trim_matches('0')
                .len()
        };
        let mut same = 0;
        let total = values.len();
        for v in values {
            let plain = plain_decimal(v);
            let display = format!("{v}");
            assert_eq!(
                plain.parse::<f64>().unwrap().to_bits(),
                v.to_bits(),
                "{v:e}"
            );
            assert!(!plain.contains(['e', 'E']), "{plain}");
            // As short as Rust's own shortest digits; the same digits but for rare ties.
            assert_eq!(significant(&plain), significant(&display), "{v:e}");
            same += usize::from(plain == display);
        }
        assert!(
            same * 100 >= total * 99,
            "{same} of {total} identical to Display"
        );
    }
}
