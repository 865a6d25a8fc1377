//! `lab results`: the results grid read back (docs/PROTOCOL.md §6): runs per package, what
//! was spent, the accepted results, the cost per accepted result over all runs, and which runs
//! lack a measurement.
//!
//! Every row is checked by the rules `lab record` writes with ([`crate::record::rules`]); a row
//! that breaks one is refused by line (exit 2), never counted as something it does not say.
//!
//! **Purchases.** The grid has no purchase column: a row names its package (GPU, days, lots).
//! Runs of one package share a purchase when they end within that package's duration of the
//! purchase's first run (sorted by `date_utc`); a run ending later cannot have used it (the
//! package had expired), so it starts another purchase. That is the fewest purchases the rows
//! allow; each is counted once at the catalog's package price. Money is exact: cents, and the
//! cost per result half-to-even to 6 decimals as `lab price` ([`crate::pricing`]).

use crate::catalog::Catalog;
use crate::record::{kit_header, GridRow, MAX_GRID_BYTES};
use crate::{Error, Result};
use rust_decimal::Decimal;
use serde::Serialize;
use std::path::Path;

/// One package of the grid: runs on it and what its purchases cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageResults {
    /// Catalog GPU id.
    pub gpu: String,
    /// Package duration, days.
    pub days: u32,
    /// Lots of the package.
    pub lots: u64,
    /// Rows naming this package.
    pub runs: u64,
    /// Purchases those runs need (see the module documentation).
    pub purchases: u64,
    /// Price of one purchase of the package, US cents.
    pub package_cents: i64,
    /// `package_cents x purchases`, US cents.
    pub spent_cents: i64,
    /// `spent_cents` in US dollars, 2 decimals.
    #[serde(with = "rust_decimal::serde::str")]
    pub spent_usd: Decimal,
    /// Sum of the runs' accepted results (an empty cell counts 0).
    pub accepted_results: u64,
    /// `spent_usd / accepted_results`, 6 decimals half-to-even; null with no accepted result.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub unit_cost_usd: Option<Decimal>,
}

/// The whole grid read back (the `lab results --json` object).
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// The grid, as given.
    pub grid: String,
    /// Data rows.
    pub runs: u64,
    /// Per package, in order of first appearance in the grid.
    pub packages: Vec<PackageResults>,
    /// Sum of every package's `spent_cents`.
    pub spent_cents: i64,
    /// `spent_cents` in US dollars, 2 decimals.
    #[serde(with = "rust_decimal::serde::str")]
    pub spent_usd: Decimal,
    /// Accepted results over all runs.
    pub accepted_results: u64,
    /// Total spent over accepted results of all runs, 6 decimals half-to-even; null when no
    /// run accepted any.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub unit_cost_usd: Option<Decimal>,
    /// `run_id` of every run whose row names no measurement file.
    pub runs_without_measurement: Vec<String>,
    /// `run_id` of every `completed` run whose accepted results cell is empty (counted 0).
    pub runs_without_accepted_count: Vec<String>,
}

/// Reads the grid at `path` (at most [`MAX_GRID_BYTES`]) and checks every row; returns each
/// row with its 1-based line number.
///
/// # Errors
/// [`Error::Usage`] for a grid that is not UTF-8, whose header is not the kit's, or with a row
/// that breaks a rule (`FILE: line N: ...`); [`Error::Runtime`] when it cannot be read.
pub fn read_grid(
    path: &Path,
    catalog: &Catalog,
    now: time::OffsetDateTime,
) -> Result<Vec<(u64, GridRow)>> {
    let name = crate::text::one_line(&path.display().to_string());
    use crate::input::ReadFailure;
    let bytes = crate::input::file(path, MAX_GRID_BYTES).map_err(|failure| match failure {
        ReadFailure::Io(e) => Error::runtime(format!("cannot read the grid {name}: {e}")),
        ReadFailure::NotAFile => Error::usage(format!(
            "{name} is not a file; give the results grid (resultats-bruts.csv)"
        )),
        ReadFailure::TooLarge { .. } => Error::usage(format!(
            "{name} is larger than {MAX_GRID_BYTES} bytes; not a results grid"
        )),
    })?;
    parse_grid(&name, &bytes, catalog, now)
}

/// [`read_grid`] on bytes already read; `name` labels messages.
///
/// # Errors
/// As [`read_grid`].
pub fn parse_grid(
    name: &str,
    bytes: &[u8],
    catalog: &Catalog,
    now: time::OffsetDateTime,
) -> Result<Vec<(u64, GridRow)>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::usage(format!("{name} is not UTF-8 text: {e}")))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let header = kit_header();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut records = reader.records();
    match records.next() {
        Some(Ok(first)) if first.iter().eq(header.iter().copied()) => {}
        _ => {
            return Err(Error::usage(format!(
                "{name}: the first line is not the kit's results grid header ({})",
                header.join(",")
            )))
        }
    }
    let mut rows = Vec::new();
    for record in records {
        let record = record.map_err(|e| Error::usage(format!("{name}: not valid CSV: {e}")))?;
        let line = record.position().map_or(0, |p| p.line());
        let at = |e: Error| Error::usage(format!("{name}: line {line}: {e}"));
        if record.len() != header.len() {
            return Err(at(Error::usage(format!(
                "{} fields, the header has {}",
                record.len(),
                header.len()
            ))));
        }
        let row = row_of(&record).map_err(at)?;
        crate::record::rules::check_row(&row, catalog, now).map_err(at)?;
        rows.push((line, row));
    }
    crate::record::rules::check_unique(
        rows.iter()
            .map(|(line, r)| (*line, r.run_id.as_str(), r.measurement_sha256.as_deref())),
    )
    .map_err(|e| Error::usage(format!("{name}: {e}")))?;
    Ok(rows)
}

/// The row of one CSV record in the kit's column order (checked against the header by the
/// caller): empty cells are absent values; whole numbers as `lab record` writes them.
fn row_of(record: &csv::StringRecord) -> Result<GridRow> {
    let cell = |i: usize| record.get(i).unwrap_or_default();
    let opt = |i: usize| Some(cell(i).to_string()).filter(|v| !v.is_empty());
    let whole = |i: usize, column: &str| -> Result<u64> {
        crate::record::rules::parse_count(cell(i)).ok_or_else(|| {
            Error::usage(format!(
                "{column} '{}' is not a whole number (the digits 0-9 only, at most {})",
                crate::text::excerpt(cell(i)),
                u64::MAX
            ))
        })
    };
    let days = whole(5, "days")?;
    Ok(GridRow {
        run_id: cell(0).to_string(),
        date_utc: cell(1).to_string(),
        measurement_file: opt(2),
        measurement_sha256: opt(3),
        gpu: cell(4).to_string(),
        days: u32::try_from(days)
            .map_err(|_| Error::usage(format!("days {days} is not a catalog duration")))?,
        lots: whole(6, "lots")?,
        quality_metric: opt(7),
        threshold: opt(8),
        observed: opt(9),
        accepted_results: match cell(10) {
            "" => None,
            _ => Some(whole(10, "accepted_results")?),
        },
        outcome: cell(11).to_string(),
        notes: opt(12),
    })
}

/// Sums checked rows as described in the module documentation.
///
/// The rules of [`check_row`](crate::record::rules::check_row) bound every row so that these
/// sums fit (see [`crate::record::rules`]); they are checked all the same, and an overflow is
/// refused naming the line and the field, never wrapped.
///
/// # Errors
/// [`Error::Usage`] when a package is not in `catalog` or a sum overflows.
pub fn summarize(grid: &str, rows: &[(u64, GridRow)], catalog: &Catalog) -> Result<Results> {
    let shown = crate::text::one_line(grid);
    let overflow = |line: u64, field: &str| {
        Error::usage(format!(
            "{shown}: line {line}: {field}: the total with this row does not fit a 64-bit \
             integer; the row breaks the bounds of lab record (docs/PROTOCOL.md §6), fix it by hand"
        ))
    };
    // Each package with the line of its first row and every run's (end, line).
    type Runs = Vec<(time::OffsetDateTime, u64)>;
    let mut packages: Vec<(PackageResults, u64, Runs)> = Vec::new();
    for (line, row) in rows {
        let ended = time::OffsetDateTime::parse(
            &row.date_utc,
            &time::format_description::well_known::Rfc3339,
        )
        .map_err(|e| Error::usage(format!("date_utc '{}': {e}", row.date_utc)))?;
        let index = match packages
            .iter()
            .position(|(p, _, _)| p.gpu == row.gpu && p.days == row.days && p.lots == row.lots)
        {
            Some(i) => i,
            None => {
                let quote = crate::pricing::quote(catalog, &row.gpu, row.days, row.lots, None)?;
                packages.push((
                    PackageResults {
                        gpu: row.gpu.clone(),
                        days: row.days,
                        lots: row.lots,
                        runs: 0,
                        purchases: 0,
                        package_cents: quote.total_cents,
                        spent_cents: 0,
                        spent_usd: Decimal::ZERO,
                        accepted_results: 0,
                        unit_cost_usd: None,
                    },
                    *line,
                    Vec::new(),
                ));
                packages.len() - 1
            }
        };
        let (package, _, ends) = &mut packages[index];
        package.runs += 1;
        package.accepted_results = package
            .accepted_results
            .checked_add(row.accepted_results.unwrap_or(0))
            .ok_or_else(|| overflow(*line, "accepted_results"))?;
        ends.push((ended, *line));
    }
    let mut out = Vec::with_capacity(packages.len());
    let mut spent_cents: i64 = 0;
    let mut accepted: u64 = 0;
    for (mut package, first_line, mut ends) in packages {
        ends.sort();
        let window = time::Duration::days(i64::from(package.days));
        let mut first: Option<time::OffsetDateTime> = None;
        for (end, line) in ends {
            if first.is_none_or(|f| end > f + window) {
                package.purchases += 1;
                package.spent_cents = package
                    .spent_cents
                    .checked_add(package.package_cents)
                    .ok_or_else(|| overflow(line, "spent (the package's price x purchases)"))?;
                first = Some(end);
            }
        }
        package.spent_usd = crate::pricing::cents_to_usd(package.spent_cents);
        package.unit_cost_usd = unit_cost(package.spent_cents, package.accepted_results)?;
        spent_cents = spent_cents
            .checked_add(package.spent_cents)
            .ok_or_else(|| overflow(first_line, "spent, over all packages"))?;
        accepted = accepted
            .checked_add(package.accepted_results)
            .ok_or_else(|| overflow(first_line, "accepted_results, over all packages"))?;
        out.push(package);
    }
    Ok(Results {
        grid: grid.to_string(),
        runs: rows.len() as u64,
        packages: out,
        spent_cents,
        spent_usd: crate::pricing::cents_to_usd(spent_cents),
        accepted_results: accepted,
        unit_cost_usd: unit_cost(spent_cents, accepted)?,
        runs_without_measurement: rows
            .iter()
            .filter(|(_, r)| r.measurement_file.is_none())
            .map(|(_, r)| r.run_id.clone())
            .collect(),
        runs_without_accepted_count: rows
            .iter()
            .filter(|(_, r)| r.outcome == "completed" && r.accepted_results.is_none())
            .map(|(_, r)| r.run_id.clone())
            .collect(),
    })
}

/// The cost per result, or `None` with no accepted result (never a division by zero).
fn unit_cost(cents: i64, accepted: u64) -> Result<Option<Decimal>> {
    match accepted {
        0 => Ok(None),
        k => crate::pricing::unit_cost_usd(cents, k).map(Some),
    }
}

/// The text of `lab results`: one line for the grid, a table of packages with a total row,
/// the runs that lack a measurement or an accepted count.
pub fn lines(results: &Results) -> Vec<String> {
    let dash = |v: Option<Decimal>| v.map_or_else(|| "-".to_string(), |d| d.to_string());
    let run_word = if results.runs == 1 { "run" } else { "runs" };
    let mut out = vec![format!(
        "results grid {}: {} {run_word} on {} package(s)",
        crate::text::one_line(&results.grid),
        results.runs,
        results.packages.len()
    )];
    let mut rows = vec![[
        "package",
        "runs",
        "purchases",
        "spent USD",
        "accepted",
        "USD/result",
    ]
    .map(String::from)
    .to_vec()];
    for p in &results.packages {
        rows.push(vec![
            format!("{} x {} lot(s), {} days", p.gpu, p.lots, p.days),
            p.runs.to_string(),
            p.purchases.to_string(),
            p.spent_usd.to_string(),
            p.accepted_results.to_string(),
            dash(p.unit_cost_usd),
        ]);
    }
    rows.push(vec![
        "all runs".to_string(),
        results.runs.to_string(),
        results
            .packages
            .iter()
            .map(|p| p.purchases)
            .sum::<u64>()
            .to_string(),
        results.spent_usd.to_string(),
        results.accepted_results.to_string(),
        dash(results.unit_cost_usd),
    ]);
    out.extend(
        crate::table::align(&rows, |i| i == 0)
            .into_iter()
            .map(|l| format!("  {l}")),
    );
    let list = |ids: &[String]| {
        ids.iter()
            .map(|id| crate::text::one_line(id))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push(if results.runs_without_measurement.is_empty() {
        "every run names its measurement".to_string()
    } else {
        format!(
            "runs without a measurement: {}",
            list(&results.runs_without_measurement)
        )
    });
    if !results.runs_without_accepted_count.is_empty() {
        out.push(format!(
            "completed runs with no accepted count (counted 0): {}",
            list(&results.runs_without_accepted_count)
        ));
    }
    out.push(
        "purchases: runs of one package ending within its duration of the purchase's first run share it"
            .to_string(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> time::OffsetDateTime {
        time::macros::datetime!(2026-12-01 20:00 UTC)
    }

    fn grid(rows: &[&str]) -> String {
        let mut text = kit_header().join(",") + "\n";
        for row in rows {
            text.push_str(row);
            text.push('\n');
        }
        text
    }

    const SHA: &str = "ed2c081712eeb45c430e61679b91b524743d7f5de7e00462f7bbf52a96f71236";

    /// Real values: h200 x1 for 7 days is 510.72 USD (3.20 x 24 x 7 x 0.95 x 100 cents, the
    /// catalog's rule); two runs 3 days apart share one purchase, a third 9 days after the
    /// first needs another; b200 x2 for 7 days is 3064.32 USD.
    #[test]
    fn sums_purchases_accepted_results_and_unit_cost() {
        let catalog = Catalog::embedded().unwrap();
        let text = grid(&[
            &format!("a,2026-11-01T10:00:00Z,m.json,{SHA},h200,7,1,em,>=0.9,0.95,100,completed,"),
            "b,2026-11-04T10:00:00Z,,,h200,7,1,em,>=0.9,0.5,0,rejected,",
            "c,2026-11-10T10:00:00Z,,,h200,7,1,em,>=0.9,0.97,140,completed,",
            "d,2026-11-20T10:00:00Z,,,b200,7,2,em,,,,failed,out of memory",
            "e,2026-11-08T10:00:00Z,,,h200,7,1,em,>=0.9,,,completed,",
        ]);
        let rows = parse_grid("g.csv", text.as_bytes(), &catalog, now()).unwrap();
        let r = summarize("g.csv", &rows, &catalog).unwrap();
        assert_eq!(r.runs, 5);
        let h200 = &r.packages[0];
        assert_eq!(
            (h200.runs, h200.purchases, h200.package_cents),
            (4, 2, 51072)
        );
        // a (11-01) opens a purchase; b (11-04) and e (11-08, exactly 7 days later) share it;
        // c (11-10) starts the second.
        assert_eq!(h200.spent_usd.to_string(), "1021.44");
        assert_eq!(h200.accepted_results, 240);
        assert_eq!(h200.unit_cost_usd.unwrap().to_string(), "4.256000");
        let b200 = &r.packages[1];
        assert_eq!(
            (b200.runs, b200.purchases, b200.spent_cents),
            (1, 1, 306432)
        );
        assert_eq!(b200.unit_cost_usd, None);
        assert_eq!(r.spent_cents, 102144 + 306432);
        assert_eq!(r.spent_usd.to_string(), "4085.76");
        assert_eq!(r.accepted_results, 240);
        // 4085.76 / 240 = 17.024 exactly.
        assert_eq!(r.unit_cost_usd.unwrap().to_string(), "17.024000");
        assert_eq!(r.runs_without_measurement, ["b", "c", "d", "e"]);
        assert_eq!(r.runs_without_accepted_count, ["e"]);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["spent_usd"], "4085.76");
        assert_eq!(json["unit_cost_usd"], "17.024000");
        assert_eq!(
            json["packages"][1]["unit_cost_usd"],
            serde_json::Value::Null
        );
        assert_eq!(
            lines(&r),
            [
                "results grid g.csv: 5 runs on 2 package(s)",
                "  package                  runs  purchases  spent USD  accepted  USD/result",
                "  h200 x 1 lot(s), 7 days     4          2    1021.44       240    4.256000",
                "  b200 x 2 lot(s), 7 days     1          1    3064.32         0           -",
                "  all runs                    5          3    4085.76       240   17.024000",
                "runs without a measurement: b, c, d, e",
                "completed runs with no accepted count (counted 0): e",
                "purchases: runs of one package ending within its duration of the purchase's first run share it",
            ]
        );
    }

    #[test]
    fn an_empty_grid_has_no_unit_cost() {
        let catalog = Catalog::embedded().unwrap();
        let rows = parse_grid("g.csv", grid(&[]).as_bytes(), &catalog, now()).unwrap();
        let r = summarize("g.csv", &rows, &catalog).unwrap();
        assert_eq!((r.runs, r.spent_cents, r.unit_cost_usd), (0, 0, None));
    }

    /// A row that breaks a rule is refused by line, whatever the rule.
    #[test]
    fn bad_rows_are_refused_by_line() {
        let catalog = Catalog::embedded().unwrap();
        for (row, needle) in [
            (
                "a,2026-11-01T10:00:00Z,,,h200,7,1,em,>=0.92,0.10,500,completed,",
                "below its own threshold",
            ),
            (
                "a,1969-12-31T00:00:00Z,,,h200,7,1,,,,,failed,",
                "before 2026-01-01",
            ),
            (
                "a,2026-11-01T10:00:00Z,,,h200,7,x,,,,,failed,",
                "lots 'x' is not a whole number",
            ),
            ("a,2026-11-01T10:00:00Z,,,h200,5,1,,,,,failed,", "line 2"),
            (
                "a,2026-11-01T10:00:00Z,,,h200,7,1,,,,,done,",
                "--outcome must be one of",
            ),
            (
                "a,2026-11-01T10:00:00Z,m.json,,h200,7,1,,,,,failed,",
                "go together",
            ),
            ("a,2026-11-01T10:00:00Z,,,h200,7,1,,,,", "11 fields"),
        ] {
            let e = parse_grid("g.csv", grid(&[row]).as_bytes(), &catalog, now())
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("g.csv: line 2: ") || needle == "11 fields",
                "{e}"
            );
            assert!(e.contains(needle), "{needle}: {e}");
        }
        let e = parse_grid("g.csv", b"run,x\n", &catalog, now())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not the kit's results grid header"), "{e}");
    }

    /// Rows that skipped the rules (`summarize` on rows not read by `parse_grid`) whose totals
    /// overflow are refused naming the line and the field, never wrapped; the bounds of
    /// `lab record` keep every checked grid far from that (2^21 rows at most).
    #[test]
    fn an_overflowing_total_names_the_line_and_field() {
        use crate::record::rules::{MAX_ACCEPTED_RESULTS, MAX_GRID_ROWS};
        assert_eq!(MAX_GRID_ROWS, 1 << 21);
        assert!(MAX_GRID_ROWS.checked_mul(MAX_ACCEPTED_RESULTS).is_some());
        let catalog = Catalog::embedded().unwrap();
        let text = grid(&[
            "a,2026-11-01T10:00:00Z,,,h200,7,1,,,,5,completed,",
            "b,2026-11-02T10:00:00Z,,,h200,7,1,,,,6,completed,",
        ]);
        let mut rows = parse_grid("g.csv", text.as_bytes(), &catalog, now()).unwrap();
        for (accepted, line, field) in [
            ([u64::MAX, 1], 3, "accepted_results"),
            ([1, u64::MAX], 3, "accepted_results"),
        ] {
            rows[0].1.accepted_results = Some(accepted[0]);
            rows[1].1.accepted_results = Some(accepted[1]);
            let e = summarize("g.csv", &rows, &catalog).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("g.csv: line {line}: {field}: the total")),
                "{e}"
            );
        }
        // Across packages: each fits, their sum does not.
        rows[1].1.lots = 2;
        rows[0].1.accepted_results = Some(u64::MAX);
        rows[1].1.accepted_results = Some(1);
        let e = summarize("g.csv", &rows, &catalog).unwrap_err().to_string();
        assert!(
            e.starts_with("g.csv: line 3: accepted_results, over all packages"),
            "{e}"
        );
    }
}
