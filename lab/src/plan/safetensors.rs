//! Reading safetensors headers only: exact tensor counts and stored dtypes without touching
//! the tensor data, so that a 400 GB folder plans in milliseconds.
//!
//! Format (the `safetensors` specification): 8 bytes, a little-endian `u64` N; N bytes of
//! UTF-8 JSON mapping each tensor name to `{"dtype", "shape", "data_offsets": [begin, end]}`
//! (offsets relative to the end of the header), plus an optional `"__metadata__"` object of
//! strings; then the data. A sharded model lists `tensor -> file` in
//! `model.safetensors.index.json` (`weight_map`).
//!
//! Checks (each failure is one line, exit 2): the header length fits the file and
//! [`MAX_HEADER_BYTES`]; the JSON is an object of well-formed entries; the dtype is known;
//! `end - begin` equals the elements times the dtype's width; every range lies inside the
//! data; the ranges tile the data as the reference library requires (no overlap, no gap, no
//! bytes past the last tensor: [`contiguous`]); no key is given twice ([`super::json`]). Shard names must be
//! plain file names next to the index, and each must exist; a tensor named in two shards is
//! refused. A model file that is present but cannot be read (a dangling symbolic link, a
//! link loop, no permission) is exit 1, never skipped.

use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::path::Path;

/// Largest header accepted, in bytes: 100,000,000, the limit of the reference `safetensors`
/// library (`MAX_HEADER_SIZE`).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Largest index file read (`model.safetensors.index.json`), in bytes (64 MiB).
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Width in bits of a safetensors dtype spelled `dtype`, or `None` when the reference
/// library does not read it ([`super::header::Dtype`] lists them: `BOOL`, `F4`, `F6_E2M3`,
/// `F6_E3M2`, `U8`, `I8`, the five `F8_*`, `I16`, `U16`, `F16`, `BF16`, `I32`, `U32`, `F32`,
/// `C64`, `F64`, `I64`, `U64`).
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    super::header::Dtype::from_name(dtype).map(super::header::Dtype::bits)
}

/// What the headers of one model say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Tensors read.
    pub tensors: u64,
    /// Elements of all tensors (the parameter count of an unquantized checkpoint).
    pub elements: u64,
    /// Bytes of tensor data (what loading the weights takes).
    pub data_bytes: u64,
    /// Elements per stored dtype.
    pub elements_by_dtype: BTreeMap<String, u64>,
    /// Files read (one, or the shards of an index).
    pub files: Vec<String>,
    /// Header bytes read, over all files.
    pub header_bytes: u64,
}

impl From<super::header::Totals> for Summary {
    /// One header's totals, with no file or header bytes yet.
    fn from(t: super::header::Totals) -> Summary {
        Summary {
            tensors: t.tensors,
            elements: t.elements,
            data_bytes: t.data_bytes,
            elements_by_dtype: t.elements_by_dtype,
            ..Summary::default()
        }
    }
}

impl Summary {
    fn add(&mut self, other: Summary) -> Result<()> {
        let overflow = || Error::usage("safetensors: the tensor totals overflow 64 bits");
        self.tensors = self
            .tensors
            .checked_add(other.tensors)
            .ok_or_else(overflow)?;
        self.elements = self
            .elements
            .checked_add(other.elements)
            .ok_or_else(overflow)?;
        self.data_bytes = self
            .data_bytes
            .checked_add(other.data_bytes)
            .ok_or_else(overflow)?;
        for (dtype, n) in other.elements_by_dtype {
            let slot = self.elements_by_dtype.entry(dtype).or_default();
            *slot = slot.checked_add(n).ok_or_else(overflow)?;
        }
        self.files.extend(other.files);
        self.header_bytes = self
            .header_bytes
            .checked_add(other.header_bytes)
            .ok_or_else(overflow)?;
        Ok(())
    }

    /// The dtype holding the most elements (the stored dtype of the weights).
    pub fn main_dtype(&self) -> Option<&str> {
        self.elements_by_dtype
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(d, _)| d.as_str())
    }
}

/// Most header bytes read over all the shards of one folder: [`MAX_HEADER_BYTES`], the
/// reference library's limit for one header, applied to the folder as a whole.
pub const MAX_FOLDER_HEADER_BYTES: u64 = MAX_HEADER_BYTES;

/// Most tensors an index may name: 1,048,576 (the largest public checkpoints name about
/// 10⁵: DeepSeek-V3's index lists 91,991 tensors).
pub const MAX_TENSORS: usize = 1 << 20;

/// Header bytes a shard may spend per tensor the index puts in it, on top of the tensor's
/// name: a JSON entry `{"dtype":"BF16","shape":[128256,4096],"data_offsets":[0,1050673152]}`
/// takes about 70; 512 leaves room for any realistic shape.
pub const HEADER_BYTES_PER_TENSOR: u64 = 512;

/// Header bytes a shard may spend on its `__metadata__` and layout (64 KiB).
pub const HEADER_BYTES_PER_SHARD: u64 = 64 << 10;

/// Reads the safetensors header(s) of the model folder `folder`, if any: the index and its
/// shards when `model.safetensors.index.json` is there, else `model.safetensors`, else
/// `None` when the folder holds no `.safetensors` file at all. A name counts as there when
/// the folder has an entry for it, so that a symbolic link whose target is missing (an
/// interrupted Hugging Face download) is reported, not skipped.
///
/// # Errors
/// [`Error::Usage`] for any malformed header or index (see the module documentation), for
/// `.safetensors` files that neither an index lists nor are `model.safetensors` (named);
/// [`Error::Runtime`] for a file that is there but cannot be read.
pub fn read_folder(folder: &Path) -> Result<Option<Summary>> {
    let index = folder.join("model.safetensors.index.json");
    if present(&index)? {
        return read_index(&index).map(Some);
    }
    let single = folder.join("model.safetensors");
    let others = safetensors_files(folder, &BTreeSet::from(["model.safetensors"]))?;
    if !others.is_empty() {
        let shown = crate::text::one_line(&folder.display().to_string());
        let what = if present(&single)? {
            "next to model.safetensors, which transformers loads alone"
        } else {
            "with neither model.safetensors nor model.safetensors.index.json (the index that lists shards)"
        };
        return Err(Error::usage(format!(
            "{shown} holds {} {what}: add the index, remove the extra files, or give config.json alone to plan from the config",
            names_shown(&others)
        )));
    }
    if present(&single)? {
        let (summary, ()) = read_file(&single, MAX_HEADER_BYTES, |_| Ok(()))?;
        return Ok(Some(summary));
    }
    Ok(None)
}

/// Whether the folder holding `path` has an entry of that name, whatever it is (a dangling
/// symbolic link or a link loop included, which `Path::exists` calls absent). A name too long
/// for the file system cannot be there.
///
/// # Errors
/// [`Error::Runtime`] when the folder cannot be searched (no permission).
pub fn present(path: &Path) -> Result<bool> {
    use std::io::ErrorKind::{InvalidFilename, NotFound};
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), NotFound | InvalidFilename) => Ok(false),
        Err(e) => Err(Error::runtime(format!(
            "cannot read {}: {e}",
            crate::text::one_line(&path.display().to_string())
        ))),
    }
}

/// The `.safetensors` entries of `folder` other than `known`, sorted.
///
/// # Errors
/// [`Error::Runtime`] when the folder cannot be listed.
fn safetensors_files(folder: &Path, known: &BTreeSet<&str>) -> Result<Vec<String>> {
    let cannot = |e: std::io::Error| {
        Error::runtime(format!(
            "cannot list {}: {e}",
            crate::text::one_line(&folder.display().to_string())
        ))
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).map_err(cannot)? {
        let name = entry.map_err(cannot)?.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".safetensors") && !known.contains(name.as_ref()) {
            found.push(name.into_owned());
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// Whether `name` reads as a shard of an index: `PREFIX-DIGITS-of-DIGITS.safetensors`, as
/// transformers names them (`model-00001-of-00004.safetensors`).
pub fn shard_like(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(stem) = name.strip_suffix(".safetensors") else {
        return false;
    };
    let Some((head, total)) = stem.rsplit_once("-of-") else {
        return false;
    };
    head.rsplit_once('-')
        .is_some_and(|(prefix, part)| !prefix.is_empty() && digits(part) && digits(total))
}

/// Up to three names, quoted, then how many more.
fn names_shown(names: &[String]) -> String {
    let mut shown: Vec<String> = names
        .iter()
        .take(3)
        .map(|n| format!("\"{}\"", crate::text::excerpt(n)))
        .collect();
    if names.len() > 3 {
        shown.push(format!("and {} more", names.len() - 3));
    }
    shown.join(", ")
}

/// Why `file`, a shard name from an index, is not a plain `.safetensors` file name next to
/// the index, or `None` when it is one. The class: empty, `.` or `..`, a path (a `/` or `\`
/// separator anywhere, which also covers absolute paths), a NUL (no file system has such a
/// name), or another extension (`config.json` read as weights).
pub fn shard_name_problem(file: &str) -> Option<&'static str> {
    if file.is_empty() {
        Some("is empty")
    } else if file.contains('\0') {
        Some("holds a NUL character")
    } else if file.contains(['/', '\\']) {
        Some("is a path, not a file name next to the index")
    } else if file == "." || file == ".." {
        Some("is not a file name")
    } else if !file.ends_with(".safetensors") || file == ".safetensors" {
        Some("is not a .safetensors file name")
    } else {
        None
    }
}

/// Reads an index and the header of every shard it names.
///
/// # Errors
/// As [`read_folder`]; also a shard name that is not a plain `.safetensors` file name
/// ([`shard_name_problem`]), a missing shard, more than [`MAX_TENSORS`] tensors, a shard
/// header over its share of bytes ([`HEADER_BYTES_PER_TENSOR`], [`HEADER_BYTES_PER_SHARD`])
/// or past [`MAX_FOLDER_HEADER_BYTES`] in all, a tensor listed in the index but absent from
/// its shard, a tensor in a shard that the index does not put there, and a shard-like
/// `.safetensors` file ([`shard_like`]) or `model.safetensors` in the folder that the index
/// does not list.
pub fn read_index(index: &Path) -> Result<Summary> {
    read_index_within(index, MAX_FOLDER_HEADER_BYTES)
}

/// [`read_index`] with `folder_limit` header bytes over all shards in place of
/// [`MAX_FOLDER_HEADER_BYTES`] (so that tests can reach the limit with small files).
fn read_index_within(index: &Path, folder_limit: u64) -> Result<Summary> {
    let shown = crate::text::one_line(&index.display().to_string());
    let bytes = crate::input::model_file(index, MAX_INDEX_BYTES, "model index")?;
    let map = super::weight_map::parse(super::json::strip_bom(&bytes))
        .map_err(|e| Error::usage(e.message(&shown)))?;
    let Some(map) = map else {
        return Err(Error::usage(format!(
            "{shown}: no \"weight_map\" object (tensor name -> shard file)"
        )));
    };
    if map.len() > MAX_TENSORS {
        return Err(Error::usage(format!(
            "{shown}: weight_map names {} tensors, over the {MAX_TENSORS} lab plan reads",
            map.len()
        )));
    }
    // Each shard with the index's tensors for it, in the order the index first names them.
    // The index lists a shard's tensors in runs, so the last shard is tried first.
    let mut slot: HashMap<&str, usize> = HashMap::new();
    let mut shards: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut last: Option<usize> = None;
    for (tensor, file) in &map {
        let Some(file) = file.as_deref() else {
            return Err(Error::usage(format!(
                "{shown}: weight_map entry \"{}\" is not a file name",
                crate::text::excerpt(tensor)
            )));
        };
        let at = match last.filter(|&i| shards[i].0 == file) {
            Some(i) => i,
            None => match slot.get(file) {
                Some(&i) => i,
                None => {
                    // A shard's name is checked where the index first names it, which is
                    // where a refusal of it names a tensor.
                    if let Some(problem) = shard_name_problem(file) {
                        return Err(Error::usage(format!(
                            "{shown}: shard \"{}\" of tensor \"{}\" {problem}",
                            crate::text::excerpt(file),
                            crate::text::excerpt(tensor)
                        )));
                    }
                    slot.insert(file, shards.len());
                    shards.push((file, Vec::new()));
                    shards.len() - 1
                }
            },
        };
        last = Some(at);
        shards[at].1.push(tensor);
    }
    if shards.is_empty() {
        return Err(Error::usage(format!("{shown}: weight_map is empty")));
    }
    let folder = index.parent().unwrap_or(Path::new("."));
    let folder_shown = crate::text::one_line(&folder.display().to_string());
    let listed: BTreeSet<&str> = shards.iter().map(|(file, _)| *file).collect();
    // Read in the order of their names, as the answers name the first shard that is wrong.
    let mut order: Vec<usize> = (0..shards.len()).collect();
    order.sort_unstable_by_key(|&i| shards[i].0);
    // Another checkpoint's file (Mistral's consolidated.safetensors, an adapter) is not read
    // by transformers through an index; a shard-like name or model.safetensors (which
    // transformers would load instead of the index) is.
    let unlisted: Vec<String> = safetensors_files(folder, &listed)?
        .into_iter()
        .filter(|name| name == "model.safetensors" || shard_like(name))
        .collect();
    if !unlisted.is_empty() {
        return Err(Error::usage(format!(
            "{folder_shown} holds {} that {shown} does not list: remove what does not belong or fix the index",
            names_shown(&unlisted)
        )));
    }
    let mut total = Summary::default();
    let mut header_bytes: u64 = 0;
    for at in order {
        let (file, tensors) = &shards[at];
        let path = folder.join(file);
        // A directory, a FIFO or a dangling link of that name is there: read_file says what
        // is wrong with it.
        if !present(&path)? {
            return Err(Error::usage(format!(
                "{shown} names shard \"{}\", which is not in {folder_shown}",
                crate::text::excerpt(file)
            )));
        }
        let share = tensors.iter().fold(HEADER_BYTES_PER_SHARD, |sum, t| {
            sum.saturating_add(t.len() as u64 + HEADER_BYTES_PER_TENSOR)
        });
        let left = folder_limit.saturating_sub(header_bytes);
        let (summary, mismatch) = read_file(&path, share.min(left), |h| Ok(mismatch(h, tensors)))
            .map_err(|e| {
            if let Error::Usage(m) = &e {
                if m.ends_with(OVER_BUDGET) {
                    return Error::usage(format!(
                        "{m}: the index puts {} tensors in it, which need at most {share} bytes, and the folder's headers may take {folder_limit} bytes in all ({header_bytes} read before it)",
                        tensors.len()
                    ));
                }
            }
            e
        })?;
        header_bytes += summary.header_bytes;
        match mismatch {
            None => {}
            Some(Mismatch::Missing(tensor)) => {
                return Err(Error::usage(format!(
                    "{shown} puts tensor \"{}\" in {}, whose header does not have it",
                    crate::text::excerpt(&tensor),
                    crate::text::excerpt(file)
                )));
            }
            Some(Mismatch::Extra(extra)) => {
                let elsewhere = match map
                    .iter()
                    .find(|(t, _)| *t == extra)
                    .and_then(|(_, f)| f.as_deref())
                {
                    Some(other) => format!("puts it in {}", crate::text::excerpt(other)),
                    None => "does not name it".to_string(),
                };
                return Err(Error::usage(format!(
                    "{} holds tensor \"{}\" but {shown} {elsewhere}",
                    crate::text::excerpt(file),
                    crate::text::excerpt(&extra)
                )));
            }
        }
        total.add(summary)?;
    }
    Ok(total)
}

/// How a shard's header disagrees with the tensors the index puts in it.
enum Mismatch {
    /// The first tensor (by name) the index puts there that the header lacks.
    Missing(String),
    /// The first tensor (by name) of the header that the index does not put there.
    Extra(String),
}

/// Compares a shard's header with the index's tensors for it. Names in a header are unique
/// (a repeated one is refused), and so are the index's, so the two sorted lists are equal
/// exactly when the sets are; both are usually in name order already, which the sort only
/// confirms.
fn mismatch(header: &super::header::Header, listed: &[&str]) -> Option<Mismatch> {
    if header.tensors.len() == listed.len() {
        let mut have: Vec<&str> = header.tensors.iter().map(|t| t.name.as_ref()).collect();
        let mut want = listed.to_vec();
        have.sort_unstable();
        want.sort_unstable();
        if have == want {
            return None;
        }
    }
    let names: HashSet<&str> = header.tensors.iter().map(|t| t.name.as_ref()).collect();
    if let Some(missing) = listed.iter().filter(|t| !names.contains(**t)).min() {
        return Some(Mismatch::Missing((*missing).to_string()));
    }
    let listed: HashSet<&str> = listed.iter().copied().collect();
    header
        .tensors
        .iter()
        .map(|t| t.name.as_ref())
        .filter(|n| !listed.contains(n))
        .min()
        .map(|n| Mismatch::Extra(n.to_string()))
}

/// How a refusal by [`read_file`] for a header over its budget ends.
const OVER_BUDGET: &str = "more than lab plan reads for it";

/// Refuses a path that is not a regular file (a FIFO would block `open`, a device never ends).
///
/// # Errors
/// [`Error::Usage`] (exit 2) naming the path; [`Error::Runtime`] when it cannot be inspected,
/// saying so when it is a symbolic link whose target cannot be reached (missing, a loop).
fn regular_file(path: &Path, shown: &str) -> Result<()> {
    let meta = std::fs::metadata(path).map_err(|e| {
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if link {
            Error::runtime(format!(
                "cannot read {shown}: a symbolic link whose target cannot be read: {e}"
            ))
        } else {
            Error::runtime(format!("cannot read {shown}: {e}"))
        }
    })?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "{shown} is not a regular file: point to the model's files themselves"
        )))
    }
}

/// Reads the header of one safetensors file, at most `max_header` bytes of it: its summary
/// and what `inspect` makes of its tensors (called once the header is read and checked).
///
/// # Errors
/// As [`parse_header`], prefixed with the file name; a header over `max_header` bytes
/// (checked before it is read); [`Error::Runtime`] when the file cannot be opened or read;
/// what `inspect` returns.
pub fn read_file<T>(
    path: &Path,
    max_header: u64,
    inspect: impl FnOnce(&super::header::Header) -> Result<T>,
) -> Result<(Summary, T)> {
    let shown = crate::text::one_line(&path.display().to_string());
    let cannot = |e: std::io::Error| Error::runtime(format!("cannot read {shown}: {e}"));
    regular_file(path, &shown)?;
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let file_len = file.metadata().map_err(cannot)?.len();
    let mut prefix = [0u8; 8];
    if file_len < 8 {
        return Err(Error::usage(format!(
            "{shown}: truncated safetensors file ({file_len} bytes; the 8-byte header length is missing)"
        )));
    }
    file.read_exact(&mut prefix).map_err(cannot)?;
    let n = u64::from_le_bytes(prefix);
    check_length(n, file_len).map_err(|e| Error::usage(format!("{shown}: {e}")))?;
    if n > max_header {
        return Err(Error::usage(format!(
            "{shown}: safetensors header of {n} bytes, {OVER_BUDGET}"
        )));
    }
    let header = crate::input::prefix(&mut file, n).map_err(cannot)?;
    if header.len() as u64 != n {
        return Err(Error::usage(format!(
            "{shown}: truncated safetensors header ({} of {n} bytes)",
            header.len()
        )));
    }
    let read = super::header::parse(&header, file_len - 8 - n)
        .map_err(|e| Error::usage(format!("{shown}: {e}")))?;
    let found = inspect(&read)?;
    let mut summary = Summary::from(read.summary);
    summary.header_bytes = n;
    summary.files.push(
        path.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    Ok((summary, found))
}

/// Checks a header length `n` against [`MAX_HEADER_BYTES`] and the file length.
///
/// # Errors
/// A message saying which limit `n` passes.
pub fn check_length(n: u64, file_len: u64) -> std::result::Result<(), String> {
    if n > MAX_HEADER_BYTES {
        return Err(format!(
            "safetensors header of {n} bytes is over the {MAX_HEADER_BYTES}-byte limit (not a safetensors file, or a corrupt one)"
        ));
    }
    if n < 2 || n > file_len.saturating_sub(8) {
        return Err(format!(
            "safetensors header length {n} does not fit the file ({file_len} bytes): truncated or not a safetensors file"
        ));
    }
    Ok(())
}

/// Parses header bytes (the JSON after the 8-byte length) for a data section of
/// `data_len` bytes: its summary and its tensor names ([`super::header::parse`] keeps each
/// tensor's dtype, shape and offsets too).
///
/// # Errors
/// A one-line message naming the tensor and the problem: a key given twice at any depth
/// ([`super::json`]), text that is not one JSON object, an entry that is not
/// `{"dtype", "shape", "data_offsets"}` with a known dtype, whole-number dimensions whose
/// product fits 64 bits and `end - begin` equal to the elements times the dtype's width,
/// `__metadata__` neither null nor an object of strings, totals past 64 bits; then the ranges
/// not tiling the data as the reference library requires (no overlap, no gap, no bytes past
/// the last tensor).
pub fn parse_header(
    header: &[u8],
    data_len: u64,
) -> std::result::Result<(Summary, BTreeSet<String>), String> {
    let read = super::header::parse(header, data_len)?;
    let names = read
        .tensors
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    Ok((Summary::from(read.summary), names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file_bytes(header: &str, data_len: usize) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend(std::iter::repeat_n(0u8, data_len));
        out
    }

    #[test]
    fn counts_elements_and_bytes_per_dtype() {
        let header = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[4],"data_offsets":[12,28]},"c":{"dtype":"F4","shape":[2],"data_offsets":[28,29]}}"#;
        let (s, names) = parse_header(header.as_bytes(), 29).unwrap();
        assert_eq!(s.tensors, 3);
        assert_eq!(s.elements, 12);
        assert_eq!(s.data_bytes, 29);
        assert_eq!(s.elements_by_dtype["BF16"], 6);
        assert_eq!(s.main_dtype(), Some("BF16"));
        assert_eq!(names.len(), 3);
    }

    #[test]
    fn malformed_headers_are_one_line_errors() {
        let cases = [
            (r#"[1]"#, "not a JSON object"),
            (r#""a""#, "not a JSON object"),
            (r#"{"a":1"#, "not valid JSON"),
            (
                r#"{"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
                "\"a\" is listed twice",
            ),
            (r#"{"__metadata__":{},"__metadata__":{}}"#, "listed twice"),
            (
                r#"{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}"#,
                "unknown dtype",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,1]}}"#,
                "1 bytes of data for 2",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,200]}}"#,
                "outside",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}"#,
                "overlap",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,2]}}"#,
                "whole numbers",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,2]}}"#,
                "overflows",
            ),
            (r#"{"__metadata__":{"x":1}}"#, "object of strings"),
            (
                r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}}"#,
                "[begin, end]",
            ),
        ];
        for (header, needle) in cases {
            let e = parse_header(header.as_bytes(), 10).unwrap_err();
            assert!(e.contains(needle), "{header}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    /// The layout class of the reference library: every way the ranges can fail to tile the
    /// data is refused, every tiling accepted (in any key order, empty tensors anywhere).
    #[test]
    fn ranges_must_tile_the_data_as_the_reference_requires() {
        let t = |name: &str, begin: u64, end: u64| {
            format!(
                r#""{name}":{{"dtype":"U8","shape":[{}],"data_offsets":[{begin},{end}]}}"#,
                end - begin
            )
        };
        let refused = [
            (vec![t("a", 1, 3)], 3, "1 unused bytes before tensor \"a\""),
            (
                vec![t("a", 0, 2), t("b", 4, 6)],
                6,
                "2 unused bytes before tensor \"b\"",
            ),
            (
                vec![t("a", 0, 2)],
                5,
                "3 bytes of data past the last tensor",
            ),
            (vec![], 1, "1 bytes of data past the last tensor"),
            (
                vec![t("a", 0, 4), t("b", 2, 6)],
                6,
                "\"a\" and \"b\" overlap",
            ),
            (vec![t("b", 0, 4), t("a", 0, 4)], 8, "overlap"),
        ];
        for (entries, data_len, needle) in refused {
            let header = format!("{{{}}}", entries.join(","));
            let e = parse_header(header.as_bytes(), data_len).unwrap_err();
            assert!(e.contains(needle), "{header}: {e}");
        }
        let accepted = [
            (vec![], 0),
            (vec![t("z", 0, 2), t("a", 2, 5)], 5),
            (vec![t("b", 3, 5), t("a", 0, 3)], 5),
            (
                vec![t("e", 0, 0), t("f", 0, 0), t("a", 0, 1), t("g", 1, 1)],
                1,
            ),
        ];
        for (entries, data_len) in accepted {
            let header = format!("{{{}}}", entries.join(","));
            let (s, _) = parse_header(header.as_bytes(), data_len).unwrap();
            assert_eq!(s.data_bytes, data_len, "{header}");
        }
    }

    /// The folder's header budget counts every shard: two shards within their own shares
    /// but over the folder's limit together are refused at the second, before it is read.
    #[test]
    fn the_folder_limit_spans_the_shards() {
        let dir = tempfile::tempdir().unwrap();
        let one = |name: &str| {
            file_bytes(
                &format!(r#"{{"{name}":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#),
                1,
            )
        };
        let a = one("a");
        std::fs::write(dir.path().join("a.safetensors"), &a).unwrap();
        std::fs::write(dir.path().join("b.safetensors"), one("b")).unwrap();
        let index = dir.path().join("model.safetensors.index.json");
        std::fs::write(
            &index,
            r#"{"weight_map":{"a":"a.safetensors","b":"b.safetensors"}}"#,
        )
        .unwrap();
        let header = a.len() as u64 - 9;
        assert_eq!(
            read_index_within(&index, 2 * header).unwrap().header_bytes,
            2 * header
        );
        let e = read_index_within(&index, 2 * header - 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.safetensors: safetensors header of"), "{e}");
        assert!(e.contains(&format!("({header} read before it)")), "{e}");
    }

    /// Every kind of shard name that is not a plain `.safetensors` file next to the index.
    #[test]
    fn shard_names_are_plain_safetensors_file_names() {
        let bad = [
            ("", "empty"),
            ("a\0.safetensors", "NUL"),
            ("\0", "NUL"),
            ("/etc/x.safetensors", "a path"),
            ("/", "a path"),
            ("sub/x.safetensors", "a path"),
            ("..\\x.safetensors", "a path"),
            ("C:\\x.safetensors", "a path"),
            ("../x.safetensors", "a path"),
            ("..", "not a file name"),
            (".", "not a file name"),
            (".safetensors", "not a .safetensors"),
            ("config.json", "not a .safetensors"),
            ("x.safetensors.index.json", "not a .safetensors"),
        ];
        for (name, needle) in bad {
            let problem = shard_name_problem(name).unwrap_or_default();
            assert!(problem.contains(needle), "{name:?}: {problem:?}");
        }
        for good in [
            "model-00001-of-00002.safetensors",
            "é.safetensors",
            "..x.safetensors",
        ] {
            assert_eq!(shard_name_problem(good), None, "{good}");
        }
        for like in ["model-00001-of-00002.safetensors", "x-1-of-1.safetensors"] {
            assert!(shard_like(like), "{like}");
        }
        for unlike in [
            "consolidated.safetensors",
            "adapter_model.safetensors",
            "-1-of-2.safetensors",
            "model-a-of-2.safetensors",
            "model-1-of-.safetensors",
            "model-00001-of-00002.bin",
        ] {
            assert!(!shard_like(unlike), "{unlike}");
        }
    }

    /// `__metadata__` as the reference reads it: absent, null or an object of strings.
    #[test]
    fn metadata_may_be_null() {
        for metadata in [r#""__metadata__":null,"#, r#""__metadata__":{},"#, ""] {
            let header =
                format!(r#"{{{metadata}"a":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#);
            assert_eq!(
                parse_header(header.as_bytes(), 1).unwrap().0.tensors,
                1,
                "{header}"
            );
        }
        for metadata in ["[]", "1", r#""pt""#, r#"{"a":null}"#] {
            let header = format!(r#"{{"__metadata__":{metadata}}}"#);
            let e = parse_header(header.as_bytes(), 0).unwrap_err();
            assert!(e.contains("object of strings"), "{header}: {e}");
        }
    }

    #[test]
    fn lengths_past_the_file_or_the_limit_are_refused() {
        assert!(check_length(100, 50).unwrap_err().contains("does not fit"));
        assert!(check_length(MAX_HEADER_BYTES + 1, u64::MAX)
            .unwrap_err()
            .contains("limit"));
        assert!(check_length(0, 100).is_err());
        assert!(check_length(10, 18).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        let mut bytes = file_bytes(
            r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}"#,
            4,
        );
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            read_file(&path, MAX_HEADER_BYTES, |_| Ok(()))
                .unwrap()
                .0
                .elements,
            4
        );
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&path, &bytes).unwrap();
        let e = read_file(&path, MAX_HEADER_BYTES, |_| Ok(())).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        std::fs::write(&path, [1u8, 2, 3]).unwrap();
        assert!(read_file(&path, MAX_HEADER_BYTES, |_| Ok(()))
            .unwrap_err()
            .to_string()
            .contains("truncated"));
    }

    proptest! {
        // Whatever the bytes, the reader answers Ok or one line, never panics.
        #[test]
        fn fuzz_parse_header(bytes in proptest::collection::vec(any::<u8>(), 0..400), data_len in 0u64..1_000) {
            if let Err(e) = parse_header(&bytes, data_len) {
                prop_assert!(!e.contains('\n'));
            }
        }

        // Structured fuzz: valid-looking entries with random dtypes, shapes and offsets.
        #[test]
        fn fuzz_structured(entries in proptest::collection::vec(
            ("[A-Z0-9_]{1,8}", proptest::collection::vec(0u64..5_000, 0..4), 0u64..10_000, 0u64..10_000), 0..6),
            data_len in 0u64..20_000) {
            let mut map = serde_json::Map::new();
            for (i, (dtype, shape, a, b)) in entries.iter().enumerate() {
                map.insert(format!("t{i}"), serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [a, b]}));
            }
            let text = serde_json::to_string(&map).unwrap();
            match parse_header(text.as_bytes(), data_len) {
                Ok((s, _)) => {
                    prop_assert_eq!(s.data_bytes, data_len);
                    prop_assert_eq!(s.tensors as usize, entries.len());
                }
                Err(e) => prop_assert!(!e.contains('\n')),
            }
        }

        // The index against its shards' headers, over interleaved index orders, shuffled
        // headers and one fault (a tensor dropped from its header, or written into another
        // shard's too): accepted exactly when every header names the tensors the index puts
        // there; otherwise the first shard by name that differs is named, with its first
        // missing tensor by name, else its first extra one, as the set reader answered.
        #[test]
        fn index_and_headers_agree_as_sets(
            shard_of in proptest::collection::vec(0usize..3, 1..10),
            seed in any::<u64>(),
            fault in 0usize..3,
            which in any::<prop::sample::Index>(),
        ) {
            use std::collections::BTreeMap;
            let n = shard_of.len();
            let name = |i: usize| format!("t{i:02}");
            let file = |s: usize| format!("s{s}.safetensors");
            // A fixed shuffle of 0..n from the seed (index order and header orders).
            let shuffled = |salt: u64| {
                let mut v: Vec<usize> = (0..n).collect();
                v.sort_by_key(|i| (*i as u64 + 1).wrapping_mul(seed ^ salt).rotate_left(17));
                v
            };
            let mut headers: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for i in shuffled(1) {
                headers.entry(shard_of[i]).or_default().push(i);
            }
            let k = which.index(n);
            match fault {
                1 => headers.get_mut(&shard_of[k]).unwrap().retain(|&i| i != k),
                2 => headers.entry((shard_of[k] + 1) % 3).or_default().push(k),
                _ => {}
            }
            let dir = tempfile::tempdir().unwrap();
            for (s, tensors) in &headers {
                let entries: Vec<String> = tensors.iter().enumerate().map(|(at, i)| format!(
                    r#""{}":{{"dtype":"U8","shape":[1],"data_offsets":[{at},{}]}}"#, name(*i), at + 1
                )).collect();
                let header = format!("{{{}}}", entries.join(","));
                std::fs::write(dir.path().join(file(*s)), file_bytes(&header, tensors.len())).unwrap();
            }
            // A shard the index names whose header lost its only tensor is still a file.
            for s in shard_of.iter() {
                if !dir.path().join(file(*s)).exists() {
                    std::fs::write(dir.path().join(file(*s)), file_bytes("{}", 0)).unwrap();
                }
            }
            let map: Vec<String> = shuffled(2).iter().map(|&i| format!(r#""{}":"{}""#, name(i), file(shard_of[i]))).collect();
            let index = dir.path().join("model.safetensors.index.json");
            std::fs::write(&index, format!(r#"{{"weight_map":{{{}}}}}"#, map.join(","))).unwrap();
            // The answer of sets: the index's shards by name, each one's tensors as a set.
            let mut listed: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
            for (i, s) in shard_of.iter().enumerate() {
                listed.entry(*s).or_default().insert(i);
            }
            let expected = listed.iter().find_map(|(s, want)| {
                let have: BTreeSet<usize> = headers.get(s).into_iter().flatten().copied().collect();
                if let Some(m) = want.iter().find(|i| !have.contains(i)) {
                    return Some(format!("puts tensor \"{}\" in {}, whose header does not have it", name(*m), file(*s)));
                }
                have.iter().find(|i| !want.contains(i)).map(|x| format!(
                    "{} holds tensor \"{}\" but {} puts it in {}", file(*s), name(*x), index.display(), file(shard_of[*x])
                ))
            });
            match (read_index(&index), expected) {
                (Ok(summary), None) => prop_assert_eq!(summary.tensors as usize, n),
                (Err(e), Some(want)) => prop_assert!(e.to_string().contains(&want), "{} / {}", e, want),
                (got, want) => prop_assert!(false, "{:?} / {:?}", got.map(|s| s.tensors), want),
            }
        }

        // Whole files with a random length prefix: never a panic, never reading past the end.
        #[test]
        fn fuzz_files(prefix in any::<u64>(), body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("x.safetensors");
            let mut bytes = prefix.to_le_bytes().to_vec();
            bytes.extend(body);
            std::fs::write(&path, &bytes).unwrap();
            if let Err(e) = read_file(&path, MAX_HEADER_BYTES, |_| Ok(())) {
                prop_assert_eq!(e.exit_code(), 2);
            }
        }
    }
}
