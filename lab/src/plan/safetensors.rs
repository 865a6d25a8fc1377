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
//! data; no two ranges overlap; no key is given twice ([`super::json`]). Shard names must be
//! plain file names next to the index, and each must exist; a tensor named in two shards is
//! refused. A model file that is present but cannot be read (a dangling symbolic link, a
//! link loop, no permission) is exit 1, never skipped.

use crate::{Error, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

/// Largest header accepted, in bytes: 100,000,000, the limit of the reference `safetensors`
/// library (`MAX_HEADER_SIZE`).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Largest index file read (`model.safetensors.index.json`), in bytes (64 MiB).
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Width in bits of a safetensors dtype, or `None` when unknown.
///
/// Known: `BOOL`, `U8`, `I8`, `F8_E4M3`, `F8_E5M2`, `F8_E8M0` (8); `I16`, `U16`, `F16`,
/// `BF16` (16); `I32`, `U32`, `F32` (32); `I64`, `U64`, `F64` (64); `F4` (4); `F6_E2M3`,
/// `F6_E3M2` (6).
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" | "F8_E8M0" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" => 64,
        _ => return None,
    })
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

/// Reads the safetensors header(s) of the model folder `folder`, if any: the index and its
/// shards when `model.safetensors.index.json` is there, else `model.safetensors`, else
/// `None`. A name counts as there when the folder has an entry for it, so that a symbolic
/// link whose target is missing (an interrupted Hugging Face download) is reported, not
/// skipped.
///
/// # Errors
/// [`Error::Usage`] for any malformed header or index (see the module documentation);
/// [`Error::Runtime`] for a file that is there but cannot be read.
pub fn read_folder(folder: &Path) -> Result<Option<Summary>> {
    let index = folder.join("model.safetensors.index.json");
    if present(&index)? {
        return read_index(&index).map(Some);
    }
    let single = folder.join("model.safetensors");
    if present(&single)? {
        let (summary, _) = read_file(&single)?;
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

/// Reads an index and the header of every shard it names.
///
/// # Errors
/// As [`read_folder`]; also a shard name with a path in it, a missing shard, a tensor listed
/// in the index but absent from its shard, and a tensor found in two shards.
pub fn read_index(index: &Path) -> Result<Summary> {
    let shown = crate::text::one_line(&index.display().to_string());
    let bytes = crate::input::model_file(index, MAX_INDEX_BYTES, "model index")?;
    let value = super::json::parse(super::json::strip_bom(&bytes))
        .map_err(|e| Error::usage(e.message(&shown)))?;
    let Some(Value::Object(map)) = value.get("weight_map") else {
        return Err(Error::usage(format!(
            "{shown}: no \"weight_map\" object (tensor name -> shard file)"
        )));
    };
    let mut shards: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (tensor, file) in map {
        let Some(file) = file.as_str() else {
            return Err(Error::usage(format!(
                "{shown}: weight_map entry \"{}\" is not a file name",
                crate::text::excerpt(tensor)
            )));
        };
        if file.is_empty() || file.contains(['/', '\\']) || file == ".." || file == "." {
            return Err(Error::usage(format!(
                "{shown}: shard \"{}\" is not a plain file name next to the index",
                crate::text::excerpt(file)
            )));
        }
        shards.entry(file).or_default().insert(tensor);
    }
    if shards.is_empty() {
        return Err(Error::usage(format!("{shown}: weight_map is empty")));
    }
    let folder = index.parent().unwrap_or(Path::new("."));
    let mut total = Summary::default();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (file, listed) in shards {
        let path = folder.join(file);
        // A directory, a FIFO or a dangling link of that name is there: read_file says what
        // is wrong with it.
        if !present(&path)? {
            return Err(Error::usage(format!(
                "{shown} names shard \"{}\", which is not in {}",
                crate::text::excerpt(file),
                crate::text::one_line(&folder.display().to_string())
            )));
        }
        let (summary, names) = read_file(&path)?;
        for tensor in &listed {
            if !names.contains(*tensor) {
                return Err(Error::usage(format!(
                    "{shown} puts tensor \"{}\" in {}, whose header does not have it",
                    crate::text::excerpt(tensor),
                    crate::text::excerpt(file)
                )));
            }
        }
        for name in names {
            if let Some(first) = seen.insert(name.clone(), file.to_string()) {
                return Err(Error::usage(format!(
                    "tensor \"{}\" is in two shards: {} and {}",
                    crate::text::excerpt(&name),
                    crate::text::excerpt(&first),
                    crate::text::excerpt(file)
                )));
            }
        }
        total.add(summary)?;
    }
    Ok(total)
}

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

/// Reads the header of one safetensors file: its summary and its tensor names.
///
/// # Errors
/// As [`parse_header`], prefixed with the file name; [`Error::Runtime`] when the file cannot
/// be opened or read.
pub fn read_file(path: &Path) -> Result<(Summary, BTreeSet<String>)> {
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
    let header = crate::input::prefix(&mut file, n).map_err(cannot)?;
    if header.len() as u64 != n {
        return Err(Error::usage(format!(
            "{shown}: truncated safetensors header ({} of {n} bytes)",
            header.len()
        )));
    }
    let (mut summary, names) = parse_header(&header, file_len - 8 - n)
        .map_err(|e| Error::usage(format!("{shown}: {e}")))?;
    summary.files.push(
        path.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    Ok((summary, names))
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
/// `data_len` bytes.
///
/// # Errors
/// A one-line message naming the tensor and the problem.
pub fn parse_header(
    header: &[u8],
    data_len: u64,
) -> std::result::Result<(Summary, BTreeSet<String>), String> {
    // JSON readers keep the last of two equal keys; a header naming a tensor twice is
    // ambiguous, so it is refused rather than silently read one way (super::json).
    let value = super::json::parse(header).map_err(|e| match e {
        super::json::Problem::Duplicate { key, parent: None } => format!(
            "tensor \"{}\" is listed twice in the safetensors header",
            crate::text::excerpt(&key)
        ),
        nested @ super::json::Problem::Duplicate { .. } => {
            format!("{} in the safetensors header", nested.describe())
        }
        invalid => format!("safetensors header is {}", invalid.describe()),
    })?;
    let Value::Object(map) = value else {
        return Err("safetensors header is not a JSON object".to_string());
    };
    let mut summary = Summary::default();
    let mut names = BTreeSet::new();
    let mut ranges: Vec<(u64, u64, &str)> = Vec::new();
    for (name, entry) in &map {
        if name == "__metadata__" {
            let ok = entry
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string));
            if !ok {
                return Err("__metadata__ must be an object of strings".to_string());
            }
            continue;
        }
        let shown = crate::text::excerpt(name);
        let bad = |what: &str| format!("tensor \"{shown}\": {what}");
        let Some(entry) = entry.as_object() else {
            return Err(bad("entry is not an object"));
        };
        let dtype = entry
            .get("dtype")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no dtype"))?;
        let bits = dtype_bits(dtype).ok_or_else(|| {
            bad(&format!(
                "unknown dtype \"{}\"",
                crate::text::excerpt(dtype)
            ))
        })?;
        let shape = entry
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no shape list"))?;
        let mut elements: u64 = 1;
        for dim in shape {
            let dim = dim
                .as_u64()
                .ok_or_else(|| bad("shape holds something other than whole numbers"))?;
            elements = elements
                .checked_mul(dim)
                .ok_or_else(|| bad("shape overflows 64 bits"))?;
        }
        let offsets = entry
            .get("data_offsets")
            .and_then(Value::as_array)
            .filter(|o| o.len() == 2)
            .ok_or_else(|| bad("data_offsets must be [begin, end]"))?;
        let (Some(begin), Some(end)) = (offsets[0].as_u64(), offsets[1].as_u64()) else {
            return Err(bad("data_offsets must be whole numbers"));
        };
        if end < begin || end > data_len {
            return Err(bad(&format!(
                "data_offsets [{begin}, {end}] lie outside the {data_len} bytes of data"
            )));
        }
        let want = u128::from(elements) * u128::from(bits);
        if want % 8 != 0 || u128::from(end - begin) != want / 8 {
            return Err(bad(&format!(
                "{} bytes of data for {elements} {dtype} elements",
                end - begin
            )));
        }
        ranges.push((begin, end, name));
        names.insert(name.clone());
        summary.tensors += 1;
        summary.elements = summary
            .elements
            .checked_add(elements)
            .ok_or_else(|| "the element count overflows 64 bits".to_string())?;
        summary.data_bytes = summary
            .data_bytes
            .checked_add(end - begin)
            .ok_or_else(|| "the data size overflows 64 bits".to_string())?;
        *summary
            .elements_by_dtype
            .entry(dtype.to_string())
            .or_default() += elements;
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, end_a, a), (begin_b, _, b)) = (pair[0], pair[1]);
        if begin_b < end_a {
            return Err(format!(
                "tensors \"{}\" and \"{}\" overlap in the data (corrupt header)",
                crate::text::excerpt(a),
                crate::text::excerpt(b)
            ));
        }
    }
    Ok((summary, names))
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
        assert_eq!(read_file(&path).unwrap().0.elements, 4);
        bytes.truncate(bytes.len() - 10);
        std::fs::write(&path, &bytes).unwrap();
        let e = read_file(&path).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        std::fs::write(&path, [1u8, 2, 3]).unwrap();
        assert!(read_file(&path)
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
                    prop_assert!(s.data_bytes <= data_len);
                    prop_assert_eq!(s.tensors as usize, entries.len());
                }
                Err(e) => prop_assert!(!e.contains('\n')),
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
            if let Err(e) = read_file(&path) {
                prop_assert_eq!(e.exit_code(), 2);
            }
        }
    }
}
