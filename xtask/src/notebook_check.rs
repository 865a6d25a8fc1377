//! The read-only notebook check: `mesure-memoire.ipynb` must be valid nbformat 4, carry no
//! saved state (outputs, execution counts, attachments, widget state, execution timing) and
//! not import the companion script. The file is never rewritten; each finding names the file,
//! the cell index and the field.

use lab::kit::Finding;
use serde_json::{Map, Value};

/// Keys every v4 cell may carry, per cell type (nbformat 4.x schema, `id` from 4.5).
const MARKDOWN_KEYS: [&str; 5] = ["id", "cell_type", "metadata", "source", "attachments"];
const CODE_KEYS: [&str; 6] = [
    "id",
    "cell_type",
    "metadata",
    "source",
    "outputs",
    "execution_count",
];

/// Cell metadata keys that record a past execution or ask a front end to keep outputs.
const FORBIDDEN_CELL_METADATA: [&str; 4] = ["ExecuteTime", "execution", "keep_output", "init_cell"];

/// Name of the companion script the notebook must not import.
const COMPANION_MODULE: &str = "mesure_memoire";

/// Checks the notebook bytes; `file` names it in every finding. Empty means clean.
pub fn check(file: &str, bytes: &[u8]) -> Vec<Finding> {
    let mut out = Findings {
        file,
        list: Vec::new(),
    };
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            out.at("notebook", format!("not UTF-8: {e}"));
            return out.list;
        }
    };
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            out.at("notebook", format!("not valid JSON: {e}"));
            return out.list;
        }
    };
    let Some(root) = root.as_object() else {
        out.at("notebook", "top level is not a JSON object");
        return out.list;
    };
    check_top_level(root, &mut out);
    let minor = root
        .get("nbformat_minor")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    match root.get("cells").and_then(Value::as_array) {
        Some(cells) => {
            for (index, cell) in cells.iter().enumerate() {
                check_cell(index, cell, minor, &mut out);
            }
        }
        None => out.at("field `cells`", "missing or not a list"),
    }
    out.list
}

/// Collects findings for one file.
struct Findings<'a> {
    file: &'a str,
    list: Vec<Finding>,
}

impl Findings<'_> {
    /// Records `message` at `place` (e.g. `cell 3, field `outputs``).
    fn at(&mut self, place: &str, message: impl AsRef<str>) {
        self.list.push(Finding::new(
            self.file,
            format!("{place}: {}", message.as_ref()),
        ));
    }

    /// Records `message` about `field` of cell `index`.
    fn cell(&mut self, index: usize, field: &str, message: impl AsRef<str>) {
        self.at(&format!("cell {index}, field `{field}`"), message);
    }
}

fn check_top_level(root: &Map<String, Value>, out: &mut Findings<'_>) {
    match root.get("nbformat") {
        Some(Value::Number(n)) if n.as_u64() == Some(4) => {}
        Some(other) => out.at("field `nbformat`", format!("is {other}, expected 4")),
        None => out.at("field `nbformat`", "missing"),
    }
    if !root.get("nbformat_minor").is_some_and(Value::is_u64) {
        out.at(
            "field `nbformat_minor`",
            "missing or not a non-negative integer",
        );
    }
    match root.get("metadata").map(Value::as_object) {
        Some(Some(metadata)) => {
            if metadata.contains_key("widgets") {
                out.at(
                    "field `metadata.widgets`",
                    "saved widget state must be removed",
                );
            }
        }
        Some(None) => out.at("field `metadata`", "not an object"),
        None => out.at("field `metadata`", "missing"),
    }
    for key in root.keys() {
        if !["metadata", "nbformat", "nbformat_minor", "cells"].contains(&key.as_str()) {
            out.at(
                &format!("field `{key}`"),
                "not an nbformat 4 top-level field",
            );
        }
    }
}

fn check_cell(index: usize, cell: &Value, minor: u64, out: &mut Findings<'_>) {
    let Some(cell) = cell.as_object() else {
        out.at(&format!("cell {index}"), "not a JSON object");
        return;
    };
    let cell_type = match cell.get("cell_type").and_then(Value::as_str) {
        Some(t @ ("code" | "markdown" | "raw")) => t,
        Some(other) => {
            out.cell(index, "cell_type", format!("unknown cell type {other:?}"));
            return;
        }
        None => {
            out.cell(index, "cell_type", "missing");
            return;
        }
    };
    // Required keys (v4; `id` required from 4.5).
    if minor >= 5 {
        match cell.get("id").and_then(Value::as_str) {
            Some(id)
                if (1..=64).contains(&id.len())
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') => {}
            Some(_) => out.cell(index, "id", "must be 1-64 characters of [A-Za-z0-9_-]"),
            None => out.cell(index, "id", "missing (required from nbformat 4.5)"),
        }
    }
    if !cell.get("metadata").is_some_and(Value::is_object) {
        out.cell(index, "metadata", "missing or not an object");
    }
    let source_ok = match cell.get("source") {
        Some(Value::String(_)) => true,
        Some(Value::Array(lines)) => lines.iter().all(Value::is_string),
        _ => false,
    };
    if !source_ok {
        out.cell(
            index,
            "source",
            "missing, or not a string or a list of strings",
        );
    }
    let allowed: &[&str] = if cell_type == "code" {
        &CODE_KEYS
    } else {
        &MARKDOWN_KEYS
    };
    for key in cell.keys() {
        if key == "attachments" {
            out.cell(index, key, "attachments must be removed");
        } else if !allowed.contains(&key.as_str()) {
            let message = if key == "outputs" || key == "execution_count" {
                format!("not allowed on a {cell_type} cell")
            } else {
                format!("not an nbformat 4 field of a {cell_type} cell")
            };
            out.cell(index, key, message);
        }
    }
    if cell_type == "code" {
        match cell.get("outputs") {
            Some(Value::Array(outputs)) if outputs.is_empty() => {}
            Some(Value::Array(outputs)) => out.cell(
                index,
                "outputs",
                format!("{} saved output(s); must be []", outputs.len()),
            ),
            Some(_) => out.cell(index, "outputs", "not a list; must be []"),
            None => out.cell(index, "outputs", "missing; must be []"),
        }
        match cell.get("execution_count") {
            Some(Value::Null) => {}
            Some(other) => out.cell(
                index,
                "execution_count",
                format!("is {other}; must be null"),
            ),
            None => out.cell(index, "execution_count", "missing; must be null"),
        }
        if let Some(line) = source_text(cell).lines().find(|l| imports_companion(l)) {
            out.cell(
                index,
                "source",
                format!(
                    "imports the companion script ({:?}); the notebook must be self-contained",
                    line.trim()
                ),
            );
        }
    }
    if let Some(metadata) = cell.get("metadata").and_then(Value::as_object) {
        for key in FORBIDDEN_CELL_METADATA {
            if metadata.contains_key(key) {
                out.cell(
                    index,
                    &format!("metadata.{key}"),
                    "execution state must be removed",
                );
            }
        }
        if metadata.contains_key("widgets") {
            out.cell(
                index,
                "metadata.widgets",
                "saved widget state must be removed",
            );
        }
    }
}

/// The cell source as one string.
fn source_text(cell: &Map<String, Value>) -> String {
    match cell.get("source") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(lines)) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// Whether a line of code loads the companion script (`import`, `from ... import`,
/// `importlib`, `__import__`, `runpy`, `%run`, `%load`, `exec(open(...))`).
fn imports_companion(line: &str) -> bool {
    let code = line.split('#').next().unwrap_or_default().trim();
    if !code.contains(COMPANION_MODULE) {
        return false;
    }
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let mentions_module = words.contains(&COMPANION_MODULE);
    let import_statement =
        (code.starts_with("import ") || code.starts_with("from ")) && mentions_module;
    let loader = [
        "import_module",
        "__import__",
        "runpy",
        "exec",
        "run_path",
        "spec_from_file_location",
    ]
    .iter()
    .any(|w| words.contains(w));
    let magic = code.starts_with("%run") || code.starts_with("%load");
    import_statement || loader || magic
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn notebook(cells: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
            "cells": cells,
        }))
        .unwrap()
    }

    fn code(source: &str) -> Value {
        json!({"id": "c1", "cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": null})
    }

    fn messages(bytes: &[u8]) -> Vec<String> {
        check("nb.ipynb", bytes)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn clean_notebook_passes() {
        let md = json!({"id": "m1", "cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "see mesure_memoire.py"]});
        let nb = notebook(json!([
            md,
            code("import json\n# same as mesure_memoire.py\nx = 1")
        ]));
        assert_eq!(messages(&nb), Vec::<String>::new());
        let mut with_bom = b"\xEF\xBB\xBF".to_vec();
        with_bom.extend_from_slice(&nb);
        assert_eq!(messages(&with_bom), Vec::<String>::new());
    }

    #[test]
    fn each_saved_state_is_named_by_cell_and_field() {
        let mut with_output = code("1");
        with_output["outputs"] = json!([{"output_type": "stream", "name": "stdout", "text": "1"}]);
        let mut counted = code("1");
        counted["execution_count"] = json!(3);
        let mut no_count = code("1");
        no_count.as_object_mut().unwrap().remove("execution_count");
        let mut timed = code("1");
        timed["metadata"] = json!({"ExecuteTime": {}, "keep_output": true});
        let md_out = json!({"id": "m", "cell_type": "markdown", "metadata": {}, "source": "", "outputs": [], "attachments": {}});
        let nb = notebook(json!([
            with_output,
            counted,
            no_count,
            timed,
            md_out,
            code("from mesure_memoire import estimate")
        ]));
        let found = messages(&nb);
        let expect = [
            "nb.ipynb: cell 0, field `outputs`: 1 saved output(s)",
            "nb.ipynb: cell 1, field `execution_count`: is 3",
            "nb.ipynb: cell 2, field `execution_count`: missing",
            "nb.ipynb: cell 3, field `metadata.ExecuteTime`",
            "nb.ipynb: cell 3, field `metadata.keep_output`",
            "nb.ipynb: cell 4, field `outputs`: not allowed on a markdown cell",
            "nb.ipynb: cell 4, field `attachments`",
            "nb.ipynb: cell 5, field `source`: imports the companion script",
        ];
        for e in expect {
            assert!(
                found.iter().any(|f| f.starts_with(e)),
                "{e} not in {found:#?}"
            );
        }
        assert_eq!(found.len(), expect.len(), "{found:#?}");
    }

    #[test]
    fn widget_state_and_bad_format_are_caught() {
        let mut nb: Value = serde_json::from_slice(&notebook(json!([code("1")]))).unwrap();
        nb["metadata"]["widgets"] = json!({"application/vnd.jupyter.widget-state+json": {}});
        nb["nbformat"] = json!(3);
        let found = messages(&serde_json::to_vec(&nb).unwrap());
        assert!(
            found.iter().any(|f| f.contains("`metadata.widgets`")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|f| f.contains("`nbformat`: is 3")),
            "{found:?}"
        );
        assert_eq!(
            messages(b"{not json"),
            ["nb.ipynb: notebook: not valid JSON: key must be a string at line 1 column 2"]
        );
    }

    #[test]
    fn import_detection() {
        for yes in [
            "import mesure_memoire",
            "import os, mesure_memoire as mm",
            "from mesure_memoire import measure",
            "m = importlib.import_module('mesure_memoire')",
            "%run mesure_memoire.py",
            "exec(open('mesure_memoire.py').read())",
            "runpy.run_path('mesure_memoire.py')",
        ] {
            assert!(imports_companion(yes), "{yes}");
        }
        for no in [
            "print('see mesure_memoire.py')",
            "x = 1  # like mesure_memoire.estimate",
            "import json",
        ] {
            assert!(!imports_companion(no), "{no}");
        }
    }
}
