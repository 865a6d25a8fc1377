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
    // Each file is read once; its kind is told by the synthetic reader succeeding, else by
    // its `schema` (a model measurement), else it is neither (its error is kept for its turn).
    let given: Vec<Given> = args
        .files
        .iter()
        .map(|path| read_given(path))
        .collect::<Result<_>>()?;
    if let Some(done) = report_models(&args, &given)? {
        return Ok(done);
    }
    let mut measurements = Vec::new();
    for (path, item) in args.files.iter().zip(given) {
        match item {
            Given::Stdin => measurements.push(read_stdin_measurement()?),
            Given::Synthetic(m) => measurements.push(*m),
            Given::Model(..) => unreachable_model(path)?,
            Given::Other { error, bytes } => {
                measurements.extend(from_comparison(path, error, bytes.as_deref())?)
            }
        }
    }
    refuse_repeated(&measurements)?;
    // `--json` alone needs no report held: its rows are written as they are computed.
    let report = (args.svg.is_some() || !args.json).then(|| build_report(&measurements));
    if let (Some(svg), Some(report)) = (&args.svg, &report) {
        let drawing = render_svg(report)?;
        lab::output::write_new(svg, drawing.as_bytes())?;
    }
    if args.json {
        lab::stdout::stream(|out| lab::report::write_json_of(out, &measurements))?;
    } else if let Some(report) = &report {
        let text = if args.markdown {
            render_markdown(report)
        } else {
            render_text(report)
        };
        emit(&[text.trim_end().to_owned()])?;
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

/// One path given to `lab report`, read once.
enum Given {
    /// `-`: standard input, read in its turn (one synthetic document).
    Stdin,
    /// A synthetic measurement document, read and checked.
    Synthetic(Box<lab::document::LoadedMeasurement>),
    /// A model measurement (`lab measure --model`), read and checked, with the SHA-256 of
    /// its bytes (a report counts each document once).
    Model(Box<lab::document::model_run::ModelDocument>, String),
    /// Neither: what the synthetic reader said, and the bytes when they were read (the file
    /// may be the comparison `lab measure --device all` writes).
    Other {
        error: lab::Error,
        bytes: Option<Vec<u8>>,
    },
}

/// Reads `path` once and tells its kind.
///
/// # Errors
/// Usage (exit 2) for a model measurement that does not read (its error comes before any
/// other file's, as model documents are told apart first); every other problem is kept in
/// [`Given::Other`] for its turn.
fn read_given(path: &std::path::Path) -> Result<Given> {
    if super::is_stdin(path) {
        return Ok(Given::Stdin);
    }
    let bytes = match lab::document::read_bytes(path) {
        Ok(bytes) => bytes,
        Err(error) => return Ok(Given::Other { error, bytes: None }),
    };
    // The bytes stay only where they may still be needed: a model document's or a
    // comparison's (both small) after the synthetic reader refused them.
    let error = match lab::document::from_bytes(path, &bytes) {
        Ok(m) => return Ok(Given::Synthetic(Box::new(m))),
        Err(error) => error,
    };
    if lab::measure_model::is_model_document(&bytes) {
        let doc = lab::measure_model::parse(&bytes).map_err(|e| {
            lab::Error::usage(format!(
                "{}: {e}",
                lab::text::one_line(&path.display().to_string())
            ))
        })?;
        return Ok(Given::Model(Box::new(doc), lab::digest::sha256_hex(&bytes)));
    }
    Ok(Given::Other {
        error,
        bytes: Some(bytes),
    })
}

/// A model measurement reached the synthetic report: [`report_models`] returns first for
/// any of them, so this is never called; an internal error if it were.
fn unreachable_model(path: &std::path::Path) -> Result<()> {
    Err(lab::Error::runtime(format!(
        "internal error: {} is a model measurement in a synthetic report",
        lab::text::one_line(&path.display().to_string())
    )))
}

/// `lab report` of model measurements (`lab measure --model`): each document's rows and
/// `lab plan`'s prediction beside the measured figures (text), or the documents (`--json`).
/// `None` when no file is a model measurement (the synthetic report runs).
///
/// # Errors
/// Usage (exit 2) when model and synthetic documents are mixed, for a document given twice,
/// and for `--svg` or `--markdown` (not drawn for model measurements).
fn report_models(args: &Args, given: &[Given]) -> Result<Option<()>> {
    let docs: Vec<(&PathBuf, &lab::document::model_run::ModelDocument, &str)> = args
        .files
        .iter()
        .zip(given)
        .filter_map(|(path, item)| match item {
            Given::Model(doc, sha256) => Some((path, &**doc, sha256.as_str())),
            _ => None,
        })
        .collect();
    if docs.is_empty() {
        return Ok(None);
    }
    if docs.len() < given.len() {
        return Err(lab::Error::usage(
            "lab report shows synthetic measurements or model measurements (lab measure --model), not both at once: give one kind",
        ));
    }
    let named: Vec<(&std::path::Path, &str)> =
        docs.iter().map(|(p, _, s)| (p.as_path(), *s)).collect();
    refuse_repeated_named(&named)?;
    if args.svg.is_some() || args.markdown {
        return Err(lab::Error::usage(
            "--svg and --markdown are for synthetic measurements; a model measurement is reported as text or --json",
        ));
    }
    if args.json {
        let all: Vec<&lab::document::model_run::ModelDocument> =
            docs.iter().map(|(_, d, _)| *d).collect();
        return print_json(&all).map(Some);
    }
    let mut text = Vec::new();
    for (path, doc, _) in &docs {
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

/// The documents the comparison at `path` names (`lab measure --device all` writes it), read
/// from its folder (and a note on standard error saying so), when `path` (read as `bytes`)
/// is one; else `error`, what the document reader said of it.
///
/// # Errors
/// `error` when `path` is no comparison; as [`read_measurement`] for the documents it
/// names; a document name that is not a plain file name, or a comparison that names none.
fn from_comparison(
    path: &std::path::Path,
    error: lab::Error,
    bytes: Option<&[u8]>,
) -> Result<Vec<lab::document::LoadedMeasurement>> {
    if !matches!(error, lab::Error::Usage(_)) {
        return Err(error);
    }
    let Some(names) = bytes.and_then(comparison_files) else {
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

/// The document names listed by the comparison held in `bytes`, when it is one: a small JSON
/// object (at most 1 MiB) with exactly the keys `lab measure --device all` writes (`basis`,
/// `median_seconds`, `gpus`, `flagged`; [`lab::fleet::Comparison`]); `None` for anything else.
fn comparison_files(bytes: &[u8]) -> Option<Vec<String>> {
    // Anything larger is not a comparison: the document reader's error then stands.
    if bytes.len() > 1 << 20 {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
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
    let named: Vec<(&std::path::Path, &str)> = measurements
        .iter()
        .map(|m| (m.path.as_path(), m.sha256.as_str()))
        .collect();
    refuse_repeated_named(&named)
}

/// Refuses the second of two (path, SHA-256) with the same SHA-256, naming both paths (`-` as
/// "(standard input)"): a report counts each measurement once, of either kind.
fn refuse_repeated_named(named: &[(&std::path::Path, &str)]) -> Result<()> {
    for (later, (path, sha256)) in named.iter().enumerate() {
        if let Some((first, _)) = named[..later].iter().find(|(_, s)| s == sha256) {
            let name = |x: &std::path::Path| {
                if x.as_os_str() == "-" {
                    "(standard input)".to_string()
                } else {
                    lab::text::one_line(&x.display().to_string())
                }
            };
            return Err(lab::Error::usage(format!(
                "{} and {} are the same document (sha256 {sha256}): a report counts each \
                 measurement once; give it once",
                name(first),
                name(path),
            )));
        }
    }
    Ok(())
}
