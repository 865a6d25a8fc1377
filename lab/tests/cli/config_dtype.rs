//! The dtype a config.json states (`torch_dtype`, or `dtype` as transformers 5 writes it) is
//! read as transformers reads it: the name of a `torch` attribute (transformers 5.17.0,
//! `PreTrainedConfig`: `getattr(torch, dtype)`), so `half` is fp16 and `float` fp32, while
//! spellings torch has no attribute for (`bf16`, `FLOAT32`, `BFloat16`) stop transformers
//! and are refused by name, never read as the format they resemble.

use crate::plan_headers::folder;
use crate::support::Lab;

/// Llama-3.1-8B's config with `key` set to `dtype` and the other dtype key removed.
fn config(key: &str, dtype: &str) -> tempfile::TempDir {
    let path = crate::support::repo_root().join("examples/models/llama-3.1-8b/config.json");
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let map = c.as_object_mut().unwrap();
    map.remove("torch_dtype");
    map.insert(key.into(), dtype.into());
    folder(&c.to_string(), &[])
}

#[test]
fn torch_dtype_names_are_read_as_transformers_reads_them() {
    // Checked with transformers 5.17.0 and torch: AutoConfig gives these dtypes.
    let read = [
        ("float32", "fp32"),
        ("float", "fp32"),
        ("bfloat16", "bf16"),
        ("float16", "fp16"),
        ("half", "fp16"),
    ];
    for key in ["torch_dtype", "dtype"] {
        for (dtype, format) in read {
            let dir = config(key, dtype);
            let v = Lab::new(&["plan", "--json", "--gpu", "h200", "--model"])
                .arg(dir.path())
                .json();
            assert_eq!(
                v["weights_format"],
                format!("{format} (as configured)"),
                "{key} {dtype}"
            );
        }
    }
}

#[test]
fn dtype_spellings_torch_lacks_are_refused_by_name() {
    // transformers 5.17.0: "module 'torch' has no attribute ..." for each.
    for key in ["torch_dtype", "dtype"] {
        for dtype in [
            "bf16", "fp16", "fp32", "f32", "BF16", "BFloat16", "Float16", "FLOAT32",
        ] {
            let dir = config(key, dtype);
            let line = Lab::new(&["plan", "--gpu", "h200", "--model"])
                .arg(dir.path())
                .refused(2, &format!("dtype \"{dtype}\""));
            assert!(line.contains("--weights-dtype"), "{line}");
        }
    }
}
