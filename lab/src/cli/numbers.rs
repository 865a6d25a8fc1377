//! Strict parsing of numeric command-line values, with one-line messages naming the flag.
//!
//! Flags are taken as text and parsed here (not by clap) so that `--lots 0`, `--lots -1`,
//! `--lots 1.5` or `--parameters 7e9` each give one clear line and exit code 2.

use lab::catalog::{durations_list, DURATIONS};
use lab::{Error, Result};

/// A whole number from 1 to `max`, written with ASCII digits only.
///
/// A value with a decimal point, exponent or separator gets a hint fitting the flag: for
/// `--parameters` "write all the digits, e.g. 7000000000"; for any other flag "digits only".
///
/// # Errors
/// [`Error::Usage`] naming `flag` and the accepted range.
pub fn positive_integer(flag: &str, text: &str, max: u64) -> Result<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let value = if digits_only {
        // Leading zeros are harmless; an overlong number is simply too large.
        text.parse::<u64>().ok().filter(|v| *v <= max)
    } else {
        None
    };
    match value {
        Some(value) if value >= 1 => Ok(value),
        _ => {
            let hint = if !text.contains(['e', 'E', '.', ',', '_']) || text.starts_with('-') {
                ""
            } else if flag == "--parameters" {
                " (write all the digits, e.g. 7000000000)"
            } else {
                " (digits only: no decimal point, exponent or separator)"
            };
            Err(Error::usage(format!(
                "{flag} must be a whole number from 1 to {max}, got '{text}'{hint}"
            )))
        }
    }
}

/// A package duration: 3, 7 or 30.
///
/// # Errors
/// [`Error::Usage`] listing the valid durations.
pub fn duration(text: &str) -> Result<u32> {
    text.parse::<u32>()
        .ok()
        .filter(|d| DURATIONS.contains(d) && text.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            Error::usage(format!(
                "--days must be one of {} (packages are not pro-rated), got '{text}'",
                durations_list()
            ))
        })
}

/// Prints `value` as one JSON object (pretty, two-space indent) followed by a newline.
///
/// # Errors
/// [`Error::Runtime`] if serialization or writing to stdout fails (see [`emit`]).
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::runtime(format!("cannot write JSON: {e}")))?;
    // Control and format characters from a catalog or a file become JSON escapes.
    emit(&[lab::text::json_visible(&text)])
}

/// Writes `lines` to stdout, each followed by a newline.
///
/// A closed pipe (`lab tariffs | head`) is not an error: the reader has what it wanted.
///
/// # Errors
/// [`Error::Runtime`] for any other write failure.
pub fn emit(lines: &[String]) -> Result<()> {
    use std::io::Write;
    let mut text = lines.join("\n");
    text.push('\n');
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::runtime(format!(
            "cannot write to standard output: {e}"
        ))),
    }
}
