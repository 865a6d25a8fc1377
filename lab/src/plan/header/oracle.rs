//! The tree reader that [`super::parse`] replaced, kept as the test oracle: every header
//! is parsed into a `serde_json::Value` first, then checked entry by entry.

use super::{Dtype, Totals as Summary};
use serde_json::Value;
use std::collections::BTreeSet;

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
    let value = crate::plan::json::parse(header).map_err(|e| match e {
        crate::plan::json::Problem::Duplicate { key, parent: None } => format!(
            "tensor \"{}\" is listed twice in the safetensors header",
            crate::text::excerpt(&key)
        ),
        nested @ crate::plan::json::Problem::Duplicate { .. } => {
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
            // The reference reads it as `Option<HashMap<String, String>>`: null is none.
            let ok = entry.is_null()
                || entry
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
        let bits = Dtype::from_name(dtype).map(Dtype::bits).ok_or_else(|| {
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
    contiguous(ranges, data_len)?;
    Ok((summary, names))
}

/// The reference library's layout rule (`safetensors/src/tensor.rs`, `Metadata::validate`
/// and `SafeTensors::read_metadata`): sorted by `data_offsets`, the first tensor begins at 0,
/// each begins where the one before ends, and the last ends where the file ends
/// (`InvalidOffset`, `MetadataIncompleteBuffer`). So no overlap, no gap, no trailing data;
/// empty tensors may share an offset.
fn contiguous(mut ranges: Vec<(u64, u64, &str)>, data_len: u64) -> std::result::Result<(), String> {
    ranges.sort_unstable();
    let mut end = 0u64;
    let mut before: Option<&str> = None;
    for (begin, stop, name) in ranges {
        if begin < end {
            return Err(format!(
                "tensors \"{}\" and \"{}\" overlap in the data (corrupt header)",
                crate::text::excerpt(before.unwrap_or_default()),
                crate::text::excerpt(name)
            ));
        }
        if begin > end {
            return Err(format!(
                "{} unused bytes before tensor \"{}\" (data_offsets begin at {begin}, the data before ends at {end}); the safetensors library refuses gaps",
                begin - end,
                crate::text::excerpt(name)
            ));
        }
        end = stop;
        before = Some(name);
    }
    if end != data_len {
        return Err(format!(
            "{} bytes of data past the last tensor (the tensors end at {end} of {data_len}); the safetensors library refuses a file longer than its tensors",
            data_len - end
        ));
    }
    Ok(())
}
