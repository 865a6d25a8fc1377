//! Text that `lab` prints back from user input: every control character escaped, so that a
//! value quoted in an error or a report stays on its line and never sends escape sequences to
//! the terminal.

/// `message` with every control character escaped (`\n`, `\r`, `\t`, `\u{1b}`...), so that
/// text quoting user input stays exactly one line and never sends escape sequences to the
/// terminal. Backslashes and printable text (non-ASCII letters included) are left as they are.
///
/// ```
/// assert_eq!(lab::text::one_line("cuda:\u{1b}[31mRED\n"), r"cuda:\u{1b}[31mRED\n");
/// assert_eq!(lab::text::one_line(r"a\nb é"), r"a\nb é");
/// ```
pub fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn control_characters_are_escaped_text_is_not() {
        assert_eq!(one_line("x\ny\r\tz"), r"x\ny\r\tz");
        assert_eq!(one_line("\u{1b}[31mred"), r"\u{1b}[31mred");
        assert_eq!(one_line("\u{7f}\u{9b}"), r"\u{7f}\u{9b}");
        assert_eq!(one_line(r"C:\path h100é"), r"C:\path h100é");
        assert_eq!(one_line(""), "");
    }
}
