//! The measurement document's JSON schema, generated from the document's types
//! ([`schemars`], from the `#[schemars(...)]` attributes beside each field) and committed as
//! `lab/schema/measurement.schema.json` for the Python twin and for readers of the protocol.
//! `cargo xtask codegen` rewrites the file; `cargo xtask verify` fails when it differs from
//! [`measurement_schema_text`], so a type change cannot leave the committed schema behind.
//!
//! The generated text keeps the hand-written v1 schema's meaning: the same required keys, the
//! same types, enums, constants, patterns and bounds, the repetition rule per phase, and no
//! constraint on the keys the v1 schema left open (`environment.driver`,
//! `phases[].forward_passes`). Its form differs: one definition per Rust type, an explicit
//! `"type"` beside each enum and constant, `anyOf` for the optional graph, and the annotation
//! keywords (`title`, `description`, `format`) that schemars takes from the Rust
//! doc comments and integer widths are left out, save the document's own.

use super::Document;
use serde_json::{Map, Value};

/// Where the generated schema is committed, relative to the workspace root.
pub const SCHEMA_FILE: &str = "lab/schema/measurement.schema.json";

/// The schema's `$id`.
pub const SCHEMA_URI: &str = "https://iteragpu.example/lab/measurement.schema.json";

const TITLE: &str = "IteraGPU Lab measurement document (iteragpu-lab/measurement/v1)";

const DESCRIPTION: &str = "Written by `lab measure` (implementation rust) and \
    `mesure_memoire.py measure` (implementation python). Memory counters are bytes of this \
    process's PyTorch caching allocator on the chosen device only. Fields may be added; none \
    may be renamed.";

const GRAPH_DESCRIPTION: &str = "The CUDA-graph floor (docs/PROTOCOL.md §4.6), only with \
    --graph-replays N; absent or null otherwise. One forward captured on a side stream after \
    capture_warmup_forwards warm-up forwards there, then batches × N replays back to back (each \
    batch between two CUDA events) and N single replays each followed by a synchronize. The \
    graph keeps its own private memory pool: the captured forward's intermediates stay \
    reserved for it while it exists, so capture shows reserved bytes grow; replays allocate \
    nothing.";

/// Removes the annotation keywords schemars writes, everywhere except under `properties`
/// (where a key is a field name, not a keyword).
fn strip_annotations(value: &mut Value, is_properties: bool) {
    match value {
        Value::Object(map) => {
            if !is_properties {
                for keyword in ["title", "description", "format"] {
                    map.remove(keyword);
                }
            }
            for (key, inner) in map.iter_mut() {
                strip_annotations(inner, !is_properties && key == "properties");
            }
        }
        Value::Array(items) => {
            for item in items {
                strip_annotations(item, false);
            }
        }
        _ => {}
    }
}

/// An enum schemars writes as `oneOf` string constants (one per documented variant) becomes
/// the plain `enum` of its names.
fn plain_enums(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let names: Option<Vec<Value>> =
                map.get("oneOf")
                    .and_then(Value::as_array)
                    .and_then(|items| {
                        items
                            .iter()
                            .map(|item| {
                                let item = item.as_object()?;
                                let only_const = item.len() == 2
                                    && item.get("type").and_then(Value::as_str) == Some("string");
                                only_const.then(|| item.get("const").cloned()).flatten()
                            })
                            .collect()
                    });
            if let Some(names) = names {
                map.remove("oneOf");
                map.insert("type".into(), "string".into());
                map.insert("enum".into(), Value::Array(names));
            }
            map.values_mut().for_each(plain_enums);
        }
        Value::Array(items) => items.iter_mut().for_each(plain_enums),
        _ => {}
    }
}

/// The schema of [`Document`] (draft 2020-12), as committed.
pub fn measurement_schema() -> Value {
    let generated = schemars::generate::SchemaSettings::draft2020_12()
        // What is written: an `Option` field without `skip_serializing_if` is always present
        // (required, possibly null), as the v1 schema has it.
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<Document>();
    let mut body = generated.to_value();
    strip_annotations(&mut body, false);
    plain_enums(&mut body);
    if let Some(Value::Object(graph)) = body.pointer_mut("/properties/graph") {
        graph.insert("description".into(), GRAPH_DESCRIPTION.into());
    }
    // The header first, then what schemars generated, in its order.
    let mut root = Map::new();
    let Value::Object(body) = body else {
        return body;
    };
    if let Some(draft) = body.get("$schema") {
        root.insert("$schema".into(), draft.clone());
    }
    root.insert("$id".into(), SCHEMA_URI.into());
    root.insert("title".into(), TITLE.into());
    root.insert("description".into(), DESCRIPTION.into());
    for (key, value) in body {
        root.entry(key).or_insert(value);
    }
    Value::Object(root)
}

/// The committed file's text: [`measurement_schema`] as pretty JSON with a final newline.
pub fn measurement_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&measurement_schema())
        .unwrap_or_else(|e| format!("cannot encode the schema: {e}"));
    text.push('\n');
    text
}
