//! Where each tensor of a [`super::DecoderSpec`] lies in a model folder's safetensors files,
//! so that the worker can read them one at a time, in materialisation order.
//!
//! The headers are first checked by [`crate::plan::safetensors::read_folder`] (the same
//! checks as `lab plan`); this module then reads each file's header again for the byte range
//! of every tensor and holds it against the spec: a missing tensor or a shape other than the
//! config's is refused by name (exit 2), before the worker starts.

use super::DecoderSpec;
use crate::plan::safetensors;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// One tensor to read: file, absolute byte range, stored dtype.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSource {
    /// Index into [`Sources::files`].
    pub file: usize,
    /// First byte of the data in the file (header included in the offset).
    pub begin: u64,
    /// One past the last byte.
    pub end: u64,
    /// Safetensors dtype (`BF16`, `F16`, `F32`).
    pub dtype: String,
}

/// The files and, per spec tensor (same order), where its data lies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sources {
    /// The safetensors files read.
    pub files: Vec<PathBuf>,
    /// One per [`DecoderSpec::tensors`] entry.
    pub tensors: Vec<TensorSource>,
}

/// Stored dtypes the worker converts from.
pub const READABLE_DTYPES: [&str; 3] = ["BF16", "F16", "F32"];

/// The sources of `spec`'s tensors in `folder` (`model.safetensors`, or the shards of
/// `model.safetensors.index.json`).
///
/// # Errors
/// [`Error::Usage`] when the folder has no safetensors (the message points to
/// `--random-weights`), a header is malformed, a tensor of the spec is missing or has another
/// shape, or a dtype is not one of [`READABLE_DTYPES`]; [`Error::Runtime`] when a file cannot
/// be read.
pub fn locate(folder: &Path, spec: &DecoderSpec) -> Result<Sources> {
    let shown = crate::text::one_line(&folder.display().to_string());
    if safetensors::read_folder(folder)?.is_none() {
        return Err(Error::usage(format!(
            "{shown} has no model.safetensors nor model.safetensors.index.json: download the weights, or measure with --random-weights (the config alone is enough)"
        )));
    }
    let index = folder.join("model.safetensors.index.json");
    let names: Vec<String> = if safetensors::present(&index)? {
        let text = crate::input::model_text(&index, safetensors::MAX_INDEX_BYTES, "model index")?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| Error::usage(format!("{}: {e}", index.display())))?;
        let mut files: Vec<String> = value
            .get("weight_map")
            .and_then(Value::as_object)
            .map(|m| {
                m.values()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files.dedup();
        files
    } else {
        vec!["model.safetensors".to_owned()]
    };
    let mut found: BTreeMap<String, (usize, u64, u64, String, Vec<u64>)> = BTreeMap::new();
    let mut files = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let path = folder.join(name);
        for (tensor, entry) in header_entries(&path)? {
            found.insert(tensor, (i, entry.0, entry.1, entry.2, entry.3));
        }
        files.push(path);
    }
    let mut tensors = Vec::with_capacity(spec.tensors.len());
    for t in &spec.tensors {
        let Some((file, begin, end, dtype, shape)) = found.remove(&t.name) else {
            return Err(Error::usage(format!(
                "{shown}: the safetensors have no tensor \"{}\", which config.json implies (another architecture, or an incomplete download?)",
                t.name
            )));
        };
        if shape != t.shape {
            return Err(Error::usage(format!(
                "{shown}: tensor \"{}\" has shape {shape:?} in the safetensors but {:?} by config.json",
                t.name, t.shape
            )));
        }
        if !READABLE_DTYPES.contains(&dtype.as_str()) {
            return Err(Error::usage(format!(
                "{shown}: tensor \"{}\" is stored as {dtype}; lab measure --model reads {} only",
                t.name,
                READABLE_DTYPES.join(", ")
            )));
        }
        tensors.push(TensorSource {
            file,
            begin,
            end,
            dtype,
        });
    }
    Ok(Sources { files, tensors })
}

type Entry = (u64, u64, String, Vec<u64>);

/// Name -> (absolute begin, absolute end, dtype, shape) for one file whose header
/// [`safetensors::read_folder`] already checked.
fn header_entries(path: &Path) -> Result<Vec<(String, Entry)>> {
    let shown = crate::text::one_line(&path.display().to_string());
    let cannot = |e: std::io::Error| Error::runtime(format!("cannot read {shown}: {e}"));
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let mut prefix = [0u8; 8];
    file.read_exact(&mut prefix).map_err(cannot)?;
    let n = u64::from_le_bytes(prefix);
    let mut header = Vec::new();
    file.take(n.min(safetensors::MAX_HEADER_BYTES))
        .read_to_end(&mut header)
        .map_err(cannot)?;
    let value: Value = serde_json::from_slice(&header)
        .map_err(|e| Error::usage(format!("{shown}: header is not JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(Error::usage(format!(
            "{shown}: header is not a JSON object"
        )));
    };
    let base = 8 + n;
    let mut out = Vec::new();
    for (name, entry) in map {
        if name == "__metadata__" {
            continue;
        }
        let offsets: Vec<u64> = entry
            .get("data_offsets")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let shape: Vec<u64> = entry
            .get("shape")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let dtype = entry
            .get("dtype")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let [begin, end] = offsets[..] {
            out.push((name, (base + begin, base + end, dtype, shape)));
        }
    }
    Ok(out)
}
