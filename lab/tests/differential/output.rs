//! What reaches the terminal: an unwritable standard output (exit 1, one line), the escaping
//! of every character, and no hidden character in text output.

use crate::support::*;

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
