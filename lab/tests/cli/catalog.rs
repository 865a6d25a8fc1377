//! Catalog validator: each malformed file is refused with its line number, through the
//! library (`Catalog::parse`) and through `lab price --tariffs FILE` (exit 2, one line). Was
//! its own test binary (`tests/catalog.rs`); now a module of the CLI tests.

use super::support::Lab;
use lab::catalog::Catalog;

const GOOD: &str = include_str!("../../../data/tarifs-forfaits.csv");

/// The shipped catalog with line `line` (1-based) replaced by `with` (`None` deletes it).
fn edit(line: usize, with: Option<&str>) -> String {
    let mut lines: Vec<String> = GOOD.lines().map(str::to_string).collect();
    match with {
        Some(text) => lines[line - 1] = text.to_string(),
        None => {
            lines.remove(line - 1);
        }
    }
    lines.join("\n") + "\n"
}

/// Asserts both the library and the CLI refuse `content`, mentioning `needle`.
fn refused(content: &str, needle: &str) {
    let error = Catalog::parse(content.as_bytes()).unwrap_err();
    assert_eq!(error.exit_code(), 2);
    let message = error.to_string();
    assert!(
        message.contains(needle),
        "expected '{needle}' in: {message}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tariffs.csv");
    std::fs::write(&path, content).unwrap();
    let line = Lab::new(&[
        "price",
        "--gpu",
        "t4",
        "--days",
        "3",
        "--lots",
        "1",
        "--tariffs",
    ])
    .arg(&path)
    .refused(2, needle);
    assert!(line.contains("tariffs.csv"), "{line}");
}

#[test]
fn shipped_catalog_is_valid() {
    let catalog = Catalog::parse(GOOD.as_bytes()).unwrap();
    assert_eq!(catalog.entries().len(), 45);
    assert!(!catalog.is_embedded());
    assert_eq!(catalog.entries()[0].line, 2);
    assert_eq!(catalog.entries()[44].line, 46);
}

#[test]
fn accepts_bom_crlf_trailing_blank_line_and_extra_columns() {
    let crlf = format!("\u{feff}{}\r\n", GOOD.replace('\n', "\r\n"));
    let catalog = Catalog::parse(crlf.as_bytes()).unwrap();
    assert_eq!(catalog.entries().len(), 45);
    assert_eq!(catalog.find("b200", 7).unwrap().price_cents, 153_216);
    // The hash is of the bytes as given, so it differs from the shipped file's.
    assert_ne!(
        catalog.sha256(),
        Catalog::parse(GOOD.as_bytes()).unwrap().sha256()
    );

    let extra: String = GOOD
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                format!("{l},note\n")
            } else {
                format!("{l},x\n")
            }
        })
        .collect();
    assert_eq!(
        Catalog::parse(extra.as_bytes()).unwrap().entries().len(),
        45
    );
}

#[test]
fn a_valid_replacement_file_is_used_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("real.csv");
    let changed = edit(2, Some("t4,NVIDIA T4 16 GB,1,3,2999"));
    std::fs::write(&path, &changed).unwrap();
    let v = Lab::new(&[
        "price",
        "--gpu",
        "t4",
        "--days",
        "3",
        "--lots",
        "2",
        "--json",
        "--tariffs",
    ])
    .arg(&path)
    .json();
    assert_eq!(v["total_cents"], 5998);
    assert_eq!(v["catalog"]["embedded"], false);
    assert_eq!(
        v["catalog"]["sha256"],
        lab::digest::sha256_hex(changed.as_bytes())
    );
}

#[test]
fn semicolon_delimiter() {
    refused(
        &GOOD.replace(',', ";"),
        "line 1: the header must start with",
    );
    refused(&GOOD.replace(',', ";"), "not semicolons");
}

#[test]
fn wrong_header() {
    refused(
        &edit(1, Some("gpu,model,days,gpus_per_lot,price_cents")),
        "line 1: the header",
    );
    refused("", "empty");
    refused("gpu,model,gpus_per_lot,days,price_cents\n", "no rows");
}

#[test]
fn decimal_price() {
    refused(
        &edit(5, Some("l4,NVIDIA L4 24 GB,1,3,12.50")),
        "line 5: price_cents must be a whole number",
    );
}

#[test]
fn price_with_thousands_separator() {
    // Unquoted, the comma makes an extra field; quoted, it is a non-integer price.
    refused(
        &edit(5, Some("l4,NVIDIA L4 24 GB,1,3,1,234")),
        "line 5: expected 5 fields",
    );
    refused(
        &edit(5, Some("l4,NVIDIA L4 24 GB,1,3,\"1,234\"")),
        "line 5: price_cents",
    );
}

#[test]
fn zero_and_negative_prices() {
    refused(
        &edit(7, Some("l4,NVIDIA L4 24 GB,1,30,0")),
        "line 7: price_cents",
    );
    refused(
        &edit(7, Some("l4,NVIDIA L4 24 GB,1,30,-42840")),
        "line 7: price_cents",
    );
    refused(
        &edit(7, Some("l4,NVIDIA L4 24 GB,1,30,+42840")),
        "line 7: price_cents",
    );
    refused(
        &edit(7, Some("l4,NVIDIA L4 24 GB,1,30, 42840")),
        "line 7: price_cents",
    );
    refused(
        &edit(7, Some("l4,NVIDIA L4 24 GB,1,30,99999999999999999999")),
        "line 7: price_cents",
    );
}

#[test]
fn duplicate_row() {
    // Line 3 (t4, 7 days) replaced by a second t4 3-day row.
    refused(
        &edit(3, Some("t4,NVIDIA T4 16 GB,1,3,2520")),
        "line 3: duplicate entry for t4 3 days (first on line 2)",
    );
}

#[test]
fn missing_model_duration_pair() {
    // Deleting line 4 (t4, 30 days) leaves t4 without a 30-day row; t4 starts on line 2.
    refused(&edit(4, None), "line 2: t4 has no 30-day row");
}

#[test]
fn lot_size_changes_between_durations() {
    refused(
        &edit(39, Some("b200,NVIDIA B200 180 GB,1,7,153216")),
        "line 39: b200 has 1 GPUs per lot here but 2 on line 38",
    );
}

#[test]
fn bad_duration_and_lot_size() {
    refused(
        &edit(3, Some("t4,NVIDIA T4 16 GB,1,14,5586")),
        "line 3: days must be one of 3, 7, 30",
    );
    refused(
        &edit(3, Some("t4,NVIDIA T4 16 GB,0,7,5586")),
        "line 3: gpus_per_lot",
    );
    refused(
        &edit(3, Some(",NVIDIA T4 16 GB,1,7,5586")),
        "line 3: gpu must be",
    );
}

#[test]
fn wrong_number_of_models() {
    // Drop the last model (3 rows): 14 models.
    let fourteen: String = GOOD.lines().take(43).map(|l| format!("{l}\n")).collect();
    refused(
        &fourteen,
        "the catalog lists 14 GPU models (42 rows); expected 15 models",
    );
    // Add a 16th model.
    let sixteen = format!("{GOOD}x1,Extra,1,3,100\nx1,Extra,1,7,200\nx1,Extra,1,30,300\n");
    refused(&sixteen, "the catalog lists 16 GPU models");
}

#[test]
fn short_row() {
    refused(
        &edit(10, Some("rtx4090,NVIDIA GeForce RTX 4090 24 GB,1,3")),
        "line 10: expected 5 fields",
    );
}

#[test]
fn a_field_with_a_line_break_is_refused_on_the_line_it_starts() {
    // The record starting on line 3 spans lines 3 and 4.
    refused(
        &edit(3, Some("t4,\"NVIDIA T4\n16 GB\",1,7,5586")),
        "line 3: a field contains a line break",
    );
    refused(
        &edit(
            1,
            Some("gpu,model,gpus_per_lot,days,price_cents,\"a\r\nnote\""),
        ),
        "line 1: a field contains a line break",
    );
}

#[test]
fn bare_carriage_returns_and_nul_are_refused_with_their_line() {
    refused(
        &GOOD.replace('\n', "\r"),
        "line 1: a carriage return without a line feed",
    );
    refused(
        &edit(5, Some("l4,NVIDIA L4 24 GB,1,3,4320\rx")),
        "line 5: a carriage return without a line feed",
    );
    refused(
        &edit(6, Some("l4,NVIDIA L4\u{0} 24 GB,1,7,10080")),
        "line 6: a NUL character",
    );
}

#[test]
fn line_numbers_count_blank_lines() {
    // Blank lines before a bad row: the row's own physical line is named.
    let text = GOOD.replacen("\n", "\n\n\n", 2);
    let bad = text.replacen(",5586\n", ",55.86\n", 1);
    refused(&bad, "line 7: price_cents");
}

#[test]
fn shipped_content_digest_is_recomputed_from_the_data_file() {
    // The canonical form written out by hand: rows sorted by gpu then days, each the JSON
    // array [gpu,model,gpus_per_lot,days,price_cents] without spaces and a line feed.
    let mut rows: Vec<(String, u32, String)> = GOOD
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let line = format!("[\"{}\",\"{}\",{},{},{}]\n", f[0], f[1], f[2], f[3], f[4]);
            (f[0].to_string(), f[3].parse().unwrap(), line)
        })
        .collect();
    assert_eq!(rows.len(), 45);
    rows.sort();
    let canonical: String = rows.into_iter().map(|(_, _, line)| line).collect();
    assert_eq!(
        lab::digest::sha256_hex(canonical.as_bytes()),
        lab::catalog::SHIPPED_CONTENT_SHA256
    );
    // The Python twin holds the same constant.
    let twin = include_str!("../../../dist/calcul_forfaits.py");
    assert!(twin.contains(&format!(
        "SHIPPED_CONTENT_SHA256 = \"{}\"",
        lab::catalog::SHIPPED_CONTENT_SHA256
    )));
}

/// Refused by the library with exactly this message (no path: `Catalog::parse`).
fn refused_exactly(content: &[u8], message: &str) {
    let error = Catalog::parse(content).unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert_eq!(error.to_string(), message);
}

const SAVE_AS_UTF8: &str =
    "save it as UTF-8 CSV (spreadsheet: Save As, \"CSV UTF-8\"; text editor: encoding UTF-8)";

#[test]
fn one_byte_order_mark_is_allowed_a_second_is_content() {
    assert!(Catalog::parse(format!("\u{feff}{GOOD}").as_bytes()).is_ok());
    for marks in [2, 3, 10] {
        let text = format!("{}{GOOD}", "\u{feff}".repeat(marks));
        refused_exactly(
            text.as_bytes(),
            &format!(
                "line 1: the file starts with a second byte-order mark (U+FEFF); keep at most one: {SAVE_AS_UTF8}"
            ),
        );
        refused(&text, "second byte-order mark (U+FEFF)");
    }
    // Not at the start of the file: a hidden character in the id, named as a code point.
    refused(
        &edit(4, Some("\u{feff}t4,NVIDIA T4 16 GB,1,30,18144")),
        "line 4: gpu contains U+FEFF, a control or format character",
    );
}

#[test]
fn utf16_and_latin1_are_named_with_their_line_and_a_hint() {
    let utf16 = |big: bool, mark: bool| -> Vec<u8> {
        let units = mark
            .then_some(0xFEFF)
            .into_iter()
            .chain(GOOD.encode_utf16());
        units
            .flat_map(|u| {
                if big {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                }
            })
            .collect()
    };
    for (bytes, start) in [
        (utf16(false, true), "FF FE"),
        (utf16(true, true), "FE FF"),
        (utf16(false, false), "67 00"),
        (utf16(true, false), "00 67"),
    ] {
        refused_exactly(
            &bytes,
            &format!(
                "line 1: the catalog looks like UTF-16 text (it starts with bytes {start}), not UTF-8: {SAVE_AS_UTF8}"
            ),
        );
    }
    // Latin-1: é (E9) in a model name on line 6; Windows-1252: € (80) on line 30.
    for (line, byte) in [(6, 0xE9u8), (30, 0x80), (46, 0xFF)] {
        let mut bytes = Vec::new();
        for (i, l) in GOOD.lines().enumerate() {
            bytes.extend_from_slice(l.as_bytes());
            if i + 1 == line {
                bytes.push(byte);
            }
            bytes.push(b'\n');
        }
        refused_exactly(
            &bytes,
            &format!(
                "line {line}: the catalog is not UTF-8 text (byte {byte:02X}); it looks like Latin-1 or Windows-1252: {SAVE_AS_UTF8}"
            ),
        );
    }
}

#[test]
fn a_data_row_separated_by_semicolons_gets_the_hint() {
    for line in [2, 17, 46] {
        let row = GOOD.lines().nth(line - 1).unwrap().replace(',', ";");
        refused(
            &edit(line, Some(&row)),
            &format!(
                "line {line}: expected 5 fields like the header, found 1 (fields must be separated by commas, not semicolons"
            ),
        );
    }
    // Some fields with semicolons, some with commas: still the hint.
    refused(
        &edit(3, Some("t4,NVIDIA T4 16 GB;1;7;5586")),
        "found 2 (fields must be separated by commas, not semicolons",
    );
}

#[test]
fn control_and_format_characters_are_refused_by_one_explicit_rule() {
    // U+001C..U+001F: not whitespace for Rust, whitespace for Python; hidden for both twins.
    for c in [
        '\u{1c}',
        '\u{1d}',
        '\u{1e}',
        '\u{1f}',
        '\u{1b}',
        '\t',
        '\u{7f}',
        '\u{85}',
        '\u{9b}',
        '\u{ad}',
        '\u{200b}',
        '\u{202e}',
        '\u{2028}',
        '\u{2029}',
        '\u{2066}',
        '\u{e0041}',
    ] {
        let code = format!("U+{:04X}", u32::from(c));
        refused(
            &GOOD.replace("NVIDIA T4 16 GB", &format!("NVIDIA{c}T4")),
            &format!("line 2: model name contains {code}, a control or format character"),
        );
        refused(
            &GOOD.replace("\nt4,", &format!("\nt{c}4,")),
            &format!("line 2: gpu contains {code}, a control or format character"),
        );
    }
    for space in ["\u{a0}", "\u{3000}", "\u{2003}", " "] {
        refused(
            &GOOD.replace("\nt4,", &format!("\nt{space}4,")),
            "line 2: gpu must be a non-empty identifier without spaces",
        );
        refused(
            &GOOD.replace("NVIDIA T4 16 GB", &space.repeat(3)),
            "line 2: model name is empty",
        );
    }
    // Visible text, inner and outer spaces of any kind: accepted, kept verbatim.
    for model in ["NVIDIA\u{a0}T4", "NVIDIA\u{3000}T4", " Réservé ", "Ω"] {
        let catalog = Catalog::parse(GOOD.replace("NVIDIA T4 16 GB", model).as_bytes()).unwrap();
        assert_eq!(catalog.find("t4", 3).unwrap().model, model);
    }
}

#[test]
fn integers_of_any_length_are_too_large_and_leading_zeros_harmless() {
    let nines = "9".repeat(4400);
    refused(
        &edit(2, Some(&format!("t4,NVIDIA T4 16 GB,1,3,{nines}"))),
        "line 2: price_cents must be a whole number of cents from 1 to 9223372036854775807",
    );
    refused(
        &edit(2, Some(&format!("t4,NVIDIA T4 16 GB,{nines},3,2520"))),
        "line 2: gpus_per_lot must be a whole number from 1 to 4294967295",
    );
    refused(
        &edit(2, Some(&format!("t4,NVIDIA T4 16 GB,1,{nines},2520"))),
        "line 2: days must be one of 3, 7, 30",
    );
    let zeros = "0".repeat(5000);
    let text = edit(
        2,
        Some(&format!("t4,NVIDIA T4 16 GB,{zeros}1,{zeros}3,{zeros}2520")),
    );
    let catalog = Catalog::parse(text.as_bytes()).unwrap();
    assert_eq!(catalog.find("t4", 3).unwrap().price_cents, 2520);
    assert!(catalog.is_shipped());
}
