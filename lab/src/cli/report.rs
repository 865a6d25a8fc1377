//! `lab report`: tables per phase for one or several measurement files, as text, Markdown or
//! JSON, and optionally an SVG chart.

use lab::document::read as read_measurement;
use lab::report::{build_report, render_markdown, render_svg, render_text};
use lab::stdout::{json as print_json, lines as emit};
use lab::Result;
use std::path::PathBuf;

/// Flags of `lab report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Measurement files written by `lab measure` or `mesure_memoire.py measure`; `-` reads
    /// one from standard input.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Also draw peak memory per phase and warm-forward times into this new SVG file.
    #[arg(long, value_name = "OUT.svg", allow_hyphen_values = true)]
    svg: Option<PathBuf>,
    /// Print the tables as Markdown.
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `lab report`.
///
/// A `comparison.json` that `lab measure --device all` wrote stands for the documents it
/// compares (the files it names, in its folder). The same document given twice (the same
/// SHA-256, whatever the path) is refused: a report counts each measurement once.
///
/// # Errors
/// Usage (exit 2) for a path that is not a file or not a measurement document (nor such a
/// comparison), for a document given twice, and for an
/// `--svg` path that exists or whose folder does not (checked before anything is printed);
/// Runtime (exit 1) for a missing or unreadable measurement file and when the chart cannot be
/// drawn or written. Nothing is printed or written unless every file is good.
pub fn run(args: Args) -> Result<()> {
    if let Some(svg) = &args.svg {
        // Checked before any work so that a bad --svg costs nothing; the write checks again.
        lab::output::check_new(svg)?;
    }
    if args
        .files
        .iter()
        .filter(|path| super::is_stdin(path))
        .count()
        > 1
    {
        return Err(lab::Error::usage(
            "`-` (standard input) can be given once: it holds one measurement document",
        ));
    }
    if let Some(done) = report_models(&args)? {
        return Ok(done);
    }
    let mut measurements = Vec::new();
    for path in &args.files {
        if super::is_stdin(path) {
            measurements.push(read_stdin_measurement()?);
        } else {
            measurements.extend(read_file(path)?);
        }
    }
    refuse_repeated(&measurements)?;
    let report = build_report(&measurements);
    if let Some(svg) = &args.svg {
        let drawing = render_svg(&report)?;
        lab::output::write_new(svg, drawing.as_bytes())?;
    }
    if args.json {
        print_json(&report)?;
    } else if args.markdown {
        emit(&[render_markdown(&report).trim_end().to_owned()])?;
    } else {
        emit(&[render_text(&report).trim_end().to_owned()])?;
    }
    if let Some(svg) = &args.svg {
        if !args.json {
            crate::errln!(
                "chart written to {}",
                lab::text::one_line(&svg.display().to_string())
            );
        }
    }
    Ok(())
}

/// `lab report` of model measurements (`lab measure --model`): each document's rows and
/// `lab plan`'s prediction beside the measured figures (text), or the documents (`--json`).
/// `None` when no file is a model measurement (the synthetic report runs).
///
/// # Errors
/// Usage (exit 2) when model and synthetic documents are mixed, for `--svg` or `--markdown`
/// (not drawn for model measurements), and for a model document that does not read.
fn report_models(args: &Args) -> Result<Option<()>> {
    let mut docs = Vec::new();
    let mut others = 0;
    for path in &args.files {
        if super::is_stdin(path) {
            others += 1;
            continue;
        }
        let bytes = match std::fs::metadata(path) {
            Ok(m) if m.is_file() && m.len() <= lab::document::MAX_DOCUMENT_BYTES => {
                std::fs::read(path).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        if lab::measure_model::is_model_document(&bytes) {
            let doc = lab::measure_model::parse(&bytes).map_err(|e| {
                lab::Error::usage(format!(
                    "{}: {e}",
                    lab::text::one_line(&path.display().to_string())
                ))
            })?;
            docs.push((path, doc));
        } else {
            others += 1;
        }
    }
    if docs.is_empty() {
        return Ok(None);
    }
    if others > 0 {
        return Err(lab::Error::usage(
            "lab report shows synthetic measurements or model measurements (lab measure --model), not both at once: give one kind",
        ));
    }
    if args.svg.is_some() || args.markdown {
        return Err(lab::Error::usage(
            "--svg and --markdown are for synthetic measurements; a model measurement is reported as text or --json",
        ));
    }
    if args.json {
        let all: Vec<&lab::document::model_run::ModelDocument> =
            docs.iter().map(|(_, d)| d).collect();
        return print_json(&all).map(Some);
    }
    let mut text = Vec::new();
    for (path, doc) in &docs {
        text.push(format!(
            "{}:",
            lab::text::one_line(&path.display().to_string())
        ));
        text.push(lab::measure_model::summary_text(doc).trim_end().to_owned());
    }
    emit(&text).map(Some)
}

/// The measurement document on standard input (`lab report -`), checked as a file is.
fn read_stdin_measurement() -> Result<lab::document::LoadedMeasurement> {
    let bytes = lab::input::stdin(lab::document::MAX_DOCUMENT_BYTES, "measurement document")?;
    let document = lab::document::parse(&bytes)
        .map_err(|e| lab::Error::usage(format!("(standard input): {e}")))?;
    Ok(lab::document::LoadedMeasurement {
        path: "-".into(),
        sha256: lab::digest::sha256_hex(&bytes),
        document,
    })
}

/// The measurement at `path`; for the comparison `lab measure --device all` writes, the
/// documents it names, read from its folder (and a note on standard error saying so).
///
/// # Errors
/// As [`read_measurement`]; for a comparison, also a document name that is not a plain file
/// name, or a comparison that names no document.
fn read_file(path: &std::path::Path) -> Result<Vec<lab::document::LoadedMeasurement>> {
    let error = match read_measurement(path) {
        Ok(m) => return Ok(vec![m]),
        Err(e @ lab::Error::Usage(_)) => e,
        Err(e) => return Err(e),
    };
    let Some(names) = comparison_files(path) else {
        return Err(error);
    };
    let shown = path.display();
    if names.is_empty() {
        return Err(lab::Error::usage(format!(
            "{shown} is the comparison `lab measure --device all` writes, and it names no \
             document (no GPU was measured): nothing to report"
        )));
    }
    if let Some(bad) = names
        .iter()
        .find(|n| n.is_empty() || n.contains('/') || n.contains('\\') || *n == "." || *n == "..")
    {
        return Err(lab::Error::usage(format!(
            "{shown} names the document '{}', which is not a file name beside it; give the \
             measurement documents themselves",
            lab::text::one_line(bad)
        )));
    }
    let folder = path.parent().unwrap_or(std::path::Path::new(""));
    crate::errln!(
        "note: {shown} is the comparison `lab measure --device all` writes; reporting the documents it compares: {}",
        names.join(", ")
    );
    names
        .iter()
        .map(|name| read_measurement(&folder.join(name)))
        .collect()
}

/// The document names listed by the comparison at `path`, when it is one: a small JSON
/// object with exactly the keys `lab measure --device all` writes (`basis`, `median_seconds`,
/// `gpus`, `flagged`; [`lab::fleet::Comparison`]); `None` for anything else.
fn comparison_files(path: &std::path::Path) -> Option<Vec<String>> {
    // Any failure (not a regular file, over 1 MiB, unreadable) means "not a comparison": the
    // document reader then words the error.
    let bytes = lab::input::file(path, 1 << 20).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let object = value.as_object()?;
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    if keys != ["basis", "median_seconds", "gpus", "flagged"] {
        return None;
    }
    object["gpus"]
        .as_array()?
        .iter()
        .filter_map(|line| match line.get("file") {
            Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(name)) => Some(Some(name.clone())),
            _ => Some(None),
        })
        .collect()
}

/// Refuses a document given twice (same SHA-256), naming both places it came from.
fn refuse_repeated(measurements: &[lab::document::LoadedMeasurement]) -> Result<()> {
    for (later, m) in measurements.iter().enumerate() {
        if let Some(first) = measurements[..later].iter().find(|f| f.sha256 == m.sha256) {
            let name = |x: &lab::document::LoadedMeasurement| {
                if x.path.as_os_str() == "-" {
                    "(standard input)".to_string()
                } else {
                    lab::text::one_line(&x.path.display().to_string())
                }
            };
            return Err(lab::Error::usage(format!(
                "{} and {} are the same document (sha256 {}): a report counts each measurement \
                 once; give it once",
                name(first),
                name(m),
                m.sha256
            )));
        }
    }
    Ok(())
}
