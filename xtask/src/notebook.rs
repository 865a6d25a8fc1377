//! `cargo xtask notebook`: builds `dist/mesure-memoire.ipynb` from `dist/mesure_memoire.py`.
//!
//! One source of truth: the notebook's library code cells are the script's marked regions,
//! copied verbatim (`# notebook-cell: NAME` ... `# end-notebook-cell`). The markdown and the
//! few cells that call the code (parameters, "run this step") are written here. The output is
//! deterministic: nbformat 4.5, fixed cell ids, sorted keys, one-space indent (as Jupyter
//! saves), every `outputs` empty and every `execution_count` null, no widget state.
//!
//! `cargo xtask notebook --check` (run by `cargo xtask verify`) rewrites nothing: it fails
//! when the committed notebook differs from what the script would generate.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;

/// The script holding the code, relative to the workspace root.
pub const SCRIPT: &str = "dist/mesure_memoire.py";

/// The generated notebook, relative to the workspace root.
pub const NOTEBOOK: &str = "dist/mesure-memoire.ipynb";

/// Marker line opening a region: `# notebook-cell: NAME`.
const START: &str = "# notebook-cell: ";

/// Marker line closing a region.
const END: &str = "# end-notebook-cell";

/// Flags of `cargo xtask notebook`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only check that the committed notebook is up to date (exit 1 if not); write nothing.
    #[arg(long)]
    pub check: bool,
}

/// One cell of the notebook, in order.
enum Cell {
    /// Markdown text written here.
    Markdown(&'static str, &'static str),
    /// Code written here (parameters and the calls that run a step).
    Code(&'static str, &'static str),
    /// Code copied from the script region of that name.
    Region(&'static str, &'static str),
}

/// The notebook, cell by cell: (id, content).
const CELLS: &[Cell] = &[
    Cell::Markdown(
        "intro",
        r#"# IteraGPU Lab v1: GPU memory of a small synthetic MLP

This notebook walks through the kit's workflow in one Python kernel: an estimate of weight
memory (no GPU needed), a look at the environment, then a measurement whose size you set,
on a small network `Linear -> GELU -> Linear`. Nothing is downloaded: no model, no data set.
The network is not a language model, not a training run and not a benchmark of the GPUs
IteraGPU rents; it is a controlled workload for reading PyTorch's memory counters.

The code cells are the same code as the command-line companion `mesure_memoire.py`
(generated from it), but the notebook does not import the script: it also works when
downloaded on its own. Python 3.10 or later is enough for step 1; steps 2 to 4 also need an
existing PyTorch build that matches the GPU, its driver and its CUDA or ROCm runtime.
Nothing in this notebook installs anything.

Run the cells from top to bottom. Before sharing a copy, clear its outputs."#,
    ),
    Cell::Markdown(
        "parameters-intro",
        r#"## Parameters

Edit only this cell. `DEVICE` is always explicit: `cuda:0`, `cuda:1`, ... (ROCm builds of
PyTorch use the same `cuda` name). Output files must be new names: a measurement never
overwrites an existing file."#,
    ),
    Cell::Code(
        "parameters",
        r#"# Step 1: weight estimate (no GPU)
PARAMETERS = 7_000_000_000  # number of parameters
BITS = 16  # storage bits per parameter, rounded up to whole bytes
RESERVE_GIB = "4"  # an assumption you choose, in GiB ("0" for none)

# Steps 2 and 3: environment and a small measurement
DEVICE = "cuda:0"
SMALL = dict(batch=1, context=16, width=64, dtype="float32", warmup=1, repeats=2, seed=0)
SMALL_OUTPUT = "mesures-petit-essai.json"
GRAPH_REPLAYS = None  # e.g. 1000: also measure the CUDA-graph floor after the phases

# Step 4: a larger measurement, off until you switch it on
RUN_LARGER = False
LARGER = dict(batch=2, context=128, width=1024, dtype="float32", warmup=3, repeats=5, seed=0)
LARGER_OUTPUT = "mesures.json""#,
    ),
    Cell::Markdown(
        "shared-intro",
        r#"## Shared code

Imports and helpers used by every step: the tool's identity, the error type (each error is
one sentence saying what is wrong and how to fix it), strict whole-number parsing and
half-to-even decimal formatting."#,
    ),
    Cell::Region("code-imports", "imports"),
    Cell::Region("code-common", "common"),
    Cell::Markdown(
        "estimate-intro",
        r#"## Step 1: estimate the weights, no GPU

The storage width is rounded **up** to whole bytes (4 bits -> 1 byte, 12 -> 2, 16 -> 2).
Weight bytes = parameters x bytes per parameter, shown in GiB (2^30 bytes) and in decimal GB
(10^9 bytes): two different units. The reserve is a number you choose, not a measurement; it
is added to give a total in GiB. The arithmetic is exact (Python's `decimal`), and every
shown value is rounded once, half to even, to 6 decimals.

The result covers the weights only. It leaves out activations, the KV cache, quantization
metadata, gradients, optimizer states, libraries and the runtime, and it does not tell you
whether a real model fits on a given card."#,
    ),
    Cell::Region("code-estimate", "estimate"),
    Cell::Code(
        "run-estimate",
        r#"estimate = estimate_weights(PARAMETERS, BITS, RESERVE_GIB)
print(estimate_text(estimate))"#,
    ),
    Cell::Markdown(
        "environment-intro",
        r#"## Step 2: check the environment you already have

Keep with your results: the Python version, the PyTorch version, the CUDA or HIP version
PyTorch was **built** with (not the driver's version), the GPU actually visible at `DEVICE`
with its compute capability, and the total memory the runtime announces. The driver version
appears only when the vendor tool (`nvidia-smi` or `rocm-smi`) answers, labelled with that
source. No environment variable, host name or user name is collected.

This step is a diagnostic: "not available" is a valid answer, not an error."#,
    ),
    Cell::Region("code-environment", "environment"),
    Cell::Code(
        "run-environment",
        r#"environment = collect_environment(DEVICE)
print(environment_text(environment))"#,
    ),
    Cell::Markdown(
        "measure-intro",
        r#"## Step 3: a small, bounded measurement

Start small, ideally in a freshly started kernel. The model is `Linear(width, 4 x width)`
-> exact GELU (erf) -> `Linear(4 x width, width)`, with biases, initialised on the CPU from
the seed and then moved to `DEVICE`. The input `[batch, context, width]` is created directly
on the GPU from the same seed; `context` is only a number of positions (no attention, no KV
cache). Weights and input share the dtype; no autocast, no gradients, no optimizer, no
quantization, one GPU. TF32 for float32 matmuls is left as PyTorch has it (off by default)
and recorded.

| phase | what it covers |
| --- | --- |
| `model_load` | building and initialising the model on the CPU, then moving it to the GPU (the time includes the CPU work; the counters are GPU only) |
| `inputs` | creating the synthetic input on the GPU |
| `cold_forward` | the first forward pass after device, generator and input set-up (not a cold start of the machine or the driver) |
| `warmup` | all warm-up passes together, in one row (kept apart from the repetitions; the row is there even with 0 passes) |
| `warm_forward` | one row per repetition after the warm-up |

Every phase: synchronize the device, read the baseline allocated and reserved bytes, reset the
peak counters, record a CUDA start event, run, record the end event, synchronize, read the
end and peak counters. Wall time covers the whole step (Python overhead and synchronization
included); GPU time comes from the two CUDA events. The output of a forward pass still
exists at its phase's final reading and is freed right after it, before the next pass; the
weights and the input persist; the allocator's cache is kept (no `empty_cache`).

With `GRAPH_REPLAYS = N` the measurement then captures one forward into a CUDA graph (after
three warm-up forwards on a side stream) and replays it: five batches of N replays back to
back between two CUDA events, and N single replays each followed by a synchronize. The
document gets a `graph` object: the launch-free time per forward, the launch overhead of the
eager forward, and the allocator counters around capture (a graph keeps its own memory pool).

Without an importable PyTorch or without the GPU named by `DEVICE` the measurement stops with
a clear error and writes nothing; it never runs on the CPU. The JSON is written atomically to
a new file."#,
    ),
    Cell::Region("code-measure", "measure"),
    Cell::Code(
        "run-small",
        r#"small = run_measurement(DEVICE, **SMALL, graph_replays=GRAPH_REPLAYS)
write_new_json(SMALL_OUTPUT, small)
print(phases_text(small))
if GRAPH_REPLAYS is not None:
    print(graph_text(small))
print("wrote", SMALL_OUTPUT)"#,
    ),
    Cell::Markdown(
        "larger-intro",
        r#"## Step 4: a larger measurement

`LARGER` is a proposed configuration, not a guaranteed capacity or a published result. Grow
one dimension at a time and keep an eye on the memory left on the card. Memory counters of
one process carry over from run to run (the allocator keeps its cache), so for readings
untouched by step 3, restart the kernel and run every cell except the small measurement.
Set `RUN_LARGER = True` in the parameters cell to run it."#,
    ),
    Cell::Code(
        "run-larger",
        r#"if RUN_LARGER:
    larger = run_measurement(DEVICE, **LARGER)
    write_new_json(LARGER_OUTPUT, larger)
    print(phases_text(larger))
    print("wrote", LARGER_OUTPUT)
else:
    print("RUN_LARGER is False: the larger measurement was skipped")"#,
    ),
    Cell::Markdown(
        "reading",
        r#"## Reading the counters

- `allocated` is part of `reserved`: never add the two.
- `peak_allocated_bytes` and `peak_reserved_bytes` are two separate maxima: never subtract
  one from the other to get a "cache" size. Compare baselines, ends and peaks each on its own.
- The counters cover only this process's PyTorch allocator on `DEVICE`: not the CUDA or HIP
  context, not other processes, not other GPUs, not the card's total use.
- After the first forward pass some memory (tens of MiB on an H200 in our runs) can stay
  allocated beyond the output: most likely the cuBLAS workspace, kept for later passes.
- The values depend on the allocator and the software versions: keep the environment with
  the results (it is in the JSON file).

## Then: quality and cost

Read `protocole-qualite.md` and fix the useful work, the quality threshold and what counts as
an accepted unit **before** a real trial. Record every real run in `resultats-bruts.csv`,
linking it to its measurement file by name and SHA-256 (the next cell prints it). Only then
price the package with `python calcul_forfaits.py --gpu b200 --days 7 --lots 2`, adding
`--accepted-results K` once you know K."#,
    ),
    Cell::Code(
        "fingerprint",
        r#"import hashlib

for name in (SMALL_OUTPUT, LARGER_OUTPUT):
    if os.path.exists(name):
        with open(name, "rb") as stream:
            print(name, hashlib.sha256(stream.read()).hexdigest())"#,
    ),
];

/// Runs `cargo xtask notebook [--check]`.
///
/// # Errors
/// The script cannot be read or its regions are malformed; with `--check`, the notebook is
/// missing or out of date.
pub fn run(args: Args) -> Result<()> {
    let root = crate::project_root();
    if args.check {
        check(&root)?;
        lab::errln!("{NOTEBOOK} is up to date with {SCRIPT}");
        return Ok(());
    }
    let notebook = generate(&root)?;
    std::fs::write(root.join(NOTEBOOK), notebook)
        .with_context(|| format!("cannot write {NOTEBOOK}"))?;
    lab::errln!("wrote {NOTEBOOK} from {SCRIPT}");
    Ok(())
}

/// The notebook text the script in `root` generates.
///
/// # Errors
/// The script cannot be read or its regions are malformed.
pub fn generate(root: &Path) -> Result<String> {
    let script = std::fs::read_to_string(root.join(SCRIPT))
        .with_context(|| format!("cannot read {SCRIPT}"))?;
    render(&script)
}

/// Fails unless the committed notebook is exactly what the script generates.
///
/// # Errors
/// The notebook is missing, or differs (the message says which command fixes it).
pub fn check(root: &Path) -> Result<()> {
    let expected = generate(root)?;
    let actual = std::fs::read_to_string(root.join(NOTEBOOK))
        .with_context(|| format!("cannot read {NOTEBOOK}; run `cargo xtask notebook`"))?;
    if let Some(line) = first_difference(&actual, &expected) {
        bail!(
            "{NOTEBOOK} is out of date with {SCRIPT} (first difference at line {line}); run `cargo xtask notebook` and commit the result"
        );
    }
    Ok(())
}

/// The 1-based line where `actual` first differs from `expected`; `None` when they are equal.
pub fn first_difference(actual: &str, expected: &str) -> Option<usize> {
    if actual == expected {
        return None;
    }
    Some(
        actual
            .lines()
            .zip(expected.lines())
            .position(|(a, e)| a != e)
            .map_or_else(
                || actual.lines().count().min(expected.lines().count()) + 1,
                |i| i + 1,
            ),
    )
}

/// The marked regions of `script`, in order: (name, code). Blank lines around each region's
/// code are dropped; everything else is kept verbatim.
///
/// # Errors
/// A region opened twice, nested, left open, closed without being opened, or empty.
pub fn regions(script: &str) -> Result<Vec<(String, String)>> {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut open: Option<(String, usize, Vec<&str>)> = None;
    for (index, line) in script.lines().enumerate() {
        let number = index + 1;
        if let Some(name) = line.strip_prefix(START) {
            if let Some((current, start, _)) = &open {
                bail!("{SCRIPT}:{number}: region '{name}' opens inside region '{current}' (opened on line {start})");
            }
            let name = name.trim().to_string();
            if name.is_empty() || found.iter().any(|(n, _)| *n == name) {
                bail!("{SCRIPT}:{number}: region name '{name}' is empty or used twice");
            }
            open = Some((name, number, Vec::new()));
        } else if line.trim_end() == END {
            let Some((name, start, lines)) = open.take() else {
                bail!("{SCRIPT}:{number}: '{END}' without an opening marker");
            };
            let code = lines.join("\n").trim_matches('\n').to_string();
            if code.trim().is_empty() {
                bail!("{SCRIPT}:{start}: region '{name}' is empty");
            }
            found.push((name, code));
        } else if let Some((_, _, lines)) = &mut open {
            lines.push(line);
        }
    }
    if let Some((name, start, _)) = open {
        bail!("{SCRIPT}:{start}: region '{name}' is never closed with '{END}'");
    }
    Ok(found)
}

/// The notebook JSON text for `script`.
///
/// # Errors
/// Malformed regions, a region the notebook needs that the script lacks, or a script region
/// the notebook does not use (so that no code is silently left out).
pub fn render(script: &str) -> Result<String> {
    let regions = regions(script)?;
    let mut used: Vec<&str> = Vec::new();
    let mut cells = Vec::new();
    for cell in CELLS {
        let value = match cell {
            Cell::Markdown(id, text) => json!({
                "cell_type": "markdown",
                "id": id,
                "metadata": {},
                "source": source_lines(text),
            }),
            Cell::Code(id, code) => code_cell(id, code),
            Cell::Region(id, name) => {
                let code = regions
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, code)| code)
                    .with_context(|| format!("{SCRIPT} has no region '{START}{name}'"))?;
                used.push(name);
                code_cell(id, code)
            }
        };
        cells.push(value);
    }
    if let Some((name, _)) = regions.iter().find(|(n, _)| !used.contains(&n.as_str())) {
        bail!("{SCRIPT} region '{name}' is not placed in the notebook (add it to xtask/src/notebook.rs)");
    }
    let notebook = json!({
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    });
    let mut out = String::new();
    write_value(&mut out, &notebook, 0);
    out.push('\n');
    Ok(out)
}

/// A code cell with no outputs and no execution count.
fn code_cell(id: &str, code: &str) -> Value {
    json!({
        "cell_type": "code",
        "execution_count": null,
        "id": id,
        "metadata": {},
        "outputs": [],
        "source": source_lines(code),
    })
}

/// Splits text into nbformat source lines: each keeps its `\n` except the last.
fn source_lines(text: &str) -> Value {
    let text = text.trim_end_matches('\n');
    let mut lines: Vec<Value> = text
        .split_inclusive('\n')
        .map(|l| Value::String(l.to_string()))
        .collect();
    if lines.is_empty() {
        lines.push(Value::String(String::new()));
    }
    Value::Array(lines)
}

/// Writes `value` as JSON the way Jupyter saves notebooks: keys sorted, one-space indent,
/// UTF-8 kept as is, empty arrays and objects as `[]` and `{}`.
fn write_value(out: &mut String, value: &Value, depth: usize) {
    let pad = |out: &mut String, depth: usize| out.push_str(&" ".repeat(depth));
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                pad(out, depth + 1);
                write_value(out, item, depth + 1);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, key) in keys.iter().enumerate() {
                pad(out, depth + 1);
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push_str(": ");
                write_value(out, &map[key.as_str()], depth + 1);
                out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push('}');
        }
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT_TEXT: &str = "import sys\n# notebook-cell: imports\nimport os\n\n# end-notebook-cell\n\n# notebook-cell: common\nA = 1\n\n\ndef f():\n    return A\n# end-notebook-cell\nmain()\n";

    #[test]
    fn regions_are_extracted_verbatim_without_surrounding_blank_lines() {
        let found = regions(SCRIPT_TEXT).unwrap();
        assert_eq!(
            found,
            vec![
                ("imports".to_string(), "import os".to_string()),
                (
                    "common".to_string(),
                    "A = 1\n\n\ndef f():\n    return A".to_string()
                ),
            ]
        );
    }

    #[test]
    fn malformed_regions_are_errors() {
        for bad in [
            "# notebook-cell: a\nx\n",
            "x\n# end-notebook-cell\n",
            "# notebook-cell: a\n# notebook-cell: b\n# end-notebook-cell\n",
            "# notebook-cell: a\n\n# end-notebook-cell\n",
            "# notebook-cell: a\nx\n# end-notebook-cell\n# notebook-cell: a\ny\n# end-notebook-cell\n",
        ] {
            assert!(regions(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn missing_or_unused_regions_are_errors() {
        let error = render(SCRIPT_TEXT).unwrap_err().to_string();
        assert!(error.contains("no region"), "{error}");
    }

    #[test]
    fn source_lines_keep_newlines_but_the_last() {
        assert_eq!(source_lines("a\nb\n"), json!(["a\n", "b"]));
        assert_eq!(source_lines("a"), json!(["a"]));
    }

    #[test]
    fn committed_notebook_is_clean_and_up_to_date() {
        let root = crate::project_root();
        check(&root).unwrap();
        let text = std::fs::read_to_string(root.join(NOTEBOOK)).unwrap();
        let findings = crate::notebook_check::check(NOTEBOOK, text.as_bytes());
        assert!(findings.is_empty(), "{findings:?}");
        let notebook: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(notebook["nbformat"], 4);
        assert_eq!(notebook["nbformat_minor"], 5);
        assert_eq!(notebook["metadata"]["kernelspec"]["name"], "python3");
        assert!(notebook["metadata"].get("widgets").is_none());
        let cells = notebook["cells"].as_array().unwrap();
        assert_eq!(cells[0]["cell_type"], "markdown");
        for cell in cells {
            if cell["cell_type"] == "code" {
                assert_eq!(cell["outputs"], json!([]));
                assert!(cell["execution_count"].is_null());
                let source: String = cell["source"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap())
                    .collect();
                assert!(!source.contains("import mesure_memoire"));
                assert!(!source.contains("from mesure_memoire"));
            }
        }
        let ids: Vec<&str> = cells.iter().map(|c| c["id"].as_str().unwrap()).collect();
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        // The parameters cell comes before any code.
        let first_code = cells.iter().find(|c| c["cell_type"] == "code").unwrap();
        assert_eq!(first_code["id"], "parameters");
    }

    #[test]
    fn rendering_is_deterministic() {
        let root = crate::project_root();
        assert_eq!(generate(&root).unwrap(), generate(&root).unwrap());
    }
}
