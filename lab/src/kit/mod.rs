//! The release kit `iteragpu-lab-v1.zip` as users receive it: its nine members, the schema of
//! `MANIFEST.json`, and the verifier behind `lab verify-kit` and `cargo xtask verify --archive`.
//!
//! What the archive must look like (the promise [`verify_archive`] checks) is stated in
//! [`layout`]; the writer that produces it lives in `xtask` (`cargo xtask dist`), because only
//! the release needs the repository paths, the entry times and the compression settings.
//! Everything here works on bytes in memory and never extracts anything to disk; every read is
//! capped ([`MAX_MEMBER_BYTES`], [`MAX_ARCHIVE_BYTES`]) so that a hostile archive cannot
//! exhaust memory. The layout is described in `docs/PROTOCOL.md §7`.

pub mod layout;
mod verify;

pub use verify::{check_archive_path, verify_archive, verify_archive_bytes, Report};

use serde::{Deserialize, Serialize};
use std::fmt;

/// Name of the folder every member lives in, inside the archive.
pub const KIT_ROOT: &str = "iteragpu-lab-v1";
/// File name of the release archive.
pub const ARCHIVE_NAME: &str = "iteragpu-lab-v1.zip";
/// File name of the manifest member.
pub const MANIFEST_NAME: &str = "MANIFEST.json";
/// Identifier of the manifest layout ([`Manifest::format`]).
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
/// Unix permissions of every member (a regular file, `rw-r--r--`).
pub const MEMBER_PERMISSIONS: u32 = 0o644;

/// The nine member file names inside [`KIT_ROOT`], in archive order: sorted by path (byte
/// order, so upper case first and `-` before `_`). The manifest is one of them; it is
/// computed from the other eight before anything is written, so its place is free.
pub const MEMBERS: [&str; 9] = [
    "LICENSE.txt",
    MANIFEST_NAME,
    "README.md",
    "calcul_forfaits.py",
    "mesure-memoire.ipynb",
    "mesure_memoire.py",
    "protocole-qualite.md",
    "resultats-bruts.csv",
    "tarifs-forfaits.csv",
];

/// Full name of a member's entry inside the archive, e.g. `iteragpu-lab-v1/README.md`.
pub fn member_path(name: &str) -> String {
    format!("{KIT_ROOT}/{name}")
}

/// The entry names of the nine members, in archive order ([`MEMBERS`]).
pub fn member_paths() -> Vec<String> {
    MEMBERS.iter().map(|name| member_path(name)).collect()
}

/// One problem found in a kit or an archive, attached to the file it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
        let file = crate::text::one_line(&self.file);
        write!(f, "{file}: {}", crate::text::one_line(&self.message))
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

/// The content of `MANIFEST.json`: pretty-printed JSON with the keys in this order and a final
/// newline.
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

impl Manifest {
    /// The manifest describing the eight content files given as `(file name, bytes)` (file
    /// names as in [`MEMBERS`]); its own entry is added, unhashed. Members come out sorted by
    /// path whatever the order given.
    pub fn describe<'n, 'b>(files: impl IntoIterator<Item = (&'n str, &'b [u8])>) -> Manifest {
        let mut members: Vec<ManifestEntry> = files
            .into_iter()
            .map(|(name, bytes)| ManifestEntry {
                path: member_path(name),
                size: Some(bytes.len() as u64),
                sha256: Some(crate::digest::sha256_hex(bytes)),
                unhashed_reason: None,
            })
            .collect();
        members.push(ManifestEntry {
            path: member_path(MANIFEST_NAME),
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

    /// The exact bytes of `MANIFEST.json`: pretty-printed JSON, this struct's key order, final
    /// newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A struct of strings, numbers and options always serialises.
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_sorted_by_path_and_unique() {
        let paths = member_paths();
        let mut sorted = paths.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(paths, sorted);
        assert_eq!(paths.len(), 9);
        assert_eq!(paths[1], "iteragpu-lab-v1/MANIFEST.json");
    }

    #[test]
    fn manifest_lists_nine_sorted_members_and_leaves_itself_unhashed() {
        let files: Vec<(&str, &[u8])> = MEMBERS
            .iter()
            .rev()
            .filter(|n| **n != MANIFEST_NAME)
            .map(|n| (*n, n.as_bytes()))
            .collect();
        let manifest = Manifest::describe(files);
        let listed: Vec<&str> = manifest.members.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(listed, member_paths());
        let own = &manifest.members[1];
        assert_eq!((own.size, own.sha256.as_deref()), (None, None));
        let readme = &manifest.members[2];
        assert_eq!(readme.size, Some(9));
        assert_eq!(
            readme.sha256.as_deref(),
            Some(crate::digest::sha256_hex(b"README.md").as_str())
        );
        let bytes = manifest.to_bytes();
        assert!(bytes.ends_with(b"}\n"));
        assert_eq!(
            serde_json::from_slice::<Manifest>(&bytes).unwrap(),
            manifest
        );
    }
}
