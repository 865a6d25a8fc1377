//! Text that `lab` prints back from user input or files: every hidden character escaped, so
//! that a value quoted in an error, a table or a report stays on its line, shows what it
//! holds, and never sends escape sequences to the terminal.
//!
//! One explicit character rule, the same in the kit's Python twins (`calcul_forfaits.py`,
//! `mesure_memoire.py`, function `one_line`) and checked against them over every code point
//! by `lab/tests/differential/output.rs`. It does not depend on what Rust or Python call
//! "whitespace" or "control", which differ (Python counts U+001C..U+001F as spaces):
//!
//! - **hidden** ([`is_hidden`]): C0 controls U+0000..U+001F, DEL U+007F, C1 controls
//!   U+0080..U+009F, the line and paragraph separators U+2028 and U+2029, and the Unicode
//!   15.1 format characters (general category Cf, listed in [`FORMAT_RANGES`]: soft hyphen,
//!   bidirectional overrides such as U+202E, zero-width characters such as U+200B, the
//!   byte-order mark U+FEFF, tag characters...);
//! - **space** ([`is_space`]): the Unicode 15.1 space separators (general category Zs:
//!   U+0020, U+00A0, U+1680, U+2000..U+200A, U+202F, U+205F, U+3000).

/// The Unicode 15.1 format characters (general category Cf) as inclusive ranges.
///
/// Source: the Unicode Character Database 15.1, `DerivedGeneralCategory.txt`, lines `; Cf`.
pub const FORMAT_RANGES: [(u32, u32); 21] = [
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

/// The Unicode 15.1 space separators (general category Zs).
pub const SPACES: [char; 17] = [
    '\u{20}', '\u{a0}', '\u{1680}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}',
    '\u{2005}', '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}', '\u{200a}', '\u{202f}', '\u{205f}',
    '\u{3000}',
];

/// Whether `c` is hidden: a C0 or C1 control, DEL, U+2028, U+2029 or a format character
/// (see the module documentation). Hidden characters are escaped by [`one_line`] and refused
/// in catalog identifiers and model names.
pub fn is_hidden(c: char) -> bool {
    let code = u32::from(c);
    code <= 0x1F
        || (0x7F..=0x9F).contains(&code)
        || code == 0x2028
        || code == 0x2029
        || FORMAT_RANGES
            .iter()
            .any(|(low, high)| (*low..=*high).contains(&code))
}

/// Whether `c` is one of the [`SPACES`] (U+0020, U+00A0, U+3000...). Tabs and line breaks
/// are not spaces here: they are [hidden](is_hidden).
pub fn is_space(c: char) -> bool {
    SPACES.contains(&c)
}

/// `message` with every [hidden](is_hidden) character escaped, so that text quoting user
/// input or a file stays exactly one line, shows what it holds and never sends escape
/// sequences to the terminal: `\n`, `\r`, `\t`, and `\u{1b}` (lowercase hex, no leading
/// zeros) for the others (`\u{202e}`, `\u{feff}`...). Backslashes and visible text (non-ASCII
/// letters included) are left as they are.
///
/// ```
/// assert_eq!(lab::text::one_line("cuda:\u{1b}[31mRED\n"), r"cuda:\u{1b}[31mRED\n");
/// assert_eq!(lab::text::one_line(r"a\nb é"), r"a\nb é");
/// assert_eq!(lab::text::one_line("abc\u{202e}def\u{200b}"), r"abc\u{202e}def\u{200b}");
/// ```
pub fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        match c {
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            c if is_hidden(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Most characters of a value from the input that a message quotes ([`excerpt`]).
pub const EXCERPT_CHARS: usize = 64;

/// `value` as a message quotes it: its first [`EXCERPT_CHARS`] characters, then `…` when it
/// is longer, escaped by [`ascii`] (so an escape is never cut in half). A value read from a
/// file or a flag can be any length; the message stays short whatever it holds, and shows
/// exactly which characters it holds.
///
/// ```
/// assert_eq!(lab::text::excerpt("llama"), "llama");
/// let long = "x".repeat(100_000);
/// assert_eq!(lab::text::excerpt(&long), format!("{}…", "x".repeat(64)));
/// assert_eq!(lab::text::excerpt("a\nb"), r"a\nb");
/// assert_eq!(lab::text::excerpt("ll\u{430}ma"), r"ll\u{430}ma");
/// ```
pub fn excerpt(value: &str) -> String {
    match value.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", ascii(&value[..cut])),
        None => ascii(value),
    }
}

/// `value` as [`one_line`] writes it, with every other non-ASCII character escaped too
/// (`\u{43e}`, the same notation): identifiers quoted back from a file or a flag (a
/// `model_type`, a GPU id, a tensor name) are compared with ASCII names, and a look-alike
/// letter (Cyrillic `а` for Latin `a`) must not read as the name it imitates.
///
/// ```
/// assert_eq!(lab::text::ascii("\u{43e}pt é\t"), r"\u{43e}pt \u{e9}\t");
/// ```
pub fn ascii(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c.is_ascii() {
            out.push_str(&one_line(c.encode_utf8(&mut [0u8; 4])));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
    }
    out
}

/// `json` (text produced by a JSON serializer) with every [hidden](is_hidden) character that
/// the serializer left raw written as a JSON escape (`\u202e`; a UTF-16 surrogate pair above
/// U+FFFF), so that printing the JSON sends no control or format character to a terminal.
/// C0 controls are left alone: a serializer escapes them in strings, and outside strings
/// they are layout (line feeds). The JSON value is unchanged: outside strings, JSON text
/// holds only ASCII.
///
/// ```
/// assert_eq!(lab::text::json_visible("{\"m\":\"a\u{202e}b\"}"), r#"{"m":"a\u202eb"}"#);
/// ```
pub fn json_visible(json: &str) -> String {
    // Fast path: ASCII below DEL holds no hidden character a JSON encoder leaves unescaped
    // (it escapes U+0000..U+001F itself), and is most output.
    if json.bytes().all(|b| b < 0x7f) {
        return json.to_owned();
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_hidden(c) && u32::from(c) > 0x1F {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_escaped_text_is_not() {
        assert_eq!(one_line("x\ny\r\tz"), r"x\ny\r\tz");
        assert_eq!(one_line("\u{1b}[31mred"), r"\u{1b}[31mred");
        assert_eq!(one_line("\u{7f}\u{9b}"), r"\u{7f}\u{9b}");
        assert_eq!(one_line(r"C:\path h100é"), r"C:\path h100é");
        assert_eq!(one_line(""), "");
        assert_eq!(
            one_line("\u{1c}\u{1f}\u{ad}\u{200b}\u{202e}\u{2028}\u{2029}\u{feff}\u{e0041}"),
            r"\u{1c}\u{1f}\u{ad}\u{200b}\u{202e}\u{2028}\u{2029}\u{feff}\u{e0041}"
        );
        // Visible neighbours of the ranges stay as they are.
        assert_eq!(
            one_line("\u{a0}\u{200a}\u{2030}\u{fffc}\u{e0080}"),
            "\u{a0}\u{200a}\u{2030}\u{fffc}\u{e0080}"
        );
    }

    #[test]
    fn the_character_classes_are_exact() {
        let hidden = (0..=0x10FFFFu32)
            .filter_map(char::from_u32)
            .filter(|c| is_hidden(*c))
            .count();
        // 32 C0 + DEL + 32 C1 + 2 separators + 170 format characters.
        assert_eq!(hidden, 32 + 1 + 32 + 2 + 170);
        for c in SPACES {
            assert!(c.is_whitespace() && !is_hidden(c), "{c:?}");
        }
        for c in ['\t', '\n', '\u{1c}', '\u{85}', '\u{2028}', 'a', '\u{200b}'] {
            assert!(!is_space(c), "{c:?}");
        }
    }

    #[test]
    fn excerpts_cut_long_values_before_escaping() {
        let exact = "é".repeat(EXCERPT_CHARS);
        assert_eq!(excerpt(&exact), r"\u{e9}".repeat(EXCERPT_CHARS));
        assert_eq!(
            excerpt(&format!("{exact}z")),
            format!("{}…", r"\u{e9}".repeat(EXCERPT_CHARS))
        );
        // 64 newlines: all shown, escaped; one more is cut.
        let lines = "\n".repeat(EXCERPT_CHARS + 1);
        assert_eq!(excerpt(&lines), format!("{}…", r"\n".repeat(EXCERPT_CHARS)));
        assert_eq!(excerpt(""), "");
    }

    /// Every code point: ASCII printable characters are shown as they are, every other
    /// character as an escape that names it, so the text is printable ASCII and reads back.
    #[test]
    fn ascii_escapes_every_other_character() {
        for code in 0..=0x10FFFFu32 {
            let Some(c) = char::from_u32(code) else {
                continue;
            };
            let shown = ascii(&c.to_string());
            let plain = (0x20..0x7F).contains(&code);
            if plain {
                assert_eq!(shown, c.to_string());
            } else if !matches!(c, '\n' | '\r' | '\t') {
                assert_eq!(shown, format!("\\u{{{code:x}}}"));
            }
            assert!(shown.bytes().all(|b| (0x20..0x7F).contains(&b)), "{code:x}");
        }
        // Look-alikes of the names lab knows.
        assert_eq!(ascii("ll\u{430}ma"), r"ll\u{430}ma");
        assert_eq!(ascii("h\u{406}00"), r"h\u{406}00");
        assert_eq!(ascii("bf\u{ff11}6"), r"bf\u{ff11}6");
    }

    #[test]
    fn json_keeps_its_value() {
        let value = serde_json::json!({"m": "a\u{1b}\u{9b}\u{202e}\u{e0041}é", "n": [1, 2]});
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let text = json_visible(&pretty);
        assert_eq!(text.lines().count(), pretty.lines().count());
        let text = text.replace('\n', "");
        assert!(text.is_ascii() || text.contains('é'));
        assert!(!text.chars().any(is_hidden), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
