//! Byte counts shown in binary units, exactly: MiB (2^20 bytes) and GiB (2^30 bytes) as
//! [`rust_decimal::Decimal`], computed from the integer byte count and rounded once,
//! half-to-even. No floats: a shown memory figure is the byte count, rounded, nothing else.

use rust_decimal::{Decimal, RoundingStrategy};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// `bytes` in MiB (2^20 bytes), rounded half-to-even to `dp` decimal places and always shown
/// with `dp` decimals (`1.000`). `bytes` is a count (`u64`) or, for a signed difference of
/// counts, a `Decimal`.
pub fn mib(bytes: impl Into<Decimal>, dp: u32) -> Decimal {
    in_unit(bytes.into(), MIB, dp)
}

/// `bytes` in GiB (2^30 bytes), as [`mib`].
pub fn gib(bytes: impl Into<Decimal>, dp: u32) -> Decimal {
    in_unit(bytes.into(), GIB, dp)
}

/// `v` rounded half-to-even to `dp` decimal places, always shown with `dp` decimals (the one
/// rounding rule of times, rates and ratios).
pub fn round(v: Decimal, dp: u32) -> Decimal {
    let mut r = v.round_dp_with_strategy(dp, RoundingStrategy::MidpointNearestEven);
    r.rescale(dp);
    r
}

fn in_unit(bytes: Decimal, unit: u64, dp: u32) -> Decimal {
    let mut value = (bytes / Decimal::from(unit))
        .round_dp_with_strategy(dp, RoundingStrategy::MidpointNearestEven);
    value.rescale(dp);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_half_to_even() {
        assert_eq!(mib(1u64 << 20, 3).to_string(), "1.000");
        // 1536 bytes = 0.00146484375 MiB -> 0.001
        assert_eq!(mib(1536u64, 3).to_string(), "0.001");
        // Ties: 0.5 MiB and 2.5 MiB go to the even neighbour, 1.5 MiB up to 2.
        assert_eq!(mib(MIB / 2, 0).to_string(), "0");
        assert_eq!(mib(3 * MIB / 2, 0).to_string(), "2");
        assert_eq!(mib(5 * MIB / 2, 0).to_string(), "2");
        assert_eq!(gib(150_109_880_320u64, 2).to_string(), "139.80");
        assert_eq!(gib(u64::MAX, 3).to_string(), "17179869184.000");
        // A signed difference of counters.
        assert_eq!(mib(Decimal::from(-1_572_864), 3).to_string(), "-1.500");
    }
}
