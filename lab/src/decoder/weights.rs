//! Where each tensor of a [`super::DecoderSpec`] lies in a model folder's safetensors files,
//! so that the worker can read them one at a time, in materialisation order.
//!
//! The headers are first checked by [`crate::plan::safetensors::read_folder`] (the same
//! checks as `lab plan`); this module then reads each file's header again for the byte range
//! of every tensor and holds it against the spec: a missing tensor or a shape other than the
//! config's is refused by name (exit 2), before the worker starts.
//!
//! A spec tensor is found under its `transformers` name or, where `transformers` 5 converts
//! the checkpoint's tensors at load (`conversion_mapping.py`, 5.17), as the checkpoint's
//! pieces laid one after the other ([`checkpoint_layout`]): Mixtral's stacked experts from
//! the per-expert `block_sparse_moe.experts.{e}.w1/w3/w2.weight` of every released Mixtral
//! checkpoint (`mistralai/Mixtral-8x7B-v0.1`'s index names them so).

use super::DecoderSpec;
use crate::plan::safetensors;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// One contiguous byte range of a safetensors file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// Index into [`Sources::files`].
    pub file: usize,
    /// First byte of the data in the file (header included in the offset).
    pub begin: u64,
    /// One past the last byte.
    pub end: u64,
}

/// One tensor to read: its pieces, whose bytes laid one after the other are the tensor's
/// row-major data (one piece unless the checkpoint splits the tensor), and the stored dtype
/// they share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSource {
    /// In order.
    pub pieces: Vec<Piece>,
    /// Safetensors dtype (`BF16`, `F16`, `F32`).
    pub dtype: String,
}

impl Sources {
    /// Reads spec tensor `i`'s bytes into `host` (resized to them), opening files into `open`
    /// (one slot per [`Self::files`] entry) on first use.
    ///
    /// # Errors
    /// [`Error::Runtime`] when a file cannot be opened or read, or the index is out of range.
    pub fn read(
        &self,
        i: usize,
        open: &mut [Option<std::fs::File>],
        host: &mut Vec<u8>,
    ) -> Result<()> {
        use std::io::{Seek as _, SeekFrom};
        let src = self
            .tensors
            .get(i)
            .ok_or_else(|| Error::runtime(format!("no source for tensor {i}")))?;
        host.clear();
        for piece in &src.pieces {
            let path = self
                .files
                .get(piece.file)
                .ok_or_else(|| Error::runtime(format!("no file {}", piece.file)))?;
            let shown = crate::text::one_line(&path.display().to_string());
            let cannot = |e: std::io::Error| Error::runtime(format!("cannot read {shown}: {e}"));
            let slot = open
                .get_mut(piece.file)
                .ok_or_else(|| Error::runtime(format!("no file slot {}", piece.file)))?;
            if slot.is_none() {
                *slot = Some(std::fs::File::open(path).map_err(cannot)?);
            }
            let Some(file) = slot.as_mut() else {
                return Err(Error::runtime(format!("{shown} is not open")));
            };
            let len = usize::try_from(piece.end.saturating_sub(piece.begin))
                .map_err(|e| Error::runtime(e.to_string()))?;
            let at = host.len();
            host.resize(at + len, 0);
            file.seek(SeekFrom::Start(piece.begin))
                .and_then(|_| file.read_exact(&mut host[at..]))
                .map_err(cannot)?;
        }
        Ok(())
    }
}

/// Where `transformers` 5 finds a tensor it materialises as `name` of `shape` in a
/// checkpoint that stores it otherwise: the checkpoint's tensors (name, shape) whose rows,
/// laid one after the other, are that tensor; `None` when the checkpoint stores it as is.
///
/// Mixtral (`conversion_mapping.py`, transformers 5.17): `block_sparse_moe.gate` is renamed
/// `mlp.gate`; `mlp.experts.gate_up_proj` `[E, 2I, H]` is `MergeModulelist(dim=0)` of the
/// experts' `w1` and of their `w3`, then `Concatenate(dim=1)`: per expert e, `w1` then `w3`
/// (`[I, H]` each); `mlp.experts.down_proj` `[E, H, I]` is the experts' `w2` merged.
pub fn checkpoint_layout(name: &str, shape: &[u64]) -> Option<Vec<(String, Vec<u64>)>> {
    let per_expert = |prefix: &str, members: &[&str], rows: u64, cols: u64| {
        let experts = shape.first().copied().unwrap_or(0);
        (0..experts)
            .flat_map(|e| {
                members.iter().map(move |w| {
                    (
                        format!("{prefix}.block_sparse_moe.experts.{e}.{w}.weight"),
                        vec![rows, cols],
                    )
                })
            })
            .collect()
    };
    if let Some(prefix) = name.strip_suffix(".mlp.gate.weight") {
        return Some(vec![(
            format!("{prefix}.block_sparse_moe.gate.weight"),
            shape.to_vec(),
        )]);
    }
    if let (Some(prefix), [_, two_i, h]) = (name.strip_suffix(".mlp.experts.gate_up_proj"), shape) {
        return Some(per_expert(prefix, &["w1", "w3"], two_i / 2, *h));
    }
    if let (Some(prefix), [_, h, i]) = (name.strip_suffix(".mlp.experts.down_proj"), shape) {
        return Some(per_expert(prefix, &["w2"], *h, *i));
    }
    None
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
        // The tensor as `transformers` names it, else the checkpoint's layout of it.
        let direct = vec![(t.name.clone(), t.shape.clone())];
        let converted = checkpoint_layout(&t.name, &t.shape);
        let layout = if found.contains_key(&t.name) {
            direct
        } else {
            converted.unwrap_or(direct)
        };
        let mut pieces = Vec::with_capacity(layout.len());
        let mut stored: Option<&str> = None;
        for (name, want) in &layout {
            let Some((file, begin, end, dtype, shape)) = found.get(name) else {
                let also = if *name == t.name {
                    String::new()
                } else {
                    format!(" (nor \"{}\" as transformers names it)", t.name)
                };
                return Err(Error::usage(format!(
                    "{shown}: the safetensors have no tensor \"{name}\"{also}, which config.json implies (another architecture, or an incomplete download?)"
                )));
            };
            if shape != want {
                return Err(Error::usage(format!(
                    "{shown}: tensor \"{name}\" has shape {shape:?} in the safetensors but {want:?} by config.json"
                )));
            }
            if !READABLE_DTYPES.contains(&dtype.as_str()) {
                return Err(Error::usage(format!(
                    "{shown}: tensor \"{name}\" is stored as {dtype}; lab measure --model reads {} only",
                    READABLE_DTYPES.join(", ")
                )));
            }
            if let Some(first) = stored.filter(|d| *d != dtype) {
                return Err(Error::usage(format!(
                    "{shown}: tensor \"{name}\" is stored as {dtype} but the other parts of \"{}\" as {first}",
                    t.name
                )));
            }
            stored = Some(dtype);
            pieces.push(Piece {
                file: *file,
                begin: *begin,
                end: *end,
            });
        }
        tensors.push(TensorSource {
            pieces,
            dtype: stored.unwrap_or_default().to_owned(),
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
