//! Identifiers echoed in errors show every non-ASCII character as an escape, so that a
//! look-alike letter (Cyrillic `а` U+0430 for Latin `a`) never reads as the name it imitates:
//! one case per echo site, from a flag or from a file.

use crate::plan_headers::{bf16, folder, raw, TINY_LLAMA};
use crate::support::{lab, repo_root};

/// A folder's files: name and bytes.
type Files = Vec<(&'static str, Vec<u8>)>;

/// Runs `lab args` (in `dir` when given): exit 2, one stderr line holding `shown` (the
/// escaped identifier) and no non-ASCII character at all.
fn escaped(args: &[&str], shown: &str) {
    let out = lab().args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(shown), "{args:?}: expected {shown:?} in {err}");
    assert!(err.is_ascii(), "{args:?}: {err}");
}

#[test]
fn look_alikes_from_flags_are_escaped() {
    let model = repo_root().join("examples/models/llama-3.2-1b");
    let model = model.to_str().unwrap();
    let plan =
        |flag: &'static str, value: &'static str| vec!["plan", "--model", model, flag, value];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["pl\u{430}n"], "'pl\\u{430}n'"),
        (plan("--mode", "tr\u{430}ining"), "'tr\\u{430}ining'"),
        (plan("--weights-dtype", "bf1\u{431}"), "'bf1\\u{431}'"),
        (plan("--kv-dtype", "f\u{440}8"), "'f\\u{440}8'"),
        (plan("--bits", "\u{ff14}"), "'\\u{ff14}'"),
        (
            vec![
                "price",
                "--gpu",
                "h1\u{43e}\u{43e}",
                "--days",
                "7",
                "--lots",
                "1",
            ],
            "'h1\\u{43e}\\u{43e}'",
        ),
        (
            vec!["measure", "--device", "cud\u{430}:0"],
            "'cud\\u{430}:0'",
        ),
        (
            vec!["measure", "--dtype", "bflo\u{430}t16"],
            "'bflo\\u{430}t16'",
        ),
        (
            vec![
                "record",
                "--results",
                "no-such-grid.csv",
                "--gpu",
                "h200",
                "--days",
                "7",
                "--lots",
                "1",
                "--outcome",
                "c\u{43e}mpleted",
            ],
            "'c\\u{43e}mpleted'",
        ),
        (
            vec![
                "record",
                "--results",
                "no-such-grid.csv",
                "--gpu",
                "h200",
                "--days",
                "7",
                "--lots",
                "1",
                "--date-utc",
                "\u{ff12}026-10-02T14:05:00Z",
            ],
            "'\\u{ff12}026-10-02T14:05:00Z'",
        ),
    ];
    for (args, shown) in cases {
        escaped(&args, shown);
    }
}

#[test]
fn look_alikes_from_files_are_escaped() {
    let config = TINY_LLAMA.replace("\"llama\"", "\"ll\\u0430ma\"");
    let dir = folder(&config, &[]);
    let path = dir.path().to_str().unwrap().to_string();
    escaped(&["plan", "--model", &path], "\"ll\\u{430}ma\"");
    let cases: Vec<(Files, &str)> = vec![
        (
            vec![(
                "model.safetensors",
                raw(
                    r#"{"a":{"dtype":"BF1\u0431","shape":[1],"data_offsets":[0,2]}}"#,
                    2,
                ),
            )],
            "unknown dtype \"BF1\\u{431}\"",
        ),
        (
            vec![(
                "model.safetensors",
                raw(
                    r#"{"\u0430":{"dtype":"U8","shape":[1],"data_offsets":[0,2]}}"#,
                    2,
                ),
            )],
            "tensor \"\\u{430}\"",
        ),
        (
            vec![(
                "model.safetensors.index.json",
                br#"{"weight_map":{"a":"m\u043edel.safetensors"}}"#.to_vec(),
            )],
            "shard \"m\\u{43e}del.safetensors\", which is not in",
        ),
        (
            vec![
                (
                    "model.safetensors.index.json",
                    br#"{"weight_map":{"a":"s.safetensors"}}"#.to_vec(),
                ),
                ("s.safetensors", bf16(&[("\u{430}", 16)])),
            ],
            "tensor \"a\" in s.safetensors, whose header does not have it",
        ),
    ];
    for (files, shown) in cases {
        let dir = folder(TINY_LLAMA, &files);
        escaped(&["plan", "--model", dir.path().to_str().unwrap()], shown);
    }
    // A key given twice in config.json, named with its escape.
    let dir = folder(
        &TINY_LLAMA.replacen('{', "{\"\u{43e}\":1,\"\u{43e}\":2,", 1),
        &[],
    );
    escaped(
        &["plan", "--model", dir.path().to_str().unwrap()],
        "key \"\\u{43e}\" is listed twice",
    );
}
