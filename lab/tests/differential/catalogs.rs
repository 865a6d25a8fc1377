//! Catalogs: malformed ones name the same line, the `catalog` object agrees, long integers,
//! encodings, byte order marks and control characters are refused alike, and a catalog on
//! standard input is read alike.

use crate::support::*;

#[test]
fn malformed_catalogs_name_the_same_line() {
    let dir = tempfile::tempdir().unwrap();
    for file in malformed_catalogs(dir.path()) {
        let args = strings(&[
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "1",
            "--tariffs",
            &file,
        ]);
        let mut lab_args = strings(&["price"]);
        lab_args.extend(args.iter().cloned());
        let lab: Outcome = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(&lab_args)
            .output()
            .unwrap()
            .into();
        let python = run_python_process("calcul_forfaits.py", &args);
        assert_eq!(lab.code, 2, "{file}: {}", lab.stderr);
        assert_eq!(python.code, 2, "{file}: {}", python.stderr);
        assert_eq!(
            named_line(&lab.stderr),
            named_line(&python.stderr),
            "{file}:\n lab: {}\n python: {}",
            lab.stderr,
            python.stderr
        );
    }
}

#[test]
fn catalog_objects_agree_for_shipped_and_other_content() {
    // The shipped rows in other bytes (CRLF, BOM, reversed rows, an extra column) are still
    // the shipped, illustrative catalog dated 2026-09-24; changed prices carry no date.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(catalog()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[1..].reverse();
    let reordered: Vec<String> = lines.iter().map(|l| format!("{l},x")).collect();
    let variants = [
        ("crlf.csv", text.replace('\n', "\r\n"), true),
        (
            "reordered.csv",
            format!("\u{feff}{}\n", reordered.join("\n")),
            true,
        ),
        ("other.csv", text.replacen(",2520\n", ",2999\n", 1), false),
    ];
    let mut grid = Vec::new();
    for (name, content, _) in &variants {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let args = strings(&[
            "--gpu",
            "t4",
            "--days",
            "3",
            "--lots",
            "2",
            "--tariffs",
            &path.to_string_lossy(),
            "--json",
        ]);
        let mut lab = strings(&["price"]);
        lab.extend(args.iter().cloned());
        grid.push((lab, args));
    }
    compare_grid("catalog object", "calcul_forfaits.py", &grid);
    for ((lab_args, _), (name, _, shipped)) in grid.iter().zip(&variants) {
        let output = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(lab_args)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&output.stdout).unwrap();
        let info = &v["catalog"];
        assert_eq!(info["illustrative"], *shipped, "{name}");
        let date = if *shipped {
            Value::from("2026-09-24")
        } else {
            Value::Null
        };
        assert_eq!(info["snapshot_date"], date, "{name}");
    }
}

#[test]
fn long_integers_in_a_catalog_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(catalog()).unwrap();
    let nines = "9".repeat(4400);
    let variants = [
        (
            "price.csv",
            text.replacen(",2520\n", &format!(",{nines}\n"), 1),
        ),
        (
            "lot.csv",
            text.replacen(",1,3,2520\n", &format!(",{nines},3,2520\n"), 1),
        ),
        (
            "days.csv",
            text.replacen(",1,3,2520\n", &format!(",1,3{nines},2520\n"), 1),
        ),
    ];
    for (name, content) in variants {
        let file = catalog_variant(dir.path(), name, content.into_bytes());
        let (lab, python) = priced_with(&file);
        assert_same_message(&lab, "calcul_forfaits.py", &python);
    }
    // Leading zeros in a catalog are the same value on both sides.
    let zeros = "0".repeat(5000);
    let file = catalog_variant(
        dir.path(),
        "zeros.csv",
        text.replacen(
            ",1,3,2520\n",
            &format!(",{zeros}1,{zeros}3,{zeros}2520\n"),
            1,
        )
        .into_bytes(),
    );
    let (mut lab, mut python) = priced_with(&file);
    lab.push("--json".into());
    python.push("--json".into());
    compare_grid("zeros in a catalog", "calcul_forfaits.py", &[(lab, python)]);
}

#[test]
fn encodings_and_byte_order_marks_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(catalog()).unwrap();
    let bom = "\u{feff}";
    let utf16 = |big_endian: bool, mark: bool| -> Vec<u8> {
        let mut units: Vec<u16> = Vec::new();
        if mark {
            units.push(0xFEFF);
        }
        units.extend(text.encode_utf16());
        units
            .iter()
            .flat_map(|u| {
                if big_endian {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                }
            })
            .collect()
    };
    // Latin-1 / Windows-1252: a model name with é (E9) on line 5, a euro sign (80) on line 9.
    let latin1 = |line: usize, byte: u8| -> Vec<u8> {
        let mut out = Vec::new();
        for (i, l) in text.lines().enumerate() {
            out.extend_from_slice(l.as_bytes());
            if i + 1 == line {
                out.push(byte);
            }
            out.push(b'\n');
        }
        out
    };
    let mut semicolon_row: Vec<String> = text.lines().map(str::to_string).collect();
    semicolon_row[6] = semicolon_row[6].replace(',', ";");
    let variants: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "two-boms.csv",
            format!("{bom}{bom}{text}").into_bytes(),
            "line 1: the file starts with a second byte-order mark (U+FEFF)",
        ),
        (
            "three-boms.csv",
            format!("{bom}{bom}{bom}{text}").into_bytes(),
            "second byte-order mark (U+FEFF)",
        ),
        (
            "bom-on-a-row.csv",
            text.replacen("\nt4,", &format!("\n{bom}t4,"), 1)
                .into_bytes(),
            "line 2: gpu contains U+FEFF, a control or format character",
        ),
        (
            "utf16le.csv",
            utf16(false, true),
            "line 1: the catalog looks like UTF-16 text (it starts with bytes FF FE)",
        ),
        (
            "utf16be.csv",
            utf16(true, true),
            "line 1: the catalog looks like UTF-16 text (it starts with bytes FE FF)",
        ),
        (
            "utf16le-no-bom.csv",
            utf16(false, false),
            "line 1: the catalog looks like UTF-16 text (it starts with bytes 67 00)",
        ),
        (
            "utf16be-no-bom.csv",
            utf16(true, false),
            "(it starts with bytes 00 67)",
        ),
        (
            "latin1.csv",
            latin1(5, 0xE9),
            "line 5: the catalog is not UTF-8 text (byte E9); it looks like Latin-1",
        ),
        (
            "cp1252.csv",
            latin1(9, 0x80),
            "line 9: the catalog is not UTF-8 text (byte 80)",
        ),
        (
            "bom-then-latin1.csv",
            [b"\xEF\xBB\xBF".to_vec(), latin1(2, 0xE9)].concat(),
            "line 2: the catalog is not UTF-8 text (byte E9)",
        ),
        (
            "semicolon-row.csv",
            format!("{}\n", semicolon_row.join("\n")).into_bytes(),
            "line 7: expected 5 fields like the header, found 1 (fields must be separated by commas, not semicolons",
        ),
        (
            "semicolon-header.csv",
            text.replace(',', ";").into_bytes(),
            "line 1: the header must start with",
        ),
    ];
    for (name, bytes, expected) in variants {
        let file = catalog_variant(dir.path(), name, bytes);
        let (lab, python) = priced_with(&file);
        let outcome = assert_same_message(&lab, "calcul_forfaits.py", &python);
        assert_eq!(outcome.code, 2, "{name}");
        assert!(
            message(&outcome).contains(expected),
            "{name}: {}",
            outcome.stderr
        );
        if name.starts_with("utf16") || name.contains("latin1") || name.starts_with("cp") {
            assert!(
                message(&outcome).ends_with("save it as UTF-8 CSV (spreadsheet: Save As, \"CSV UTF-8\"; text editor: encoding UTF-8)"),
                "{name}: {}",
                outcome.stderr
            );
        }
    }
}

#[test]
fn control_and_format_characters_in_a_catalog_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(catalog()).unwrap();
    // Model names (all three rows of t4, so that only this rule can refuse them).
    let model = |with: &str| text.replace("NVIDIA T4 16 GB", &format!("NVIDIA{with}T4"));
    let gpu = |id: &str| text.replace("\nt4,", &format!("\n{id},"));
    let mut refused: Vec<(String, String, String)> = Vec::new();
    for (code, c) in [
        ("001C", "\u{1c}"),
        ("001D", "\u{1d}"),
        ("001E", "\u{1e}"),
        ("001F", "\u{1f}"),
        ("001B", "\u{1b}[2J"),
        ("0009", "\t"),
        ("007F", "\u{7f}"),
        ("0085", "\u{85}"),
        ("009B", "\u{9b}"),
        ("00AD", "\u{ad}"),
        ("200B", "\u{200b}"),
        ("202E", "\u{202e}"),
        ("2028", "\u{2028}"),
        ("2029", "\u{2029}"),
        ("2066", "\u{2066}"),
        ("FEFF", "\u{feff}"),
        ("E0041", "\u{e0041}"),
    ] {
        refused.push((
            format!("model-{code}.csv"),
            model(c),
            format!("line 2: model name contains U+{code}, a control or format character"),
        ));
        refused.push((
            format!("gpu-{code}.csv"),
            gpu(&format!("t{c}4")),
            format!("line 2: gpu contains U+{code}, a control or format character"),
        ));
    }
    for (name, id) in [
        ("nbsp", "t\u{a0}4"),
        ("ideographic", "t4\u{3000}"),
        ("space", " t4"),
    ] {
        refused.push((
            format!("gpu-{name}.csv"),
            gpu(id),
            "line 2: gpu must be a non-empty identifier without spaces".to_string(),
        ));
    }
    for (name, spaces) in [("nbsp", "\u{a0}"), ("spaces", "  \u{3000}\u{2003}")] {
        refused.push((
            format!("model-only-{name}.csv"),
            text.replace("NVIDIA T4 16 GB", spaces),
            "line 2: model name is empty".to_string(),
        ));
    }
    let cases: Vec<Refusal> = refused
        .iter()
        .map(|(name, content, _)| {
            let file = catalog_variant(dir.path(), name, content.clone().into_bytes());
            let (lab, python) = priced_with(&file);
            (lab, "calcul_forfaits.py", python)
        })
        .collect();
    let outcomes = assert_same_messages(&cases);
    for ((name, _, expected), outcome) in refused.iter().zip(&outcomes) {
        assert!(
            message(outcome).contains(expected.as_str()),
            "{name}: {}",
            outcome.stderr
        );
        // The refusal shows the character escaped, never raw.
        assert!(
            !outcome.stderr.trim_end().chars().any(lab::text::is_hidden),
            "{name}: {:?}",
            outcome.stderr
        );
    }
    // Visible non-ASCII text and inner spaces of every kind are accepted alike.
    let mut grid = Vec::new();
    for (name, content) in [
        ("model-nbsp.csv", model("\u{a0}")),
        ("model-ideographic.csv", model("\u{3000}")),
        ("model-accents.csv", model(" Réservé ")),
        (
            "model-padded.csv",
            text.replace("NVIDIA T4 16 GB", " NVIDIA T4 "),
        ),
        ("gpu-accents.csv", gpu("té4")),
    ] {
        let file = catalog_variant(dir.path(), name, content.into_bytes());
        let (mut lab, mut python) = priced_with(&file);
        if name.starts_with("gpu") {
            lab[2] = "té4".into();
            python[1] = "té4".into();
        }
        lab.push("--json".into());
        python.push("--json".into());
        grid.push((lab, python));
    }
    compare_grid("visible catalog text", "calcul_forfaits.py", &grid);
}

/// `--tariffs -` reads the catalog from standard input in both twins: the same output for the
/// shipped catalog, the same refusal for an empty one.
#[test]
fn a_catalog_on_standard_input_is_read_alike() {
    use std::io::Write as _;
    let run = |program: &str, first: Option<String>, input: &[u8]| {
        let mut command = std::process::Command::new(program);
        command.args(first).args([
            "--tariffs",
            "-",
            "--gpu",
            "h200",
            "--days",
            "7",
            "--lots",
            "1",
        ]);
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    };
    let lab = env!("CARGO_BIN_EXE_lab");
    let shipped = std::fs::read(catalog()).unwrap();
    let (l, p) = (
        run(lab, Some("price".into()), &shipped),
        run(&python(), Some(script("calcul_forfaits.py")), &shipped),
    );
    assert_eq!(
        l.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&l.stderr)
    );
    assert_eq!(
        p.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&p.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&l.stdout),
        String::from_utf8_lossy(&p.stdout)
    );
    let (l, p) = (
        run(lab, Some("price".into()), b""),
        run(&python(), Some(script("calcul_forfaits.py")), b""),
    );
    assert_eq!((l.status.code(), p.status.code()), (Some(2), Some(2)));
    let text = |o: &std::process::Output| {
        let s = String::from_utf8_lossy(&o.stderr).into_owned();
        s.split_once("error: ")
            .map(|x| x.1.trim().to_string())
            .unwrap_or(s)
    };
    assert_eq!(text(&l), text(&p));
}
