//! The release kit `iteragpu-lab-v1.zip`: its nine members, `MANIFEST.json`, the
//! byte-reproducible archive writer and the safe archive verifier.
//!
//! Everything here works on bytes in memory and never extracts anything to disk, so that
//! `cargo xtask dist`, `cargo xtask verify --archive FILE` and `lab` itself share one
//! implementation. The kit is small (well under a megabyte); every read is capped
//! ([`MAX_MEMBER_BYTES`], [`MAX_ARCHIVE_BYTES`]) so that a hostile archive cannot exhaust memory.

use crate::digest::sha256_hex;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{Cursor, Read, Write};
use std::path::Path;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, System, ZipArchive, ZipWriter};

/// Name of the folder every member lives in, inside the archive.
pub const KIT_ROOT: &str = "iteragpu-lab-v1";
/// File name of the release archive.
pub const ARCHIVE_NAME: &str = "iteragpu-lab-v1.zip";
/// File name of the manifest member.
pub const MANIFEST_NAME: &str = "MANIFEST.json";
/// Identifier of the manifest layout written by [`Kit::manifest_bytes`].
pub const MANIFEST_FORMAT: &str = "iteragpu-lab-manifest/1";
/// Hash algorithm named in the manifest.
pub const HASH_ALGORITHM: &str = "sha256";
/// Version recorded in the manifest (the workspace version).
pub const KIT_VERSION: &str = env!("CARGO_PKG_VERSION");
/// Date of the catalog snapshot shipped in the kit (`YYYY-MM-DD`); also the default entry time.
pub use crate::catalog::SNAPSHOT_DATE;
/// Why the manifest carries no size and no hash for itself.
pub const MANIFEST_UNHASHED_REASON: &str =
    "a file cannot contain its own fingerprint: writing the hash would change the bytes it hashes";
/// Largest member the kit reads, from disk or from an archive (8 MiB).
pub const MAX_MEMBER_BYTES: u64 = 8 << 20;
/// Largest archive [`verify_archive`] reads (32 MiB).
pub const MAX_ARCHIVE_BYTES: u64 = 32 << 20;
/// Deflate level of every member (fixed so that builds are reproducible).
pub const DEFLATE_LEVEL: i64 = 9;
/// Unix permissions of every member.
pub const MEMBER_PERMISSIONS: u32 = 0o644;

/// Seconds since the Unix epoch of 1980-01-01 00:00:00 UTC, the first time a zip entry can hold.
const DOS_MIN_EPOCH: i64 = 315_532_800;
/// Seconds since the Unix epoch of 2107-12-31 23:59:59 UTC, the last time a zip entry can hold.
const DOS_MAX_EPOCH: i64 = 4_354_819_199;

/// One file of the kit: its name inside [`KIT_ROOT`] and where its bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// File name inside the kit folder, e.g. `README.md`.
    pub name: &'static str,
    /// Source path relative to the repository root; `None` for the generated manifest.
    pub source: Option<&'static str>,
}

impl Member {
    /// Full name of the entry inside the archive, e.g. `iteragpu-lab-v1/README.md`.
    pub fn path(&self) -> String {
        format!("{KIT_ROOT}/{}", self.name)
    }

    /// Whether this member is the generated `MANIFEST.json`.
    pub fn is_manifest(&self) -> bool {
        self.source.is_none()
    }
}

/// The nine members, in the order they are written to the archive (the manifest last, because
/// it is computed from the other eight).
pub const MEMBERS: [Member; 9] = [
    Member {
        name: "README.md",
        source: Some("dist/README.md"),
    },
    Member {
        name: "mesure-memoire.ipynb",
        source: Some("dist/mesure-memoire.ipynb"),
    },
    Member {
        name: "mesure_memoire.py",
        source: Some("dist/mesure_memoire.py"),
    },
    Member {
        name: "calcul_forfaits.py",
        source: Some("dist/calcul_forfaits.py"),
    },
    Member {
        name: "tarifs-forfaits.csv",
        source: Some("data/tarifs-forfaits.csv"),
    },
    Member {
        name: "protocole-qualite.md",
        source: Some("dist/protocole-qualite.md"),
    },
    Member {
        name: "resultats-bruts.csv",
        source: Some("dist/resultats-bruts.csv"),
    },
    Member {
        name: "LICENSE.txt",
        source: Some("LICENSE.txt"),
    },
    Member {
        name: MANIFEST_NAME,
        source: None,
    },
];

/// Looks a member up by its file name inside the kit folder (`README.md`, ...).
pub fn member(name: &str) -> Option<&'static Member> {
    MEMBERS.iter().find(|m| m.name == name)
}

/// One problem found in a kit or an archive, attached to the file it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file concerned: a source path, an archive member name or the archive itself.
    pub file: String,
    /// What is wrong, in one line.
    pub message: String,
}

impl Finding {
    /// Builds a finding for `file`.
    pub fn new(file: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            file: file.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

/// The outcome of [`verify_archive`]: every mismatch found, by member name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The archive that was checked, as given.
    pub archive: String,
    /// SHA-256 of the whole archive (lowercase hex), when it could be read.
    pub sha256: Option<String>,
    /// Every problem found; empty when the archive matches its manifest.
    pub findings: Vec<Finding>,
}

impl Report {
    /// Whether the archive passed every check.
    pub fn is_ok(&self) -> bool {
        self.findings.is_empty()
    }
}

/// One entry of `MANIFEST.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// Entry name inside the archive, e.g. `iteragpu-lab-v1/README.md`.
    pub path: String,
    /// Size in bytes of the member; `null` for the manifest itself.
    pub size: Option<u64>,
    /// Lowercase-hex SHA-256 of the member's bytes; `null` for the manifest itself.
    pub sha256: Option<String>,
    /// Present only on the manifest's own entry: why it carries no size and no hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhashed_reason: Option<String>,
}

/// The content of `MANIFEST.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Layout identifier, [`MANIFEST_FORMAT`].
    pub format: String,
    /// Archive file name, [`ARCHIVE_NAME`].
    pub archive: String,
    /// Folder holding every member, [`KIT_ROOT`].
    pub root: String,
    /// Version of the kit.
    pub version: String,
    /// Date of the catalog snapshot (`YYYY-MM-DD`).
    pub catalog_snapshot_date: String,
    /// Hash algorithm of every `sha256` field, [`HASH_ALGORITHM`].
    pub hash_algorithm: String,
    /// All nine members, sorted by path.
    pub members: Vec<ManifestEntry>,
}

/// The eight content files of a kit, read into memory, ready to be packaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kit {
    /// `(member, bytes)` for every member except the manifest, in [`MEMBERS`] order.
    files: Vec<(&'static Member, Vec<u8>)>,
}

impl Kit {
    /// Reads the eight content files from a source tree laid out like the repository
    /// (`dist/`, `data/tarifs-forfaits.csv`, `LICENSE.txt`). Only those exact files are read:
    /// whatever else lies in those folders never gets into the kit.
    ///
    /// Each source must be a regular file (not a symlink) of at most [`MAX_MEMBER_BYTES`].
    pub fn read(source_root: &Path) -> Result<Kit> {
        let mut files = Vec::with_capacity(MEMBERS.len() - 1);
        for member in &MEMBERS {
            let Some(source) = member.source else {
                continue;
            };
            let path = source_root.join(source);
            let bytes =
                read_regular_file(&path).map_err(|e| Error::runtime(format!("{source}: {e}")))?;
            files.push((member, bytes));
        }
        Ok(Kit { files })
    }

    /// Builds a kit from the eight content files given by member name (`README.md`, ...).
    /// Fails when a name is unknown, repeated or missing, or names the manifest.
    pub fn from_files(files: Vec<(String, Vec<u8>)>) -> Result<Kit> {
        let mut by_name: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for (name, bytes) in files {
            match member(&name) {
                Some(m) if !m.is_manifest() => {}
                _ => {
                    return Err(Error::usage(format!(
                        "{name}: not a content file of the kit"
                    )))
                }
            }
            if by_name.insert(name.clone(), bytes).is_some() {
                return Err(Error::usage(format!("{name}: given twice")));
            }
        }
        let mut out = Vec::with_capacity(MEMBERS.len() - 1);
        for m in MEMBERS.iter().filter(|m| !m.is_manifest()) {
            let bytes = by_name
                .remove(m.name)
                .ok_or_else(|| Error::usage(format!("{}: missing from the kit", m.name)))?;
            out.push((m, bytes));
        }
        Ok(Kit { files: out })
    }

    /// The content bytes of the member named `name` (`README.md`, ...), if it is one of the eight.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(m, _)| m.name == name)
            .map(|(_, b)| b.as_slice())
    }

    /// The eight content files in archive order, as `(member, bytes)`.
    pub fn files(&self) -> impl Iterator<Item = (&'static Member, &[u8])> {
        self.files.iter().map(|(m, b)| (*m, b.as_slice()))
    }

    /// The manifest describing this kit.
    pub fn manifest(&self) -> Manifest {
        let mut members: Vec<ManifestEntry> = self
            .files
            .iter()
            .map(|(m, bytes)| ManifestEntry {
                path: m.path(),
                size: Some(bytes.len() as u64),
                sha256: Some(sha256_hex(bytes)),
                unhashed_reason: None,
            })
            .collect();
        members.push(ManifestEntry {
            path: format!("{KIT_ROOT}/{MANIFEST_NAME}"),
            size: None,
            sha256: None,
            unhashed_reason: Some(MANIFEST_UNHASHED_REASON.to_string()),
        });
        members.sort_by(|a, b| a.path.cmp(&b.path));
        Manifest {
            format: MANIFEST_FORMAT.to_string(),
            archive: ARCHIVE_NAME.to_string(),
            root: KIT_ROOT.to_string(),
            version: KIT_VERSION.to_string(),
            catalog_snapshot_date: SNAPSHOT_DATE.to_string(),
            hash_algorithm: HASH_ALGORITHM.to_string(),
            members,
        }
    }

    /// The exact bytes of `MANIFEST.json`: pretty-printed JSON, fixed key order, final newline.
    pub fn manifest_bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(&self.manifest())
            .map_err(|e| Error::runtime(format!("{MANIFEST_NAME}: cannot serialise: {e}")))?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// Writes the nine-member archive into memory and returns its bytes.
    ///
    /// Byte-reproducible: fixed member order ([`MEMBERS`]), every entry dated `time`, Unix
    /// permissions 0644 with Unix as the system, Deflate at level [`DEFLATE_LEVEL`], no extra
    /// fields, no directory entries, no comment. The result depends only on the bytes of the
    /// eight files and on `time`.
    pub fn archive(&self, time: DateTime) -> Result<Vec<u8>> {
        let manifest = self.manifest_bytes()?;
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .compression_level(Some(DEFLATE_LEVEL))
            .last_modified_time(time)
            .unix_permissions(MEMBER_PERMISSIONS)
            .system(System::Unix)
            .large_file(false);
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        let write_err = |name: &str, e: &dyn fmt::Display| {
            Error::runtime(format!("{ARCHIVE_NAME}: cannot write {name}: {e}"))
        };
        for member in &MEMBERS {
            let bytes = match member.source {
                Some(_) => self.file(member.name).unwrap_or_default(),
                None => manifest.as_slice(),
            };
            let path = member.path();
            writer
                .start_file(path.as_str(), options)
                .map_err(|e| write_err(&path, &e))?;
            writer.write_all(bytes).map_err(|e| write_err(&path, &e))?;
        }
        let cursor = writer
            .finish()
            .map_err(|e| write_err("the central directory", &e))?;
        Ok(cursor.into_inner())
    }
}

/// The time stamped on every entry.
///
/// `source_date_epoch` is the value of `SOURCE_DATE_EPOCH` when set: an integer number of
/// seconds since 1970-01-01 UTC (ASCII digits, optional leading `-`; anything else is an
/// error), clamped to the range a zip entry can hold (1980-01-01 to 2107-12-31, UTC; odd
/// seconds round down). Unset means the catalog snapshot date at 00:00:00. Never "now".
pub fn entry_time(source_date_epoch: Option<&str>) -> Result<DateTime> {
    let seconds = match source_date_epoch {
        None => snapshot_epoch()?,
        Some(raw) => {
            let digits = raw.strip_prefix('-').unwrap_or(raw);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Error::usage(format!(
                    "SOURCE_DATE_EPOCH={raw:?} is not an integer number of seconds since \
                     1970-01-01 UTC; unset it or give e.g. SOURCE_DATE_EPOCH=1790208000"
                )));
            }
            // Syntax is valid, so the only possible parse failure is overflow: clamp it too.
            let value = raw.parse::<i128>().unwrap_or(if raw.starts_with('-') {
                i128::MIN
            } else {
                i128::MAX
            });
            value.clamp(i128::from(DOS_MIN_EPOCH), i128::from(DOS_MAX_EPOCH)) as i64
        }
    };
    let utc = time::OffsetDateTime::from_unix_timestamp(seconds)
        .map_err(|e| Error::runtime(format!("entry time {seconds}: {e}")))?;
    DateTime::from_date_and_time(
        utc.year() as u16,
        u8::from(utc.month()),
        utc.day(),
        utc.hour(),
        utc.minute(),
        utc.second(),
    )
    .map_err(|e| Error::runtime(format!("entry time {utc}: {e}")))
}

/// Seconds since the Unix epoch of [`SNAPSHOT_DATE`] at 00:00:00 UTC.
fn snapshot_epoch() -> Result<i64> {
    let bad = || Error::runtime(format!("snapshot date {SNAPSHOT_DATE} is not YYYY-MM-DD"));
    let mut parts = SNAPSHOT_DATE.split('-').map(|p| p.parse::<u16>());
    let (Some(Ok(y)), Some(Ok(m)), Some(Ok(d)), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let month = time::Month::try_from(m as u8).map_err(|_| bad())?;
    let date = time::Date::from_calendar_date(i32::from(y), month, d as u8).map_err(|_| bad())?;
    Ok(date.midnight().assume_utc().unix_timestamp())
}

/// Reads a regular file (symlinks refused), at most [`MAX_MEMBER_BYTES`].
fn read_regular_file(path: &Path) -> std::result::Result<Vec<u8>, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file (symlinks and folders are refused)".to_string());
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    read_capped(file, MAX_MEMBER_BYTES).map_err(|e| e.to_string())
}

/// Reads at most `cap` bytes; more than that is an error, not a truncation.
fn read_capped(reader: impl Read, cap: u64) -> std::result::Result<Vec<u8>, CappedReadError> {
    let mut bytes = Vec::new();
    reader
        .take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(CappedReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(CappedReadError::TooLarge(cap));
    }
    Ok(bytes)
}

/// Why [`read_capped`] failed.
#[derive(Debug)]
enum CappedReadError {
    Io(std::io::Error),
    TooLarge(u64),
}

impl fmt::Display for CappedReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CappedReadError::Io(e) => write!(f, "cannot read: {e}"),
            CappedReadError::TooLarge(cap) => write!(f, "larger than the {cap}-byte limit"),
        }
    }
}

/// Checks the results grid `resultats-bruts.csv`: UTF-8, one header line of distinct,
/// non-empty column names, and no row after it (the kit ships the grid empty).
pub fn check_results_grid(file: &str, bytes: &[u8]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.strip_prefix('\u{feff}').unwrap_or(t),
        Err(e) => return vec![Finding::new(file, format!("not UTF-8: {e}"))],
    };
    if text.trim().is_empty() {
        return vec![Finding::new(file, "empty; expected a header line")];
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut records = reader.records();
    match records.next() {
        Some(Ok(header)) => {
            let mut seen = std::collections::BTreeSet::new();
            for (i, name) in header.iter().enumerate() {
                if name.trim().is_empty() {
                    findings.push(Finding::new(
                        file,
                        format!("header column {} is empty", i + 1),
                    ));
                } else if !seen.insert(name) {
                    findings.push(Finding::new(
                        file,
                        format!("header column {name:?} repeated"),
                    ));
                }
            }
        }
        Some(Err(e)) => findings.push(Finding::new(file, format!("header is not valid CSV: {e}"))),
        None => findings.push(Finding::new(file, "no header line")),
    }
    let rows = records.count();
    // Blank lines are not records for the CSV reader; count them too, except the final newline.
    let after_header = text
        .split_once('\n')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    if rows > 0 {
        findings.push(Finding::new(
            file,
            format!("{rows} row(s) after the header; the grid must ship with its header only"),
        ));
    } else if !after_header.is_empty() {
        findings.push(Finding::new(
            file,
            "text after the header line; the grid must ship with its header only",
        ));
    }
    findings
}

/// Checks the catalog `tarifs-forfaits.csv` with the same validator `lab price` uses
/// ([`crate::catalog::Catalog::parse`]): 15 GPU models × 3 durations (3, 7, 30 days) = 45 rows
/// of whole-cent prices.
pub fn check_catalog(file: &str, bytes: &[u8]) -> Vec<Finding> {
    match crate::catalog::Catalog::parse(bytes) {
        Ok(_) => Vec::new(),
        Err(e) => vec![Finding::new(file, e.to_string())],
    }
}

/// Checks the path given to `lab verify-kit` or `cargo xtask verify --archive` before any
/// reading, so that both give the same exit code for the same path.
///
/// # Errors
/// [`Error::Usage`] (exit 2) when the path exists but is not a regular file (e.g. a folder):
/// bad input. [`Error::Runtime`] (exit 1) when it is missing or its metadata cannot be read.
pub fn check_archive_path(path: &Path) -> Result<()> {
    let metadata = std::fs::metadata(path).map_err(|e| {
        Error::runtime(format!(
            "cannot read {}: {e}; give the path of the kit's .zip archive",
            path.display()
        ))
    })?;
    if !metadata.is_file() {
        return Err(Error::usage(format!(
            "{} is not a file; give the kit's .zip archive",
            path.display()
        )));
    }
    Ok(())
}

/// Reads the archive at `path` (at most [`MAX_ARCHIVE_BYTES`]) and checks it against its own
/// manifest with [`verify_archive_bytes`]. Never extracts anything. Callers that take the path
/// from a user check it first with [`check_archive_path`].
pub fn verify_archive(path: &Path) -> Report {
    let label = path.display().to_string();
    let read = std::fs::File::open(path)
        .map_err(|e| format!("cannot open: {e}"))
        .and_then(|f| read_capped(f, MAX_ARCHIVE_BYTES).map_err(|e| e.to_string()));
    match read {
        Ok(bytes) => verify_archive_bytes(&label, &bytes),
        Err(message) => Report {
            archive: label.clone(),
            sha256: None,
            findings: vec![Finding::new(label, message)],
        },
    }
}

/// Checks an archive held in memory against its own `MANIFEST.json`, reporting every mismatch
/// by member name: exactly the nine expected names (safe, ASCII, under [`KIT_ROOT`]), no
/// duplicates, regular files only (no symlinks, no directory entries), headers consistent,
/// every member readable within [`MAX_MEMBER_BYTES`], every size and hash equal to the
/// manifest, and only the manifest unhashed. `label` names the archive in findings.
pub fn verify_archive_bytes(label: &str, bytes: &[u8]) -> Report {
    let mut findings = Vec::new();
    let report = |findings| Report {
        archive: label.to_string(),
        sha256: Some(sha256_hex(bytes)),
        findings,
    };

    // 1. The central directory as written, duplicates included (the zip crate's reader keys
    //    entries by name and would hide them).
    let entries = match central_directory(bytes) {
        Ok(entries) => entries,
        Err(message) => {
            findings.push(Finding::new(
                label,
                format!("not a readable zip archive: {message}"),
            ));
            return report(findings);
        }
    };
    if entries.len() != MEMBERS.len() {
        findings.push(Finding::new(
            label,
            format!(
                "holds {} entries, expected {}",
                entries.len(),
                MEMBERS.len()
            ),
        ));
    }
    let expected: Vec<String> = MEMBERS.iter().map(Member::path).collect();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for entry in &entries {
        let name = String::from_utf8_lossy(&entry.name).into_owned();
        *counts.entry(name.clone()).or_default() += 1;
        if let Some(problem) = unsafe_name(&entry.name) {
            findings.push(Finding::new(&name, format!("unsafe entry name: {problem}")));
        } else if !expected.contains(&name) {
            findings.push(Finding::new(
                &name,
                "unexpected entry: not one of the nine kit members",
            ));
        }
        if let Some(kind) = entry.non_regular_kind() {
            findings.push(Finding::new(
                &name,
                format!("{kind}, expected a regular file"),
            ));
        }
    }
    for (name, count) in &counts {
        if *count > 1 {
            findings.push(Finding::new(
                name,
                format!("appears {count} times in the archive"),
            ));
        }
    }
    for name in &expected {
        if !counts.contains_key(name) {
            findings.push(Finding::new(name, "missing from the archive"));
        }
    }

    // 2. The zip crate's reader, for local headers and contents.
    let mut archive = match ZipArchive::new(Cursor::new(bytes)) {
        Ok(a) => a,
        Err(e) => {
            findings.push(Finding::new(
                label,
                format!("not a readable zip archive: {e}"),
            ));
            return report(findings);
        }
    };
    if !archive.has_duplicate_names() {
        if let Err(e) = archive.validate_header_consistency() {
            findings.push(Finding::new(label, format!("inconsistent headers: {e}")));
        }
    }

    // 3. The manifest.
    let manifest_path = format!("{KIT_ROOT}/{MANIFEST_NAME}");
    let manifest = read_member(&mut archive, &manifest_path, &mut findings)
        .and_then(|b| check_manifest(&manifest_path, &b, &expected, &mut findings));

    // 4. Every hashed member against the manifest.
    for member in MEMBERS.iter().filter(|m| !m.is_manifest()) {
        let path = member.path();
        if !counts.contains_key(&path) {
            continue;
        }
        let Some(content) = read_member(&mut archive, &path, &mut findings) else {
            continue;
        };
        let Some(entry) = manifest
            .as_ref()
            .and_then(|m| m.members.iter().find(|e| e.path == path))
        else {
            continue;
        };
        let (size, hash) = (content.len() as u64, sha256_hex(&content));
        if entry.size != Some(size) {
            findings.push(Finding::new(
                &path,
                format!(
                    "size {size} bytes in the archive, {} in {MANIFEST_NAME}",
                    show(entry.size)
                ),
            ));
        }
        if entry.sha256.as_deref() != Some(hash.as_str()) {
            findings.push(Finding::new(
                &path,
                format!(
                    "SHA-256 {hash} in the archive, {} in {MANIFEST_NAME}",
                    show(entry.sha256.as_deref())
                ),
            ));
        }
    }
    report(findings)
}

/// `null` or the value, for messages.
fn show<T: fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "null".to_string(), |v| v.to_string())
}

/// Reads one member (size-capped), recording a finding when it cannot be read.
fn read_member(
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    path: &str,
    findings: &mut Vec<Finding>,
) -> Option<Vec<u8>> {
    let file = match archive.by_name(path) {
        Ok(f) => f,
        Err(e) => {
            findings.push(Finding::new(path, format!("cannot be read: {e}")));
            return None;
        }
    };
    if file.size() > MAX_MEMBER_BYTES {
        findings.push(Finding::new(
            path,
            format!(
                "declares {} bytes, over the {MAX_MEMBER_BYTES}-byte limit",
                file.size()
            ),
        ));
        return None;
    }
    match read_capped(file, MAX_MEMBER_BYTES) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            findings.push(Finding::new(path, e.to_string()));
            None
        }
    }
}

/// Parses and checks the manifest's own structure; returns it when it can be used for the
/// member comparisons.
fn check_manifest(
    path: &str,
    bytes: &[u8],
    expected: &[String],
    findings: &mut Vec<Finding>,
) -> Option<Manifest> {
    let manifest: Manifest = match serde_json::from_slice(bytes) {
        Ok(m) => m,
        Err(e) => {
            findings.push(Finding::new(path, format!("not a valid manifest: {e}")));
            return None;
        }
    };
    let mut field = |name: &str, got: &str, want: &str| {
        if got != want {
            findings.push(Finding::new(
                path,
                format!("{name} is {got:?}, expected {want:?}"),
            ));
        }
    };
    field("format", &manifest.format, MANIFEST_FORMAT);
    field("archive", &manifest.archive, ARCHIVE_NAME);
    field("root", &manifest.root, KIT_ROOT);
    field("hash_algorithm", &manifest.hash_algorithm, HASH_ALGORITHM);
    if manifest.version.trim().is_empty() {
        findings.push(Finding::new(path, "version is empty"));
    }
    let listed: Vec<&str> = manifest.members.iter().map(|e| e.path.as_str()).collect();
    let mut sorted_expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    sorted_expected.sort_unstable();
    if listed != sorted_expected {
        findings.push(Finding::new(
            path,
            format!(
                "lists {listed:?}, expected the nine members sorted by path: {sorted_expected:?}"
            ),
        ));
    }
    for entry in &manifest.members {
        let is_self = entry.path == path;
        match (is_self, entry.size, entry.sha256.as_deref()) {
            (true, None, None) => {
                if entry.unhashed_reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                    findings.push(Finding::new(
                        path,
                        "its own entry does not say why it carries no hash (unhashed_reason)",
                    ));
                }
            }
            (true, _, _) => findings.push(Finding::new(
                path,
                "its own entry must have size and sha256 null",
            )),
            (false, Some(_), Some(hash)) => {
                if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                    findings.push(Finding::new(
                        &entry.path,
                        format!("{MANIFEST_NAME} gives {hash:?}, not a lowercase-hex SHA-256"),
                    ));
                }
                if entry.unhashed_reason.is_some() {
                    findings.push(Finding::new(
                        &entry.path,
                        format!("{MANIFEST_NAME} marks it unhashed; only the manifest may be"),
                    ));
                }
            }
            (false, _, _) => findings.push(Finding::new(
                &entry.path,
                format!("{MANIFEST_NAME} gives no size or no SHA-256; only the manifest may be unhashed"),
            )),
        }
    }
    Some(manifest)
}

/// Why an entry name is unsafe or malformed, if it is.
fn unsafe_name(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty name");
    }
    if !name.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Some("not printable ASCII");
    }
    if name.contains(&b'\\') {
        return Some("contains a backslash");
    }
    if name.starts_with(b"/") || name.get(1) == Some(&b':') {
        return Some("absolute path");
    }
    if name
        .split(|b| *b == b'/')
        .any(|part| part == b".." || part == b".")
    {
        return Some("contains a `..` or `.` component");
    }
    None
}

/// One central-directory record, as written.
#[derive(Debug)]
struct CentralEntry {
    name: Vec<u8>,
    system: u8,
    external_attributes: u32,
}

impl CentralEntry {
    /// `Some(kind)` when the entry is not a regular file.
    fn non_regular_kind(&self) -> Option<&'static str> {
        const S_IFMT: u32 = 0o170_000;
        if self.name.ends_with(b"/") || self.external_attributes & 0x10 != 0 {
            return Some("a directory entry");
        }
        if self.system == 3 {
            match (self.external_attributes >> 16) & S_IFMT {
                0 | 0o100_000 => {}
                0o120_000 => return Some("a symbolic link"),
                0o040_000 => return Some("a directory entry"),
                _ => return Some("a special file"),
            }
        }
        None
    }
}

/// Lists the central directory records (duplicates kept) of a plain, single-disk,
/// non-ZIP64 archive.
fn central_directory(bytes: &[u8]) -> std::result::Result<Vec<CentralEntry>, String> {
    const EOCD_LEN: usize = 22;
    let u16_at = |at: usize| -> std::result::Result<u16, String> {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| "truncated".to_string())
    };
    let u32_at = |at: usize| -> std::result::Result<u32, String> {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| "truncated".to_string())
    };
    if bytes.len() < EOCD_LEN {
        return Err("too short".to_string());
    }
    let lowest = bytes.len().saturating_sub(EOCD_LEN + usize::from(u16::MAX));
    let eocd = (lowest..=bytes.len() - EOCD_LEN)
        .rev()
        .find(|&at| bytes[at..at + 4] == [0x50, 0x4b, 0x05, 0x06])
        .ok_or("no end-of-central-directory record")?;
    let (disk, cd_disk) = (u16_at(eocd + 4)?, u16_at(eocd + 6)?);
    let count = u16_at(eocd + 10)?;
    let offset = u32_at(eocd + 16)?;
    if disk != 0 || cd_disk != 0 {
        return Err("multi-disk archives are not supported".to_string());
    }
    if count == u16::MAX || offset == u32::MAX {
        return Err("ZIP64 archives are not expected for this kit".to_string());
    }
    let mut at = offset as usize;
    let mut entries = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        if u32_at(at)? != 0x0201_4b50 {
            return Err(format!("no central directory record at offset {at}"));
        }
        let system = bytes.get(at + 5).copied().ok_or("truncated")?;
        let name_len = usize::from(u16_at(at + 28)?);
        let extra_len = usize::from(u16_at(at + 30)?);
        let comment_len = usize::from(u16_at(at + 32)?);
        let external_attributes = u32_at(at + 38)?;
        let name = bytes
            .get(at + 46..at + 46 + name_len)
            .ok_or("truncated entry name")?
            .to_vec();
        entries.push(CentralEntry {
            name,
            system,
            external_attributes,
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_time_defaults_to_the_snapshot_date() {
        let t = entry_time(None).unwrap();
        assert_eq!((t.year(), t.month(), t.day(), t.hour()), (2026, 9, 24, 0));
    }

    #[test]
    fn entry_time_reads_and_clamps_source_date_epoch() {
        let t = entry_time(Some("1790208001")).unwrap();
        assert_eq!((t.year(), t.month(), t.day(), t.second()), (2026, 9, 24, 0));
        let low = entry_time(Some("0")).unwrap();
        assert_eq!((low.year(), low.month(), low.day()), (1980, 1, 1));
        let low = entry_time(Some("-5")).unwrap();
        assert_eq!(low.year(), 1980);
        let high = entry_time(Some("99999999999999999999999999999999999999999")).unwrap();
        assert_eq!((high.year(), high.month(), high.day()), (2107, 12, 31));
    }

    #[test]
    fn malformed_source_date_epoch_is_an_error() {
        for bad in ["", "abc", "12.5", " 12", "1e9", "+12", "-"] {
            assert!(entry_time(Some(bad)).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn grid_with_header_only_passes_and_rows_fail() {
        assert!(check_results_grid("g.csv", b"a,b,c\n").is_empty());
        assert!(check_results_grid("g.csv", b"a,b,c").is_empty());
        let rows = check_results_grid("g.csv", b"a,b,c\n1,2,3\n");
        assert_eq!(rows.len(), 1);
        assert!(rows[0].to_string().starts_with("g.csv: 1 row(s)"));
        assert_eq!(check_results_grid("g.csv", b"a,b,c\n\n").len(), 1);
        assert_eq!(check_results_grid("g.csv", b"a,,a\n").len(), 2);
        assert_eq!(check_results_grid("g.csv", b"").len(), 1);
    }

    #[test]
    fn unsafe_names_are_recognised() {
        assert!(unsafe_name(b"iteragpu-lab-v1/README.md").is_none());
        for bad in [
            &b"../x"[..],
            b"/etc/passwd",
            b"a\\b",
            b"C:/x",
            b"a/./b",
            b"caf\xc3\xa9",
        ] {
            assert!(unsafe_name(bad).is_some(), "{bad:?}");
        }
    }
}
