//! Performance facts per catalog GPU: `data/gpu-perf.csv` (embedded; `--gpu-perf FILE`
//! replaces it, checked by the same validator).
//!
//! Per GPU id: memory bandwidth (GB/s, 10^9 bytes per second); dense tensor throughput in
//! TFLOP/s (10^12 per second) for bf16, fp16, fp8 and int8 (TOPS), empty where the GPU has no
//! such tensor format (the T4 has no bf16 and no fp8); the rate with fp32 accumulation where a
//! card's headline fp16 rate assumes fp16 accumulation (GeForce cards: PyTorch accumulates in
//! fp32, so the RTX 4090 runs bf16/fp16 products at 165.2, not 330.3); the link between the
//! GPUs of one lot (`nvlink3`..`nvlink5`, `pcie3-p2p`.., `pcie4-no-p2p` where the driver allows
//! no peer-to-peer, `xgmi-pair` for two AMD GPUs sharing one Infinity Fabric link) with its
//! bandwidth per direction in GB/s; the expected-efficiency factors (fraction of the peak
//! compute and of the peak bandwidth a real kernel reaches, each with its band `low-high`,
//! labelled `measured`, `carried over` or `assumed`); the launch cost per kernel in
//! microseconds for eager execution and for CUDA graphs; and the vendor document every figure
//! comes from. Dense figures only: vendors print the 2:4-sparse ones first, which are twice
//! these. Sources and checks: `docs/PLANNING.md`, "GPU facts".
//!
//! Format: UTF-8 CSV (optional BOM, LF or CRLF), header exactly [`HEADER`], one row per catalog
//! GPU id, none missing, none twice, none unknown; numbers are plain decimals (digits, one
//! optional point), positive; efficiencies from 0 (exclusive) to 1; the source last and
//! non-empty (it may hold commas).

use crate::catalog::Catalog;
use crate::{Error, Result};
use rust_decimal::Decimal;
use serde::Serialize;
use std::path::Path;

/// The header a GPU performance file must have.
pub const HEADER: [&str; 19] = [
    "gpu",
    "bandwidth_gb_s",
    "bf16_tflops",
    "fp16_tflops",
    "fp8_tflops",
    "int8_tops",
    "fp32_accumulate_tflops",
    "link",
    "link_gb_s",
    "compute_efficiency",
    "compute_band",
    "bandwidth_efficiency",
    "bandwidth_band",
    "decode_attention_efficiency",
    "decode_attention_band",
    "efficiency_label",
    "eager_launch_us",
    "graph_launch_us",
    "source",
];

/// Links a lot's GPUs may have.
pub const LINKS: [&str; 9] = [
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "pcie3-p2p",
    "pcie4-p2p",
    "pcie5-p2p",
    "pcie4-no-p2p",
    "pcie5-no-p2p",
    "xgmi-pair",
];

/// Where an efficiency factor comes from: `measured` on that GPU, `carried over` (the
/// H200's measured fractions of the peaks and fixed kernel costs, transferred), `assumed`.
pub const LABELS: [&str; 3] = ["measured", "carried over", "assumed"];

/// Largest file read, bytes (1 MiB).
pub const MAX_BYTES: u64 = 1 << 20;

const EMBEDDED: &str = include_str!("../../data/gpu-perf.csv");

/// A tensor format's throughput.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// bfloat16 inputs.
    Bf16,
    /// float16 inputs.
    Fp16,
    /// 8-bit float inputs.
    Fp8,
    /// 8-bit integer inputs.
    Int8,
}

/// A band `low-high` of a factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Band {
    /// Lowest plausible value.
    #[serde(with = "rust_decimal::serde::str")]
    pub low: Decimal,
    /// Highest plausible value.
    #[serde(with = "rust_decimal::serde::str")]
    pub high: Decimal,
}

/// One GPU's performance facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuPerf {
    /// Catalog GPU id.
    pub gpu: String,
    /// Peak memory bandwidth, GB/s (10^9 B/s).
    #[serde(with = "rust_decimal::serde::str")]
    pub bandwidth_gb_s: Decimal,
    /// Dense bf16 tensor TFLOP/s, when the GPU has the format.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub bf16_tflops: Option<Decimal>,
    /// Dense fp16 tensor TFLOP/s (the headline rate).
    #[serde(with = "rust_decimal::serde::str_option")]
    pub fp16_tflops: Option<Decimal>,
    /// Dense fp8 tensor TFLOP/s.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub fp8_tflops: Option<Decimal>,
    /// Dense int8 tensor TOPS.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub int8_tops: Option<Decimal>,
    /// fp16/bf16 rate with fp32 accumulation, where lower than the headline (GeForce).
    #[serde(with = "rust_decimal::serde::str_option")]
    pub fp32_accumulate_tflops: Option<Decimal>,
    /// Link between the GPUs of one lot ([`LINKS`]).
    pub link: String,
    /// Its bandwidth per direction, GB/s.
    #[serde(with = "rust_decimal::serde::str")]
    pub link_gb_s: Decimal,
    /// Expected fraction of peak compute.
    #[serde(with = "rust_decimal::serde::str")]
    pub compute_efficiency: Decimal,
    /// Its band.
    pub compute_band: Band,
    /// Expected fraction of peak bandwidth.
    #[serde(with = "rust_decimal::serde::str")]
    pub bandwidth_efficiency: Decimal,
    /// Its band.
    pub bandwidth_band: Band,
    /// Expected fraction of peak bandwidth at which SDPA's decode call reads the keys and
    /// values of every query head (the slope of `examples/h200/time/calibration-attention.csv`
    /// on the H200; its fixed time and `repeat_kv`'s copy are in [`super::engine`]).
    #[serde(with = "rust_decimal::serde::str")]
    pub decode_attention_efficiency: Decimal,
    /// Its band.
    pub decode_attention_band: Band,
    /// `measured`, `carried over` or `assumed`.
    pub efficiency_label: String,
    /// Host cost per kernel launched eagerly, microseconds (a step is at least its launches).
    #[serde(with = "rust_decimal::serde::str")]
    pub eager_launch_us: Decimal,
    /// Time per kernel of a replayed CUDA graph of tiny kernels, microseconds: the least GPU
    /// time any kernel takes in the expected figures (eager or replayed).
    #[serde(with = "rust_decimal::serde::str")]
    pub graph_launch_us: Decimal,
    /// Vendor documents.
    pub source: String,
}

impl GpuPerf {
    /// The dense rate PyTorch reaches for products in `format`, TFLOP/s, or `None` when the
    /// GPU has no tensor cores for it. fp16/bf16 (and fp8, accumulated in fp32 by
    /// `torch._scaled_mm`) use the fp32-accumulate rate where the card has one (GeForce: half
    /// the headline).
    pub fn tflops(&self, format: Format) -> Option<Decimal> {
        let headline = match format {
            Format::Bf16 => self.bf16_tflops,
            Format::Fp16 => self.fp16_tflops,
            Format::Fp8 => self.fp8_tflops,
            Format::Int8 => self.int8_tops,
        }?;
        match (format, self.fp32_accumulate_tflops, self.fp16_tflops) {
            (Format::Int8, _, _) | (_, None, _) => Some(headline),
            // The fp8 headline assumes fp16 accumulation too: half of it (Ada whitepaper).
            (Format::Fp8, Some(acc), Some(fp16)) if acc < fp16 => Some(headline / Decimal::TWO),
            (_, Some(acc), _) => Some(headline.min(acc)),
        }
    }

    /// Whether the lot's link lets GPUs read each other's memory directly.
    pub fn peer_to_peer(&self) -> bool {
        !self.link.ends_with("no-p2p")
    }
}

/// The embedded file, or the one at `path`, validated against `catalog`.
///
/// # Errors
/// [`Error::Usage`] (exit 2) for an invalid file, naming the line; [`Error::Runtime`] for an
/// unreadable one.
pub fn load(path: Option<&Path>, catalog: &Catalog) -> Result<Vec<GpuPerf>> {
    match path {
        None => parse(EMBEDDED, catalog).map_err(|e| Error::usage(format!("embedded {e}"))),
        Some(path) => {
            let shown = crate::text::one_line(&path.display().to_string());
            if path.as_os_str().is_empty() {
                return Err(Error::usage(
                    "--gpu-perf needs a file name, got an empty one",
                ));
            }
            let meta = std::fs::metadata(path)
                .map_err(|e| Error::runtime(format!("cannot read {shown}: {e}")))?;
            if !meta.is_file() {
                return Err(Error::usage(format!("{shown}: not a regular file")));
            }
            let text = crate::input::model_text(path, MAX_BYTES, "GPU performance file")?;
            parse(&text, catalog).map_err(|e| Error::usage(format!("{shown}: {e}")))
        }
    }
}

fn decimal(text: &str) -> Option<Decimal> {
    let ok = !text.is_empty()
        && text.len() <= 16
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|b| *b == b'.').count() <= 1
        && !text.starts_with('.')
        && !text.ends_with('.');
    ok.then(|| text.parse::<Decimal>().ok())
        .flatten()
        .filter(|v| *v > Decimal::ZERO)
}

fn band(text: &str) -> Option<Band> {
    let (low, high) = text.split_once('-')?;
    let (low, high) = (decimal(low)?, decimal(high)?);
    (low <= high && high <= Decimal::ONE).then_some(Band { low, high })
}

/// Parses and validates the text of a GPU performance file.
///
/// # Errors
/// A one-line `gpu performance file: line N: ...` message.
pub fn parse(text: &str, catalog: &Catalog) -> std::result::Result<Vec<GpuPerf>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rows: Vec<GpuPerf> = Vec::new();
    let mut header_seen = false;
    for (index, raw) in text.split('\n').enumerate() {
        let line = index + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.is_empty() {
            continue;
        }
        let bad = |what: String| format!("gpu performance file: line {line}: {what}");
        if raw.contains(['\r', '\0', '"']) {
            return Err(bad(
                "a carriage return, NUL or quote character (plain CSV, one row per line)".into(),
            ));
        }
        let f: Vec<&str> = raw.splitn(HEADER.len(), ',').collect();
        if !header_seen {
            if f != HEADER {
                return Err(bad(format!(
                    "the header must be {}, found '{}'",
                    HEADER.join(","),
                    crate::text::excerpt(raw)
                )));
            }
            header_seen = true;
            continue;
        }
        if f.len() != HEADER.len() {
            return Err(bad(format!(
                "expected {} fields, found {}",
                HEADER.len(),
                f.len()
            )));
        }
        let gpu = f[0];
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
        let number = |i: usize| {
            decimal(f[i]).ok_or_else(|| {
                bad(format!(
                    "{} must be a positive decimal number, found '{}'",
                    HEADER[i],
                    crate::text::excerpt(f[i])
                ))
            })
        };
        let optional = |i: usize| {
            if f[i].is_empty() {
                Ok(None)
            } else {
                number(i).map(Some)
            }
        };
        let fraction = |i: usize| {
            number(i).and_then(|v| {
                if v <= Decimal::ONE {
                    Ok(v)
                } else {
                    Err(bad(format!("{} must be at most 1, found {v}", HEADER[i])))
                }
            })
        };
        let banded = |i: usize, value: Decimal| {
            band(f[i])
                .filter(|b| b.low <= value && value <= b.high)
                .ok_or_else(|| {
                    bad(format!(
                        "{} must be 'low-high' with low <= {} <= high <= 1, found '{}'",
                        HEADER[i],
                        HEADER[i - 1],
                        crate::text::excerpt(f[i])
                    ))
                })
        };
        let compute_efficiency = fraction(9)?;
        let bandwidth_efficiency = fraction(11)?;
        let decode_attention_efficiency = fraction(13)?;
        let row = GpuPerf {
            gpu: gpu.to_string(),
            bandwidth_gb_s: number(1)?,
            bf16_tflops: optional(2)?,
            fp16_tflops: optional(3)?,
            fp8_tflops: optional(4)?,
            int8_tops: optional(5)?,
            fp32_accumulate_tflops: optional(6)?,
            link: LINKS
                .iter()
                .find(|l| **l == f[7])
                .ok_or_else(|| {
                    bad(format!(
                        "link must be one of {}, found '{}'",
                        LINKS.join(", "),
                        crate::text::excerpt(f[7])
                    ))
                })?
                .to_string(),
            link_gb_s: number(8)?,
            compute_efficiency,
            compute_band: banded(10, compute_efficiency)?,
            bandwidth_efficiency,
            bandwidth_band: banded(12, bandwidth_efficiency)?,
            decode_attention_efficiency,
            decode_attention_band: banded(14, decode_attention_efficiency)?,
            efficiency_label: LABELS
                .iter()
                .find(|l| **l == f[15])
                .ok_or_else(|| {
                    bad(format!(
                        "efficiency_label must be one of {}, found '{}'",
                        LABELS.join(", "),
                        crate::text::excerpt(f[15])
                    ))
                })?
                .to_string(),
            eager_launch_us: number(16)?,
            graph_launch_us: number(17)?,
            source: f[18].to_string(),
        };
        if row.source.trim().is_empty() {
            return Err(bad("source is empty: name the vendor document".into()));
        }
        if row.fp16_tflops.is_none() && row.bf16_tflops.is_none() {
            return Err(bad("a GPU needs at least an fp16 or a bf16 rate".into()));
        }
        rows.push(row);
    }
    if !header_seen {
        return Err(format!(
            "gpu performance file: empty; expected the header {}",
            HEADER.join(",")
        ));
    }
    if let Some(missing) = catalog
        .gpu_ids()
        .into_iter()
        .find(|id| !rows.iter().any(|r| r.gpu == *id))
    {
        return Err(format!(
            "gpu performance file: no row for {missing} (every catalog GPU needs its facts)"
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn embedded_file_holds_every_catalog_gpu_with_datasheet_figures() {
        let catalog = Catalog::embedded().unwrap();
        let rows = load(None, &catalog).unwrap();
        assert_eq!(rows.len(), 15);
        let get = |id: &str| rows.iter().find(|r| r.gpu == id).unwrap();
        // SPEC figures checked against the datasheets (docs/PLANNING.md, "GPU facts").
        assert_eq!(get("h200").bandwidth_gb_s, d("4800"));
        assert_eq!(get("h200").tflops(Format::Bf16), Some(d("989.4")));
        assert_eq!(get("a100-80gb").tflops(Format::Bf16), Some(d("312")));
        assert_eq!(get("a100-80gb").tflops(Format::Fp8), None);
        assert_eq!(get("t4").tflops(Format::Bf16), None);
        assert_eq!(get("t4").tflops(Format::Fp16), Some(d("65")));
        assert_eq!(get("l40s").tflops(Format::Bf16), Some(d("362.05")));
        assert_eq!(get("l4").tflops(Format::Bf16), Some(d("121")));
        assert_eq!(get("mi300x").tflops(Format::Bf16), Some(d("1307.4")));
        assert_eq!(get("b200").tflops(Format::Bf16), Some(d("2250")));
        // GeForce: fp32 accumulation halves the headline fp16 and fp8 rates; int8 keeps it.
        let g = get("rtx4090");
        assert_eq!(g.tflops(Format::Fp16), Some(d("165.2")));
        assert_eq!(g.tflops(Format::Bf16), Some(d("165.2")));
        assert_eq!(g.tflops(Format::Fp8), Some(d("330.3")));
        assert_eq!(g.tflops(Format::Int8), Some(d("660.6")));
        assert!(!g.peer_to_peer());
        assert!(get("l40s").peer_to_peer());
        let measured: Vec<&str> = rows
            .iter()
            .filter(|r| r.efficiency_label == "measured")
            .map(|r| r.gpu.as_str())
            .collect();
        assert_eq!(measured, ["h200"]);
    }

    #[test]
    fn invalid_files_name_their_line() {
        let catalog = Catalog::embedded().unwrap();
        let good = EMBEDDED.to_string();
        let cases = [
            (
                good.replacen("gpu,bandwidth", "gpu;bandwidth", 1),
                "line 1: the header",
            ),
            (
                good.replacen("t4,320,", "t4,3e2,", 1),
                "line 2: bandwidth_gb_s",
            ),
            (
                good.replacen("t4,320,", "t4,0,", 1),
                "line 2: bandwidth_gb_s",
            ),
            (
                good.replacen("t4,320,", "t4,-320,", 1),
                "line 2: bandwidth_gb_s",
            ),
            (good.replacen("t4,", "t5,", 1), "unknown GPU 't5'"),
            (good.replacen("l4,", "t4,", 1), "t4 is listed twice"),
            (good.replacen(",pcie3-p2p,", ",pcie9,", 1), "link must be"),
            (
                good.replacen(",carried over,", ",guessed,", 1),
                "efficiency_label",
            ),
            (
                good.replacen(",0.774,0.50-0.85,", ",1.5,0.50-0.85,", 1),
                "at most 1",
            ),
            (
                good.replacen(",0.774,0.50-0.85,", ",0.774,0.82-0.90,", 1),
                "compute_band",
            ),
            (
                good.replacen("t4,320,,65,", "t4,320,,,", 1),
                "at least an fp16",
            ),
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
            let e = parse(&text, &catalog).expect_err(needle);
            assert!(e.contains(needle), "{needle}: {e}");
        }
        let crlf = format!("\u{feff}{}", good.replace('\n', "\r\n"));
        assert_eq!(parse(&crlf, &catalog).unwrap().len(), 15);
    }
}
