//! `lab plan` on model folders whose safetensors headers, index or shard names are wrong:
//! each class refused in one line with exit 2, naming what is wrong.

use crate::support::{assert_refused, lab};
use serde_json::Value;
use std::path::Path;

/// A Llama config of 11 parameters (every size 1), so that a header of a few elements is a
/// plausible checkpoint for it.
pub const TINY_LLAMA: &str = r#"{"model_type":"llama","hidden_size":1,"intermediate_size":1,
"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":1,"torch_dtype":"bfloat16"}"#;

/// A safetensors file: the 8-byte length, `header`, then `data` zero bytes.
pub fn raw(header: &str, data: usize) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    bytes
}

/// A well-formed safetensors file of these BF16 tensors (name, elements), packed in order.
pub fn bf16(tensors: &[(&str, u64)]) -> Vec<u8> {
    let mut map = serde_json::Map::new();
    let mut offset = 0;
    for (name, n) in tensors {
        map.insert(
            name.to_string(),
            serde_json::json!({"dtype": "BF16", "shape": [n], "data_offsets": [offset, offset + 2 * n]}),
        );
        offset += 2 * n;
    }
    raw(&Value::Object(map).to_string(), offset as usize)
}

/// A temporary model folder holding `config` as config.json and these files.
pub fn folder(config: &str, files: &[(&str, Vec<u8>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

/// `lab plan --model dir` refused with `code`, one line holding `needle`.
pub fn refused(dir: &Path, code: i32, needle: &str) {
    let out = lab().args(["plan", "--model"]).arg(dir).output().unwrap();
    assert_refused(&out, code, needle);
}

/// `lab plan --model dir --json`, which must succeed.
pub fn planned(dir: &Path) -> Value {
    let out = lab()
        .args(["plan", "--json", "--model"])
        .arg(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{dir:?}: {err}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The reference library's layout rule, through the binary: ranges that leave a gap, overlap
/// or stop before the end of the file are refused, in a single file and in a shard; a
/// tiling and a null `__metadata__` are accepted.
#[test]
fn headers_must_tile_their_data() {
    let u8s = |entries: &[(&str, u64, u64)]| {
        let body: Vec<String> = entries
            .iter()
            .map(|(n, b, e)| {
                format!(
                    r#""{n}":{{"dtype":"U8","shape":[{}],"data_offsets":[{b},{e}]}}"#,
                    e - b
                )
            })
            .collect();
        format!("{{{}}}", body.join(","))
    };
    let bad = [
        (
            raw(&u8s(&[("a", 0, 8), ("b", 10, 16)]), 16),
            "2 unused bytes before tensor \"b\"",
        ),
        (
            raw(&u8s(&[("a", 4, 16)]), 16),
            "4 unused bytes before tensor \"a\"",
        ),
        (
            raw(&u8s(&[("a", 0, 16)]), 20),
            "4 bytes of data past the last tensor",
        ),
        (raw(&u8s(&[("a", 0, 10), ("b", 8, 16)]), 16), "overlap"),
    ];
    for (bytes, needle) in bad {
        let single = folder(TINY_LLAMA, &[("model.safetensors", bytes.clone())]);
        refused(single.path(), 2, needle);
        let sharded = folder(
            TINY_LLAMA,
            &[
                ("s.safetensors", bytes),
                (
                    "model.safetensors.index.json",
                    br#"{"weight_map":{"a":"s.safetensors"}}"#.to_vec(),
                ),
            ],
        );
        refused(sharded.path(), 2, needle);
    }
    let null_metadata =
        r#"{"__metadata__":null,"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}}"#;
    let dir = folder(TINY_LLAMA, &[("model.safetensors", raw(null_metadata, 16))]);
    assert_eq!(planned(dir.path())["headers"]["data_bytes"], 16);
}
