//! `lab estimate`: weight memory from a parameter count and a storage width (no GPU).

use super::numbers::{emit, positive_integer, print_json};
use lab::estimate::{estimate, parse_reserve_gib};
use rust_decimal::Decimal;

/// Flags of `lab estimate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of parameters, all digits (e.g. 7000000000).
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    parameters: String,
    /// Storage width of one parameter in bits (e.g. 16, 8, 4); rounded up to whole bytes.
    #[arg(long, value_name = "B", allow_hyphen_values = true)]
    bits: String,
    /// Extra GiB you choose to set aside (an assumption, not a measurement); default 0.
    #[arg(long, value_name = "R", allow_hyphen_values = true)]
    reserve_gib: Option<String>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
}

/// Runs `lab estimate`.
///
/// # Errors
/// Usage (exit 2) for a zero, negative or non-integer parameter count or bit width, a
/// negative or non-finite reserve, or weights beyond 2^64 bytes.
pub fn run(args: Args) -> lab::Result<()> {
    let parameters = positive_integer("--parameters", &args.parameters, u64::MAX)?;
    let bits = positive_integer("--bits", &args.bits, u64::from(u32::MAX))?;
    let bits = u32::try_from(bits).map_err(|_| lab::Error::usage("--bits is too large"))?;
    let reserve = match args.reserve_gib.as_deref() {
        Some(text) => parse_reserve_gib(text)?,
        None => Decimal::ZERO,
    };
    let e = estimate(parameters, bits, reserve)?;
    if args.json {
        return print_json(&e);
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
    out.push(
        "  This is weight memory only; it does not say whether a real model fits a card."
            .to_string(),
    );
    emit(&out)
}
