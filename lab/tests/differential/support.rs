//! What the differential tests share: running `lab` and the Python twins (one interpreter for a
//! batch of cases), the outcome of a run, the grids, and the comparisons.

#![allow(dead_code)] // Each module uses its own part.

pub use serde_json::Value;
pub use std::io::Write;
pub use std::path::{Path, PathBuf};
pub use std::process::{Command, Output, Stdio};

/// Calls `main(argv)` of the script named by argv[1] for each JSON argv read from stdin and
/// prints one JSON line per case: exit code, stdout, stderr.
pub const DRIVER: &str = r#"
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
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
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
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("lab/ is one level below the workspace root")
        .to_path_buf()
}

/// Path of the repository's catalog, given to both sides with `--tariffs`.
pub fn catalog() -> String {
    root()
        .join("data/tarifs-forfaits.csv")
        .to_string_lossy()
        .into_owned()
}

/// Path of a kit script in `dist/`.
pub fn script(name: &str) -> String {
    root()
        .join("dist")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The Python interpreter: `$PYTHON`, else `python3`, resolved once to the program it runs
/// (its `sys.executable`), so that each of the suite's hundreds of processes starts that
/// program itself. Where `python3` on the PATH is a launcher (pyenv's shim is a shell script
/// that runs `pyenv exec`), starting it cost more than the interpreter: 126 ms of CPU per
/// `python3 -c pass` against 53 ms for the interpreter it runs, on the 2-core machine
/// (BENCHMARKS.md, "Verify time"). The name as given when it cannot be resolved.
pub fn python() -> String {
    static RESOLVED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    RESOLVED
        .get_or_init(|| {
            let named = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
            Command::new(&named)
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .ok()
                .filter(|out| out.status.success())
                .and_then(|out| String::from_utf8(out.stdout).ok())
                .map(|text| text.trim_end_matches(['\n', '\r']).to_string())
                .filter(|path| !path.is_empty() && Path::new(path).is_file())
                .unwrap_or(named)
        })
        .clone()
}

/// Runs `lab` once per argument vector, spread over the available cores; results in order.
pub fn run_lab_all(cases: &[Vec<String>]) -> Vec<Outcome> {
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
pub fn run_python_batch(script_name: &str, cases: &[Vec<String>]) -> Vec<Outcome> {
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
pub fn run_python_process(script_name: &str, args: &[String]) -> Outcome {
    Command::new(python())
        .arg(script(script_name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python()))
        .into()
}

/// Owned copies of `items`.
pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Both succeeded with one JSON object each, and the objects are equal.
pub fn assert_same_json(what: &str, args: &[String], lab: &Outcome, python: &Outcome) {
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
pub fn price_grid() -> Vec<(Vec<String>, Vec<String>)> {
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
pub fn estimate_grid() -> Vec<(Vec<String>, Vec<String>)> {
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
pub fn compare_grid(what: &str, script_name: &str, grid: &[(Vec<String>, Vec<String>)]) {
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

/// Runs one bad input on both sides, as real processes: same exit code, nothing on stdout,
/// one stderr line on each side, and `lab`'s starts with `lab: error: ` (clap's own usage
/// errors included: `lab` folds them into one line).
pub fn assert_same_refusal(
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
    check_refusal(lab_args, &lab, &python);
    (lab, python)
}

/// What [`assert_same_refusal`] requires of one bad input's two outcomes.
fn check_refusal(lab_args: &[String], lab: &Outcome, python: &Outcome) {
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
    for (side, outcome) in [("lab", lab), ("python", python)] {
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
}

/// One bad input for both sides: `lab`'s arguments, the script, the script's arguments.
pub type Refusal<'a> = (Vec<String>, &'a str, Vec<String>);

/// One case in this many of [`assert_same_refusals`] also runs as a real `python3 SCRIPT`
/// process (the first case always).
pub const REAL_PROCESS_EVERY: usize = 4;

/// Every case refused alike, as [`assert_same_refusal`] requires of one, with fewer
/// processes: `lab` as real processes (in parallel, [`run_lab_all`]); the script's `main`
/// for all cases in one interpreter per script ([`run_python_batch`]); and every
/// [`REAL_PROCESS_EVERY`]-th case again as a real process, whose exit code, stdout and
/// stderr must be the in-process ones exactly (so the driver is checked on refusals too).
/// Returns the outcomes (lab, python) in order.
pub fn assert_same_refusals(cases: &[Refusal<'_>]) -> Vec<(Outcome, Outcome)> {
    let lab_cases: Vec<Vec<String>> = cases.iter().map(|(l, _, _)| l.clone()).collect();
    let (lab, python) = std::thread::scope(|scope| {
        let python = scope.spawn(|| {
            let mut outcomes: Vec<Option<Outcome>> = vec![None; cases.len()];
            let mut scripts: Vec<&str> = cases.iter().map(|(_, s, _)| *s).collect();
            scripts.sort_unstable();
            scripts.dedup();
            for script in scripts {
                let at: Vec<usize> = (0..cases.len()).filter(|&i| cases[i].1 == script).collect();
                let argvs: Vec<Vec<String>> = at.iter().map(|&i| cases[i].2.clone()).collect();
                for (i, outcome) in at.into_iter().zip(run_python_batch(script, &argvs)) {
                    outcomes[i] = Some(outcome);
                }
            }
            outcomes
        });
        let lab = run_lab_all(&lab_cases);
        (lab, python.join().unwrap())
    });
    let python: Vec<Outcome> = python.into_iter().map(Option::unwrap).collect();
    for (i, (lab_args, script, python_args)) in cases.iter().enumerate() {
        check_refusal(lab_args, &lab[i], &python[i]);
        if i % REAL_PROCESS_EVERY == 0 {
            let real = run_python_process(script, python_args);
            assert_eq!(
                (real.code, &real.stdout, &real.stderr),
                (python[i].code, &python[i].stdout, &python[i].stderr),
                "{python_args:?}: a real {script} process differs from its main() in-process"
            );
        }
    }
    lab.into_iter().zip(python).collect()
}

/// [`assert_same_refusals`], then the same message word for word on both sides of each case;
/// returns `lab`'s outcomes in order.
pub fn assert_same_messages(cases: &[Refusal<'_>]) -> Vec<Outcome> {
    assert_same_refusals(cases)
        .into_iter()
        .zip(cases)
        .map(|((lab, python), (lab_args, _, _))| {
            assert_eq!(
                message(&lab),
                message(&python),
                "{lab_args:?}: the messages differ"
            );
            lab
        })
        .collect()
}

/// Catalog files that both sides must refuse, naming the same line; returns their paths.
pub fn malformed_catalogs(dir: &Path) -> Vec<String> {
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
pub fn named_line(message: &str) -> Option<String> {
    let at = message.find("line ")?;
    let digits: String = message[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some(digits)
}

/// The message of a one-line refusal: the text after `: error: ` (`lab: error: ` or
/// `SCRIPT: error: `), without the line end and without a trailing pointer to the help
/// (`lab` adds `` (see `lab --help`)`` to a usage error; a script may add its own or none).
pub fn message(outcome: &Outcome) -> &str {
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
pub fn assert_same_message(
    lab_args: &[String],
    script_name: &str,
    python_args: &[String],
) -> Outcome {
    let (lab, python) = assert_same_refusal(lab_args, script_name, python_args);
    assert_eq!(
        message(&lab),
        message(&python),
        "{lab_args:?}: the messages differ"
    );
    lab
}

/// `price` arguments for `lab` and the same for `calcul_forfaits.py`.
pub fn price_args(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut lab = strings(&["price"]);
    lab.extend(args.iter().cloned());
    (lab, args.to_vec())
}

/// The shipped catalog with `edit` applied, written to `dir/name`; returns the path.
pub fn catalog_variant(dir: &Path, name: &str, bytes: Vec<u8>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

/// `price --gpu t4 --days 3 --lots 1 --tariffs FILE` for both sides.
pub fn priced_with(file: &str) -> (Vec<String>, Vec<String>) {
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

/// Every Unicode scalar value, in order, as one string.
pub fn every_character() -> String {
    (0..=0x10FFFFu32).filter_map(char::from_u32).collect()
}
