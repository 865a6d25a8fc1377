//! Error messages stay one line whatever the user typed: control characters quoted back from
//! the command line (newlines, carriage returns, tabs, ESC sequences) are escaped by `lab`'s
//! `main`, on both the library-error path and clap's usage-error path (`lab::text::one_line`),
//! and in what `lab environment` prints back on stdout.

use super::support::{lab, usage_error};

#[test]
fn library_errors_escape_newlines_in_values() {
    usage_error(
        &["price", "--gpu", "x\ny", "--days", "7", "--lots", "1"],
        r"x\ny",
    );
    usage_error(
        &["price", "--gpu", "b200", "--days", "7", "--lots", "1\n"],
        r"1\n",
    );
    usage_error(
        &[
            "estimate",
            "--parameters",
            "7000000000",
            "--bits",
            "16",
            "--reserve-gib",
            "1\n2",
        ],
        r"1\n2",
    );
    usage_error(
        &["price", "--gpu", "b200", "--days", "7\r\n", "--lots", "1"],
        r"7\r\n",
    );
}

#[test]
fn escape_sequences_never_reach_the_terminal() {
    let stderr = usage_error(
        &[
            "price",
            "--gpu",
            "\u{1b}[31mred",
            "--days",
            "7",
            "--lots",
            "1",
        ],
        r"\u{1b}[31mred",
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    usage_error(&["compare", "--gpus", "2\t", "--days", "7"], r"2\t");
}

#[test]
fn clap_errors_escape_newlines_too() {
    // An unknown flag holding a blank line: the message is neither split nor cut short.
    let stderr = usage_error(
        &[
            "price",
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "1",
            "--bo\n\ngus",
        ],
        r"--bo\n\ngus",
    );
    // `usage_error` checked that stderr is this line and one final newline.
    assert!(stderr.ends_with("(see `lab --help`)"), "{stderr:?}");
    usage_error(&["bad\ncmd"], r"bad\ncmd");
    usage_error(&["tariffs", "--days", "7", "x\u{1b}y"], r"x\u{1b}y");
}

#[test]
fn printable_ascii_is_left_alone_other_letters_escaped() {
    // Backslashes are printed as typed; a non-ASCII letter in an identifier as its escape.
    usage_error(
        &["price", "--gpu", r"a\nb", "--days", "7", "--lots", "1"],
        r"'a\nb'",
    );
    usage_error(
        &["price", "--gpu", "h100é", "--days", "7", "--lots", "1"],
        r"'h100\u{e9}'",
    );
}

/// `lab environment` prints the device as typed (its `device ...` row and the `note:` line
/// quoting it): control characters there are escaped too, and the report keeps one line per
/// row. A diagnostic, so exit 0.
#[test]
fn environment_escapes_the_device_it_prints_back() {
    let output = lab()
        .args(["environment", "--device", "cuda:\u{1b}[31mRED\nfake: row"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stdout:?}");
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
    assert!(
        !stdout.lines().any(|l| l.chars().any(char::is_control)),
        "{stdout:?}"
    );
    let escaped = r"cuda:\u{1b}[31mRED\nfake: row";
    let device_row = stdout
        .lines()
        .find(|l| l.starts_with("device cuda:"))
        .unwrap_or_else(|| panic!("{stdout:?}"));
    assert_eq!(
        device_row,
        format!("device {escaped} not available (no torch worker, see note)")
    );
    let note = stdout
        .lines()
        .find(|l| l.starts_with("note: "))
        .unwrap_or_else(|| panic!("{stdout:?}"));
    assert_eq!(
        note,
        format!("note: device '{escaped}': write cuda:N with N a GPU index, e.g. cuda:0")
    );
    assert!(!stdout.lines().any(|l| l.starts_with("fake: row")));

    // --json escapes through JSON itself: the value comes back exactly as typed.
    let output = lab()
        .args(["environment", "--json", "--device", "cuda:\u{1b}[31mRED"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(!output.stdout.contains(&0x1b));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["device"], "cuda:\u{1b}[31mRED");
}
