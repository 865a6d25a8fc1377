//! `lab estimate`: weight memory from a parameter count and a storage width (no GPU).

use lab::estimate::estimate;
use lab::values;
use rust_decimal::Decimal;

/// Flags of `lab estimate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of parameters, all digits (e.g. 7000000000).
    #[arg(long, value_name = "P", value_parser = values::positive, allow_hyphen_values = true)]
    parameters: u64,
    /// Storage width of one parameter in bits (e.g. 16, 8, 4); rounded up to whole bytes.
    #[arg(long, value_name = "B", value_parser = values::positive_u32, allow_hyphen_values = true)]
    bits: u32,
    /// Extra GiB you choose to set aside (an assumption, not a measurement); default 0.
    #[arg(long, value_name = "R", value_parser = values::reserve_gib, allow_hyphen_values = true)]
    reserve_gib: Option<Decimal>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

/// Runs `lab estimate`.
///
/// # Errors
/// Usage (exit 2) for weights beyond 2^64 bytes; Runtime (exit 1) for a failed write to
/// standard output. (Bad flag values are refused by clap through [`lab::values`].)
pub fn run(args: Args) -> lab::Result<()> {
    let reserve = args.reserve_gib.unwrap_or(Decimal::ZERO);
    let e = estimate(args.parameters, args.bits, reserve)?;
    if args.json {
        return lab::stdout::json(&e);
    }
    let mut out: Vec<String> = Vec::new();
    let byte_word = if e.bytes_per_parameter == 1 {
        "byte"
    } else {
        "bytes"
    };
    out.push(format!(
        "{} parameters x {} {byte_word} ({} bits rounded up to whole bytes) = {} bytes",
        e.parameters, e.bytes_per_parameter, e.bits, e.weights_bytes
    ));
    out.push(format!("  weights:  {} GiB (2^30 bytes)", e.weights_gib));
    out.push(format!("  weights:  {} GB (10^9 bytes)", e.weights_gb));
    out.push(format!(
        "  reserve:  {} GiB (your assumption)",
        e.reserve_gib
    ));
    out.push(format!("  total:    {} GiB", e.total_gib));
    out.push(format!("  not included: {}.", e.excluded.join(", ")));
    if e.bits % 8 != 0 {
        // The whole-byte rule overstates a packed width; plan counts packing and scales.
        out.push(format!(
            "  {} bits is a packed width: for packed weights (with their scales) use `lab plan --weights-dtype int4` (PROTOCOL §9).",
            e.bits
        ));
    }
    out.push(
        "  This is weight memory only; it does not say whether a real model fits a card."
            .to_string(),
    );
    lab::stdout::lines(&out)
}
