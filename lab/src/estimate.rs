//! Weight-memory estimate from a parameter count and a storage width (docs/PROTOCOL.md §2). No GPU.
//!
//! - bytes per parameter = `ceil(bits / 8)` (4 -> 1, 12 -> 2, 16 -> 2);
//! - weight bytes = parameters x bytes per parameter;
//! - GiB = bytes / 2^30 (binary), GB = bytes / 10^9 (decimal); both are reported;
//! - the reserve is an assumption the user chooses, in GiB, added to the weights for a total.
//!
//! Every shown value is computed exactly from integers and rounded **once**, half-to-even, to
//! 6 decimal places: the total is `round(bytes / 2^30 + reserve)`, not the sum of two rounded
//! numbers. The estimate covers weights only; see [`EXCLUDED`]. It does not say whether a real
//! model fits a card.

use crate::error::{Error, Result};
use crate::pricing::round_half_even_ratio;
use rust_decimal::Decimal;
use serde::Serialize;

/// What the estimate leaves out, in this order (the `excluded` list of `lab estimate --json`,
/// identical in the Python twin `mesure_memoire.py estimate`).
pub const EXCLUDED: [&str; 6] = [
    "activations",
    "KV cache",
    "quantization metadata",
    "gradients",
    "optimizer states",
    "libraries and runtime",
];

/// Decimal places of every GiB / GB value shown.
pub const DECIMALS: u32 = 6;

/// Most digits accepted before the decimal point of a reserve (GiB).
pub const RESERVE_MAX_INTEGER_DIGITS: usize = 15;

/// Most digits accepted after the decimal point of a reserve (GiB).
///
/// With [`RESERVE_MAX_INTEGER_DIGITS`], 27 significant digits: every such value is held
/// exactly by `rust_decimal` (28 digits at most), so the limit checked is the real one.
pub const RESERVE_MAX_FRACTION_DIGITS: usize = 12;

const GIB: u128 = 1 << 30;

/// A weight-memory estimate.
///
/// Serializes (the `lab estimate --json` object) with the keys `parameters`, `bits`,
/// `bytes_per_parameter`, `weights_bytes` (integers), `weights_gib`, `weights_gb`,
/// `reserve_gib`, `total_gib` (strings with exactly 6 decimals) and `excluded` (list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Estimate {
    /// Number of parameters (at least 1).
    pub parameters: u64,
    /// Storage width of one parameter, in bits (at least 1).
    pub bits: u32,
    /// `ceil(bits / 8)`.
    pub bytes_per_parameter: u64,
    /// `parameters x bytes_per_parameter`, bytes.
    pub weights_bytes: u64,
    /// Weights in GiB (2^30 bytes), half-to-even, 6 decimals.
    #[serde(serialize_with = "rust_decimal::serde::str::serialize")]
    pub weights_gib: Decimal,
    /// Weights in GB (10^9 bytes), half-to-even, 6 decimals.
    #[serde(serialize_with = "rust_decimal::serde::str::serialize")]
    pub weights_gb: Decimal,
    /// The reserve the user chose, GiB, half-to-even, 6 decimals.
    #[serde(serialize_with = "rust_decimal::serde::str::serialize")]
    pub reserve_gib: Decimal,
    /// Weights plus reserve in GiB, computed exactly then rounded half-to-even to 6 decimals.
    #[serde(serialize_with = "rust_decimal::serde::str::serialize")]
    pub total_gib: Decimal,
    /// What the estimate does not include: [`EXCLUDED`].
    pub excluded: Vec<&'static str>,
}

/// Estimates weight memory for `parameters` parameters stored on `bits` bits each, plus a
/// reserve of `reserve_gib` GiB.
///
/// # Errors
/// [`Error::Usage`] when `parameters` or `bits` is 0, when `reserve_gib` is negative or has
/// more than [`RESERVE_MAX_INTEGER_DIGITS`] / [`RESERVE_MAX_FRACTION_DIGITS`] digits, or when
/// the weight bytes do not fit in 64 bits.
pub fn estimate(parameters: u64, bits: u32, reserve_gib: Decimal) -> Result<Estimate> {
    if parameters == 0 {
        return Err(Error::usage("the parameter count must be at least 1"));
    }
    if bits == 0 {
        return Err(Error::usage(
            "the number of bits per parameter must be at least 1",
        ));
    }
    check_reserve(reserve_gib)?;
    let bytes_per_parameter = u64::from(bits.div_ceil(8));
    let weights_bytes = parameters.checked_mul(bytes_per_parameter).ok_or_else(|| {
        Error::usage(format!(
            "{parameters} parameters x {bytes_per_parameter} bytes does not fit in 64 bits ({} bytes at most)",
            u64::MAX
        ))
    })?;

    // Everything in millionths (of GiB or GB), exactly.
    let bytes_micro = u128::from(weights_bytes) * 1_000_000; // bytes x 10^6 < 1.9e25
    let weights_gib = round_half_even_ratio(bytes_micro, GIB);
    let weights_gb = round_half_even_ratio(u128::from(weights_bytes), 1_000);
    let (reserve_mantissa, reserve_scale) = (reserve_gib.mantissa() as u128, reserve_gib.scale());
    let (reserve_micro, total_micro) = if reserve_scale <= DECIMALS {
        // The reserve is a whole number of millionths: exact, no rounding.
        let reserve_micro = reserve_mantissa * 10u128.pow(DECIMALS - reserve_scale);
        (
            reserve_micro,
            round_half_even_ratio(bytes_micro + reserve_micro * GIB, GIB),
        )
    } else {
        // reserve = mantissa / 10^scale; in millionths: mantissa / k, k = 10^(scale - 6) <= 10^6.
        let k = 10u128.pow(reserve_scale - DECIMALS);
        let reserve_micro = round_half_even_ratio(reserve_mantissa, k);
        // bytes_micro / 2^30 + mantissa / k = whole + (fraction numerator / (2^30 k)).
        let whole = bytes_micro / GIB + reserve_mantissa / k;
        let fraction = (bytes_micro % GIB) * k + (reserve_mantissa % k) * GIB; // < 2 x 2^30 x 10^6
        let denominator = GIB * k;
        let carry = fraction / denominator;
        let rest = fraction % denominator;
        let total = whole + carry;
        let total_micro = match rest.cmp(&(denominator - rest)) {
            std::cmp::Ordering::Less => total,
            std::cmp::Ordering::Greater => total + 1,
            std::cmp::Ordering::Equal => total + total % 2,
        };
        (reserve_micro, total_micro)
    };

    Ok(Estimate {
        parameters,
        bits,
        bytes_per_parameter,
        weights_bytes,
        weights_gib: micro(weights_gib),
        weights_gb: micro(weights_gb),
        reserve_gib: micro(reserve_micro),
        total_gib: micro(total_micro),
        excluded: EXCLUDED.to_vec(),
    })
}

fn check_reserve(reserve: Decimal) -> Result<()> {
    if reserve.is_sign_negative() && !reserve.is_zero() {
        return Err(Error::usage("the reserve must not be negative"));
    }
    let limit = Decimal::from(10u64.pow(RESERVE_MAX_INTEGER_DIGITS as u32));
    if reserve >= limit || reserve.scale() > RESERVE_MAX_FRACTION_DIGITS as u32 {
        return Err(Error::usage(format!(
            "the reserve accepts at most {RESERVE_MAX_INTEGER_DIGITS} digits before the point and {RESERVE_MAX_FRACTION_DIGITS} after"
        )));
    }
    Ok(())
}

fn micro(value: u128) -> Decimal {
    // Values here are below 2 x 10^21: far inside Decimal's 96-bit mantissa.
    Decimal::from_i128_with_scale(value as i128, DECIMALS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::str::FromStr;

    fn d(text: &str) -> Decimal {
        Decimal::from_str(text).unwrap()
    }

    #[test]
    fn spec_worked_example() {
        let e = estimate(7_000_000_000, 16, d("4")).unwrap();
        assert_eq!(e.bytes_per_parameter, 2);
        assert_eq!(e.weights_bytes, 14_000_000_000);
        assert_eq!(e.weights_gib.to_string(), "13.038516");
        assert_eq!(e.weights_gb.to_string(), "14.000000");
        assert_eq!(e.reserve_gib.to_string(), "4.000000");
        assert_eq!(e.total_gib.to_string(), "17.038516");
        assert_eq!(e.excluded.len(), 6);
        assert!(e.excluded.contains(&"KV cache"));
    }

    #[test]
    fn bytes_per_parameter_rounds_bits_up() {
        for (bits, bytes) in [(1, 1), (4, 1), (8, 1), (9, 2), (12, 2), (16, 2), (32, 4)] {
            assert_eq!(
                estimate(1, bits, Decimal::ZERO)
                    .unwrap()
                    .bytes_per_parameter,
                bytes
            );
        }
    }

    #[test]
    fn values_round_half_to_even() {
        // 2^23 bytes = 0.0078125 GiB: halfway between 0.007812 and 0.007813 -> even 0.007812.
        let e = estimate(1 << 23, 8, Decimal::ZERO).unwrap();
        assert_eq!(e.weights_gib.to_string(), "0.007812");
        // 3 x 2^23 bytes = 0.0234375 GiB -> even 0.023438.
        let e = estimate(3 << 23, 8, Decimal::ZERO).unwrap();
        assert_eq!(e.weights_gib.to_string(), "0.023438");
        // 1,500 bytes = 0.0000015 GB -> 0.000002; 2,500 bytes = 0.0000025 GB -> 0.000002.
        assert_eq!(
            estimate(1_500, 8, Decimal::ZERO)
                .unwrap()
                .weights_gb
                .to_string(),
            "0.000002"
        );
        assert_eq!(
            estimate(2_500, 8, Decimal::ZERO)
                .unwrap()
                .weights_gb
                .to_string(),
            "0.000002"
        );
    }

    #[test]
    fn total_is_rounded_once_not_summed_after_rounding() {
        // 2^23 bytes = 0.0078125 GiB; + 0.0000004 GiB = 0.0078129 -> 0.007813, whereas the
        // rounded parts 0.007812 + 0.000000 would give 0.007812.
        let e = estimate(1 << 23, 8, d("0.0000004")).unwrap();
        assert_eq!(e.weights_gib.to_string(), "0.007812");
        assert_eq!(e.reserve_gib.to_string(), "0.000000");
        assert_eq!(e.total_gib.to_string(), "0.007813");
        // Exactly on a tie through the reserve: 0.0078125 + 0.000001 = 0.0078135 -> 0.007814.
        let e = estimate(1 << 23, 8, d("0.000001")).unwrap();
        assert_eq!(e.total_gib.to_string(), "0.007814");
        // 0.0078125 + 0.000000000001 is just above the tie -> 0.007813.
        let e = estimate(1 << 23, 8, d("0.000000000001")).unwrap();
        assert_eq!(e.total_gib.to_string(), "0.007813");
    }

    #[test]
    fn bad_inputs_are_usage_errors() {
        assert_eq!(estimate(0, 16, Decimal::ZERO).unwrap_err().exit_code(), 2);
        assert_eq!(estimate(1, 0, Decimal::ZERO).unwrap_err().exit_code(), 2);
        assert_eq!(estimate(1, 16, d("-1")).unwrap_err().exit_code(), 2);
        assert_eq!(
            estimate(u64::MAX, 16, Decimal::ZERO)
                .unwrap_err()
                .exit_code(),
            2
        );
        // The largest weight that fits is fine.
        let e = estimate(u64::MAX, 8, Decimal::ZERO).unwrap();
        assert_eq!(e.weights_bytes, u64::MAX);
    }

    proptest! {
        #[test]
        fn monotone_in_parameters(p in 1u64..1_000_000_000_000, extra in 0u64..1_000_000_000, bits in 1u32..64) {
            let a = estimate(p, bits, Decimal::ZERO).unwrap();
            let b = estimate(p + extra, bits, Decimal::ZERO).unwrap();
            prop_assert!(a.weights_bytes <= b.weights_bytes);
            prop_assert!(a.weights_gib <= b.weights_gib);
            prop_assert!(a.weights_gb <= b.weights_gb);
            prop_assert!(a.total_gib <= b.total_gib);
        }

        #[test]
        fn monotone_in_bits(p in 1u64..1_000_000_000_000, bits in 1u32..64, extra in 0u32..64) {
            let a = estimate(p, bits, Decimal::ONE).unwrap();
            let b = estimate(p, bits + extra, Decimal::ONE).unwrap();
            prop_assert!(a.weights_bytes <= b.weights_bytes);
            prop_assert!(a.weights_gib <= b.weights_gib);
            prop_assert!(a.weights_gb <= b.weights_gb);
            prop_assert!(a.total_gib <= b.total_gib);
        }

        #[test]
        fn total_matches_decimal_arithmetic(p in 1u64..1_000_000_000_000, bits in 1u32..64, r in 0u64..1_000_000_000, scale in 0u32..10) {
            // Against rust_decimal's own division (exact enough at these magnitudes).
            let reserve = Decimal::new(r as i64, scale);
            let e = estimate(p, bits, reserve).unwrap();
            let exact = Decimal::from(e.weights_bytes) / Decimal::from(1u64 << 30) + reserve;
            let expected = exact.round_dp_with_strategy(6, rust_decimal::RoundingStrategy::MidpointNearestEven);
            prop_assert_eq!(e.total_gib, expected);
            prop_assert_eq!(e.total_gib.scale(), 6);
        }
    }
}
