//! The kit writer: reads the eight content files from the repository and writes the
//! byte-reproducible archive `iteragpu-lab-v1.zip` in memory.
//!
//! The archive is the layout of [`lab::kit::layout`] (which `lab verify-kit` checks) with these
//! release settings: members in path order ([`lab::kit::MEMBERS`]), every entry dated by
//! [`entry_time`], Unix mode 0644, deflate at level [`DEFLATE_LEVEL`], no extra field, no
//! directory entry, no comment.
//!
//! **What the kit's SHA-256 depends on:** the bytes of the eight files, the entry time, and the
//! compressor: the `zip` crate (headers) and its deflate implementation, `flate2` over the
//! `zlib-rs` backend (feature `deflate-flate2-zlib-rs`), at the versions `Cargo.lock` pins.
//! Deflate is not canonical: another conforming implementation, another version of this one or
//! another level gives other compressed bytes (for five of the nine members in practice), hence
//! another archive hash, although every member is byte-identical after inflating. A test pins
//! the hash of fixed inputs (`compressor_output_is_pinned`) and one the published kit's
//! (`xtask/published-kit.sha256`), so that an update of the compressor fails loudly instead of
//! silently changing the published hash.

use anyhow::{bail, Context, Result};
use lab::kit::{self, Manifest, MANIFEST_NAME, MAX_MEMBER_BYTES, MEMBERS, MEMBER_PERMISSIONS};
use std::io::{Cursor, Read, Write};
use std::path::Path;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, System, ZipWriter};

/// Deflate level of every member (fixed so that builds are reproducible).
pub const DEFLATE_LEVEL: i64 = 9;

/// Where each content member comes from, relative to the repository root.
pub const SOURCES: [(&str, &str); 8] = [
    ("LICENSE.txt", "LICENSE.txt"),
    ("README.md", "dist/README.md"),
    ("calcul_forfaits.py", "dist/calcul_forfaits.py"),
    ("mesure-memoire.ipynb", "dist/mesure-memoire.ipynb"),
    ("mesure_memoire.py", "dist/mesure_memoire.py"),
    ("protocole-qualite.md", "dist/protocole-qualite.md"),
    ("resultats-bruts.csv", "dist/resultats-bruts.csv"),
    ("tarifs-forfaits.csv", "data/tarifs-forfaits.csv"),
];

/// The repository path of content member `name` (`README.md` -> `dist/README.md`).
pub fn source_of(name: &str) -> Option<&'static str> {
    SOURCES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

/// Seconds since the Unix epoch of 1980-01-01 00:00:00 UTC, the first time a zip entry can hold.
const DOS_MIN_EPOCH: i64 = 315_532_800;
/// Seconds since the Unix epoch of 2107-12-31 23:59:59 UTC, the last time a zip entry can hold.
const DOS_MAX_EPOCH: i64 = 4_354_819_199;

/// The eight content files of a kit, read into memory, ready to be packaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kit {
    /// `(member name, bytes)` for every member except the manifest, in [`MEMBERS`] order.
    files: Vec<(&'static str, Vec<u8>)>,
}

impl Kit {
    /// Reads the eight content files from a source tree laid out like the repository
    /// ([`SOURCES`]). Only those exact files are read: whatever else lies in those folders
    /// never gets into the kit. Each must be a regular file (not a symlink) of at most
    /// [`MAX_MEMBER_BYTES`].
    pub fn read(source_root: &Path) -> Result<Kit> {
        let mut files = Vec::with_capacity(SOURCES.len());
        for name in MEMBERS.iter().filter(|n| **n != MANIFEST_NAME) {
            let source = source_of(name).context("every content member has a source")?;
            let bytes =
                read_regular_file(&source_root.join(source)).with_context(|| source.to_string())?;
            files.push((*name, bytes));
        }
        Ok(Kit { files })
    }

    /// Builds a kit from `(member name, bytes)` pairs (tests).
    ///
    /// # Errors
    /// A name that is not one of the eight content members, given twice, or missing.
    #[cfg(test)]
    pub fn from_files(files: Vec<(&str, Vec<u8>)>) -> Result<Kit> {
        let mut out: Vec<(&'static str, Vec<u8>)> = Vec::with_capacity(SOURCES.len());
        for name in MEMBERS.iter().filter(|n| **n != MANIFEST_NAME) {
            let mut given = files.iter().filter(|(n, _)| n == name);
            match (given.next(), given.next()) {
                (Some((_, bytes)), None) => out.push((name, bytes.clone())),
                (None, _) => bail!("{name}: missing from the kit"),
                (Some(_), Some(_)) => bail!("{name}: given twice"),
            }
        }
        if let Some((name, _)) = files.iter().find(|(n, _)| source_of(n).is_none()) {
            bail!("{name}: not a content file of the kit");
        }
        Ok(Kit { files: out })
    }

    /// The content bytes of member `name` (`README.md`, ...), if it is one of the eight.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b.as_slice())
    }

    /// The eight content files in archive order, as `(member name, bytes)`.
    pub fn files(&self) -> impl Iterator<Item = (&'static str, &[u8])> {
        self.files.iter().map(|(n, b)| (*n, b.as_slice()))
    }

    /// The manifest describing this kit.
    pub fn manifest(&self) -> Manifest {
        Manifest::describe(self.files())
    }

    /// Writes the nine-member archive into memory and returns its bytes: the layout of
    /// [`lab::kit::layout`], members in [`MEMBERS`] order, every entry dated `time`. The
    /// result depends only on the eight files, on `time` and on the compressor (see the
    /// module documentation).
    pub fn archive(&self, time: DateTime) -> Result<Vec<u8>> {
        let manifest = self.manifest().to_bytes();
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .compression_level(Some(DEFLATE_LEVEL))
            .last_modified_time(time)
            .unix_permissions(MEMBER_PERMISSIONS)
            .system(System::Unix)
            .large_file(false);
        let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
        for name in MEMBERS {
            let bytes = if name == MANIFEST_NAME {
                manifest.as_slice()
            } else {
                self.file(name).unwrap_or_default()
            };
            let path = kit::member_path(name);
            writer
                .start_file(path.as_str(), options)
                .and_then(|()| writer.write_all(bytes).map_err(Into::into))
                .with_context(|| format!("{}: cannot write {path}", kit::ARCHIVE_NAME))?;
        }
        let cursor = writer
            .finish()
            .with_context(|| format!("{}: cannot finish the archive", kit::ARCHIVE_NAME))?;
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
                bail!(
                    "SOURCE_DATE_EPOCH={raw:?} is not an integer number of seconds since \
                     1970-01-01 UTC; unset it or give e.g. SOURCE_DATE_EPOCH=1790208000"
                );
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
        .with_context(|| format!("entry time {seconds}"))?;
    DateTime::from_date_and_time(
        utc.year() as u16,
        u8::from(utc.month()),
        utc.day(),
        utc.hour(),
        utc.minute(),
        utc.second(),
    )
    .with_context(|| format!("entry time {utc}"))
}

/// Seconds since the Unix epoch of the catalog snapshot date at 00:00:00 UTC.
fn snapshot_epoch() -> Result<i64> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let date = time::Date::parse(kit::SNAPSHOT_DATE, &format)
        .with_context(|| format!("snapshot date {} is not YYYY-MM-DD", kit::SNAPSHOT_DATE))?;
    Ok(date.midnight().assume_utc().unix_timestamp())
}

/// Reads a regular file (symlinks refused), at most [`MAX_MEMBER_BYTES`].
fn read_regular_file(path: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).context("cannot read")?;
    if !meta.file_type().is_file() {
        bail!("not a regular file (symlinks and folders are refused)");
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .context("cannot open")?
        .take(MAX_MEMBER_BYTES + 1)
        .read_to_end(&mut bytes)
        .context("cannot read")?;
    if bytes.len() as u64 > MAX_MEMBER_BYTES {
        bail!("larger than the {MAX_MEMBER_BYTES}-byte limit");
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Eight fixed files with some text to compress (deflate's output depends on the input's
    /// repetitions, so a few hundred lines make it work).
    fn fixed_kit() -> Kit {
        let files = SOURCES
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let text: String = (0..200 * (i + 1))
                    .map(|n| format!("{name} line {n}: {}\n", n * n % 977))
                    .collect();
                (*name, text.into_bytes())
            })
            .collect();
        Kit::from_files(files).unwrap()
    }

    /// The compressor's output on fixed inputs. If this fails after a dependency update, the
    /// `zip` crate or its deflate (flate2 / zlib-rs) writes other bytes: the published kit's
    /// SHA-256 changes with it. Decide whether to publish a new hash (update both pins) or keep
    /// the old compressor version in `Cargo.lock`.
    #[test]
    fn compressor_output_is_pinned() {
        let bytes = fixed_kit().archive(entry_time(None).unwrap()).unwrap();
        assert_eq!(
            lab::digest::sha256_hex(&bytes),
            "b542f16c5226a5183fefab0d9bc31228ea134545299f120d71299442a74a98cd",
            "the compressor's output changed (see the test's comment)"
        );
    }

    #[test]
    fn written_archive_passes_the_verifier_in_path_order() {
        let bytes = fixed_kit().archive(entry_time(None).unwrap()).unwrap();
        let report = kit::verify_archive_bytes("k.zip", &bytes);
        assert!(report.is_ok(), "{:#?}", report.findings);
        let mut archive = zip::ZipArchive::new(Cursor::new(&bytes)).unwrap();
        let names: Vec<String> = (0..archive.len())
            .map(|i| archive.by_index(i).unwrap().name().unwrap().to_string())
            .collect();
        assert_eq!(names, kit::member_paths());
    }

    #[test]
    fn from_files_refuses_unknown_repeated_and_missing_names() {
        let mut files: Vec<(&str, Vec<u8>)> = SOURCES.iter().map(|(n, _)| (*n, vec![])).collect();
        assert!(Kit::from_files(files.clone()).is_ok());
        files.push(("notes.txt", vec![]));
        assert!(Kit::from_files(files.clone()).is_err());
        files.pop();
        files.push(("README.md", vec![]));
        assert!(Kit::from_files(files.clone()).is_err());
        files.truncate(6);
        assert!(Kit::from_files(files).is_err());
    }

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
}
