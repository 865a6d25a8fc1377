//! Package totals and cost per accepted result (docs/PROTOCOL.md §5).
//!
//! All money is integer US cents (`i64`) until it is shown; shown amounts are
//! [`rust_decimal::Decimal`] values built from exact integer arithmetic and rounded
//! half-to-even once. No floats anywhere.
//!
//! - total = lot price x lots; GPUs = GPUs per lot x lots;
//! - unit cost = total / accepted results, in USD, half-to-even to 6 decimals
//!   (micro-dollars); only when the user gives the number of accepted results;
//! - price per GPU-day = lot price / (GPUs per lot x days), used to compare models
//!   (`lab tariffs`, and `lab compare`).

use crate::catalog::{Catalog, Entry};
use crate::error::{Error, Result};
use rust_decimal::Decimal;
use serde::Serialize;
use std::cmp::Ordering;

/// Decimal places of a unit cost and of a price per GPU-day, in USD (micro-dollars).
pub const UNIT_COST_DECIMALS: u32 = 6;

/// The price of a package and, when accepted results are given, the cost of each.
///
/// Serializes (the `lab price --json` object) with the keys `gpu`, `model`, `days`, `lots`,
/// `gpus_per_lot`, `gpus`, `lot_price_cents`, `total_cents`, `total_usd` (string, 2
/// decimals), `accepted_results` (integer or null), `unit_cost_usd` (string, 6 decimals, or
/// null). `lab price --json` adds the `catalog` object ([`crate::catalog::CatalogInfo`]) once,
/// after these keys; `lab compare` gives it once for all its packages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quote {
    /// GPU identifier, e.g. `b200`.
    pub gpu: String,
    /// Model name from the catalog.
    pub model: String,
    /// Package duration in days (3, 7 or 30).
    pub days: u32,
    /// Number of lots bought (at least 1).
    pub lots: u64,
    /// GPUs in one lot.
    pub gpus_per_lot: u32,
    /// GPUs in total: `gpus_per_lot x lots`.
    pub gpus: u64,
    /// Price of one lot for the whole duration, US cents.
    pub lot_price_cents: i64,
    /// Price of the whole package: `lot_price_cents x lots`, US cents.
    pub total_cents: i64,
    /// `total_cents` in US dollars, exactly 2 decimals.
    #[serde(serialize_with = "rust_decimal::serde::str::serialize")]
    pub total_usd: Decimal,
    /// Distinct useful results accepted, as given by the user (no default).
    pub accepted_results: Option<u64>,
    /// `total_usd / accepted_results`, half-to-even to 6 decimals; `None` without results.
    #[serde(serialize_with = "rust_decimal::serde::str_option::serialize")]
    pub unit_cost_usd: Option<Decimal>,
}

/// Prices `lots` lots of `gpu` for `days` days from `catalog`.
///
/// # Errors
/// [`Error::Usage`] for an unknown GPU (lists the valid ids), a duration other than 3, 7 or
/// 30 (lists them), `lots` = 0, `accepted_results` = `Some(0)`, or a total (or GPU count)
/// too large for a signed 64-bit cent count.
pub fn quote(
    catalog: &Catalog,
    gpu: &str,
    days: u32,
    lots: u64,
    accepted_results: Option<u64>,
) -> Result<Quote> {
    let entry = catalog.find(gpu, days)?;
    if lots == 0 {
        return Err(Error::usage("the number of lots must be at least 1"));
    }
    let total_cents = package_total_cents(entry.price_cents, lots)?;
    let gpus = u64::from(entry.gpus_per_lot)
        .checked_mul(lots)
        .ok_or_else(|| Error::usage(format!("{lots} lots is too many: the GPU count overflows")))?;
    let unit_cost_usd = match accepted_results {
        None => None,
        Some(results) => Some(unit_cost_usd(total_cents, results)?),
    };
    Ok(Quote {
        gpu: entry.gpu.clone(),
        model: entry.model.clone(),
        days: entry.days,
        lots,
        gpus_per_lot: entry.gpus_per_lot,
        gpus,
        lot_price_cents: entry.price_cents,
        total_cents,
        total_usd: cents_to_usd(total_cents),
        accepted_results,
        unit_cost_usd,
    })
}

/// `lot_price_cents x lots`, checked.
///
/// # Errors
/// [`Error::Usage`] when the product does not fit a signed 64-bit count of cents
/// (9,223,372,036,854,775,807 cents), or when `lots` is 0.
pub fn package_total_cents(lot_price_cents: i64, lots: u64) -> Result<i64> {
    if lots == 0 {
        return Err(Error::usage("the number of lots must be at least 1"));
    }
    i64::try_from(lots)
        .ok()
        .and_then(|lots| lot_price_cents.checked_mul(lots))
        .ok_or_else(|| {
            Error::usage(format!(
                "{lots} lots x {lot_price_cents} cents does not fit in a signed 64-bit cent count (max {} cents); buy fewer lots",
                i64::MAX
            ))
        })
}

/// Cost of one accepted result: `total_cents / 100 / accepted_results` USD, rounded
/// half-to-even to [`UNIT_COST_DECIMALS`] decimals (the result always has scale 6).
///
/// # Errors
/// [`Error::Usage`] when `accepted_results` is 0 or `total_cents` is negative.
pub fn unit_cost_usd(total_cents: i64, accepted_results: u64) -> Result<Decimal> {
    if accepted_results == 0 {
        return Err(Error::usage(
            "the number of accepted results must be at least 1",
        ));
    }
    if total_cents < 0 {
        return Err(Error::usage("a package total cannot be negative"));
    }
    // micro-dollars = cents x 10^4 / results; at most ~9.2e22, fits i128 and Decimal.
    let numerator = u128::from(total_cents.unsigned_abs()) * 10_000;
    let micro = round_half_even_ratio(numerator, u128::from(accepted_results));
    Ok(micro_to_decimal(micro))
}

/// Price of one GPU for one day of this catalog row, in USD, half-to-even to
/// [`UNIT_COST_DECIMALS`] decimals: `price_cents / 100 / (gpus_per_lot x days)`.
///
/// For ordering, use [`compare_per_gpu_day`], which is exact (no rounding).
pub fn usd_per_gpu_day(entry: &Entry) -> Decimal {
    let numerator = u128::from(entry.price_cents.unsigned_abs()) * 10_000;
    micro_to_decimal(round_half_even_ratio(numerator, gpu_days(entry)))
}

/// Orders two catalog rows by exact price per GPU-day (cheapest first); ties are broken by
/// GPU id, then duration, so the order is total and stable across implementations.
pub fn compare_per_gpu_day(a: &Entry, b: &Entry) -> Ordering {
    // a.price / a.gpu_days  vs  b.price / b.gpu_days, by cross-multiplication (fits u128).
    let left = u128::from(a.price_cents.unsigned_abs()) * gpu_days(b);
    let right = u128::from(b.price_cents.unsigned_abs()) * gpu_days(a);
    left.cmp(&right)
        .then_with(|| a.gpu.cmp(&b.gpu))
        .then_with(|| a.days.cmp(&b.days))
}

/// A whole number of cents as US dollars with exactly 2 decimals.
pub fn cents_to_usd(cents: i64) -> Decimal {
    Decimal::new(cents, 2)
}

/// `numerator / denominator` rounded to the nearest integer, ties to the even one.
///
/// `denominator` must not be 0 (callers check); returns 0 if it is.
pub fn round_half_even_ratio(numerator: u128, denominator: u128) -> u128 {
    if denominator == 0 {
        return 0;
    }
    let quotient = numerator / denominator;
    let remainder = numerator % denominator;
    // Compare remainder with denominator / 2 without overflow.
    match remainder.cmp(&(denominator - remainder)) {
        Ordering::Less => quotient,
        Ordering::Greater => quotient + 1,
        Ordering::Equal => quotient + (quotient % 2),
    }
}

fn gpu_days(entry: &Entry) -> u128 {
    u128::from(entry.gpus_per_lot) * u128::from(entry.days)
}

/// Millionths as a Decimal with scale 6. Inputs here stay far below Decimal's 96-bit limit.
fn micro_to_decimal(micro: u128) -> Decimal {
    Decimal::from_i128_with_scale(micro as i128, UNIT_COST_DECIMALS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn catalog() -> Catalog {
        Catalog::embedded().unwrap()
    }

    #[test]
    fn two_b200_lots_for_7_days_are_4_gpus_and_twice_the_lot_price() {
        let catalog = catalog();
        let lot = catalog.find("b200", 7).unwrap().price_cents;
        let q = quote(&catalog, "b200", 7, 2, None).unwrap();
        assert_eq!(q.gpus_per_lot, 2);
        assert_eq!(q.gpus, 4);
        assert_eq!(q.lot_price_cents, lot);
        assert_eq!(q.total_cents, 2 * lot);
        assert_eq!(q.total_cents, 306_432);
        assert_eq!(q.total_usd.to_string(), "3064.32");
        assert_eq!(q.unit_cost_usd, None);
    }

    #[test]
    fn unit_cost_ties_round_to_even() {
        // 1 cent / 20,000 = 0.0000005 USD exactly: halfway, rounds to the even 0.000000.
        assert_eq!(unit_cost_usd(1, 20_000).unwrap().to_string(), "0.000000");
        // 7 cents / 20,000 = 0.0000035: halfway, rounds up to the even 0.000004.
        assert_eq!(unit_cost_usd(7, 20_000).unwrap().to_string(), "0.000004");
        // 1 cent / 4,000 = 0.0000025 -> 0.000002; 1 cent / 800 = 0.0000125 -> 0.000012.
        assert_eq!(unit_cost_usd(1, 4_000).unwrap().to_string(), "0.000002");
        assert_eq!(unit_cost_usd(1, 800).unwrap().to_string(), "0.000012");
        // Not a tie: 1 cent / 3 = 0.00333... -> 0.003333.
        assert_eq!(unit_cost_usd(1, 3).unwrap().to_string(), "0.003333");
    }

    #[test]
    fn unit_cost_of_a_real_package_on_a_tie() {
        // One 7-day B200 lot costs 153,216 cents = 2^7 x 1197. Over 2,560,000 results that is
        // 598.5 micro-dollars exactly: rounds down to the even 598.
        let catalog = catalog();
        let q = quote(&catalog, "b200", 7, 1, Some(2_560_000)).unwrap();
        assert_eq!(q.unit_cost_usd.unwrap().to_string(), "0.000598");
        // Over 7,680,000 results: 199.5 micro-dollars, rounds up to the even 200.
        let q = quote(&catalog, "b200", 7, 1, Some(7_680_000)).unwrap();
        assert_eq!(q.unit_cost_usd.unwrap().to_string(), "0.000200");
    }

    #[test]
    fn bad_inputs_are_usage_errors() {
        let catalog = catalog();
        let unknown = quote(&catalog, "x100", 7, 1, None).unwrap_err();
        assert_eq!(unknown.exit_code(), 2);
        assert!(unknown.to_string().contains("b200"), "{unknown}");
        let days = quote(&catalog, "b200", 5, 1, None).unwrap_err();
        assert!(days.to_string().contains("3, 7, 30"), "{days}");
        assert_eq!(
            quote(&catalog, "b200", 7, 0, None).unwrap_err().exit_code(),
            2
        );
        assert_eq!(
            quote(&catalog, "b200", 7, 1, Some(0))
                .unwrap_err()
                .exit_code(),
            2
        );
        let overflow = quote(&catalog, "b200", 30, u64::MAX / 2, None).unwrap_err();
        assert!(overflow.to_string().contains("64-bit"), "{overflow}");
    }

    #[test]
    fn largest_total_that_fits_is_accepted() {
        assert_eq!(package_total_cents(1, i64::MAX as u64).unwrap(), i64::MAX);
        assert!(package_total_cents(2, i64::MAX as u64).is_err());
        assert!(package_total_cents(1, i64::MAX as u64 + 1).is_err());
    }

    #[test]
    fn per_gpu_day_and_ordering() {
        let catalog = catalog();
        let b200 = catalog.find("b200", 7).unwrap();
        // 153,216 cents / (2 GPUs x 7 days) = 10,944 cents = 109.44 USD.
        assert_eq!(usd_per_gpu_day(b200).to_string(), "109.440000");
        let t4 = catalog.find("t4", 30).unwrap();
        assert_eq!(compare_per_gpu_day(t4, b200), Ordering::Less);
        assert_eq!(compare_per_gpu_day(b200, b200), Ordering::Equal);
    }

    #[test]
    fn half_even_ratio() {
        assert_eq!(round_half_even_ratio(5, 2), 2);
        assert_eq!(round_half_even_ratio(7, 2), 4);
        assert_eq!(round_half_even_ratio(8, 3), 3);
        assert_eq!(round_half_even_ratio(7, 3), 2);
        assert_eq!(round_half_even_ratio(u128::MAX, u128::MAX), 1);
    }

    proptest! {
        #[test]
        fn total_is_lot_price_times_lots(index in 0usize..45, lots in 1u64..1_000_000_000) {
            let catalog = catalog();
            let entry = &catalog.entries()[index];
            let q = quote(&catalog, &entry.gpu, entry.days, lots, None).unwrap();
            prop_assert_eq!(i128::from(q.total_cents), i128::from(entry.price_cents) * i128::from(lots));
            prop_assert_eq!(q.gpus, u64::from(entry.gpus_per_lot) * lots);
            prop_assert_eq!(q.total_usd * Decimal::from(100), Decimal::from(q.total_cents));
        }

        #[test]
        fn unit_cost_is_within_half_a_micro_dollar(total in 0i64..i64::MAX, results in 1u64..u64::MAX) {
            let cost = unit_cost_usd(total, results).unwrap();
            prop_assert_eq!(cost.scale(), 6);
            // |cost x results - total| <= 0.0000005 x results, in exact integers of 10^-7 USD:
            // cost x results x 10^7 vs total x 10^5.
            let cost_tenth_micro = cost.mantissa() * 10 * i128::from(results);
            let total_tenth_micro = i128::from(total) * 100_000;
            prop_assert!((cost_tenth_micro - total_tenth_micro).abs() <= 5 * i128::from(results));
        }
    }
}
