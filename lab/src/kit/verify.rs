//! The verifier: reads an archive in memory (never extracting it) and checks it against the
//! layout rule ([`super::layout`]) and against its own `MANIFEST.json`, reporting every problem
//! by member name. [`Report`] also renders the result, for `lab verify-kit` and
//! `cargo xtask verify --archive` alike.

use super::layout::{self, Layout};
use super::{
    member_path, member_paths, Finding, Manifest, ARCHIVE_NAME, HASH_ALGORITHM, KIT_ROOT,
    MANIFEST_FORMAT, MANIFEST_NAME, MAX_ARCHIVE_BYTES, MAX_MEMBER_BYTES, MEMBERS,
};
use crate::digest::sha256_hex;
use crate::input::ReadFailure;
use crate::text::one_line;
use crate::{Error, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{Cursor, Read};
use std::path::Path;
use zip::ZipArchive;

/// The outcome of [`verify_archive`]: every problem found, by member name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The archive that was checked, as given.
    pub archive: String,
    /// SHA-256 of the whole archive (lowercase hex), when it could be read.
    pub sha256: Option<String>,
    /// Whether the archive passed every check.
    pub ok: bool,
    /// Number of members a kit holds.
    pub members_expected: usize,
    /// Every problem found; empty when the archive is a kit that matches its manifest.
    pub findings: Vec<Finding>,
}

impl Report {
    fn new(archive: &str, sha256: Option<String>, findings: Vec<Finding>) -> Report {
        Report {
            archive: archive.to_string(),
            sha256,
            ok: findings.is_empty(),
            members_expected: MEMBERS.len(),
            findings,
        }
    }

    /// Whether the archive passed every check.
    pub fn is_ok(&self) -> bool {
        self.ok
    }

    /// The text report, one line each: the archive's SHA-256, every finding as
    /// `FILE: MESSAGE`, then `ARCHIVE: ok, 9 members match MANIFEST.json` or
    /// `ARCHIVE: N problem(s)`. Control characters in names are escaped.
    pub fn lines(&self) -> Vec<String> {
        let archive = one_line(&self.archive);
        let mut out = Vec::with_capacity(self.findings.len() + 2);
        if let Some(hash) = &self.sha256 {
            out.push(format!("{archive}: sha256 {hash}"));
        }
        out.extend(self.findings.iter().map(ToString::to_string));
        out.push(if self.ok {
            format!(
                "{archive}: ok, {} members match {MANIFEST_NAME}",
                self.members_expected
            )
        } else {
            format!("{archive}: {} problem(s)", self.findings.len())
        });
        out
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

/// Reads the archive at `path` (at most [`MAX_ARCHIVE_BYTES`]) and checks it with
/// [`verify_archive_bytes`]. Never extracts anything. Callers that take the path from a user
/// check it first with [`check_archive_path`].
pub fn verify_archive(path: &Path) -> Report {
    let label = path.display().to_string();
    let read = std::fs::File::open(path)
        .map_err(|e| format!("cannot open: {e}"))
        .and_then(|f| read_capped(f, MAX_ARCHIVE_BYTES));
    match read {
        Ok(bytes) => verify_archive_bytes(&label, &bytes),
        Err(message) => Report::new(&label, None, vec![Finding::new(&label, message)]),
    }
}

/// Checks an archive held in memory: the layout rule of [`super::layout`] (exactly what
/// `cargo xtask dist` writes, up to the compressed bytes), exactly the nine expected names
/// (safe, ASCII, under [`KIT_ROOT`], each once), every member readable within
/// [`MAX_MEMBER_BYTES`] with a matching CRC-32, every size and hash equal to the manifest, and
/// only the manifest unhashed. `label` names the archive in findings.
pub fn verify_archive_bytes(label: &str, bytes: &[u8]) -> Report {
    let sha256 = Some(sha256_hex(bytes));
    let Layout {
        entries,
        mut findings,
        unreadable,
    } = layout::read(label, bytes);
    if unreadable {
        return Report::new(label, sha256, findings);
    }

    // 1. Names: the nine expected, each once.
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
    let expected = member_paths();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for entry in &entries {
        let name = entry.display_name();
        *counts.entry(name.clone()).or_default() += 1;
        if let Some(problem) = unsafe_name(&entry.name) {
            findings.push(Finding::new(&name, format!("unsafe entry name: {problem}")));
        } else if !expected.contains(&name) {
            findings.push(Finding::new(
                &name,
                "unexpected entry: not one of the nine kit members",
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
    let duplicates = counts.values().any(|c| *c > 1);

    // 2. Contents, through the zip crate's reader (which checks each CRC-32). With duplicate
    //    names it would read only one of each, so contents are not compared then.
    let mut archive = match ZipArchive::new(Cursor::new(bytes)) {
        Ok(a) if !duplicates => a,
        Ok(_) => return Report::new(label, sha256, findings),
        Err(e) => {
            findings.push(Finding::new(
                label,
                format!("not a readable zip archive: {e}"),
            ));
            return Report::new(label, sha256, findings);
        }
    };
    let manifest_path = member_path(MANIFEST_NAME);
    let manifest = read_member(&mut archive, &manifest_path, &mut findings)
        .and_then(|b| check_manifest(&manifest_path, &b, &expected, &mut findings));
    for path in expected.iter().filter(|p| **p != manifest_path) {
        if !counts.contains_key(path) {
            continue;
        }
        let Some(content) = read_member(&mut archive, path, &mut findings) else {
            continue;
        };
        let Some(entry) = manifest
            .as_ref()
            .and_then(|m| m.members.iter().find(|e| e.path == *path))
        else {
            continue;
        };
        let (size, hash) = (content.len() as u64, sha256_hex(&content));
        if entry.size != Some(size) {
            findings.push(Finding::new(
                path,
                format!(
                    "size {size} bytes in the archive, {} in {MANIFEST_NAME}",
                    show(entry.size)
                ),
            ));
        }
        if entry.sha256.as_deref() != Some(hash.as_str()) {
            findings.push(Finding::new(
                path,
                format!(
                    "SHA-256 {hash} in the archive, {} in {MANIFEST_NAME}",
                    show(entry.sha256.as_deref())
                ),
            ));
        }
    }
    Report::new(label, sha256, findings)
}

/// `null` or the value, for messages.
fn show<T: fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "null".to_string(), |v| v.to_string())
}

/// Reads one member (size-capped, CRC-checked), recording a finding when it cannot be read.
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
            findings.push(Finding::new(path, e));
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
    let sorted_expected: Vec<&str> = expected.iter().map(String::as_str).collect();
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

/// Reads at most `cap` bytes ([`crate::input::capped`]); the failure in the words of a
/// finding.
fn read_capped(reader: impl Read, cap: u64) -> std::result::Result<Vec<u8>, String> {
    crate::input::capped(reader, cap).map_err(|failure| match failure {
        ReadFailure::Io(e) => format!("cannot read: {e}"),
        ReadFailure::TooLarge { .. } | ReadFailure::NotAFile => {
            format!("larger than the {cap}-byte limit")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
            b"a\nb",
            b"",
        ] {
            assert!(unsafe_name(bad).is_some(), "{bad:?}");
        }
    }

    /// A kit packed like dist packs it (any deflate level is allowed).
    fn small_kit() -> Vec<u8> {
        use std::io::Write;
        let files: Vec<(&str, Vec<u8>)> = MEMBERS
            .iter()
            .filter(|n| **n != MANIFEST_NAME)
            .map(|n| (*n, format!("{n}\n").repeat(20).into_bytes()))
            .collect();
        let manifest = Manifest::describe(files.iter().map(|(n, b)| (*n, b.as_slice()))).to_bytes();
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(0o644)
            .system(zip::System::Unix);
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for name in MEMBERS {
            let bytes = files
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(manifest.as_slice(), |(_, b)| b.as_slice());
            writer.start_file(member_path(name), options).unwrap();
            writer.write_all(bytes).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn a_kit_packed_like_dist_passes() {
        let report = verify_archive_bytes("k.zip", &small_kit());
        assert!(report.is_ok(), "{:#?}", report.findings);
    }

    /// Random byte changes and truncations never make the verifier panic, and are refused
    /// unless the result is a content-identical re-pack (every byte of a kit is covered by the
    /// layout rule, a CRC-32 or the manifest, except unused bits of a deflate stream).
    #[test]
    fn mutated_kits_are_refused_without_panicking() {
        let good = small_kit();
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut accepted = 0;
        for round in 0..3000 {
            let mut bytes = good.clone();
            if round % 10 == 0 {
                bytes.truncate(next() as usize % bytes.len());
            } else {
                for _ in 0..=(next() % 3) {
                    let at = next() as usize % bytes.len();
                    let old = bytes[at];
                    bytes[at] = old ^ (1 + (next() % 255) as u8);
                }
            }
            let report = verify_archive_bytes("k.zip", &bytes);
            if report.is_ok() {
                // Accepted only as a content-identical re-pack: e.g. the unused padding bits
                // at the end of a deflate stream, which no reader sees.
                assert_eq!(contents(&bytes), contents(&good), "round {round}");
                accepted += 1;
            }
        }
        assert!(accepted < 30, "{accepted} of 3000 changed kits accepted");
    }

    /// Every member's name and inflated bytes.
    fn contents(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut archive = ZipArchive::new(Cursor::new(bytes)).unwrap();
        (0..archive.len())
            .map(|i| {
                let mut file = archive.by_index(i).unwrap();
                let mut content = Vec::new();
                file.read_to_end(&mut content).unwrap();
                (file.name().unwrap().to_string(), content)
            })
            .collect()
    }

    #[test]
    fn report_lines_end_with_the_verdict() {
        let ok = Report::new("k.zip", Some("ab".repeat(32)), Vec::new());
        assert_eq!(
            ok.lines(),
            [
                format!("k.zip: sha256 {}", "ab".repeat(32)),
                "k.zip: ok, 9 members match MANIFEST.json".to_string()
            ]
        );
        let bad = Report::new(
            "k\n.zip",
            None,
            vec![Finding::new("iteragpu-lab-v1/x\u{1b}", "unexpected")],
        );
        assert_eq!(
            bad.lines(),
            [
                r"iteragpu-lab-v1/x\u{1b}: unexpected".to_string(),
                r"k\n.zip: 1 problem(s)".to_string()
            ]
        );
    }
}
