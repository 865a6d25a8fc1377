//! Comparing packages for a need: at least N GPUs for D days, cheapest first.
//!
//! Built on [`crate::pricing::quote`] (the same arithmetic as `lab price`) over the validated
//! [`crate::catalog::Catalog`]: for every model sold for D days, the lots needed are
//! `ceil(N / gpus_per_lot)`, and the package is priced exactly as `lab price` would price it.

use crate::catalog::{Catalog, CatalogInfo};
use crate::pricing::{self, Quote};
use crate::{Error, Result};
use rust_decimal::Decimal;
use serde::Serialize;

/// One package that meets the need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// 1-based rank, cheapest first.
    pub rank: usize,
    /// The package as `lab price` prices it (lots, GPUs, totals, unit cost).
    #[serde(flatten)]
    pub quote: Quote,
    /// GPUs bought beyond the need (`gpus - N`), because lots are whole.
    pub extra_gpus: u64,
    /// Price of one GPU for one day, USD, half-to-even to 6 decimals.
    #[serde(serialize_with = "rust_decimal::serde::str::serialize")]
    pub usd_per_gpu_day: Decimal,
}

/// The comparison: the need and the packages that meet it, cheapest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// GPUs needed.
    pub gpus_needed: u64,
    /// Duration in days.
    pub days: u32,
    /// Accepted results, when given (for the unit cost).
    pub accepted_results: Option<u64>,
    /// The packages, cheapest total first (ties: cheaper per GPU-day, then GPU id).
    pub packages: Vec<Candidate>,
    /// Which catalog the prices came from.
    pub catalog: CatalogInfo,
}

/// Lots of `gpus_per_lot` GPUs needed for at least `gpus` GPUs: `ceil(gpus / gpus_per_lot)`.
pub fn lots_needed(gpus: u64, gpus_per_lot: u32) -> u64 {
    gpus.div_ceil(u64::from(gpus_per_lot.max(1)))
}

/// Every D-day package of `catalog` that gives at least `gpus` GPUs, priced like `lab price`,
/// cheapest first.
///
/// # Errors
/// [`Error::Usage`] when `gpus` or `accepted_results` is 0, when `days` is not a sold
/// duration (lists them), or when a total overflows a signed 64-bit cent count (the message
/// names the GPUs asked for and says to ask for fewer).
pub fn compare(
    catalog: &Catalog,
    gpus: u64,
    days: u32,
    accepted_results: Option<u64>,
) -> Result<Comparison> {
    if gpus == 0 {
        return Err(Error::usage("the number of GPUs needed must be at least 1"));
    }
    crate::catalog::check_days(days)?;
    let mut rows: Vec<(&crate::catalog::Entry, Quote)> = Vec::new();
    for entry in catalog.entries().iter().filter(|e| e.days == days) {
        let lots = lots_needed(gpus, entry.gpus_per_lot);
        // Checked here so that the message speaks of the GPUs asked for, not of lots the user
        // never typed (pricing::quote would say "buy fewer lots").
        if pricing::package_total_cents(entry.price_cents, lots).is_err() {
            return Err(Error::usage(format!(
                "{gpus} GPUs is too many: {lots} lot(s) of {} for {days} days would cost more \
                 than a signed 64-bit cent count holds ({} cents); ask for fewer GPUs",
                entry.gpu,
                i64::MAX
            )));
        }
        let quote = pricing::quote(catalog, &entry.gpu, days, lots, accepted_results)?;
        rows.push((entry, quote));
    }
    rows.sort_by(|(ea, qa), (eb, qb)| {
        qa.total_cents
            .cmp(&qb.total_cents)
            .then_with(|| pricing::compare_per_gpu_day(ea, eb))
            .then_with(|| qa.gpu.cmp(&qb.gpu))
    });
    let packages = rows
        .into_iter()
        .enumerate()
        .map(|(i, (entry, quote))| Candidate {
            rank: i + 1,
            extra_gpus: quote.gpus.saturating_sub(gpus),
            usd_per_gpu_day: pricing::usd_per_gpu_day(entry),
            quote,
        })
        .collect();
    Ok(Comparison {
        gpus_needed: gpus,
        days,
        accepted_results,
        packages,
        catalog: catalog.info(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lots_round_up() {
        assert_eq!(lots_needed(1, 2), 1);
        assert_eq!(lots_needed(3, 2), 2);
        assert_eq!(lots_needed(4, 2), 2);
        assert_eq!(lots_needed(5, 1), 5);
        assert_eq!(lots_needed(u64::MAX, 2), u64::MAX / 2 + 1);
    }

    #[test]
    fn every_model_priced_like_lab_price_cheapest_first() {
        let catalog = Catalog::embedded().unwrap();
        let c = compare(&catalog, 3, 7, Some(1000)).unwrap();
        assert_eq!(c.packages.len(), 15);
        for window in c.packages.windows(2) {
            assert!(window[0].quote.total_cents <= window[1].quote.total_cents);
        }
        for p in &c.packages {
            let entry = catalog.find(&p.quote.gpu, 7).unwrap();
            let again =
                pricing::quote(&catalog, &p.quote.gpu, 7, p.quote.lots, Some(1000)).unwrap();
            assert_eq!(p.quote, again);
            assert!(p.quote.gpus >= 3);
            assert!(
                p.quote.gpus - u64::from(entry.gpus_per_lot) < 3,
                "no useless lot"
            );
            assert_eq!(p.extra_gpus, p.quote.gpus - 3);
        }
        let b200 = c.packages.iter().find(|p| p.quote.gpu == "b200").unwrap();
        assert_eq!(b200.quote.lots, 2);
        assert_eq!(b200.quote.gpus, 4);
        assert_eq!(b200.extra_gpus, 1);
        assert_eq!(c.packages[0].rank, 1);
    }

    #[test]
    fn bad_need_is_usage() {
        let catalog = Catalog::embedded().unwrap();
        assert_eq!(compare(&catalog, 0, 7, None).unwrap_err().exit_code(), 2);
        assert_eq!(compare(&catalog, 1, 5, None).unwrap_err().exit_code(), 2);
        assert_eq!(compare(&catalog, 1, 7, Some(0)).unwrap_err().exit_code(), 2);
        let overflow = compare(&catalog, u64::MAX, 30, None).unwrap_err();
        assert_eq!(overflow.exit_code(), 2);
        assert!(overflow.to_string().contains("64-bit"), "{overflow}");
        assert!(
            overflow
                .to_string()
                .starts_with(&format!("{} GPUs is too many", u64::MAX)),
            "{overflow}"
        );
        assert!(
            overflow.to_string().contains("ask for fewer GPUs"),
            "{overflow}"
        );
        assert!(!overflow.to_string().contains("lots;"), "{overflow}");
    }
}
