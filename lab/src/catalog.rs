//! The package catalog: what an IteraGPU package costs, per GPU model and duration.
//!
//! The catalog is a CSV file (`data/tarifs-forfaits.csv`) whose header starts with
//! `gpu,model,gpus_per_lot,days,price_cents` (more columns may follow and are ignored). It has
//! exactly [`MODEL_COUNT`] GPU models, each offered for every duration in [`DURATIONS`], so
//! 45 rows. A price is a whole number of US cents for one **lot**; a lot holds a fixed number
//! of GPUs per model (`gpus_per_lot`, the same for all three durations).
//!
//! The file is embedded in the binary ([`Catalog::embedded`]) and can be replaced at run time
//! with any file that passes the same validator ([`Catalog::from_file`]). Validation is strict
//! and every problem names the line it was found on: a catalog is money, and a silently
//! skipped row would give a wrong price.
//!
//! Accepted text details: UTF-8 with at most one byte-order mark (a second one is content and
//! is refused, as are UTF-16 and Latin-1 files, with a hint on saving as UTF-8 CSV), LF or
//! CRLF line ends, and blank lines (a trailing one included). Fields are taken verbatim: no
//! trimming. Identifiers and model names hold no control or format character and
//! identifiers no space, by the explicit character rule of [`crate::text`] (the Python twin
//! applies the same rule).

use crate::digest::sha256_hex;
use crate::error::{Error, Result};
use crate::text::{is_hidden, is_space};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Date of the IteraGPU price snapshot the catalog stands for (ISO 8601).
///
/// The shipped prices are illustrative stand-ins for this snapshot; see `data/README.md`.
pub const SNAPSHOT_DATE: &str = "2026-09-24";

/// Package durations sold, in days. Any other duration is an error (no pro-rata).
pub const DURATIONS: [u32; 3] = [3, 7, 30];

/// Number of GPU models a valid catalog lists.
pub const MODEL_COUNT: usize = 15;

/// The columns a catalog header must start with, in this order.
pub const HEADER: [&str; 5] = ["gpu", "model", "gpus_per_lot", "days", "price_cents"];

/// SHA-256 (lowercase hex) of the *content* of the catalog shipped in
/// `data/tarifs-forfaits.csv`: its rows in the canonical form of [`content_sha256`].
///
/// A catalog whose rows are these (whatever its byte-level form: BOM, CRLF, row order, extra
/// columns) is the shipped catalog: it carries [`SNAPSHOT_DATE`] and, while
/// [`SHIPPED_IS_ILLUSTRATIVE`] is true, the "illustrative" label. Any other content carries
/// no date. The Python twin `calcul_forfaits.py` holds the same constant; a test recomputes
/// it from the data file, so replacing the file makes that test fail until both are updated.
pub const SHIPPED_CONTENT_SHA256: &str =
    "d402c41982dbc5220353c1c15900bc78a2220a8105b3dde18f85cbe7218ac044";

/// Whether the shipped catalog's prices are illustrative stand-ins (true until the real
/// 2026-09-24 snapshot is dropped in; then set it to false here and in the Python twin).
pub const SHIPPED_IS_ILLUSTRATIVE: bool = true;

/// Largest catalog file read, in bytes (1 MiB; the real catalog is about 2 KB). A larger file,
/// or one that is not a regular file (`/dev/zero`, a folder, a pipe), is refused unread.
pub const MAX_CATALOG_BYTES: u64 = 1 << 20;

/// The catalog bytes compiled into `lab`: a copy of `data/tarifs-forfaits.csv` inside the
/// crate (so that `cargo package` works); `cargo xtask verify` proves the two are byte-equal.
const EMBEDDED_BYTES: &[u8] = include_bytes!("../data/tarifs-forfaits.csv");

/// One catalog row: the price of one lot of one GPU model for one duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// Short GPU identifier used on the command line, e.g. `b200`.
    pub gpu: String,
    /// Human-readable model name, e.g. `NVIDIA B200 180 GB`.
    pub model: String,
    /// GPUs in one lot (B200: 2). Always at least 1.
    pub gpus_per_lot: u32,
    /// Package duration in days: one of [`DURATIONS`].
    pub days: u32,
    /// Price of one lot for the whole duration, in whole US cents. Always at least 1.
    pub price_cents: i64,
    /// Line of the file the row was read from (1-based, the header is line 1).
    #[serde(skip)]
    pub line: u64,
}

/// Where a catalog came from, as reported in every price result.
///
/// Serialized with exactly the keys `snapshot_date`, `sha256`, `embedded`, `illustrative`
/// (the Python twin `calcul_forfaits.py` writes the same object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogInfo {
    /// [`SNAPSHOT_DATE`] when the catalog's content is the shipped catalog, else null: a
    /// user-supplied file carries no date.
    pub snapshot_date: SnapshotDate,
    /// SHA-256 of the catalog file's bytes exactly as read, lowercase hex (64 characters).
    pub sha256: String,
    /// `true` when the catalog is the one compiled into `lab`, `false` for `--tariffs FILE`.
    pub embedded: bool,
    /// `true` when the content is the shipped catalog and its prices are illustrative
    /// stand-ins ([`SHIPPED_IS_ILLUSTRATIVE`]).
    pub illustrative: bool,
}

/// The snapshot date of a catalog, when it is known: serialized as the date string or null,
/// displayed as the date or `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotDate(pub Option<&'static str>);

impl Serialize for SnapshotDate {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl std::fmt::Display for SnapshotDate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.unwrap_or("unknown"))
    }
}

/// A validated package catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    entries: Vec<Entry>,
    sha256: String,
    content_sha256: String,
    embedded: bool,
    /// The file it was read from (`None` for the embedded catalog or raw bytes).
    path: Option<String>,
}

impl Catalog {
    /// The catalog compiled into `lab` (a copy of `data/tarifs-forfaits.csv` at build time).
    ///
    /// # Errors
    /// [`Error::Usage`] if the embedded file does not pass the validator (a build-time mistake;
    /// the test suite checks it never happens).
    pub fn embedded() -> Result<Catalog> {
        let mut catalog = Catalog::parse(EMBEDDED_BYTES)
            .map_err(|e| Error::usage(format!("embedded catalog: {e}")))?;
        catalog.embedded = true;
        Ok(catalog)
    }

    /// Reads and validates a catalog file (the `--tariffs FILE` option).
    ///
    /// # Errors
    /// [`Error::Runtime`] if the file is missing or cannot be read; [`Error::Usage`] for an
    /// empty path, a path that is not a regular file (a device such as `/dev/zero`, a folder,
    /// a pipe), a file larger than [`MAX_CATALOG_BYTES`], or content that is not a valid
    /// catalog (the message starts with the path and names the line).
    pub fn from_file(path: &Path) -> Result<Catalog> {
        use crate::input::ReadFailure;
        if path.as_os_str().is_empty() {
            return Err(Error::usage(
                "--tariffs needs a catalog file name, got an empty one",
            ));
        }
        let shown = path.display();
        let bytes = crate::input::file(path, MAX_CATALOG_BYTES).map_err(|failure| match failure {
            ReadFailure::Io(e) => Error::runtime(format!("cannot read catalog {shown}: {e}")),
            ReadFailure::NotAFile => Error::usage(format!(
                "catalog {shown}: not a regular file (a catalog is a CSV file, not a folder, device or pipe)"
            )),
            ReadFailure::TooLarge { .. } => Error::usage(format!(
                "catalog {shown}: larger than {MAX_CATALOG_BYTES} bytes (1 MiB); a catalog is a CSV file of a few KB"
            )),
        })?;
        let mut catalog =
            Catalog::parse(&bytes).map_err(|e| Error::usage(format!("catalog {shown}: {e}")))?;
        catalog.path = Some(shown.to_string());
        Ok(catalog)
    }

    /// The embedded catalog, or the file at `path` when one is given.
    ///
    /// # Errors
    /// As [`Catalog::embedded`] and [`Catalog::from_file`].
    pub fn load(path: Option<&Path>) -> Result<Catalog> {
        match path {
            Some(path) => Catalog::from_file(path),
            None => Catalog::embedded(),
        }
    }

    /// Parses and validates catalog bytes. The result is marked as not embedded.
    ///
    /// Checks, each reported with its line number: the encoding (see the module
    /// documentation), the header, the number of fields per row, non-empty identifiers
    /// without spaces and model names not only spaces, neither holding a control or format
    /// character, whole positive integers for `gpus_per_lot` and
    /// `price_cents` (so `12.50`, `1,234`, `0`, `-5` are refused), durations in
    /// [`DURATIONS`], no duplicate model/duration pair, the same lot size and model name for
    /// every duration of a model, every model offered for every duration, and exactly
    /// [`MODEL_COUNT`] models.
    ///
    /// # Errors
    /// [`Error::Usage`] with a one-line message (`line N: ...`) describing the first problem.
    pub fn parse(bytes: &[u8]) -> Result<Catalog> {
        let sha256 = sha256_hex(bytes);
        let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let text = decode(body)?;
        // Lines are counted at each line feed (LF or CRLF ends). A carriage return alone
        // (old Mac line ends) or a NUL would be read differently by other CSV readers (the
        // Python twin's included), so both are refused, with their line.
        for (index, byte) in text.bytes().enumerate() {
            let bare_cr = byte == b'\r' && text.as_bytes().get(index + 1) != Some(&b'\n');
            if bare_cr || byte == 0 {
                let line = 1 + text.as_bytes()[..index]
                    .iter()
                    .filter(|b| **b == b'\n')
                    .count();
                let what = if bare_cr {
                    "a carriage return without a line feed (end lines with LF or CRLF)"
                } else {
                    "a NUL character"
                };
                return Err(Error::usage(format!("line {line}: {what}")));
            }
        }
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(body);
        let mut records = reader.records();

        // Header (the first non-blank line; csv skips blank lines).
        let header = match records.next() {
            None => {
                return Err(Error::usage(format!(
                    "the file is empty; expected a header starting {}",
                    HEADER.join(",")
                )))
            }
            Some(record) => record.map_err(csv_error)?,
        };
        one_line(&header, text)?;
        let header_line = line_of(&header, text);
        let width = header.len();
        let starts_right = width >= HEADER.len()
            && HEADER
                .iter()
                .zip(header.iter())
                .all(|(want, got)| *want == got);
        if !starts_right {
            let found: Vec<&str> = header.iter().collect();
            let found = found.join(",");
            let hint = if found.contains(';') { SEMICOLONS } else { "" };
            return Err(Error::usage(format!(
                "line {header_line}: the header must start with {}, found '{}'{hint}",
                HEADER.join(","),
                truncate(&found, 80)
            )));
        }

        let mut entries: Vec<Entry> = Vec::new();
        for record in records {
            let record = record.map_err(csv_error)?;
            one_line(&record, text)?;
            let line = line_of(&record, text);
            if record.len() != width {
                let hint = if record.iter().any(|field| field.contains(';')) {
                    SEMICOLONS
                } else if record.len() > width {
                    " (a price must be written without separators, e.g. 1234 not 1,234)"
                } else {
                    ""
                };
                return Err(Error::usage(format!(
                    "line {line}: expected {width} fields like the header, found {}{hint}",
                    record.len()
                )));
            }
            let gpu = &record[0];
            let model = &record[1];
            check_text(line, "gpu", gpu)?;
            if gpu.is_empty() || gpu.chars().any(is_space) {
                return Err(Error::usage(format!(
                    "line {line}: gpu must be a non-empty identifier without spaces, found '{gpu}'"
                )));
            }
            check_text(line, "model name", model)?;
            if model.chars().all(is_space) {
                return Err(Error::usage(format!("line {line}: model name is empty")));
            }
            let gpus_per_lot = positive_integer(&record[2])
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    Error::usage(format!(
                        "line {line}: gpus_per_lot must be a whole number from 1 to {}, found '{}'",
                        u32::MAX,
                        &record[2]
                    ))
                })?;
            let days = record[3]
                .parse::<u32>()
                .ok()
                .filter(|d| DURATIONS.contains(d) && is_digits(&record[3]))
                .ok_or_else(|| {
                    Error::usage(format!(
                        "line {line}: days must be one of {}, found '{}'",
                        durations_list(),
                        &record[3]
                    ))
                })?;
            let price_cents = positive_integer(&record[4])
                .and_then(|n| i64::try_from(n).ok())
                .ok_or_else(|| {
                    Error::usage(format!(
                        "line {line}: price_cents must be a whole number of cents from 1 to {}, found '{}'",
                        i64::MAX,
                        &record[4]
                    ))
                })?;
            for previous in entries.iter().filter(|e| e.gpu == gpu) {
                if previous.days == days {
                    return Err(Error::usage(format!(
                        "line {line}: duplicate entry for {gpu} {days} days (first on line {})",
                        previous.line
                    )));
                }
                if previous.gpus_per_lot != gpus_per_lot {
                    return Err(Error::usage(format!(
                        "line {line}: {gpu} has {gpus_per_lot} GPUs per lot here but {} on line {}; the lot size must be the same for every duration",
                        previous.gpus_per_lot, previous.line
                    )));
                }
                if previous.model != model {
                    return Err(Error::usage(format!(
                        "line {line}: {gpu} is called '{model}' here but '{}' on line {}",
                        previous.model, previous.line
                    )));
                }
            }
            entries.push(Entry {
                gpu: gpu.to_string(),
                model: model.to_string(),
                gpus_per_lot,
                days,
                price_cents,
                line,
            });
        }

        if entries.is_empty() {
            return Err(Error::usage(format!(
                "line {header_line}: the catalog has a header but no rows"
            )));
        }
        // Every model must be offered for every duration.
        let mut first_line: Vec<(&str, u64)> = Vec::new();
        let mut seen: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for entry in &entries {
            if !seen.contains_key(entry.gpu.as_str()) {
                first_line.push((&entry.gpu, entry.line));
            }
            seen.entry(&entry.gpu).or_default().push(entry.days);
        }
        for (gpu, line) in &first_line {
            let have = &seen[gpu];
            if let Some(missing) = DURATIONS.iter().find(|d| !have.contains(d)) {
                return Err(Error::usage(format!(
                    "line {line}: {gpu} has no {missing}-day row (every model needs {} days)",
                    durations_list()
                )));
            }
        }
        if first_line.len() != MODEL_COUNT {
            return Err(Error::usage(format!(
                "the catalog lists {} GPU models ({} rows); expected {MODEL_COUNT} models x {} durations = {} rows",
                first_line.len(),
                entries.len(),
                DURATIONS.len(),
                MODEL_COUNT * DURATIONS.len()
            )));
        }

        let content_sha256 = content_sha256(&entries);
        Ok(Catalog {
            entries,
            sha256,
            content_sha256,
            embedded: false,
            path: None,
        })
    }

    /// All rows, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The GPU identifiers, each once, in file order.
    pub fn gpu_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = Vec::new();
        for entry in &self.entries {
            if !ids.contains(&entry.gpu.as_str()) {
                ids.push(&entry.gpu);
            }
        }
        ids
    }

    /// The row for one GPU identifier and duration.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the valid identifiers when `gpu` is unknown, or the valid
    /// durations when `days` is not one of [`DURATIONS`].
    pub fn find(&self, gpu: &str, days: u32) -> Result<&Entry> {
        if !self.entries.iter().any(|e| e.gpu == gpu) {
            return Err(Error::usage(format!(
                "unknown GPU '{gpu}'; valid ids: {}",
                self.gpu_ids().join(", ")
            )));
        }
        check_days(days)?;
        self.entries
            .iter()
            .find(|e| e.gpu == gpu && e.days == days)
            .ok_or_else(|| Error::usage(format!("no {days}-day package for {gpu}")))
    }

    /// SHA-256 of the catalog file's bytes (as read, BOM included), lowercase hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether this is the catalog compiled into `lab`.
    pub fn is_embedded(&self) -> bool {
        self.embedded
    }

    /// SHA-256 of the catalog's rows in canonical form ([`content_sha256`]), lowercase hex.
    pub fn content_sha256(&self) -> &str {
        &self.content_sha256
    }

    /// Whether the rows are those of the catalog shipped with `lab` (content, not bytes:
    /// a CRLF copy or one with the rows in another order is still the shipped catalog).
    pub fn is_shipped(&self) -> bool {
        self.content_sha256 == SHIPPED_CONTENT_SHA256
    }

    /// Whether the prices are the shipped illustrative stand-ins.
    pub fn is_illustrative(&self) -> bool {
        SHIPPED_IS_ILLUSTRATIVE && self.is_shipped()
    }

    /// [`SNAPSHOT_DATE`] for the shipped catalog, unknown for any other content.
    pub fn snapshot_date(&self) -> SnapshotDate {
        SnapshotDate(self.is_shipped().then_some(SNAPSHOT_DATE))
    }

    /// Snapshot date, hash, origin and label, as reported with every price.
    pub fn info(&self) -> CatalogInfo {
        CatalogInfo {
            snapshot_date: self.snapshot_date(),
            sha256: self.sha256.clone(),
            embedded: self.embedded,
            illustrative: self.is_illustrative(),
        }
    }

    /// One phrase for text output saying where the prices come from:
    /// `embedded catalog, illustrative prices (stand-ins for the 2026-09-24 snapshot)`,
    /// `catalog from FILE, snapshot 2026-09-24` or `catalog from FILE (snapshot date unknown)`.
    pub fn describe(&self) -> String {
        let origin = match (&self.path, self.embedded) {
            (_, true) => "embedded catalog".to_string(),
            (Some(path), false) => format!("catalog from {path}"),
            (None, false) => "catalog".to_string(),
        };
        if self.is_illustrative() {
            format!("{origin}, illustrative prices (stand-ins for the {SNAPSHOT_DATE} snapshot)")
        } else if self.is_shipped() {
            format!("{origin}, snapshot {SNAPSHOT_DATE}")
        } else {
            format!("{origin} (snapshot date unknown)")
        }
    }
}

/// SHA-256 (lowercase hex) of catalog rows in canonical form, the same in `calcul_forfaits.py`:
/// the rows sorted by `gpu` (UTF-8 byte order) then `days`, each written as the JSON array
/// `[gpu,model,gpus_per_lot,days,price_cents]` without spaces (strings escaped as JSON,
/// non-ASCII kept as UTF-8) and followed by a line feed. Extra columns are not part of it.
pub fn content_sha256(entries: &[Entry]) -> String {
    let mut rows: Vec<&Entry> = entries.iter().collect();
    rows.sort_by(|a, b| (a.gpu.as_str(), a.days).cmp(&(b.gpu.as_str(), b.days)));
    let mut text = String::new();
    for e in rows {
        let row = (&e.gpu, &e.model, e.gpus_per_lot, e.days, e.price_cents);
        text.push_str(&serde_json::to_string(&row).expect("strings and integers serialize"));
        text.push('\n');
    }
    sha256_hex(text.as_bytes())
}

/// Checks that `days` is a sold duration.
///
/// # Errors
/// [`Error::Usage`] listing the valid durations (3, 7, 30).
pub fn check_days(days: u32) -> Result<u32> {
    if DURATIONS.contains(&days) {
        Ok(days)
    } else {
        Err(Error::usage(format!(
            "no {days}-day package: durations are {} days (no pro-rata)",
            durations_list()
        )))
    }
}

/// The valid durations as text: `3, 7, 30`.
pub fn durations_list() -> String {
    DURATIONS
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The hint for a row whose fields are separated by semicolons (a spreadsheet's CSV export
/// in some languages).
const SEMICOLONS: &str = " (fields must be separated by commas, not semicolons: save the file as \
     CSV with comma separators)";

/// How to get a UTF-8 catalog, quoted by every encoding refusal.
const SAVE_AS_UTF8: &str =
    "save it as UTF-8 CSV (spreadsheet: Save As, \"CSV UTF-8\"; text editor: encoding UTF-8)";

/// The text of catalog bytes whose one optional UTF-8 byte-order mark is already removed.
///
/// # Errors
/// [`Error::Usage`] naming the line and the encoding the bytes look like: UTF-16 (a UTF-16
/// byte-order mark `FF FE` or `FE FF`, or a zero byte among the first two, as ASCII text in
/// UTF-16 has), a second byte-order mark (U+FEFF is then content, which no header starts
/// with), or bytes that are not UTF-8 (a single-byte encoding such as Latin-1 or
/// Windows-1252).
fn decode(body: &[u8]) -> Result<&str> {
    if let [first, second, ..] = body {
        let utf16_mark = matches!((first, second), (0xFF, 0xFE) | (0xFE, 0xFF));
        if utf16_mark || ((*first == 0) != (*second == 0)) {
            return Err(Error::usage(format!(
                "line 1: the catalog looks like UTF-16 text (it starts with bytes {first:02X} {second:02X}), \
                 not UTF-8: {SAVE_AS_UTF8}"
            )));
        }
    }
    match std::str::from_utf8(body) {
        Ok(text) if text.starts_with('\u{feff}') => Err(Error::usage(format!(
            "line 1: the file starts with a second byte-order mark (U+FEFF); keep at most one: {SAVE_AS_UTF8}"
        ))),
        Ok(text) => Ok(text),
        Err(error) => {
            let at = error.valid_up_to();
            let line = 1 + body[..at].iter().filter(|b| **b == b'\n').count();
            Err(Error::usage(format!(
                "line {line}: the catalog is not UTF-8 text (byte {:02X}); it looks like Latin-1 or \
                 Windows-1252: {SAVE_AS_UTF8}",
                body.get(at).copied().unwrap_or_default()
            )))
        }
    }
}

/// Refuses a `what` field holding a hidden character (a control or format character, see
/// [`crate::text`]), naming it as `U+XXXX`.
fn check_text(line: u64, what: &str, value: &str) -> Result<()> {
    match value.chars().find(|c| is_hidden(*c)) {
        Some(c) => Err(Error::usage(format!(
            "line {line}: {what} contains U+{:04X}, a control or format character; remove it, found '{value}'",
            u32::from(c)
        ))),
        None => Ok(()),
    }
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `Some(n)` when `text` is only ASCII digits and its value is at least 1.
fn positive_integer(text: &str) -> Option<u128> {
    if !is_digits(text) {
        return None;
    }
    text.parse::<u128>().ok().filter(|n| *n >= 1)
}

/// Refuses a record with a quoted line break in a field: each row must be one line.
fn one_line(record: &csv::StringRecord, text: &str) -> Result<()> {
    if record.iter().any(|field| field.contains(['\n', '\r'])) {
        return Err(Error::usage(format!(
            "line {}: a field contains a line break; each row must be on one line",
            line_of(record, text)
        )));
    }
    Ok(())
}

/// The physical line (1-based, counted at line feeds) where `record` starts in `text`.
///
/// The reader's position of a record that follows blank lines is the start of those blank
/// lines; the line breaks between it and the record's first character are added, so that
/// the line named is the record's own (the line `calcul_forfaits.py` names too).
fn line_of(record: &csv::StringRecord, text: &str) -> u64 {
    let Some(position) = record.position() else {
        return 0;
    };
    let start = usize::try_from(position.byte()).unwrap_or(usize::MAX);
    let skipped = text
        .as_bytes()
        .get(start..)
        .unwrap_or_default()
        .iter()
        .take_while(|b| matches!(b, b'\r' | b'\n'))
        .filter(|b| **b == b'\n')
        .count();
    position.line() + skipped as u64
}

fn csv_error(error: csv::Error) -> Error {
    match error.position() {
        Some(position) => Error::usage(format!("line {}: {}", position.line(), error)),
        None => Error::usage(format!("unreadable CSV: {error}")),
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalog_is_valid_and_complete() {
        let catalog = Catalog::embedded().unwrap();
        assert!(catalog.is_embedded());
        assert_eq!(catalog.entries().len(), 45);
        assert_eq!(catalog.gpu_ids().len(), 15);
        let b200 = catalog.find("b200", 7).unwrap();
        assert_eq!(b200.gpus_per_lot, 2);
        assert_eq!(catalog.sha256(), sha256_hex(EMBEDDED_BYTES));
        assert_eq!(catalog.info().snapshot_date.0, Some("2026-09-24"));
    }

    #[test]
    fn shipped_catalog_is_the_illustrative_one() {
        // When the real 2026-09-24 snapshot replaces data/tarifs-forfaits.csv this test fails
        // on purpose: update SHIPPED_CONTENT_SHA256 and SHIPPED_IS_ILLUSTRATIVE (here and in
        // dist/calcul_forfaits.py).
        let catalog = Catalog::embedded().unwrap();
        assert_eq!(catalog.content_sha256(), SHIPPED_CONTENT_SHA256);
        assert!(catalog.is_illustrative());
        assert!(catalog.info().illustrative);
    }

    #[test]
    fn content_digest_ignores_the_byte_form_but_not_the_prices() {
        let text = std::str::from_utf8(EMBEDDED_BYTES).unwrap();
        // CRLF, a BOM, rows reversed, an extra column: the same content.
        let mut lines: Vec<&str> = text.lines().collect();
        lines[1..].reverse();
        let reordered: Vec<String> = lines.iter().map(|l| format!("{l},x")).collect();
        let variant = format!("\u{feff}{}\r\n", reordered.join("\r\n"));
        let catalog = Catalog::parse(variant.as_bytes()).unwrap();
        assert_ne!(catalog.sha256(), sha256_hex(EMBEDDED_BYTES));
        assert!(catalog.is_illustrative());
        assert_eq!(catalog.info().snapshot_date.0, Some(SNAPSHOT_DATE));
        // One cent more on one row: another catalog, no date, not illustrative.
        let changed = text.replacen(",2520\n", ",2521\n", 1);
        let catalog = Catalog::parse(changed.as_bytes()).unwrap();
        assert!(!catalog.is_illustrative());
        assert_eq!(catalog.info().snapshot_date.0, None);
        assert!(catalog.describe().ends_with("(snapshot date unknown)"));
        let json = serde_json::to_value(catalog.info()).unwrap();
        assert_eq!(json["snapshot_date"], serde_json::Value::Null);
        assert_eq!(json["illustrative"], false);
    }
}
