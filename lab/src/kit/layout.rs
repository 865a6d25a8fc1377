//! The byte layout of the kit archive: the rule `lab verify-kit` and
//! `cargo xtask verify --archive` check, stated once.
//!
//! **The promise: the archive is exactly what `cargo xtask dist` writes, up to content-identical
//! re-packing.** Re-packing may change only the compressed bytes of a member (another
//! conforming deflate, another level; hence also the compressed sizes, the offsets and the
//! deflate option bits 1-2 of the flags) and the one entry time all members share
//! (`SOURCE_DATE_EPOCH`). Everything else is fixed, and anything else is refused:
//!
//! 1. The file starts with the first entry's local header at byte 0 (nothing prepended: no
//!    self-extracting stub, no shell script, even with the offsets adjusted) and ends with the
//!    22-byte end-of-central-directory record (no archive comment, nothing appended).
//! 2. Entries are back to back from byte 0, each a local header immediately followed by its
//!    compressed data (no data descriptor, no gap); the central directory follows the last
//!    entry immediately and lists the same entries in the same order; the end record follows
//!    it immediately and states the exact entry count, size and offset of the directory, on
//!    disk 0 (no ZIP64, no multi-disk).
//! 3. Exactly the nine members of [`super::MEMBERS`], each once, sorted by path.
//! 4. Every entry, in its local header and in the central directory alike: made by Unix (host
//!    3) with format version 2.0, version needed 2.0, flags 0 apart from the deflate option bits (no encryption, no
//!    data-descriptor flag, no UTF-8 flag: the names are ASCII), method 8 (deflate), no extra
//!    field, no file comment, disk 0, internal attributes 0, external attributes exactly a
//!    regular file with mode 0644 ([`super::MEMBER_PERMISSIONS`]; not 0755, 0666, setuid, a
//!    symbolic link or a directory), the same CRC-32 and sizes in both headers, the same
//!    date and time on every entry.
//! 5. Every member inflates to bytes matching its CRC-32 and, except `MANIFEST.json`, the size
//!    and SHA-256 the manifest gives (checked in the verifier, not here).
//!
//! This is stricter than what zip readers accept, on purpose: each of these forms is read
//! differently by some reader (Python's `zipfile`, Info-ZIP's `unzip`, Rust's `zip`), so a kit
//! that any of them could read as something else than what was published is refused.

use super::{member_paths, Finding, MEMBER_PERMISSIONS};

/// Signature of a local file header.
const LOCAL_SIGNATURE: u32 = 0x0403_4b50;
/// Signature of a central directory record.
const CENTRAL_SIGNATURE: u32 = 0x0201_4b50;
/// Signature of the end-of-central-directory record.
const END_SIGNATURE: u32 = 0x0605_4b50;
/// Length of the end record without its comment.
const END_LEN: usize = 22;
/// Length of a local header without name and extra field.
const LOCAL_LEN: usize = 30;
/// Length of a central record without name, extra field and comment.
const CENTRAL_LEN: usize = 46;
/// "Version made by": Unix (3, which carries the mode in the external attributes), format
/// version 2.0.
const MADE_BY: u16 = 0x0314;
/// Version needed to extract a deflated entry (2.0).
const VERSION_DEFLATE: u16 = 20;
/// Compression method 8, deflate.
const METHOD_DEFLATE: u16 = 8;
/// Flag bits a re-packer may set: the deflate option bits (compression level hints).
const ALLOWED_FLAGS: u16 = 0b110;
/// Unix file type bits and the regular-file type.
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;

/// One entry as the central directory lists it, after the layout checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry name, as written (not necessarily UTF-8).
    pub name: Vec<u8>,
    /// Uncompressed size the headers state.
    pub size: u32,
}

impl Entry {
    /// The name for messages (invalid UTF-8 replaced).
    pub fn display_name(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// What [`read`] found: the entries (when the central directory could be walked) and every
/// departure from the rule in the module documentation.
#[derive(Debug, Default)]
pub struct Layout {
    /// Central directory entries, in directory order (duplicates kept).
    pub entries: Vec<Entry>,
    /// Every problem, attached to the archive (`label`) or to an entry name.
    pub findings: Vec<Finding>,
    /// Whether the structure was too broken to list the entries at all.
    pub unreadable: bool,
}

/// Little-endian reads that fail on truncation.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u16(&self, at: usize) -> Option<u16> {
        let b = self.0.get(at..at.checked_add(2)?)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&self, at: usize) -> Option<u32> {
        let b = self.0.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The fields the local header and the central record must share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shared {
    version_needed: u16,
    flags: u16,
    method: u16,
    time: u16,
    date: u16,
    crc32: u32,
    compressed_size: u32,
    size: u32,
}

impl Shared {
    /// Reads the shared fields starting at the "version needed" field.
    fn at(bytes: &Bytes<'_>, at: usize) -> Option<Shared> {
        Some(Shared {
            version_needed: bytes.u16(at)?,
            flags: bytes.u16(at + 2)?,
            method: bytes.u16(at + 4)?,
            time: bytes.u16(at + 6)?,
            date: bytes.u16(at + 8)?,
            crc32: bytes.u32(at + 10)?,
            compressed_size: bytes.u32(at + 14)?,
            size: bytes.u32(at + 18)?,
        })
    }
}

/// Checks `archive` against the rule in the module documentation; `label` names the archive in
/// findings about the whole file.
pub fn read(label: &str, archive: &[u8]) -> Layout {
    let mut layout = Layout::default();
    let bytes = Bytes(archive);
    let archive_finding = |layout: &mut Layout, message: String| {
        layout.findings.push(Finding::new(label, message));
    };
    let fatal = |mut layout: Layout, message: String| {
        layout.findings.push(Finding::new(label, message));
        layout.unreadable = true;
        layout
    };

    // 1. The end record: at the very end, with no comment.
    let Some(end) = find_end_record(archive) else {
        return fatal(
            layout,
            "not a readable zip archive: no end-of-central-directory record".to_string(),
        );
    };
    let field = |at: usize| bytes.u16(end + at).unwrap_or(0);
    let (disk, directory_disk) = (field(4), field(6));
    let (count_here, count) = (field(8), field(10));
    let stated_size = bytes.u32(end + 12).unwrap_or(0);
    let stated_offset = bytes.u32(end + 16).unwrap_or(0);
    let comment_len = usize::from(field(20));
    if comment_len > 0 {
        archive_finding(
            &mut layout,
            format!("holds an archive comment ({comment_len} bytes); dist writes none"),
        );
    }
    let after = archive.len().saturating_sub(end + END_LEN + comment_len);
    if after > 0 {
        archive_finding(
            &mut layout,
            format!("{after} byte(s) after the end-of-central-directory record"),
        );
    }
    if count == u16::MAX || stated_size == u32::MAX || stated_offset == u32::MAX {
        return fatal(layout, "ZIP64 archive; dist never writes one".to_string());
    }
    if disk != 0 || directory_disk != 0 || count_here != count {
        return fatal(
            layout,
            "multi-disk archive; dist never writes one".to_string(),
        );
    }

    // 2. The central directory, record by record, each checked against its local header.
    let (offset, stated_size) = (stated_offset as usize, stated_size as usize);
    let mut at = offset;
    let mut expected_local = 0usize;
    let mut first_time: Option<(u16, u16)> = None;
    for index in 0..count {
        if bytes.u32(at) != Some(CENTRAL_SIGNATURE) {
            return fatal(
                layout,
                format!(
                    "not a readable zip archive: no central directory record {} at offset {at} \
                     (the end record states offset {offset}, {count} entries)",
                    index + 1
                ),
            );
        }
        let (Some(made_by), Some(central), Some(name_len), Some(extra_len), Some(comment_len)) = (
            bytes.u16(at + 4),
            Shared::at(&bytes, at + 6),
            bytes.u16(at + 28),
            bytes.u16(at + 30),
            bytes.u16(at + 32),
        ) else {
            return fatal(layout, "truncated central directory".to_string());
        };
        let (name_len, extra_len, comment_len) = (
            usize::from(name_len),
            usize::from(extra_len),
            usize::from(comment_len),
        );
        let disk_start = bytes.u16(at + 34).unwrap_or(0);
        let internal = bytes.u16(at + 36).unwrap_or(0);
        let external = bytes.u32(at + 38).unwrap_or(0);
        let local = bytes.u32(at + 42).unwrap_or(0) as usize;
        let Some(name) = archive.get(at + CENTRAL_LEN..at + CENTRAL_LEN + name_len) else {
            return fatal(layout, "truncated central directory".to_string());
        };
        let entry = Entry {
            name: name.to_vec(),
            size: central.size,
        };
        let shown = entry.display_name();
        let mut problem = |message: String| layout.findings.push(Finding::new(&shown, message));

        if made_by != MADE_BY {
            problem(format!(
                "made by host {} version {}.{}, expected Unix (3) version 2.0, which carries the mode",
                made_by >> 8,
                (made_by & 0xff) / 10,
                (made_by & 0xff) % 10
            ));
        }
        check_shared(&central, &mut problem);
        if extra_len > 0 {
            problem(format!(
                "{extra_len} byte(s) of extra fields; dist writes none"
            ));
        }
        if comment_len > 0 {
            problem(format!(
                "a file comment of {comment_len} byte(s); dist writes none"
            ));
        }
        if disk_start != 0 {
            problem(format!("starts on disk {disk_start}, expected 0"));
        }
        if internal != 0 {
            problem(format!("internal attributes {internal:#x}, expected 0"));
        }
        if let Some(message) = mode_problem(external, &entry.name) {
            problem(message);
        }
        match first_time {
            None => first_time = Some((central.date, central.time)),
            Some(first) if first != (central.date, central.time) => problem(
                "dated differently from the first entry; dist dates every entry alike".to_string(),
            ),
            Some(_) => {}
        }
        if local != expected_local {
            problem(if index == 0 {
                format!(
                    "first entry at offset {local}, expected 0: {local} byte(s) before it \
                     (prepended data, e.g. a script)"
                )
            } else {
                format!(
                    "local header at offset {local}, expected {expected_local} right after the \
                     previous entry"
                )
            });
        }
        match local_entry_end(&bytes, local, &central, name) {
            Ok(end_of_data) => expected_local = end_of_data,
            Err(message) => {
                problem(message);
                expected_local = local;
            }
        }
        layout.entries.push(entry);
        at += CENTRAL_LEN + name_len + extra_len + comment_len;
    }
    if count > 0 && expected_local != offset {
        archive_finding(
            &mut layout,
            format!(
                "the central directory starts at offset {offset}, expected {expected_local} right \
                 after the last entry"
            ),
        );
    }
    let actual_size = at - offset;
    if actual_size != stated_size {
        archive_finding(
            &mut layout,
            format!(
                "the end record states a central directory of {stated_size} bytes; its {count} \
                 record(s) take {actual_size}"
            ),
        );
    }
    if at != end {
        archive_finding(
            &mut layout,
            format!(
                "the central directory ends at offset {at}, the end record starts at {end}; \
                 they must be adjacent"
            ),
        );
    }

    // 3. The order of the members (names, count and duplicates are the verifier's findings).
    let names: Vec<String> = layout.entries.iter().map(Entry::display_name).collect();
    let expected = member_paths();
    let mut sorted = names.clone();
    sorted.sort();
    if sorted == expected && names != expected {
        archive_finding(
            &mut layout,
            format!("members are not in path order: {names:?}"),
        );
    }
    layout
}

/// Position of the end record: the last signature that leaves room for a full record.
fn find_end_record(archive: &[u8]) -> Option<usize> {
    let last = archive.len().checked_sub(END_LEN)?;
    let lowest = last.saturating_sub(usize::from(u16::MAX));
    (lowest..=last)
        .rev()
        .find(|&at| Bytes(archive).u32(at) == Some(END_SIGNATURE))
}

/// The checks of rule 4 on the fields local header and central record share.
fn check_shared(fields: &Shared, problem: &mut impl FnMut(String)) {
    if fields.version_needed != VERSION_DEFLATE {
        problem(format!(
            "version needed {}.{}, expected 2.0",
            fields.version_needed / 10,
            fields.version_needed % 10
        ));
    }
    let flags = fields.flags & !ALLOWED_FLAGS;
    if flags & 0x0008 != 0 {
        problem("data-descriptor flag set; dist writes sizes and CRC in the header".to_string());
    }
    if flags & 0x0001 != 0 {
        problem("encrypted".to_string());
    }
    let other = flags & !0x0009;
    if other != 0 {
        problem(format!(
            "general-purpose flags {other:#06x}; dist sets none"
        ));
    }
    if fields.method != METHOD_DEFLATE {
        problem(format!(
            "compression method {}, expected 8 (deflate)",
            fields.method
        ));
    }
}

/// Why the external attributes are not those of a regular 0644 file, if they are not.
fn mode_problem(external: u32, name: &[u8]) -> Option<String> {
    let mode = external >> 16;
    if name.ends_with(b"/") || external & 0x10 != 0 || mode & S_IFMT == 0o040_000 {
        return Some("a directory entry, expected a regular file".to_string());
    }
    match mode & S_IFMT {
        0o120_000 => return Some("a symbolic link, expected a regular file".to_string()),
        S_IFREG => {}
        0 => {
            return Some("no Unix file type in its attributes, expected a regular file".to_string())
        }
        _ => return Some("a special file, expected a regular file".to_string()),
    }
    if mode != S_IFREG | MEMBER_PERMISSIONS {
        return Some(format!(
            "mode {:04o}, expected {MEMBER_PERMISSIONS:04o} (rw-r--r--, no execute, no setuid)",
            mode & 0o7777
        ));
    }
    if external & 0xffff != 0 {
        return Some(format!(
            "MS-DOS attributes {:#06x}, expected 0",
            external & 0xffff
        ));
    }
    None
}

/// Checks the local header at `at` against the central record; returns the offset right after
/// the entry's compressed data.
fn local_entry_end(
    bytes: &Bytes<'_>,
    at: usize,
    central: &Shared,
    name: &[u8],
) -> Result<usize, String> {
    if bytes.u32(at) != Some(LOCAL_SIGNATURE) {
        return Err(format!("no local header at offset {at}"));
    }
    let (Some(local), Some(name_len), Some(extra_len)) = (
        Shared::at(bytes, at + 4),
        bytes.u16(at + 26),
        bytes.u16(at + 28),
    ) else {
        return Err(format!("truncated local header at offset {at}"));
    };
    let (name_len, extra_len) = (usize::from(name_len), usize::from(extra_len));
    let local_name = bytes.0.get(at + LOCAL_LEN..at + LOCAL_LEN + name_len);
    if local_name != Some(name) {
        return Err("the local header names another entry".to_string());
    }
    if extra_len > 0 {
        return Err(format!(
            "{extra_len} byte(s) of extra fields in the local header; dist writes none"
        ));
    }
    if local != *central {
        return Err(
            "local header and central directory disagree (version, flags, method, time, CRC-32 \
             or sizes)"
                .to_string(),
        );
    }
    let end = at + LOCAL_LEN + name_len + local.compressed_size as usize;
    if end > bytes.0.len() {
        return Err("compressed data runs past the end of the file".to_string());
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_other_than_a_regular_0644_file_are_named() {
        let reg = |mode: u32| (S_IFREG | mode) << 16;
        assert_eq!(mode_problem(reg(0o644), b"a"), None);
        for (external, expect) in [
            (reg(0o755), "mode 0755"),
            (reg(0o666), "mode 0666"),
            (reg(0o4644), "mode 4644"),
            (reg(0o600), "mode 0600"),
            ((0o120_777) << 16, "a symbolic link"),
            ((0o040_755) << 16, "a directory entry"),
            (0o644 << 16, "no Unix file type"),
            (reg(0o644) | 0x20, "MS-DOS attributes"),
        ] {
            let found = mode_problem(external, b"a").unwrap_or_default();
            assert!(found.starts_with(expect), "{external:o}: {found}");
        }
        assert!(mode_problem(reg(0o644), b"dir/")
            .unwrap()
            .contains("directory"));
    }

    #[test]
    fn no_end_record_is_unreadable() {
        for bytes in [&b""[..], b"PK", b"hello world, not a zip at all"] {
            let layout = read("k.zip", bytes);
            assert!(layout.unreadable);
            assert_eq!(layout.findings.len(), 1, "{:?}", layout.findings);
        }
    }
}
