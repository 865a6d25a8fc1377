//! The notebook gate: `mesure-memoire.ipynb` must be valid against the official nbformat 4.x
//! JSON schema of the minor version it declares (vendored in `xtask/schemas/nbformat/`, see its
//! README for the source and licence), then pass our own rules on top:
//!
//! - no saved state: every code cell has `outputs: []` and `execution_count: null`, no
//!   attachments, no widget state;
//! - cell ids unique (nbformat 4.5; the schema only checks their shape), and present only from
//!   4.5 (4.0-4.4 have none);
//! - no run metadata of any runner, known or not: only `kernelspec` and `language_info` (without
//!   the `version` of a past kernel) at the top, only UI keys (`tags`, `editable`, `deletable`,
//!   `jupyter`, `slideshow`) in a cell. Known runners are named in the finding: papermill
//!   (per-cell and notebook-level `papermill`, with parameters and local paths, and its
//!   `injected-parameters` cell), JupyterLab and
//!   nbclient (`execution` timing), the ExecuteTime extension (`ExecuteTime`), Colab (`colab`,
//!   `executionInfo`, `outputId`), Kaggle, VS Code (`vscode`, `interpreter`);
//! - self-contained: no cell imports the companion script.
//!
//! The file is never rewritten; each finding names the file, the cell index and the field.

use lab::kit::Finding;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The vendored schemas, by nbformat 4 minor version.
const SCHEMAS: [&str; 6] = [
    include_str!("../schemas/nbformat/nbformat.v4.0.schema.json"),
    include_str!("../schemas/nbformat/nbformat.v4.1.schema.json"),
    include_str!("../schemas/nbformat/nbformat.v4.2.schema.json"),
    include_str!("../schemas/nbformat/nbformat.v4.3.schema.json"),
    include_str!("../schemas/nbformat/nbformat.v4.4.schema.json"),
    include_str!("../schemas/nbformat/nbformat.v4.5.schema.json"),
];

/// First minor version with cell ids.
const IDS_FROM_MINOR: u64 = 5;

/// Top-level metadata keys allowed, and the `language_info` keys allowed in it (no `version`:
/// that is the Python of a past kernel).
const NOTEBOOK_METADATA: [&str; 2] = ["kernelspec", "language_info"];
const LANGUAGE_INFO: [&str; 6] = [
    "name",
    "codemirror_mode",
    "file_extension",
    "mimetype",
    "nbconvert_exporter",
    "pygments_lexer",
];

/// Cell metadata keys allowed: how a front end shows or protects the cell, nothing about a run.
const CELL_METADATA: [&str; 5] = ["tags", "editable", "deletable", "jupyter", "slideshow"];

/// Metadata keys written by known runners and tools, with what they record.
const KNOWN_RUN_METADATA: [(&str, &str); 11] = [
    (
        "papermill",
        "papermill's run record (parameters, local paths, times)",
    ),
    ("execution", "execution timing of JupyterLab or nbclient"),
    (
        "ExecuteTime",
        "execution timing of the ExecuteTime extension",
    ),
    ("colab", "Google Colab's session metadata"),
    (
        "executionInfo",
        "Google Colab's execution record (times, user)",
    ),
    ("outputId", "Google Colab's output id"),
    ("kaggle", "Kaggle's run metadata"),
    ("vscode", "VS Code's interpreter record"),
    ("interpreter", "the interpreter of a past run"),
    ("widgets", "saved widget state"),
    ("keep_output", "a request to keep outputs"),
];

/// Name of the companion script the notebook must not import.
const COMPANION_MODULE: &str = "mesure_memoire";

/// Cell types and the schema definition of each.
const CELL_TYPES: [(&str, &str); 3] = [
    ("code", "code_cell"),
    ("markdown", "markdown_cell"),
    ("raw", "raw_cell"),
];

/// The validators of one minor version: the whole notebook, and one per cell type (so that a
/// bad cell is reported field by field rather than as "not valid under any of `oneOf`").
struct Validators {
    notebook: jsonschema::Validator,
    cells: Vec<(&'static str, jsonschema::Validator)>,
}

/// The compiled validators of minor version `minor`, if its schema is vendored.
fn validators(minor: u64) -> Option<&'static Validators> {
    static ALL: OnceLock<Vec<Option<Validators>>> = OnceLock::new();
    let all = ALL.get_or_init(|| SCHEMAS.iter().map(|text| compile(text)).collect());
    all.get(usize::try_from(minor).ok()?)?.as_ref()
}

fn compile(text: &str) -> Option<Validators> {
    let schema: Value = serde_json::from_str(text).ok()?;
    let notebook = jsonschema::draft4::new(&schema).ok()?;
    let mut cells = Vec::new();
    for (cell_type, definition) in CELL_TYPES {
        // In draft 4 a `$ref` replaces its object, so this is exactly that definition.
        let one = serde_json::json!({
            "$ref": format!("#/definitions/{definition}"),
            "definitions": schema.get("definitions")?,
        });
        cells.push((cell_type, jsonschema::draft4::new(&one).ok()?));
    }
    Some(Validators { notebook, cells })
}

/// Schema findings of `root` against `validators`: per field inside a cell of a known type,
/// else as the validator words them (long values cut).
fn schema_findings(root: &Value, minor: u64, validators: &Validators, out: &mut Findings<'_>) {
    let cells = root.get("cells").and_then(Value::as_array);
    for error in validators.notebook.iter_errors(root) {
        let place = error.instance_path().to_string();
        let cell_index = place
            .strip_prefix("/cells/")
            .and_then(|i| i.parse::<usize>().ok());
        if let Some(index) = cell_index {
            let cell = cells.and_then(|c| c.get(index));
            let kind = cell
                .and_then(|c| c.get("cell_type"))
                .and_then(Value::as_str)
                .and_then(|t| validators.cells.iter().find(|(k, _)| *k == t));
            if let (Some(cell), Some((_, validator))) = (cell, kind) {
                for inner in validator.iter_errors(cell) {
                    let at = format!("{place}{}", inner.instance_path());
                    out.at(
                        &format!("nbformat 4.{minor} schema at `{at}`"),
                        short(&inner.to_string()),
                    );
                }
                continue;
            }
            if kind.is_none() {
                out.cell(
                    index,
                    "cell_type",
                    "must be \"code\", \"markdown\" or \"raw\"",
                );
                continue;
            }
        }
        let place = if place.is_empty() {
            "/".to_string()
        } else {
            place
        };
        out.at(
            &format!("nbformat 4.{minor} schema at `{place}`"),
            short(&error.to_string()),
        );
    }
}

/// `text` on one line, cut to 200 characters (a validator may quote a whole cell).
fn short(text: &str) -> String {
    let line = lab::text::one_line(text);
    match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

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
    let Some(object) = root.as_object() else {
        out.at("notebook", "top level is not a JSON object");
        return out.list;
    };
    match object.get("nbformat") {
        Some(Value::Number(n)) if n.as_u64() == Some(4) => {}
        Some(other) => {
            out.at("field `nbformat`", format!("is {other}, expected 4"));
            return out.list;
        }
        None => {
            out.at("field `nbformat`", "missing");
            return out.list;
        }
    }
    let Some(minor) = object.get("nbformat_minor").and_then(Value::as_u64) else {
        out.at(
            "field `nbformat_minor`",
            "missing or not a non-negative integer",
        );
        return out.list;
    };
    let Some(validators) = validators(minor) else {
        out.at(
            "field `nbformat_minor`",
            format!(
                "nbformat 4.{minor} has no published schema here (4.0 to 4.{}); declare 4.5",
                SCHEMAS.len() - 1
            ),
        );
        return out.list;
    };
    schema_findings(&root, minor, validators, &mut out);
    check_notebook_metadata(object, &mut out);
    if let Some(cells) = object.get("cells").and_then(Value::as_array) {
        let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
        for (index, cell) in cells.iter().enumerate() {
            let Some(cell) = cell.as_object() else {
                continue;
            };
            if let Some(id) = cell.get("id").and_then(Value::as_str) {
                if minor < IDS_FROM_MINOR {
                    out.cell(
                        index,
                        "id",
                        format!("cell ids exist only from nbformat 4.5; this notebook declares 4.{minor}"),
                    );
                } else if let Some(first) = ids.get(id) {
                    out.cell(
                        index,
                        "id",
                        format!("{id:?} is already the id of cell {first}; ids must be unique"),
                    );
                } else {
                    ids.insert(id, index);
                }
            }
            check_cell(index, cell, &mut out);
        }
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

/// What a metadata key not in the allowed list is, for the finding.
fn unexpected_metadata(key: &str) -> String {
    match KNOWN_RUN_METADATA.iter().find(|(k, _)| *k == key) {
        Some((_, what)) => format!("{what}; must be removed"),
        None => "not written by `cargo xtask notebook`; a shipped notebook carries no run or \
                 tool metadata"
            .to_string(),
    }
}

fn check_notebook_metadata(root: &Map<String, Value>, out: &mut Findings<'_>) {
    let Some(metadata) = root.get("metadata").and_then(Value::as_object) else {
        return; // the schema reports it
    };
    for key in metadata.keys() {
        if !NOTEBOOK_METADATA.contains(&key.as_str()) {
            out.at(&format!("field `metadata.{key}`"), unexpected_metadata(key));
        }
    }
    if let Some(info) = metadata.get("language_info").and_then(Value::as_object) {
        for key in info.keys() {
            if !LANGUAGE_INFO.contains(&key.as_str()) {
                out.at(
                    &format!("field `metadata.language_info.{key}`"),
                    "recorded by a kernel that ran the notebook; must be removed",
                );
            }
        }
    }
}

fn check_cell(index: usize, cell: &Map<String, Value>, out: &mut Findings<'_>) {
    let cell_type = cell.get("cell_type").and_then(Value::as_str).unwrap_or("");
    if cell.contains_key("attachments") {
        out.cell(index, "attachments", "attachments must be removed");
    }
    if cell_type == "code" {
        match cell.get("outputs") {
            Some(Value::Array(outputs)) if !outputs.is_empty() => out.cell(
                index,
                "outputs",
                format!("{} saved output(s); must be []", outputs.len()),
            ),
            _ => {}
        }
        match cell.get("execution_count") {
            Some(Value::Null) | None => {}
            Some(other) => out.cell(
                index,
                "execution_count",
                format!("is {other}; must be null"),
            ),
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
        for key in metadata.keys() {
            if !CELL_METADATA.contains(&key.as_str()) {
                out.cell(index, &format!("metadata.{key}"), unexpected_metadata(key));
            }
        }
        let tags = metadata.get("tags").and_then(Value::as_array);
        if tags.is_some_and(|t| t.iter().any(|t| t == "injected-parameters")) {
            out.cell(
                index,
                "metadata.tags",
                "the parameters papermill injected into a run; the cell must be removed",
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

    fn notebook_value(cells: Value) -> Value {
        json!({
            "metadata": {
                "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                "language_info": {"name": "python"}
            },
            "nbformat": 4,
            "nbformat_minor": 5,
            "cells": cells,
        })
    }

    fn notebook(cells: Value) -> Vec<u8> {
        serde_json::to_vec(&notebook_value(cells)).unwrap()
    }

    fn code(id: &str, source: &str) -> Value {
        json!({"id": id, "cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": null})
    }

    fn messages(bytes: &[u8]) -> Vec<String> {
        check("nb.ipynb", bytes)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Every expected prefix is found, and nothing else.
    fn assert_findings(found: &[String], expect: &[&str]) {
        for e in expect {
            assert!(
                found.iter().any(|f| f.starts_with(e)),
                "{e} not in {found:#?}"
            );
        }
        assert_eq!(found.len(), expect.len(), "{found:#?}");
    }

    #[test]
    fn vendored_schemas_compile() {
        for minor in 0..6 {
            assert!(validators(minor).is_some(), "4.{minor}");
        }
        assert!(validators(6).is_none());
    }

    #[test]
    fn clean_notebook_passes() {
        let md = json!({"id": "m1", "cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "see mesure_memoire.py"]});
        let nb = notebook(json!([
            md,
            code("c1", "import json\n# same as mesure_memoire.py\nx = 1")
        ]));
        assert_eq!(messages(&nb), Vec::<String>::new());
        let mut with_bom = b"\xEF\xBB\xBF".to_vec();
        with_bom.extend_from_slice(&nb);
        assert_eq!(messages(&with_bom), Vec::<String>::new());
    }

    #[test]
    fn committed_notebook_passes() {
        let path = crate::project_root().join(crate::notebook::NOTEBOOK);
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(messages(&bytes), Vec::<String>::new());
    }

    #[test]
    fn each_saved_state_is_named_by_cell_and_field() {
        let mut with_output = code("a", "1");
        with_output["outputs"] = json!([{"output_type": "stream", "name": "stdout", "text": "1"}]);
        let mut counted = code("b", "1");
        counted["execution_count"] = json!(3);
        let mut timed = code("c", "1");
        timed["metadata"] = json!({"ExecuteTime": {}, "keep_output": true});
        let md = json!({"id": "m", "cell_type": "markdown", "metadata": {}, "source": "", "attachments": {}});
        let nb = notebook(json!([
            with_output,
            counted,
            timed,
            md,
            code("d", "from mesure_memoire import estimate")
        ]));
        assert_findings(
            &messages(&nb),
            &[
                "nb.ipynb: cell 0, field `outputs`: 1 saved output(s)",
                "nb.ipynb: cell 1, field `execution_count`: is 3",
                "nb.ipynb: cell 2, field `metadata.ExecuteTime`: execution timing",
                "nb.ipynb: cell 2, field `metadata.keep_output`",
                "nb.ipynb: cell 3, field `attachments`",
                "nb.ipynb: cell 4, field `source`: imports the companion script",
            ],
        );
    }

    #[test]
    fn the_schema_refuses_what_nbformat_refuses() {
        let mut no_count = code("a", "1");
        no_count.as_object_mut().unwrap().remove("execution_count");
        let md_with_outputs = json!({"id": "m", "cell_type": "markdown", "metadata": {}, "source": "", "outputs": []});
        let bad_id = code("not an id!", "1");
        let found = messages(&notebook(json!([no_count, md_with_outputs, bad_id])));
        assert_findings(
            &found,
            &[
                "nb.ipynb: nbformat 4.5 schema at `/cells/0`: \"execution_count\" is a required property",
                "nb.ipynb: nbformat 4.5 schema at `/cells/1`: Additional properties are not allowed ('outputs' was unexpected)",
                "nb.ipynb: nbformat 4.5 schema at `/cells/2/id`",
            ],
        );
        let mut unknown = code("a", "1");
        unknown["cell_type"] = "heading".into();
        assert_findings(
            &messages(&notebook(json!([unknown]))),
            &["nb.ipynb: cell 0, field `cell_type`: must be \"code\""],
        );
    }

    #[test]
    fn cell_ids_are_unique_and_only_from_4_5() {
        let nb = notebook(json!([
            code("x", "1"),
            code("y", "2"),
            code("x", "3"),
            code("x", "4")
        ]));
        assert_findings(
            &messages(&nb),
            &[
                "nb.ipynb: cell 2, field `id`: \"x\" is already the id of cell 0",
                "nb.ipynb: cell 3, field `id`: \"x\" is already the id of cell 0",
            ],
        );
        let mut old = notebook_value(json!([code("x", "1")]));
        old["nbformat_minor"] = json!(4);
        let found = messages(&serde_json::to_vec(&old).unwrap());
        assert_findings(
            &found,
            &[
                "nb.ipynb: nbformat 4.4 schema at `/cells/0`",
                "nb.ipynb: cell 0, field `id`: cell ids exist only from nbformat 4.5",
            ],
        );
        // Without ids, 4.4 is valid.
        old["cells"][0].as_object_mut().unwrap().remove("id");
        assert_eq!(
            messages(&serde_json::to_vec(&old).unwrap()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn run_metadata_of_every_runner_is_refused() {
        let mut cell = code("a", "1");
        cell["metadata"] = json!({
            "papermill": {"duration": 0.5, "exception": false, "start_time": "2026-01-01T00:00:00", "status": "completed"},
            "execution": {"iopub.execute_input": "2026-01-01T00:00:00.1Z", "shell.execute_reply": "2026-01-01T00:00:00.2Z"},
            "executionInfo": {"user": {"displayName": "someone"}},
            "tags": ["parameters"],
            "some_tool": 1
        });
        let mut injected = code("b", "DEVICE = \"cuda:1\"");
        injected["metadata"] = json!({"tags": ["injected-parameters"]});
        let mut nb = notebook_value(json!([cell, injected]));
        nb["metadata"]["papermill"] = json!({
            "input_path": "/home/someone/in.ipynb", "output_path": "/home/someone/out.ipynb",
            "parameters": {"DEVICE": "cuda:1"}, "version": "2.6.0"
        });
        nb["metadata"]["widgets"] = json!({"application/vnd.jupyter.widget-state+json": {}});
        nb["metadata"]["vscode"] = json!({"interpreter": {"hash": "abc"}});
        nb["metadata"]["language_info"]["version"] = json!("3.11.7");
        assert_findings(
            &messages(&serde_json::to_vec(&nb).unwrap()),
            &[
                "nb.ipynb: field `metadata.papermill`: papermill's run record",
                "nb.ipynb: field `metadata.widgets`: saved widget state",
                "nb.ipynb: field `metadata.vscode`: VS Code",
                "nb.ipynb: field `metadata.language_info.version`: recorded by a kernel",
                "nb.ipynb: cell 0, field `metadata.papermill`: papermill's run record",
                "nb.ipynb: cell 0, field `metadata.execution`: execution timing",
                "nb.ipynb: cell 0, field `metadata.executionInfo`: Google Colab",
                "nb.ipynb: cell 0, field `metadata.some_tool`: not written by",
                "nb.ipynb: cell 1, field `metadata.tags`: the parameters papermill injected",
            ],
        );
    }

    #[test]
    fn bad_format_is_caught() {
        let mut nb = notebook_value(json!([code("a", "1")]));
        nb["nbformat"] = json!(3);
        assert_eq!(
            messages(&serde_json::to_vec(&nb).unwrap()),
            ["nb.ipynb: field `nbformat`: is 3, expected 4"]
        );
        nb["nbformat"] = json!(4);
        nb["nbformat_minor"] = json!(6);
        let found = messages(&serde_json::to_vec(&nb).unwrap());
        assert!(
            found[0].contains("4.6 has no published schema"),
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
