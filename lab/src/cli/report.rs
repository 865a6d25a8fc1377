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
/// # Errors
/// Usage (exit 2) for a path that is not a file or not a measurement document, and for an
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
    let measurements = args
        .files
        .iter()
        .map(|path| {
            if super::is_stdin(path) {
                read_stdin_measurement()
            } else {
                read_measurement(path)
            }
        })
        .collect::<Result<Vec<_>>>()?;
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
            crate::errln!("chart written to {}", svg.display());
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
