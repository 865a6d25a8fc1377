//! Differential tests: `lab` (the reference) against the kit's Python twins.
//!
//! - `lab price --json` vs `calcul_forfaits.py --json` over all 45 catalog rows x lots
//!   {1, 2, 3, 10} x accepted results {absent, 1, 3, 7, 1000};
//! - `lab estimate --json` vs `mesure_memoire.py estimate --json` over parameters
//!   {1, 999, 7e9, 70e9, 405e9} x bits 1..=64 x reserve {0, 4, 0.5};
//! - a set of bad inputs for both commands: the same exit code on both sides, one stderr line
//!   (and, for a malformed catalog, the same line number);
//! - the `catalog` object for catalogs that are and are not the shipped one;
//! - standard output that cannot be written: exit 1 and one stderr line on both sides.
//!
//! Both sides get the catalog through `--tariffs data/tarifs-forfaits.csv`, so the `catalog`
//! objects (snapshot date, SHA-256, `embedded: false`, `illustrative`) must match too. Every `lab` call is a
//! real process. On the Python side the grids run through one interpreter that calls each
//! script's `main(argv)` per case (starting 1,800 interpreters would take minutes on a small
//! CI machine); the bad inputs and a sample of the grid also run as real `python3 SCRIPT ...`
//! processes, which checks that the in-process driver changes nothing.
//!
//! Needs `python3` on PATH (or the interpreter named by `$PYTHON`), standard library only.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Calls `main(argv)` of the script named by argv[1] for each JSON argv read from stdin and
/// prints one JSON line per case: exit code, stdout, stderr.
const DRIVER: &str = r#"
import contextlib, importlib.util, io, json, sys
spec = importlib.util.spec_from_file_location("twin_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for line in sys.stdin:
    argv = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = module.main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    print(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}), flush=True)
"#;

/// What one run of either implementation gave.
#[derive(Debug, Clone)]
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

impl From<Output> for Outcome {
    /// Keeps the exit code (-1 when killed by a signal) and the text of both streams.
    fn from(output: Output) -> Self {
        Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("lab/ is one level below the workspace root")
        .to_path_buf()
}

/// Path of the repository's catalog, given to both sides with `--tariffs`.
fn catalog() -> String {
    root()
        .join("data/tarifs-forfaits.csv")
        .to_string_lossy()
        .into_owned()
}

/// Path of a kit script in `dist/`.
fn script(name: &str) -> String {
    root()
        .join("dist")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The Python interpreter: `$PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Runs `lab` once per argument vector, spread over the available cores; results in order.
fn run_lab_all(cases: &[Vec<String>]) -> Vec<Outcome> {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
    let chunk = cases.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|args| {
                            Command::new(env!("CARGO_BIN_EXE_lab"))
                                .args(args)
                                .output()
                                .expect("cannot run lab")
                                .into()
                        })
                        .collect::<Vec<Outcome>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("lab runner thread panicked"))
            .collect()
    })
}

/// Runs every argument vector through the script's `main` in one Python process.
fn run_python_batch(script_name: &str, cases: &[Vec<String>]) -> Vec<Outcome> {
    let mut child = Command::new(python())
        .args(["-c", DRIVER, &script(script_name)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {} (set $PYTHON): {e}", python()));
    let mut input = String::new();
    for args in cases {
        input.push_str(&serde_json::to_string(args).unwrap());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        output.status.success(),
        "python driver failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<Outcome> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            Outcome {
                code: v["code"].as_i64().unwrap() as i32,
                stdout: v["stdout"].as_str().unwrap().to_string(),
                stderr: v["stderr"].as_str().unwrap().to_string(),
            }
        })
        .collect();
    assert_eq!(lines.len(), cases.len(), "python driver lost cases");
    lines
}

/// Runs the script as a real process: `python3 SCRIPT args...`.
fn run_python_process(script_name: &str, args: &[String]) -> Outcome {
    Command::new(python())
        .arg(script(script_name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python()))
        .into()
}

/// Owned copies of `items`.
fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Both succeeded with one JSON object each, and the objects are equal.
fn assert_same_json(what: &str, args: &[String], lab: &Outcome, python: &Outcome) {
    assert_eq!(lab.code, 0, "{what} {args:?}: lab failed: {}", lab.stderr);
    assert_eq!(
        python.code, 0,
        "{what} {args:?}: python failed: {}",
        python.stderr
    );
    let lab_json: Value = serde_json::from_str(&lab.stdout)
        .unwrap_or_else(|e| panic!("{what} {args:?}: lab JSON: {e}"));
    let python_json: Value = serde_json::from_str(&python.stdout)
        .unwrap_or_else(|e| panic!("{what} {args:?}: python JSON: {e}"));
    assert_eq!(
        lab_json, python_json,
        "{what} {args:?}: lab and python disagree"
    );
}

/// The price grid: (lab args, python args).
fn price_grid() -> Vec<(Vec<String>, Vec<String>)> {
    let text = std::fs::read_to_string(catalog()).unwrap();
    let rows: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            (fields[0].to_string(), fields[3].to_string())
        })
        .collect();
    assert_eq!(rows.len(), 45, "the catalog should have 45 rows");
    let mut cases = Vec::new();
    for (gpu, days) in &rows {
        for lots in ["1", "2", "3", "10"] {
            for accepted in [None, Some("1"), Some("3"), Some("7"), Some("1000")] {
                let mut args = strings(&["--gpu", gpu, "--days", days, "--lots", lots]);
                if let Some(k) = accepted {
                    args.extend(strings(&["--accepted-results", k]));
                }
                args.extend(strings(&["--tariffs", &catalog(), "--json"]));
                let mut lab = strings(&["price"]);
                lab.extend(args.iter().cloned());
                cases.push((lab, args));
            }
        }
    }
    cases
}

/// The estimate grid: (lab args, python args).
fn estimate_grid() -> Vec<(Vec<String>, Vec<String>)> {
    let mut cases = Vec::new();
    for parameters in ["1", "999", "7000000000", "70000000000", "405000000000"] {
        for bits in 1..=64 {
            for reserve in ["0", "4", "0.5"] {
                let args = strings(&[
                    "estimate",
                    "--parameters",
                    parameters,
                    "--bits",
                    &bits.to_string(),
                    "--reserve-gib",
                    reserve,
                    "--json",
                ]);
                cases.push((args.clone(), args));
            }
        }
    }
    cases
}

/// Runs a grid on both sides (lab in parallel processes, Python in one batch) and requires
/// equal JSON for every case; then reruns a sample as real Python processes.
fn compare_grid(what: &str, script_name: &str, grid: &[(Vec<String>, Vec<String>)]) {
    let lab_cases: Vec<Vec<String>> = grid.iter().map(|(l, _)| l.clone()).collect();
    let python_cases: Vec<Vec<String>> = grid.iter().map(|(_, p)| p.clone()).collect();
    let (lab, python) = std::thread::scope(|scope| {
        let python = scope.spawn(|| run_python_batch(script_name, &python_cases));
        let lab = run_lab_all(&lab_cases);
        (lab, python.join().unwrap())
    });
    for (i, (l, p)) in lab.iter().zip(&python).enumerate() {
        assert_same_json(what, &lab_cases[i], l, p);
    }
    // A sample as real Python processes: the in-process driver must not change anything.
    for i in (0..grid.len()).step_by(grid.len() / 7 + 1) {
        let real = run_python_process(script_name, &python_cases[i]);
        assert_same_json(what, &lab_cases[i], &lab[i], &real);
        assert_eq!(
            real.stdout, python[i].stdout,
            "{what} {:?}",
            python_cases[i]
        );
    }
}

#[test]
fn price_agrees_over_the_whole_catalog() {
    let grid = price_grid();
    assert_eq!(grid.len(), 45 * 4 * 5);
    compare_grid("price", "calcul_forfaits.py", &grid);
}

#[test]
fn estimate_agrees_over_the_grid() {
    let grid = estimate_grid();
    assert_eq!(grid.len(), 5 * 64 * 3);
    compare_grid("estimate", "mesure_memoire.py", &grid);
}

/// Runs one bad input on both sides, as real processes: same exit code, nothing on stdout,
/// one stderr line on each side, and `lab`'s starts with `lab: error: ` (clap's own usage
/// errors included: `lab` folds them into one line).
fn assert_same_refusal(
    lab_args: &[String],
    script_name: &str,
    python_args: &[String],
) -> (Outcome, Outcome) {
    let lab: Outcome = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(lab_args)
        .output()
        .unwrap()
        .into();
    let python = run_python_process(script_name, python_args);
    assert_ne!(lab.code, 0, "{lab_args:?}: lab accepted it");
    assert_eq!(
        lab.code, python.code,
        "{lab_args:?}: exit codes differ\n lab: {}\n python: {}",
        lab.stderr, python.stderr
    );
    assert!(
        lab.stderr.starts_with("lab: error: "),
        "{lab_args:?}: lab stderr: {}",
        lab.stderr
    );
    for (side, outcome) in [("lab", &lab), ("python", &python)] {
        assert!(
            outcome.stdout.is_empty(),
            "{lab_args:?}: {side} printed {}",
            outcome.stdout
        );
        assert_eq!(
            outcome.stderr.lines().count(),
            1,
            "{lab_args:?}: {side} stderr: {}",
            outcome.stderr
        );
    }
    (lab, python)
}

#[test]
fn bad_price_inputs_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let semicolons = dir.path().join("semicolons.csv");
    let text = std::fs::read_to_string(catalog()).unwrap();
    std::fs::write(&semicolons, text.replace(',', ";")).unwrap();
    let decimal_price = dir.path().join("decimal.csv");
    std::fs::write(&decimal_price, text.replace(",2520\n", ",25.20\n")).unwrap();
    let duplicate = dir.path().join("duplicate.csv");
    std::fs::write(&duplicate, format!("{text}t4,NVIDIA T4 16 GB,1,3,2520\n")).unwrap();
    let missing = dir
        .path()
        .join("missing.csv")
        .to_string_lossy()
        .into_owned();
    let malformed = malformed_catalogs(dir.path());
    let files: Vec<String> = [&semicolons, &decimal_price, &duplicate]
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let base = ["--gpu", "b200", "--days", "7", "--lots", "2"];
    let mut cases: Vec<Vec<String>> = vec![
        strings(&["--gpu", "x100", "--days", "7", "--lots", "1"]),
        strings(&["--gpu", "B200", "--days", "7", "--lots", "1"]),
        strings(&["--gpu", "", "--days", "7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "5", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "7.0", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "+7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "-7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "7"]),
        strings(&["--days", "7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "7", "--lots", "1", "--lots", "2"]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "1",
            "--currency",
            "EUR",
        ]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "30",
            "--lots",
            "9223372036854775807",
        ]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "30",
            "--lots",
            "18446744073709551615",
        ]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "30",
            "--lots",
            "18446744073709551616",
        ]),
    ];
    for lots in ["0", "-1", "1.5", "1e3", "1,000", "1_000", " 1", "+1", ""] {
        cases.push(strings(&["--gpu", "b200", "--days", "7", "--lots", lots]));
    }
    for accepted in ["0", "-3", "2.5", "1e2", "", "many", "+1"] {
        let mut args = strings(&base);
        args.extend(strings(&["--accepted-results", accepted]));
        cases.push(args);
    }
    for file in files.iter().chain(std::iter::once(&missing)) {
        let mut args = strings(&base);
        args.extend(strings(&["--tariffs", file]));
        cases.push(args);
    }
    // Not a regular file, too large, empty path (all bad input, 2), malformed catalogs.
    let folder = dir.path().to_string_lossy().into_owned();
    for file in ["/dev/zero", folder.as_str(), ""]
        .into_iter()
        .chain(malformed.iter().map(String::as_str))
    {
        let mut args = strings(&base);
        args.extend(strings(&["--tariffs", file]));
        cases.push(args);
    }
    // Abbreviated flags are refused on both sides (argparse would accept them by default).
    cases.push(strings(&["--gpu", "b200", "--day", "7", "--lots", "1"]));
    cases.push(strings(&["--gpu", "b200", "--days", "7", "--lot", "1"]));
    cases.push(strings(&[
        "--gpu", "b200", "--days", "7", "--lots", "1", "--acc", "5",
    ]));
    cases.push(strings(&[
        "--gpu", "b200", "--days", "7", "--lots", "1", "--js",
    ]));
    for args in &cases {
        let mut lab = strings(&["price"]);
        lab.extend(args.iter().cloned());
        assert_same_refusal(&lab, "calcul_forfaits.py", args);
    }
    // The unreadable file is a runtime failure (1), the malformed ones bad input (2).
    let mut args = strings(&base);
    args.extend(strings(&["--tariffs", &missing]));
    assert_eq!(run_python_process("calcul_forfaits.py", &args).code, 1);
    for file in ["/dev/zero", folder.as_str(), ""]
        .into_iter()
        .chain(malformed.iter().map(String::as_str))
    {
        let mut args = strings(&base);
        args.extend(strings(&["--tariffs", file]));
        assert_eq!(
            run_python_process("calcul_forfaits.py", &args).code,
            2,
            "{file}"
        );
    }
}

/// Catalog files that both sides must refuse, naming the same line; returns their paths.
fn malformed_catalogs(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(catalog()).unwrap();
    let variants = [
        // Over 1 MiB (trailing blank lines would otherwise be accepted).
        ("big.csv", format!("{text}{}", "\n".repeat(1 << 20))),
        // A quoted field spanning lines 3 and 4.
        (
            "multiline.csv",
            text.replacen("NVIDIA T4 16 GB,1,7,", "\"NVIDIA T4\n16 GB\",1,7,", 1),
        ),
        // Old Mac line ends; a lone CR in one row; a NUL.
        ("cr.csv", text.replace('\n', "\r")),
        ("lone-cr.csv", text.replacen(",5586\n", ",5586\rx\n", 1)),
        ("nul.csv", text.replacen("NVIDIA L4", "NVIDIA\0L4", 1)),
        // Blank lines before a bad row: its own line (7) is named.
        (
            "blank-lines.csv",
            text.replacen('\n', "\n\n\n", 2)
                .replacen(",5586\n", ",55.86\n", 1),
        ),
        // A blank line after the header, then a bad row (line 4).
        (
            "blank-after-header.csv",
            text.replacen(",5586\n", ",55.86\n", 1)
                .replacen("price_cents\n", "price_cents\n\n", 1),
        ),
    ];
    variants
        .into_iter()
        .map(|(name, content)| {
            let path = dir.join(name);
            std::fs::write(&path, content).unwrap();
            path.to_string_lossy().into_owned()
        })
        .collect()
}

/// The `line N` a message names, if any.
fn named_line(message: &str) -> Option<String> {
    let at = message.find("line ")?;
    let digits: String = message[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some(digits)
}

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
fn unwritable_stdout_is_one_line_and_exit_1() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let price = strings(&["--gpu", "b200", "--days", "7", "--lots", "1"]);
    let estimate = strings(&["estimate", "--parameters", "7", "--bits", "16"]);
    let mut lab_price = strings(&["price"]);
    lab_price.extend(price.iter().cloned());
    for (lab_args, script_name, python_args) in [
        (&lab_price, "calcul_forfaits.py", &price),
        (&estimate, "mesure_memoire.py", &estimate),
    ] {
        let file = || std::fs::OpenOptions::new().write(true).open(full).unwrap();
        let lab: Outcome = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(lab_args)
            .stdout(file())
            .output()
            .unwrap()
            .into();
        let twin: Outcome = Command::new(python())
            .arg(script(script_name))
            .args(python_args)
            .stdout(file())
            .output()
            .unwrap()
            .into();
        for (side, outcome) in [("lab", &lab), ("python", &twin)] {
            assert_eq!(outcome.code, 1, "{side} {lab_args:?}: {}", outcome.stderr);
            assert_eq!(
                outcome.stderr.lines().count(),
                1,
                "{side} {lab_args:?}: {}",
                outcome.stderr
            );
            assert!(
                outcome.stderr.contains("cannot write to standard output"),
                "{side}: {}",
                outcome.stderr
            );
        }
        // A reader that has gone away (`| head -c1`) is not an error on either side.
        for (side, mut command) in [
            ("lab", Command::new(env!("CARGO_BIN_EXE_lab"))),
            ("python", Command::new(python())),
        ] {
            if side == "lab" {
                command.args(lab_args);
            } else {
                command.arg(script(script_name)).args(python_args);
            }
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            let outcome: Outcome = command.stdout(writer).output().unwrap().into();
            assert_eq!(outcome.code, 0, "{side} {lab_args:?}: {}", outcome.stderr);
            assert!(outcome.stderr.is_empty(), "{side}: {}", outcome.stderr);
        }
    }
}

#[test]
fn bad_estimate_inputs_are_refused_alike() {
    let ok = ["--parameters", "7000000000", "--bits", "16"];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for parameters in [
        "0",
        "-1",
        "7e9",
        "1.5",
        "+5",
        "7_000",
        "",
        "18446744073709551616",
        "18446744073709551615",
    ] {
        cases.push(strings(&["--parameters", parameters, "--bits", "16"]));
    }
    for bits in ["0", "-8", "8.5", "4294967296", ""] {
        cases.push(strings(&["--parameters", "7000000000", "--bits", bits]));
    }
    for reserve in [
        "-1",
        "-0.5",
        "nan",
        "NaN",
        "inf",
        "Infinity",
        "1e3",
        ".5",
        "1.",
        "+4",
        "4 GiB",
        "1,5",
        "",
        "1234567890123456",
        "0.1234567890123456789",
        // One digit past the limit (15 before the point, 12 after) on either side, and the
        // old documented limit (15 + 18), which lab could not hold.
        "1234567890123456.5",
        "0.1234567890123",
        "123456789012345.1234567890123",
        "123456789012345.123456789012345678",
    ] {
        let mut args = strings(&ok);
        args.extend(strings(&["--reserve-gib", reserve]));
        cases.push(args);
    }
    cases.push(strings(&["--parameters", "7000000000"]));
    cases.push(strings(&["--bits", "16"]));
    cases.push(strings(&[
        "--parameters",
        "7000000000",
        "--bits",
        "16",
        "--bits",
        "8",
    ]));
    cases.push(strings(&[
        "--parameters",
        "7000000000",
        "--bits",
        "16",
        "--gpu",
    ]));
    // Abbreviated flags are refused on both sides.
    cases.push(strings(&["--param", "7000000000", "--bits", "16"]));
    cases.push(strings(&["--parameters", "7000000000", "--bit", "16"]));
    cases.push(strings(&[
        "--parameters",
        "7",
        "--bits",
        "16",
        "--reserve",
        "4",
    ]));
    cases.push(strings(&["--parameters", "7", "--bits", "16", "--js"]));
    for args in &cases {
        let mut full = strings(&["estimate"]);
        full.extend(args.iter().cloned());
        assert_same_refusal(&full, "mesure_memoire.py", &full);
    }
}

#[test]
fn boundary_values_agree() {
    // Largest weights that fit in 64 bits, long reserves, exact half-micro ties.
    let estimates = [
        ["18446744073709551615", "8", "0"],
        ["8388608", "8", "0.0000004"],
        ["8388608", "8", "0.000001"],
        ["8388608", "8", "0.000000000001"],
        ["1500", "8", "123456789012345"],
        ["1", "4294967295", "0.123456789012"],
        // The largest reserves accepted: 15 digits before the point, 12 after.
        ["7000000000", "16", "123456789012345.123456789012"],
        ["18446744073709551615", "8", "999999999999999.999999999999"],
        [
            "1",
            "1",
            "000000000000000000000000000000000123456789012345.000000000000",
        ],
        ["3", "8", "0.000000000000"],
    ];
    let mut grid = Vec::new();
    for [p, b, r] in estimates {
        let args = strings(&[
            "estimate",
            "--parameters",
            p,
            "--bits",
            b,
            "--reserve-gib",
            r,
            "--json",
        ]);
        grid.push((args.clone(), args));
    }
    compare_grid("estimate boundary", "mesure_memoire.py", &grid);
    let mut grid = Vec::new();
    for (gpu, days, lots, accepted) in [
        ("b200", "7", "1", "2560000"),
        ("b200", "7", "1", "7680000"),
        ("t4", "3", "3660068268593165", "3"),
        ("t4", "3", "1", "18446744073709551615"),
    ] {
        let args = strings(&[
            "--gpu",
            gpu,
            "--days",
            days,
            "--lots",
            lots,
            "--accepted-results",
            accepted,
            "--tariffs",
            &catalog(),
            "--json",
        ]);
        let mut lab = strings(&["price"]);
        lab.extend(args.iter().cloned());
        grid.push((lab, args));
    }
    compare_grid("price boundary", "calcul_forfaits.py", &grid);
}

// ---------------------------------------------------------------------------------------
// Input classes where the twins once disagreed (docs/PROTOCOL.md §5 and §4): integers too long
// for Python's int conversion, byte-order marks and other encodings, control and format
// characters, device spellings. Each class has several inputs; both sides must give the same
// exit code and, where `lab`'s wording is the reference, the same message.

/// The message of a one-line refusal: the text after `: error: ` (`lab: error: ` or
/// `SCRIPT: error: `), without the line end and without a trailing pointer to the help
/// (`lab` adds `` (see `lab --help`)`` to a usage error; a script may add its own or none).
fn message(outcome: &Outcome) -> &str {
    let line = outcome.stderr.trim_end_matches('\n');
    let message = line.split_once(": error: ").map_or(line, |(_, m)| m);
    match message.rsplit_once(" (see `") {
        Some((before, pointer))
            if pointer.ends_with(" --help`)") && pointer.matches('`').count() == 1 =>
        {
            before
        }
        _ => message,
    }
}

/// [`assert_same_refusal`], then the same message word for word on both sides.
fn assert_same_message(lab_args: &[String], script_name: &str, python_args: &[String]) -> Outcome {
    let (lab, python) = assert_same_refusal(lab_args, script_name, python_args);
    assert_eq!(
        message(&lab),
        message(&python),
        "{lab_args:?}: the messages differ"
    );
    lab
}

/// `price` arguments for `lab` and the same for `calcul_forfaits.py`.
fn price_args(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut lab = strings(&["price"]);
    lab.extend(args.iter().cloned());
    (lab, args.to_vec())
}

#[test]
fn integers_of_any_length_are_refused_alike() {
    // Python refuses to convert more than 4300 digits (a traceback); lab says "too large".
    let nines = "9".repeat(4400);
    let one_then_zeros = format!("1{}", "0".repeat(5000));
    let huge = [
        nines.as_str(),
        one_then_zeros.as_str(),
        "18446744073709551616",
    ];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for value in huge {
        cases.push(strings(&["--gpu", "t4", "--days", "3", "--lots", value]));
        cases.push(strings(&["--gpu", "t4", "--days", value, "--lots", "1"]));
        cases.push(strings(&[
            "--gpu",
            "t4",
            "--days",
            "3",
            "--lots",
            "1",
            "--accepted-results",
            value,
        ]));
    }
    for args in &cases {
        let (lab, python) = price_args(args);
        assert_same_message(&lab, "calcul_forfaits.py", &python);
    }
    // Leading zeros are harmless on both sides, however many.
    let zeros_then_one = format!("{}1", "0".repeat(5000));
    let zeros_then_seven = format!("{}7", "0".repeat(5000));
    let mut grid = Vec::new();
    for (days, lots, accepted) in [
        ("3", zeros_then_one.as_str(), "3"),
        (zeros_then_seven.as_str(), "2", zeros_then_one.as_str()),
    ] {
        let args = strings(&[
            "--gpu",
            "t4",
            "--days",
            days,
            "--lots",
            lots,
            "--accepted-results",
            accepted,
            "--tariffs",
            &catalog(),
            "--json",
        ]);
        grid.push(price_args(&args));
    }
    compare_grid("long leading zeros", "calcul_forfaits.py", &grid);
    // The same in estimate's integer flags.
    for value in huge {
        for args in [
            strings(&["estimate", "--parameters", value, "--bits", "16"]),
            strings(&["estimate", "--parameters", "7", "--bits", value]),
            strings(&[
                "estimate",
                "--parameters",
                "7",
                "--bits",
                "16",
                "--reserve-gib",
                value,
            ]),
        ] {
            assert_same_message(&args, "mesure_memoire.py", &args);
        }
    }
    // And in measure's (refused before any GPU is looked for).
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    for value in huge {
        for flag in [
            "--batch",
            "--context",
            "--width",
            "--warmup",
            "--repeats",
            "--seed",
        ] {
            let mut args = strings(&[
                "measure",
                "--device",
                "cuda:0",
                "--batch",
                "1",
                "--context",
                "1",
                "--width",
                "1",
                "--output",
                &output,
            ]);
            match args.iter().position(|a| a == flag) {
                Some(at) => args[at + 1] = value.to_string(),
                None => args.extend(strings(&[flag, value])),
            }
            let lab = assert_same_message(&args, "mesure_memoire.py", &args);
            assert!(
                message(&lab).contains(&format!("for '{flag} <")),
                "{flag}: {}",
                lab.stderr
            );
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// The shipped catalog with `edit` applied, written to `dir/name`; returns the path.
fn catalog_variant(dir: &Path, name: &str, bytes: Vec<u8>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

/// `price --gpu t4 --days 3 --lots 1 --tariffs FILE` for both sides.
fn priced_with(file: &str) -> (Vec<String>, Vec<String>) {
    price_args(&strings(&[
        "--gpu",
        "t4",
        "--days",
        "3",
        "--lots",
        "1",
        "--tariffs",
        file,
    ]))
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
    for (name, content, expected) in &refused {
        let file = catalog_variant(dir.path(), name, content.clone().into_bytes());
        let (lab, python) = priced_with(&file);
        let outcome = assert_same_message(&lab, "calcul_forfaits.py", &python);
        assert!(
            message(&outcome).contains(expected.as_str()),
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

#[test]
fn device_spellings_are_judged_alike() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    let long = format!("cuda:{}", "9".repeat(4400));
    let zeros = format!("cuda:{}7", "0".repeat(4400));
    let refused = [
        "cuda:01",
        "cuda:00",
        "cuda:007",
        zeros.as_str(),
        "cuda:0 ",
        " cuda:0",
        "cuda: 0",
        "cuda:0\n",
        "cuda:+1",
        "cuda:-1",
        "CUDA:0",
        "Cuda:0",
        "cuda:\u{663}",
        "cuda:0\u{200b}",
        "cuda:x",
        "cuda:",
        "cuda",
        "mps:0",
        "gpu0",
        "",
        "cuda:2147483648",
        "cuda:99999999999",
        long.as_str(),
    ];
    for device in refused {
        let args = strings(&[
            "measure",
            "--device",
            device,
            "--batch",
            "1",
            "--context",
            "1",
            "--width",
            "1",
            "--output",
            &output,
        ]);
        assert_same_message(&args, "mesure_memoire.py", &args);
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // The environment diagnostic echoes the device as typed on both sides, valid or not.
    for device in refused
        .iter()
        .copied()
        .chain(["cuda:0", "cuda:10", "cuda:2147483647"])
    {
        let args = strings(&["environment", "--device", device, "--json"]);
        let lab = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(&args)
            .output()
            .unwrap();
        let python = run_python_process("mesure_memoire.py", &args);
        assert_eq!(lab.status.code(), Some(0), "{device:?}");
        assert_eq!(python.code, 0, "{device:?}: {}", python.stderr);
        let lab: Value = serde_json::from_slice(&lab.stdout).unwrap();
        let python: Value = serde_json::from_str(&python.stdout).unwrap();
        assert_eq!(lab["device"], Value::from(device), "{device:?}");
        assert_eq!(python["device"], Value::from(device), "{device:?}");
        assert_eq!(lab["device_available"], Value::Bool(false));
        assert_eq!(python["device_available"], Value::Bool(false));
    }
}

/// Every Unicode scalar value, in order, as one string.
fn every_character() -> String {
    (0..=0x10FFFFu32).filter_map(char::from_u32).collect()
}

#[test]
fn the_escaping_function_is_the_same_over_every_character() {
    // Both scripts' `one_line` and calcul_forfaits.py's `json_visible` against lab's, on all
    // 1,112,064 scalar values at once (as JSON, so that the transport cannot hide a difference).
    const COMPARE: &str = r#"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("twin_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
text = json.loads(sys.stdin.read())
answer = {"one_line": module.one_line(text)}
if hasattr(module, "json_visible"):
    answer["json_visible"] = module.json_visible(json.dumps(text, ensure_ascii=False))
sys.stdout.write(json.dumps(answer))
"#;
    let all = every_character();
    let expected_line = lab::text::one_line(&all);
    let expected_json = lab::text::json_visible(&serde_json::to_string(&all).unwrap());
    for script_name in ["calcul_forfaits.py", "mesure_memoire.py"] {
        let mut child = Command::new(python())
            .args(["-c", COMPARE, &script(script_name)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = serde_json::to_string(&all).unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(
            output.status.success(),
            "{script_name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        let got = answer["one_line"].as_str().unwrap();
        if got != expected_line {
            let first = got
                .chars()
                .zip(expected_line.chars())
                .position(|(a, b)| a != b);
            panic!("{script_name}: one_line differs from lab's near character {first:?}");
        }
        if let Some(json) = answer.get("json_visible") {
            // Python writes `/` and some escapes differently from serde_json; compare the
            // characters that reach the terminal: none hidden, same value.
            let json = json.as_str().unwrap();
            assert!(!json
                .chars()
                .any(|c| lab::text::is_hidden(c) && c > '\u{1f}'));
            let value: Value = serde_json::from_str(json).unwrap();
            assert_eq!(value, Value::from(all.clone()), "{script_name}");
            assert!(!expected_json.chars().any(lab::text::is_hidden));
        }
    }
    // 32 + 1 + 32 + 2 + 170 hidden characters, each escaped.
    assert_eq!(
        expected_line.matches("\\u{").count() + 3,
        32 + 1 + 32 + 2 + 170
    );
}

#[test]
fn text_output_never_shows_a_hidden_character() {
    // The one piece of printed text a user controls once the catalog is validated: the path.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tarifs \u{1b}[2J\u{202e}\u{200b}x.csv");
    std::fs::copy(catalog(), &file).unwrap();
    let file = file.to_string_lossy().into_owned();
    let (lab_args, python_args) = priced_with(&file);
    let lab: Outcome = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(&lab_args)
        .output()
        .unwrap()
        .into();
    let python = run_python_process("calcul_forfaits.py", &python_args);
    assert_eq!(lab.code, 0, "{}", lab.stderr);
    assert_eq!(lab.stdout, python.stdout);
    assert!(lab
        .stdout
        .contains(r"tarifs \u{1b}[2J\u{202e}\u{200b}x.csv"));
    for args in [
        strings(&["tariffs", "--tariffs", &file]),
        strings(&["compare", "--gpus", "4", "--days", "7", "--tariffs", &file]),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.chars().any(|c| c != '\n' && lab::text::is_hidden(c)),
            "{args:?}: {text:?}"
        );
        assert!(text.contains(r"\u{1b}[2J\u{202e}\u{200b}"), "{args:?}");
    }
}

/// `--repeats` stops at 100000 in both twins (a longer run would write a document that
/// `lab report` cannot read), with the same words.
#[test]
fn the_repetitions_bound_is_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    let args = strings(&[
        "measure",
        "--device",
        "cuda:0",
        "--batch",
        "1",
        "--context",
        "1",
        "--width",
        "1",
        "--repeats",
        "100001",
        "--output",
        &output,
    ]);
    let lab = assert_same_message(&args, "mesure_memoire.py", &args);
    assert!(
        message(&lab).contains("'--repeats <REPEATS>': must be a whole number from 1 to 100000"),
        "{}",
        lab.stderr
    );
}

/// A flag whose value starts with '-' (even `--`), or that has no value at all, is judged
/// alike by the twins: every flag takes the next argument as its value (PROTOCOL §8), a flag
/// at the end is refused as missing its value, and a bare `--` ends the options.
#[test]
fn hyphen_and_missing_values_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    // (lab subcommand, script, valid flag/value pairs)
    type Command<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);
    // lab's arguments start with the command; calcul_forfaits.py has no command word.
    let with_command = |sub: &str, args: &[String]| [vec![sub.to_string()], args.to_vec()].concat();
    let for_script = |sub: &str, args: &[String]| {
        if sub == "price" {
            args.to_vec()
        } else {
            with_command(sub, args)
        }
    };
    let commands: [Command; 4] = [
        (
            "environment",
            "mesure_memoire.py",
            vec![("--device", "cuda:0")],
        ),
        (
            "estimate",
            "mesure_memoire.py",
            vec![
                ("--parameters", "7"),
                ("--bits", "16"),
                ("--reserve-gib", "1"),
            ],
        ),
        (
            "price",
            "calcul_forfaits.py",
            vec![
                ("--gpu", "h200"),
                ("--days", "7"),
                ("--lots", "1"),
                ("--accepted-results", "3"),
            ],
        ),
        (
            "measure",
            "mesure_memoire.py",
            vec![
                ("--device", "cuda:0"),
                ("--batch", "1"),
                ("--context", "1"),
                ("--width", "1"),
                ("--dtype", "float32"),
                ("--warmup", "1"),
                ("--repeats", "2"),
                ("--seed", "0"),
                ("--output", output.as_str()),
            ],
        ),
    ];
    for (sub, script, pairs) in &commands {
        for (at, (flag, _)) in pairs.iter().enumerate() {
            // "-x" is a fine file name: for --output both twins go on (to a GPU check); and
            // `environment` describes any device, reporting what is missing.
            let values: &[Option<&str>] = if *flag == "--output" || *sub == "environment" {
                &[None]
            } else {
                &[Some("-x"), Some("-inf"), Some("--"), None]
            };
            for value in values.iter().copied() {
                // The flag under test goes last, so that "no value" is the end of the line.
                let mut args: Vec<String> = Vec::new();
                for (i, (f, v)) in pairs.iter().enumerate() {
                    if i != at {
                        args.extend([f.to_string(), v.to_string()]);
                    }
                }
                args.push(flag.to_string());
                if let Some(v) = value {
                    args.push(v.to_string());
                }
                assert_same_message(&with_command(sub, &args), script, &for_script(sub, &args));
            }
        }
        // A bare "--" ends the options: nothing may follow it.
        let mut args: Vec<String> = pairs
            .iter()
            .flat_map(|(f, v)| [f.to_string(), v.to_string()])
            .collect();
        args.extend(strings(&["--", "stray"]));
        assert_same_message(&with_command(sub, &args), script, &for_script(sub, &args));
    }
    // An output path that is empty or names a folder is refused before anything runs.
    let folder = dir.path().join("m.json/").to_string_lossy().into_owned();
    for output in ["", folder.as_str()] {
        let args = strings(&[
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            "1",
            "--context",
            "1",
            "--width",
            "1",
            "--output",
            output,
        ]);
        assert_same_message(&args, "mesure_memoire.py", &args);
    }
}

/// Sizes that no tensor can have are refused before the output folder is looked at, by both
/// twins, at the same boundaries (the widest activation, the weight matrix, and the FLOPs of
/// one forward within 64 bits).
#[test]
fn oversized_measurements_are_refused_alike_and_first() {
    let missing = "/nonexistent-folder-of-lab-tests/m.json";
    let max = i64::MAX as u64 / 8;
    let cases = [
        (1u64, 1u64, 1u64 << 29),    // weights 2^60: the largest accepted matrix
        (1, 1, (1 << 29) + 1),       // one more: the matrix is too large
        (1 << 20, 1 << 20, 1 << 18), // activation 2^60 exactly
        (1 << 20, 1 << 20, (1 << 18) + 1),
        (1 << 40, 1, 1 << 15), // activation fits, FLOPs per forward do not
        (max, 1, 1),
        (u64::MAX, 1, 1),
        (100_000_000, 100_000_000, 100_000),
    ];
    for (batch, context, width) in cases {
        let args = strings(&[
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            &batch.to_string(),
            "--context",
            &context.to_string(),
            "--width",
            &width.to_string(),
            "--output",
            missing,
        ]);
        assert_same_message(&args, "mesure_memoire.py", &args);
    }
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
