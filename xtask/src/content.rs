//! The content checks of the kit, shared by `cargo xtask dist` (which refuses to package a kit
//! failing any of them) and `cargo xtask verify`: the notebook (valid, clean, and generated from
//! the script it ships with), the empty results grid, the catalog. Findings name the source
//! file (`dist/mesure-memoire.ipynb`, ...).

use crate::archive::{source_of, Kit};
use crate::{notebook, notebook_check};
use lab::kit::Finding;

/// Every content finding for `kit`; empty means it may be packaged.
pub fn findings(kit: &Kit) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (name, bytes) in kit.files() {
        let file = source_of(name).unwrap_or(name);
        match name {
            "mesure-memoire.ipynb" => {
                findings.extend(notebook_check::check(file, bytes));
                let script = kit.file("mesure_memoire.py").unwrap_or_default();
                findings.extend(notebook_up_to_date(file, bytes, script));
            }
            "resultats-bruts.csv" => findings.extend(results_grid(file, bytes)),
            "tarifs-forfaits.csv" => findings.extend(catalog(file, bytes)),
            _ => {}
        }
    }
    findings
}

/// The notebook must be exactly what `cargo xtask notebook` generates from the script shipped
/// beside it (so a cell edited by hand, e.g. `(bits + 7) // 8` turned into `bits // 8`, is
/// refused by `dist` as by `verify`).
pub fn notebook_up_to_date(file: &str, notebook: &[u8], script: &[u8]) -> Option<Finding> {
    let script = match std::str::from_utf8(script) {
        Ok(s) => s,
        Err(e) => return Some(Finding::new(notebook::SCRIPT, format!("not UTF-8: {e}"))),
    };
    let expected = match notebook::render(script) {
        Ok(text) => text,
        Err(e) => return Some(Finding::new(file, format!("cannot be generated: {e:#}"))),
    };
    let actual = String::from_utf8_lossy(notebook);
    notebook::first_difference(&actual, &expected).map(|line| {
        Finding::new(
            file,
            format!(
                "out of date with {} (first difference at line {line}); run `cargo xtask \
                 notebook` and commit the result",
                notebook::SCRIPT
            ),
        )
    })
}

/// Checks the results grid `resultats-bruts.csv`: UTF-8, one header line of distinct,
/// non-empty column names, and no row after it (the kit ships the grid empty).
pub fn results_grid(file: &str, bytes: &[u8]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.strip_prefix('\u{feff}').unwrap_or(t),
        Err(e) => return vec![Finding::new(file, format!("not UTF-8: {e}"))],
    };
    if text.trim().is_empty() {
        return vec![Finding::new(file, "empty; expected a header line")];
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut records = reader.records();
    match records.next() {
        Some(Ok(header)) => {
            let mut seen = std::collections::BTreeSet::new();
            for (i, name) in header.iter().enumerate() {
                if name.trim().is_empty() {
                    findings.push(Finding::new(
                        file,
                        format!("header column {} is empty", i + 1),
                    ));
                } else if !seen.insert(name) {
                    findings.push(Finding::new(
                        file,
                        format!("header column {name:?} repeated"),
                    ));
                }
            }
        }
        Some(Err(e)) => findings.push(Finding::new(file, format!("header is not valid CSV: {e}"))),
        None => findings.push(Finding::new(file, "no header line")),
    }
    let rows = records.count();
    // Blank lines are not records for the CSV reader; count them too, except the final newline.
    let after_header = text
        .split_once('\n')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    if rows > 0 {
        findings.push(Finding::new(
            file,
            format!("{rows} row(s) after the header; the grid must ship with its header only"),
        ));
    } else if !after_header.is_empty() {
        findings.push(Finding::new(
            file,
            "text after the header line; the grid must ship with its header only",
        ));
    }
    findings
}

/// Checks the catalog `tarifs-forfaits.csv` with the validator `lab price` uses
/// ([`lab::catalog::Catalog::parse`]): 15 GPU models x 3 durations (3, 7, 30 days) = 45 rows of
/// whole-cent prices.
pub fn catalog(file: &str, bytes: &[u8]) -> Vec<Finding> {
    match lab::catalog::Catalog::parse(bytes) {
        Ok(_) => Vec::new(),
        Err(e) => vec![Finding::new(file, e.to_string())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_with_header_only_passes_and_rows_fail() {
        assert!(results_grid("g.csv", b"a,b,c\n").is_empty());
        assert!(results_grid("g.csv", b"a,b,c").is_empty());
        let rows = results_grid("g.csv", b"a,b,c\n1,2,3\n");
        assert_eq!(rows.len(), 1);
        assert!(rows[0].to_string().starts_with("g.csv: 1 row(s)"));
        assert_eq!(results_grid("g.csv", b"a,b,c\n\n").len(), 1);
        assert_eq!(results_grid("g.csv", b"a,,a\n").len(), 2);
        assert_eq!(results_grid("g.csv", b"").len(), 1);
    }

    #[test]
    fn a_notebook_cell_edited_by_hand_is_out_of_date() {
        let root = crate::project_root();
        let script = std::fs::read(root.join(notebook::SCRIPT)).unwrap();
        let good = notebook::render(std::str::from_utf8(&script).unwrap()).unwrap();
        assert_eq!(notebook_up_to_date("nb", good.as_bytes(), &script), None);
        assert!(good.contains("(bits + 7) // 8"));
        let edited = good.replacen("(bits + 7) // 8", "bits // 8", 1);
        let finding = notebook_up_to_date("nb", edited.as_bytes(), &script).unwrap();
        assert!(finding
            .message
            .starts_with("out of date with dist/mesure_memoire.py"));
    }
}
