//! Plain-text tables, as `lab report`, `lab compare` and `lab sweep` print them.

/// Aligns `rows` (the header row first) into lines: each column as wide as its widest cell,
/// counted in characters; a cell is left-aligned where `left(column index)` is true and
/// right-aligned otherwise; columns are two spaces apart; no trailing spaces.
pub fn align(rows: &[Vec<String>], left: impl Fn(usize) -> bool) -> Vec<String> {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let width = cell.chars().count();
            match widths.get_mut(i) {
                Some(w) => *w = (*w).max(width),
                None => widths.push(width),
            }
        }
    }
    rows.iter()
        .map(|row| {
            row.iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if left(i) {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_by_characters_and_trims() {
        let rows = vec![
            vec!["gpu".to_string(), "µs".to_string(), "note".to_string()],
            vec!["b200".to_string(), "1.5".to_string(), String::new()],
        ];
        assert_eq!(align(&rows, |i| i != 1), ["gpu    µs  note", "b200  1.5"]);
    }
}
