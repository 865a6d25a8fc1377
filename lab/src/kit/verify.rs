//! The verifier: reads an archive in memory (never extracting it) and checks it against the
//! layout rule ([`super::layout`]) and against its own `MANIFEST.json`, reporting every problem
//! by member name. [`Report`] also renders the result, for `lab verify-kit` and
//! `cargo xtask verify --archive` alike.

use super::layout::{self, Layout};
use super::{
    member_path, member_paths, Finding, Manifest, ARCHIVE_NAME, HASH_ALGORITHM, KIT_ROOT,
    KIT_VERSION, MANIFEST_FORMAT, MANIFEST_NAME, MANIFEST_UNHASHED_REASON, MAX_ARCHIVE_BYTES,
    MAX_MEMBER_BYTES, MEMBERS, SNAPSHOT_DATE,
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

/// Parses and checks the manifest against its schema, field by field; returns it when it can
/// be used for the member comparisons.
///
/// The schema is [`Manifest`] (and [`ManifestEntry`]): exactly its keys (serde refuses an
/// unknown, missing, repeated or wrongly typed key), and for each field the one value
/// `cargo xtask dist` writes: `format`, `archive`, `root`, `hash_algorithm`, `version` (this
/// lab's release, [`KIT_VERSION`]) and `catalog_snapshot_date` (a calendar date, the shipped
/// [`SNAPSHOT_DATE`]) equal to their constants; `members` the nine paths sorted, each content
/// member with a size and a lowercase-hex SHA-256, the manifest's own entry with neither and
/// the [`MANIFEST_UNHASHED_REASON`]. A manifest whose fields all pass must then be byte for
/// byte the pretty-printed form [`Manifest::to_bytes`] writes, which catches what the fields
/// cannot show (spacing, escapes, key order, the final newline).
fn check_manifest(
    path: &str,
    bytes: &[u8],
    expected: &[String],
    findings: &mut Vec<Finding>,
) -> Option<Manifest> {
    let manifest: Manifest = match serde_json::from_slice(bytes) {
        Ok(m) => m,
        Err(e) => {
            findings.push(Finding::new(
                path,
                format!(
                    "not a valid manifest: {}",
                    crate::text::ascii(&e.to_string())
                ),
            ));
            return None;
        }
    };
    let before = findings.len();
    let mut field = |name: &str, got: &str, want: &str, why: &str| {
        if got != want {
            findings.push(Finding::new(
                path,
                format!(
                    "{name} is \"{}\", expected \"{}\"{why}",
                    crate::text::excerpt(got),
                    crate::text::excerpt(want)
                ),
            ));
        }
    };
    field("format", &manifest.format, MANIFEST_FORMAT, "");
    field("archive", &manifest.archive, ARCHIVE_NAME, "");
    field("root", &manifest.root, KIT_ROOT, "");
    field(
        "hash_algorithm",
        &manifest.hash_algorithm,
        HASH_ALGORITHM,
        "",
    );
    field(
        "version",
        &manifest.version,
        KIT_VERSION,
        " (the release of this lab; verify a kit with the lab released with it)",
    );
    if is_calendar_date(&manifest.catalog_snapshot_date) {
        field(
            "catalog_snapshot_date",
            &manifest.catalog_snapshot_date,
            SNAPSHOT_DATE,
            " (the snapshot of the catalog this release ships)",
        );
    } else {
        findings.push(Finding::new(
            path,
            format!(
                "catalog_snapshot_date is {:?}, not a calendar date YYYY-MM-DD (expected {SNAPSHOT_DATE:?})",
                manifest.catalog_snapshot_date
            ),
        ));
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
                if entry.unhashed_reason.as_deref() != Some(MANIFEST_UNHASHED_REASON) {
                    findings.push(Finding::new(
                        path,
                        format!(
                            "its own entry's unhashed_reason is {}, expected {MANIFEST_UNHASHED_REASON:?}",
                            entry.unhashed_reason.as_deref().map_or_else(|| "missing".to_string(), |r| format!("{r:?}"))
                        ),
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
    if findings.len() == before && manifest.to_bytes() != bytes {
        findings.push(Finding::new(
            path,
            "not in the form cargo xtask dist writes: pretty-printed JSON, keys in schema order, \
             plain (unescaped) text, a final newline",
        ));
    }
    Some(manifest)
}

/// Whether `text` is a date of the proleptic Gregorian calendar written `YYYY-MM-DD` (four
/// digits, two, two; e.g. `2026-09-24`, not `2026-02-30` nor `2026-9-24`).
fn is_calendar_date(text: &str) -> bool {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let shape = text.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'-',
        _ => b.is_ascii_digit(),
    });
    text.len() == 10 && shape && time::Date::parse(text, &format).is_ok()
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

    /// The eight content files of a small kit and its manifest, as dist would describe them.
    fn small_files() -> (Vec<(&'static str, Vec<u8>)>, Manifest) {
        let files: Vec<(&str, Vec<u8>)> = MEMBERS
            .iter()
            .filter(|n| **n != MANIFEST_NAME)
            .map(|n| (*n, format!("{n}\n").repeat(20).into_bytes()))
            .collect();
        let manifest = Manifest::describe(files.iter().map(|(n, b)| (*n, b.as_slice())));
        (files, manifest)
    }

    /// A kit packed like dist packs it (any deflate level is allowed).
    fn small_kit() -> Vec<u8> {
        let (_, manifest) = small_files();
        kit_with_manifest(&manifest.to_bytes())
    }

    /// The small kit with `manifest` as its `MANIFEST.json` bytes.
    fn kit_with_manifest(manifest: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let (files, _) = small_files();
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(0o644)
            .system(zip::System::Unix);
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for name in MEMBERS {
            let bytes = files
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(manifest, |(_, b)| b.as_slice());
            writer.start_file(member_path(name), options).unwrap();
            writer.write_all(bytes).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    /// The findings on `MANIFEST.json` for a kit whose manifest is `value`, pretty-printed.
    fn manifest_findings(value: &serde_json::Value) -> Vec<String> {
        let mut bytes = serde_json::to_vec_pretty(value).unwrap();
        bytes.push(b'\n');
        let report = verify_archive_bytes("k.zip", &kit_with_manifest(&bytes));
        assert!(!report.is_ok() || report.findings.is_empty());
        report.findings.iter().map(ToString::to_string).collect()
    }

    /// Wrong values for one manifest field, whatever its type: other strings (a look-alike
    /// release, a NUL, a date that is no date, an empty one), other types, and null.
    fn mutants(good: &serde_json::Value) -> Vec<serde_json::Value> {
        use serde_json::json;
        let mut out = vec![json!(null), json!(7), json!(true), json!([]), json!({})];
        if let Some(text) = good.as_str() {
            for bad in [
                String::new(),
                "6.6.6".to_string(),
                "1.0.0\u{0}".to_string(),
                format!("{text}\u{0}"),
                format!("{text} "),
                text.to_uppercase(),
                "2026-02-30".to_string(),
                "not-a-date".to_string(),
                "0001-01-01".to_string(),
            ] {
                if bad != text {
                    out.push(json!(bad));
                }
            }
        }
        if good.is_u64() {
            out.push(json!(good.as_u64().unwrap() + 1));
            out.push(json!(-1));
            out.push(json!(1.5));
        }
        out.retain(|v| v != good);
        out
    }

    /// Every field of the manifest, top level and in each member entry, is checked: each
    /// wrong value, each wrong type, null and the field removed are refused with a finding,
    /// and a value that differs from what dist writes is refused with a finding naming the
    /// manifest (top-level fields) or its member. The walk goes over the keys dist writes, so
    /// a field added to the schema is covered without a change here.
    #[test]
    fn every_manifest_field_is_checked_against_its_schema() {
        let (_, manifest) = small_files();
        let good = serde_json::to_value(&manifest).unwrap();
        assert!(manifest_findings(&good).is_empty());
        let top = good.as_object().unwrap();
        assert_eq!(top.len(), 7, "the walk must see every top-level field");
        let mut refused = 0;
        for (key, value) in top {
            for bad in mutants(value) {
                let mut mutant = good.clone();
                mutant[key] = bad.clone();
                let found = manifest_findings(&mutant);
                assert!(!found.is_empty(), "{key} = {bad} accepted");
                assert!(
                    found.iter().any(|f| f.contains(MANIFEST_NAME)),
                    "{key} = {bad}: {found:?}"
                );
                if bad.is_string() && key != "members" {
                    assert!(
                        found.iter().any(|f| f.contains(key.as_str())),
                        "{key}: {found:?}"
                    );
                }
                refused += 1;
            }
            let mut missing = good.clone();
            missing.as_object_mut().unwrap().remove(key);
            assert!(
                !manifest_findings(&missing).is_empty(),
                "{key} removed accepted"
            );
        }
        let members = good["members"].as_array().unwrap();
        for (index, entry) in members.iter().enumerate() {
            for (key, value) in entry.as_object().unwrap() {
                for bad in mutants(value) {
                    let mut mutant = good.clone();
                    mutant["members"][index][key] = bad.clone();
                    let found = manifest_findings(&mutant);
                    assert!(!found.is_empty(), "members[{index}].{key} = {bad} accepted");
                    refused += 1;
                }
                let mut missing = good.clone();
                let entry = mutant_entry(&mut missing, index);
                if key != "unhashed_reason" || entry.len() == 4 {
                    entry.remove(key);
                    assert!(
                        !manifest_findings(&missing).is_empty(),
                        "members[{index}].{key} removed accepted"
                    );
                }
            }
        }
        // An unknown key, at either level, is refused too.
        let mut extra = good.clone();
        extra["signed_by"] = serde_json::json!("me");
        assert!(!manifest_findings(&extra).is_empty());
        mutant_entry(&mut extra, 0).insert("note".into(), serde_json::json!("x"));
        assert!(!manifest_findings(&extra).is_empty());
        assert!(refused > 150, "{refused} mutants");
    }

    fn mutant_entry(
        value: &mut serde_json::Value,
        index: usize,
    ) -> &mut serde_json::Map<String, serde_json::Value> {
        value["members"][index].as_object_mut().unwrap()
    }

    /// The findings name the problem: a release other than this lab's, a NUL, a date that is
    /// not a calendar date.
    #[test]
    fn manifest_version_and_date_refusals_say_what_is_expected() {
        let (_, manifest) = small_files();
        let good = serde_json::to_value(&manifest).unwrap();
        let with = |key: &str, value: &str| {
            let mut m = good.clone();
            m[key] = serde_json::json!(value);
            manifest_findings(&m)
        };
        assert_eq!(
            with("version", "6.6.6"),
            [format!(
                "iteragpu-lab-v1/MANIFEST.json: version is \"6.6.6\", expected \"{KIT_VERSION}\" \
                 (the release of this lab; verify a kit with the lab released with it)"
            )]
        );
        let nul = with("version", "1.0.0\u{0}");
        assert!(nul[0].contains(r#"version is "1.0.0\u{0}""#), "{nul:?}");
        for not_a_date in [
            "2026-02-30",
            "2026-9-24",
            "+026-09-24",
            "2026-09-24\n",
            "yesterday",
        ] {
            let found = with("catalog_snapshot_date", not_a_date);
            assert_eq!(found.len(), 1, "{not_a_date}: {found:?}");
            assert!(
                found[0].contains("not a calendar date YYYY-MM-DD"),
                "{found:?}"
            );
        }
        assert!(with("catalog_snapshot_date", "1969-12-31")[0].contains("expected \"2026-09-24\""));
    }

    /// A manifest with the right fields in another spelling (compact, reordered keys, an
    /// escaped letter, no final newline) is refused as not what dist writes.
    #[test]
    fn manifest_in_another_spelling_is_refused() {
        let (_, manifest) = small_files();
        let pretty = String::from_utf8(manifest.to_bytes()).unwrap();
        let compact = serde_json::to_string(&manifest).unwrap() + "\n";
        let escaped = pretty.replacen(
            r#""hash_algorithm": "sha256""#,
            r#""hash_algorithm": "sha\u0032\u0035\u0036""#,
            1,
        );
        let reordered = pretty.replacen(
            "\"format\": \"iteragpu-lab-manifest/1\",\n  \"archive\": \"iteragpu-lab-v1.zip\",",
            "\"archive\": \"iteragpu-lab-v1.zip\",\n  \"format\": \"iteragpu-lab-manifest/1\",",
            1,
        );
        let no_newline = pretty.trim_end().to_string();
        for variant in [compact, escaped, reordered, no_newline] {
            assert_ne!(variant, pretty);
            let report = verify_archive_bytes("k.zip", &kit_with_manifest(variant.as_bytes()));
            let lines: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
            assert_eq!(
                lines,
                ["iteragpu-lab-v1/MANIFEST.json: not in the form cargo xtask dist writes: \
                  pretty-printed JSON, keys in schema order, plain (unescaped) text, a final newline"],
                "{variant}"
            );
        }
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
