//! Memory per GPU model, as the runtime reports it: `data/gpu-memory.csv`.
//!
//! The catalog names say "141 GB" where the CUDA runtime reports 150,109,880,320 bytes for the
//! H200; vendors' GB are decimal, so an "80 GB" H100 holds about 79.6 GiB. This file gives, for
//! every catalog GPU id, the bytes to plan with and where the value comes from, best first:
//!
//! - `measured`: the `total_memory_bytes` of `lab environment` on that GPU (the reference names
//!   the file);
//! - `runtime`: a public record of what the runtime itself reports (CUDA `deviceQuery`'s total
//!   global memory, which is PyTorch's `total_memory`, or the ROCm runtime's GPU pool in
//!   `rocminfo`), in bytes; the reference names the thread;
//! - `nvidia-smi`: a public record of `nvidia-smi`'s MiB total, times 2^20. It is a little above
//!   what the CUDA runtime reports (621 MiB above for the A100 40 GB: 40960 MiB against
//!   `deviceQuery`'s 40339 MiB), a gap inside the planner's 1 GiB runtime reserve;
//! - `datasheet`: the vendor's nominal size taken as decimal GB, only where no public runtime
//!   record was found (below what the runtime reports on every card we know).
//!
//! It is embedded in `lab` and can be replaced with `--gpu-memory FILE`, checked by the same
//! validator.
//!
//! Format: UTF-8 CSV (optional BOM, LF or CRLF), header exactly
//! `gpu,memory_bytes,source,reference`; one row per catalog GPU id, no duplicates, none
//! missing, none unknown; `memory_bytes` ASCII digits from 1 to 2^63 - 1; `source` one of
//! [`SOURCES`]; `reference` non-empty.

use crate::catalog::Catalog;
use crate::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// The header a GPU memory file must have.
pub const HEADER: [&str; 4] = ["gpu", "memory_bytes", "source", "reference"];

/// The `source` values a row may give, best first (see the module documentation).
pub const SOURCES: [&str; 4] = ["measured", "runtime", "nvidia-smi", "datasheet"];

/// Largest GPU memory file read, in bytes (1 MiB).
pub const MAX_BYTES: u64 = 1 << 20;

const EMBEDDED: &str = include_str!("../../data/gpu-memory.csv");

/// One GPU model's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuMemory {
    /// Catalog GPU id.
    pub gpu: String,
    /// Bytes of device memory the runtime reports (or the datasheet's nominal size; see
    /// [`SOURCES`]).
    pub memory_bytes: u64,
    /// One of [`SOURCES`].
    pub source: String,
    /// Where the value comes from.
    pub reference: String,
}

/// The embedded file, or the one at `path`, validated against `catalog`.
///
/// # Errors
/// [`Error::Usage`] (exit 2) for an invalid file, naming the line; [`Error::Runtime`] for an
/// unreadable one.
pub fn load(path: Option<&Path>, catalog: &Catalog) -> Result<Vec<GpuMemory>> {
    match path {
        None => parse(EMBEDDED, catalog).map_err(|e| Error::usage(format!("embedded {e}"))),
        Some(path) => {
            let shown = crate::text::one_line(&path.display().to_string());
            if path.as_os_str().is_empty() {
                return Err(Error::usage(
                    "--gpu-memory needs a file name, got an empty one",
                ));
            }
            let meta = std::fs::metadata(path)
                .map_err(|e| Error::runtime(format!("cannot read {shown}: {e}")))?;
            if !meta.is_file() {
                return Err(Error::usage(format!("{shown}: not a regular file")));
            }
            let text = crate::input::model_text(path, MAX_BYTES, "GPU memory file")?;
            parse(&text, catalog).map_err(|e| Error::usage(format!("{shown}: {e}")))
        }
    }
}

/// Parses and validates the text of a GPU memory file.
///
/// # Errors
/// A one-line `gpu memory file: line N: ...` message.
pub fn parse(text: &str, catalog: &Catalog) -> std::result::Result<Vec<GpuMemory>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rows: Vec<GpuMemory> = Vec::new();
    let mut header_seen = false;
    for (index, raw) in text.split('\n').enumerate() {
        let line = index + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.is_empty() {
            continue;
        }
        let bad = |what: String| format!("gpu memory file: line {line}: {what}");
        if raw.contains(['\r', '\0', '"']) {
            return Err(bad(
                "a carriage return, NUL or quote character (plain CSV, one row per line)".into(),
            ));
        }
        let fields: Vec<&str> = raw.splitn(4, ',').collect();
        if !header_seen {
            if fields != HEADER {
                return Err(bad(format!(
                    "the header must be {}, found '{}'",
                    HEADER.join(","),
                    crate::text::excerpt(raw)
                )));
            }
            header_seen = true;
            continue;
        }
        if fields.len() != 4 {
            return Err(bad(format!("expected 4 fields, found {}", fields.len())));
        }
        let gpu = fields[0];
        if !catalog.gpu_ids().contains(&gpu) {
            return Err(bad(format!(
                "unknown GPU '{}'; the catalog's ids are {}",
                crate::text::excerpt(gpu),
                catalog.gpu_ids().join(", ")
            )));
        }
        if rows.iter().any(|r| r.gpu == gpu) {
            return Err(bad(format!("{gpu} is listed twice")));
        }
        let memory_bytes = Some(fields[1])
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|v| (1..=i64::MAX as u64).contains(v))
            .ok_or_else(|| {
                bad(format!(
                    "memory_bytes must be a whole number of bytes from 1 to {}, found '{}'",
                    i64::MAX,
                    crate::text::excerpt(fields[1])
                ))
            })?;
        if !SOURCES.contains(&fields[2]) {
            return Err(bad(format!(
                "source must be one of {}, found '{}'",
                SOURCES.join(", "),
                crate::text::excerpt(fields[2])
            )));
        }
        if fields[3].trim().is_empty() {
            return Err(bad(
                "reference is empty: say where the value comes from".into()
            ));
        }
        rows.push(GpuMemory {
            gpu: gpu.to_string(),
            memory_bytes,
            source: fields[2].to_string(),
            reference: fields[3].to_string(),
        });
    }
    if !header_seen {
        return Err(format!(
            "gpu memory file: empty; expected the header {}",
            HEADER.join(",")
        ));
    }
    if let Some(missing) = catalog
        .gpu_ids()
        .into_iter()
        .find(|id| !rows.iter().any(|r| r.gpu == *id))
    {
        return Err(format!(
            "gpu memory file: no row for {missing} (every catalog GPU needs its memory)"
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_file_is_valid_and_h200_is_the_measured_figure() {
        let catalog = Catalog::embedded().unwrap();
        let rows = load(None, &catalog).unwrap();
        assert_eq!(rows.len(), 15);
        let h200 = rows.iter().find(|r| r.gpu == "h200").unwrap();
        assert_eq!(h200.memory_bytes, 150_109_880_320);
        assert_eq!(h200.source, "measured");
        let measured: Vec<&str> = rows
            .iter()
            .filter(|r| r.source == "measured")
            .map(|r| r.gpu.as_str())
            .collect();
        assert_eq!(measured, ["h200"], "only the H200 was measured");
        // The recorded environment file holds the same figure.
        let env = include_str!("../../../examples/h200/environment-rust.json");
        assert!(env.contains("\"total_memory_bytes\": 150109880320"));
    }

    /// Every row follows its source's rule: an `nvidia-smi` row is the MiB total its reference
    /// quotes times 2^20, a `datasheet` row the decimal GB it quotes, a `runtime` row the bytes
    /// (or the KB of a ROCm pool) it quotes; each non-measured row cites a public thread or a
    /// datasheet. The 80 GB H100 is 79.6 GiB, not 80 x 10^9 bytes.
    #[test]
    fn every_row_is_what_its_source_reports() {
        let catalog = Catalog::embedded().unwrap();
        let rows = load(None, &catalog).unwrap();
        let number_before = |text: &str, unit: &str| -> u64 {
            let end = text.find(unit).unwrap();
            let start = text[..end]
                .rfind(|c: char| !c.is_ascii_digit())
                .map_or(0, |i| i + 1);
            text[start..end].parse().unwrap()
        };
        for row in &rows {
            let r = row.reference.as_str();
            match row.source.as_str() {
                "measured" => assert!(r.contains("lab environment"), "{r}"),
                "nvidia-smi" => {
                    assert_eq!(row.memory_bytes, number_before(r, "MiB") << 20, "{r}");
                    assert!(r.contains("github.com/"), "{r}");
                }
                "runtime" if r.contains(" KB ") => {
                    assert_eq!(row.memory_bytes, number_before(r, " KB ") * 1024, "{r}");
                    assert!(r.contains("github.com/"), "{r}");
                }
                "runtime" => {
                    assert_eq!(row.memory_bytes, number_before(r, " bytes"), "{r}");
                    assert!(r.contains("github.com/"), "{r}");
                }
                "datasheet" => {
                    assert_eq!(
                        row.memory_bytes,
                        number_before(r, " GB") * 1_000_000_000,
                        "{r}"
                    );
                    assert!(r.contains("no public runtime record found"), "{r}");
                }
                other => panic!("{}: source {other}", row.gpu),
            }
        }
        let bytes = |gpu: &str| rows.iter().find(|r| r.gpu == gpu).unwrap().memory_bytes;
        assert_eq!(bytes("h100"), 85_520_809_984);
        assert_eq!(bytes("l40s"), 46068 << 20);
        assert_eq!(bytes("rtx4090"), 24564 << 20);
        assert_eq!(bytes("a100-40gb"), 42_298_834_944);
        assert_eq!(bytes("mi300x"), 206_141_652_992);
        let datasheet: Vec<&str> = rows
            .iter()
            .filter(|r| r.source == "datasheet")
            .map(|r| r.gpu.as_str())
            .collect();
        assert_eq!(datasheet, ["rtx6000ada", "rtxpro6000", "mi325x"]);
        for source in ["runtime", "nvidia-smi"] {
            let text = EMBEDDED.replacen(",datasheet,", &format!(",{source},"), 1);
            assert!(parse(&text, &catalog).is_ok(), "{source}");
        }
    }

    #[test]
    fn invalid_files_name_their_line() {
        let catalog = Catalog::embedded().unwrap();
        let good = EMBEDDED.to_string();
        let cases = [
            (
                good.replacen("gpu,memory_bytes", "gpu;memory_bytes", 1),
                "line 1: the header",
            ),
            (
                good.replacen("t4,16106127360", "t4,16e9", 1),
                "line 2: memory_bytes",
            ),
            (
                good.replacen("t4,16106127360", "t4,0", 1),
                "line 2: memory_bytes",
            ),
            (
                good.replacen("t4,16106127360", "t4,99999999999999999999", 1),
                "line 2",
            ),
            (good.replacen("t4,", "t5,", 1), "unknown GPU 't5'"),
            (
                good.replacen(",datasheet,", ",guess,", 1),
                "source must be one of measured, runtime, nvidia-smi, datasheet",
            ),
            (
                good.replacen(",nvidia-smi,", ",NVIDIA-SMI,", 1),
                "source must be",
            ),
            (good.replacen("l4,", "t4,", 1), "t4 is listed twice"),
            (
                good.lines()
                    .filter(|l| !l.starts_with("b200"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                "no row for b200",
            ),
            (String::new(), "empty"),
        ];
        for (text, needle) in cases {
            let e = parse(&text, &catalog).unwrap_err();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        // A long value is quoted cut, so the line stays short.
        let long = "x".repeat(100_000);
        let e = parse(&good.replacen("t4,", &format!("{long},"), 1), &catalog).unwrap_err();
        assert!(
            e.contains(&format!("unknown GPU '{}…'", &long[..64])),
            "{e}"
        );
        assert!(e.len() < 400, "{e}");
        let crlf = format!("\u{feff}{}", good.replace('\n', "\r\n"));
        assert_eq!(parse(&crlf, &catalog).unwrap().len(), 15);
    }
}
