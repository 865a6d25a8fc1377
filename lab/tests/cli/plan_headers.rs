//! `lab plan` on model folders whose safetensors headers, index or shard names are wrong:
//! each class refused in one line with exit 2, naming what is wrong.

use crate::support::{assert_refused, lab};
use serde_json::Value;
use std::path::Path;

/// A Llama config of 12 parameters (every size 1), so that a header of a few elements is a
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

/// A folder's files: name and bytes.
type Files = Vec<(&'static str, Vec<u8>)>;

/// An index file naming `map` (tensor -> shard).
fn index(map: &[(&str, &str)]) -> (&'static str, Vec<u8>) {
    let map: serde_json::Map<String, Value> = map
        .iter()
        .map(|(t, f)| (t.to_string(), Value::from(*f)))
        .collect();
    (
        "model.safetensors.index.json",
        serde_json::json!({ "weight_map": map })
            .to_string()
            .into_bytes(),
    )
}

/// What an index does not account for is refused by name: a tensor in a shard that the
/// index does not name or puts elsewhere, a `.safetensors` file it does not list, a header
/// larger than its listed tensors need.
#[test]
fn shards_hold_what_the_index_names_and_nothing_else() {
    let cases: Vec<(Files, &str)> = vec![
        (
            vec![
                index(&[("a", "s.safetensors")]),
                ("s.safetensors", bf16(&[("a", 4), ("x", 4)])),
            ],
            "s.safetensors holds tensor \"x\" but",
        ),
        (
            vec![
                index(&[("a", "s.safetensors"), ("b", "t.safetensors")]),
                ("s.safetensors", bf16(&[("a", 4)])),
                ("t.safetensors", bf16(&[("b", 4), ("a", 4)])),
            ],
            "t.safetensors holds tensor \"a\" but",
        ),
        (
            vec![
                index(&[("a", "s.safetensors")]),
                ("s.safetensors", bf16(&[("a", 4)])),
                ("model-00002-of-00002.safetensors", bf16(&[("b", 4)])),
            ],
            "holds \"model-00002-of-00002.safetensors\" that",
        ),
        (
            vec![
                index(&[("a", "s.safetensors")]),
                ("s.safetensors", bf16(&[("a", 4)])),
                ("model.safetensors", bf16(&[("a", 4)])),
            ],
            "holds \"model.safetensors\" that",
        ),
        (
            vec![
                index(&[("a", "s.safetensors")]),
                (
                    "s.safetensors",
                    raw(
                        &format!(
                            r#"{{"__metadata__":{{"pad":"{}"}},"a":{{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#,
                            "x".repeat(70_000)
                        ),
                        1,
                    ),
                ),
            ],
            "more than lab plan reads for it: the index puts 1 tensors in it",
        ),
    ];
    for (files, needle) in cases {
        let dir = folder(TINY_LLAMA, &files);
        refused(dir.path(), 2, needle);
    }
    // The same folder with the index's tensors only plans, beside another checkpoint's files
    // that transformers does not read through the index either.
    let dir = folder(
        TINY_LLAMA,
        &[
            index(&[("a", "s.safetensors")]),
            ("s.safetensors", bf16(&[("a", 16)])),
            ("consolidated.safetensors", bf16(&[("x", 4)])),
            ("adapter_model.safetensors", bf16(&[("y", 4)])),
        ],
    );
    planned(dir.path());
}

/// Five shards whose headers claim 100 MB each while the index names five small tensors:
/// refused at the first, without reading it (the files are sparse; reading one would take
/// seconds and 100 MB).
#[test]
fn huge_headers_are_refused_before_they_are_read() {
    let names: Vec<String> = (1..=5)
        .map(|i| format!("model-0000{i}-of-00005.safetensors"))
        .collect();
    let tensors: Vec<String> = (1..=5).map(|i| format!("t{i}")).collect();
    let map: Vec<(&str, &str)> = tensors
        .iter()
        .map(String::as_str)
        .zip(names.iter().map(String::as_str))
        .collect();
    let dir = folder(TINY_LLAMA, &[index(&map)]);
    for name in &names {
        let file = std::fs::File::create(dir.path().join(name)).unwrap();
        use std::io::Write;
        (&file).write_all(&100_000_000u64.to_le_bytes()).unwrap();
        file.set_len(100_000_016).unwrap();
    }
    refused(dir.path(), 2, "model-00001-of-00005.safetensors: safetensors header of 100000000 bytes, more than lab plan reads");
}

/// `.safetensors` files that lab would not read (no index, and not model.safetensors, or
/// beside it) are refused by name, never skipped.
#[test]
fn safetensors_files_nobody_lists_are_named() {
    let w = || bf16(&[("a", 4)]);
    let cases: Vec<(Files, &str)> = vec![
        (
            vec![("model-00001-of-00002.safetensors", w()), ("model-00002-of-00002.safetensors", w())],
            "holds \"model-00001-of-00002.safetensors\", \"model-00002-of-00002.safetensors\" with neither model.safetensors nor model.safetensors.index.json",
        ),
        (vec![("consolidated.safetensors", w())], "holds \"consolidated.safetensors\" with neither"),
        (
            vec![("model.safetensors", w()), ("adapter_model.safetensors", w())],
            "holds \"adapter_model.safetensors\" next to model.safetensors",
        ),
        (
            vec![("a.safetensors", w()), ("b.safetensors", w()), ("c.safetensors", w()), ("d.safetensors", w()), ("e.safetensors", w())],
            "\"c.safetensors\", and 2 more",
        ),
    ];
    for (files, needle) in cases {
        let dir = folder(TINY_LLAMA, &files);
        refused(dir.path(), 2, needle);
    }
    // Other files are not weights: a folder with a tokenizer and no .safetensors plans from
    // the config.
    let dir = folder(
        TINY_LLAMA,
        &[("tokenizer.json", b"{}".to_vec()), ("model.bin", vec![0])],
    );
    assert_eq!(planned(dir.path())["headers"], Value::Null);
}

/// Every path-like value an index gives as a shard name that is not a plain `.safetensors`
/// file next to it is bad input (exit 2) naming the tensor and the problem.
#[test]
fn shard_names_that_are_not_plain_file_names_are_bad_input() {
    let cases = [
        ("a\u{0}.safetensors", "holds a NUL character"),
        ("", "is empty"),
        ("/etc/passwd.safetensors", "is a path"),
        ("../up.safetensors", "is a path"),
        ("sub/s.safetensors", "is a path"),
        ("sub\\s.safetensors", "is a path"),
        ("..", "is not a file name"),
        (".", "is not a file name"),
        ("config.json", "is not a .safetensors file name"),
    ];
    for (name, problem) in cases {
        let dir = folder(TINY_LLAMA, &[index(&[("a", name)])]);
        refused(dir.path(), 2, &format!("of tensor \"a\" {problem}"));
    }
}

/// Llama-3.1-8B's config with this `quantization_config`.
fn llama_8b_quantized(quantization: &str) -> String {
    let path = crate::support::repo_root().join("examples/models/llama-3.1-8b/config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    config["quantization_config"] = serde_json::from_str(quantization).unwrap();
    config.to_string()
}

/// A pre-quantized checkpoint whose headers hold less than its format packs the config's
/// parameters into is refused as incomplete, for every format (a header of one 2-byte
/// tensor, and one holding 90% of the bound); headers at the bound are planned.
#[test]
fn quantized_headers_must_hold_what_the_format_packs() {
    // Llama-3.1-8B: 6,979,321,856 matrix weights, an untied 525,336,576-weight output head
    // (both at the format's width), a 525,336,576-weight embedding and 266,240 norm weights
    // (16 bits).
    let (matrices, rest) = (6_979_321_856u128 + 525_336_576, 525_336_576u128 + 266_240);
    let cases = [
        (
            r#"{"quant_method":"gptq","bits":4,"group_size":128}"#,
            "\"gptq\" checkpoint (4 bits, groups of 128: 4.15625 bits",
            415_625u128,
            100_000u128,
        ),
        (
            r#"{"quant_method":"awq","bits":4,"group_size":128,"version":"gemm"}"#,
            "\"awq\" checkpoint (4 bits, groups of 128",
            415_625,
            100_000,
        ),
        (
            r#"{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_use_double_quant":true}"#,
            "\"bitsandbytes\" checkpoint (4-bit, double quantization: 4.125 bits",
            4125,
            1000,
        ),
        (
            r#"{"quant_method":"bitsandbytes","load_in_8bit":true}"#,
            "(8-bit: 8 bits",
            8,
            1,
        ),
        (
            r#"{"quant_method":"fp8","weight_block_size":[128,128]}"#,
            "\"fp8\" checkpoint (float8: 8 bits",
            8,
            1,
        ),
        (
            r#"{"quant_method":"compressed-tensors","config_groups":{"group_0":{"weights":{"num_bits":8}}}}"#,
            "(8 bits: 8 bits",
            8,
            1,
        ),
        (
            r#"{"quant_method":"hqq"}"#,
            "(a method lab plan does not know: 1 bits",
            1,
            1,
        ),
    ];
    for (quantization, needle, numerator, denominator) in cases {
        let config = llama_8b_quantized(quantization);
        let need = matrices * numerator / denominator / 8 + rest * 2;
        let tiny = folder(&config, &[("model.safetensors", bf16(&[("a", 1)]))]);
        refused(tiny.path(), 2, needle);
        refused(tiny.path(), 2, &format!("takes at least {need} bytes"));
        refused(tiny.path(), 2, &format!("{} bytes are missing", need - 2));
        // Sparse files: the headers are real, the data is a hole.
        let sized = |bytes: u128| {
            let dir = folder(&config, &[]);
            let header =
                format!(r#"{{"w":{{"dtype":"U8","shape":[{bytes}],"data_offsets":[0,{bytes}]}}}}"#);
            let file = std::fs::File::create(dir.path().join("model.safetensors")).unwrap();
            use std::io::Write;
            (&file)
                .write_all(&(header.len() as u64).to_le_bytes())
                .unwrap();
            (&file).write_all(header.as_bytes()).unwrap();
            file.set_len(8 + header.len() as u64 + bytes as u64)
                .unwrap();
            dir
        };
        refused(sized(need * 9 / 10).path(), 2, "bytes are missing");
        refused(sized(need - 1).path(), 2, "; 1 bytes are missing");
        let plan = planned(sized(need).path());
        // FP8 blocks are counted as transformers allocates them, from the config, with the
        // headers or without them; the other formats as stored.
        let expected = if quantization.contains("\"fp8\"") {
            planned(folder(&config, &[]).path())["memory"]["weights_bytes"].clone()
        } else {
            Value::from(need as u64)
        };
        assert_eq!(plan["memory"]["weights_bytes"], expected, "{quantization}");
    }
}
