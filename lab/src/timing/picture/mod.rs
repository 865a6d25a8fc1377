//! The decision as a picture (`lab plan … --svg FILE`, `--html FILE`): hours to finish against
//! cost to finish, one point per GPU × duration × setup that holds the model.
//!
//! The points come from the same [`TimePlan`] rows as `lab plan --json` through one function,
//! [`points`]: a point is a row's chosen setup or one of its alternatives, placed at its
//! [`Finish`](super::decision::Finish) (expected hours, cost in USD), with a bar from the
//! finish's ceiling hours to its expected hours, labelled by where the GPU's efficiency factors
//! come from (`measured`, `carried over`, `assumed`: `data/gpu-perf.csv`).
//!
//! - [`svg`]: the drawing, written by hand as SVG text (every name escaped, every text a real
//!   `<text>` element), with its layout boxes for the overlap checks;
//! - [`html`]: one page holding the SVG, the answer line and the table (no script, no network,
//!   no font file).
//!
//! Positions on the page are `f64` pixels (a log scale needs them); every number printed comes
//! from the plan's decimals as they are.

pub mod html;
pub mod svg;

use super::TimePlan;
use rust_decimal::Decimal;

/// One choice in the picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// Catalog GPU id.
    pub gpu: String,
    /// Package duration, days.
    pub days: u32,
    /// The setup in words (`1 replica`, `tensor parallel 2`, ...).
    pub using: String,
    /// Whether this is the row's chosen setup (the others are its alternatives).
    pub chosen: bool,
    /// Expected hours to finish, 2 decimals.
    pub hours: Decimal,
    /// Ceiling hours on the same lots, 2 decimals.
    pub ceiling_hours: Decimal,
    /// Cost to finish, USD, 2 decimals.
    pub cost_usd: Decimal,
    /// Cost to finish, cents.
    pub cost_cents: i64,
    /// How it finishes, in words (`2 lots for one package`).
    pub how: String,
    /// `measured`, `carried over` or `assumed`.
    pub factors: String,
    /// Another point is at most as slow and at most as dear, and better in one of the two.
    pub dominated: bool,
}

impl Point {
    /// Whether the expected finish is within one package of the duration.
    pub fn within_package(&self) -> bool {
        self.hours <= Decimal::from(u64::from(self.days) * 24)
    }
}

/// The points of a plan: every setup of every row that has a finish, in row order (chosen
/// setup first, then its alternatives), with dominance marked.
pub fn points(time: &TimePlan) -> Vec<Point> {
    let mut out = Vec::new();
    for row in &time.rows {
        let setups = row.setup.iter().map(|s| (s, true));
        let setups = setups.chain(row.alternatives.iter().map(|s| (s, false)));
        for (setup, chosen) in setups {
            let Some(f) = &setup.finish else { continue };
            out.push(Point {
                gpu: row.gpu.clone(),
                days: row.days,
                using: setup.using.clone(),
                chosen,
                hours: f.hours,
                ceiling_hours: f.ceiling_hours,
                cost_usd: f.cost_usd,
                cost_cents: f.cost_cents,
                how: f.how.clone(),
                factors: row.factors.clone(),
                dominated: false,
            });
        }
    }
    let keys: Vec<(Decimal, i64)> = out.iter().map(|p| (p.hours, p.cost_cents)).collect();
    for p in &mut out {
        p.dominated = keys
            .iter()
            .any(|&(h, c)| h <= p.hours && c <= p.cost_cents && (h < p.hours || c < p.cost_cents));
    }
    out
}

/// The cheapest-for-a-deadline frontier: the undominated points' distinct (hours, cents),
/// fastest first; costs fall along it.
pub fn frontier(points: &[Point]) -> Vec<(Decimal, i64)> {
    let mut steps: Vec<(Decimal, i64)> = points
        .iter()
        .filter(|p| !p.dominated)
        .map(|p| (p.hours, p.cost_cents))
        .collect();
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// `text` safe inside XML text or a quoted attribute: `& < > " '` escaped, characters XML 1.0
/// forbids (C0 controls but tab and newlines, U+FFFE, U+FFFF) and the C1 controls replaced by
/// U+FFFD; newlines and tabs become spaces (labels are one line).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// At most `max` characters of `text` (the last one `…` when cut).
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Columns a character takes in the monospace font: 2 for the East Asian wide and emoji
/// blocks, 0 for combining marks and bidi controls, else 1. An estimate for layout only.
fn columns(c: char) -> usize {
    let u = u32::from(c);
    match u {
        0x0300..=0x036F | 0x200B..=0x200F | 0x202A..=0x202E | 0x2066..=0x2069 => 0,
        0x1100..=0x115F
        | 0x2E80..=0xA4CF
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F300..=0x1FAFF
        | 0x20000..=0x3FFFD => 2,
        _ => 1,
    }
}

/// Width in columns of `text` ([`columns`] per character).
pub fn width(text: &str) -> usize {
    text.chars().map(columns).sum()
}

/// `text` wrapped to lines of at most `max` columns, at spaces where it can, mid-word where a
/// word is longer than a line.
pub fn wrap(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let sep = usize::from(!line.is_empty());
        if width(&line) + sep + width(word) <= max {
            if sep == 1 {
                line.push(' ');
            }
            line.push_str(word);
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        for c in word.chars() {
            if width(&line) + columns(c) > max && !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            line.push(c);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// The workload in words, with the unit of the picture's axes.
pub fn workload_line(time: &TimePlan) -> String {
    use super::workload::{Method, Workload};
    match time.workload {
        Workload::Inference {
            requests,
            input_tokens,
            output_tokens,
        } => format!(
            "{requests} requests x ({input_tokens} input + {output_tokens} output tokens); hours and cost to finish them all"
        ),
        Workload::Training {
            tokens,
            sequence,
            method,
            rank,
            ..
        } => format!(
            "training on {tokens} tokens in sequences of {sequence}, {}; hours and cost per run",
            match method {
                Method::Full => "full fine-tuning".to_string(),
                Method::Lora => format!("LoRA rank {rank}"),
                Method::Qlora => format!("QLoRA rank {rank}"),
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_nothing_xml_refuses() {
        let nasty = "a<b>&\"c'\u{0}\u{1}\u{7}\u{1b}\u{7f}\u{85}\u{FFFE}\u{FFFF}\n\té";
        let e = escape(nasty);
        assert_eq!(
            e,
            "a&lt;b&gt;&amp;&quot;c&#39;\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}  é"
        );
        let doc = format!("<t a=\"{e}\">{e}</t>");
        let parsed = roxmltree::Document::parse(&doc).unwrap();
        assert_eq!(
            parsed.root_element().attribute("a").map(str::len),
            parsed.root_element().text().map(str::len)
        );
    }

    #[test]
    fn wrap_keeps_every_line_within_the_width() {
        for text in [
            "answer: h100 for 7 days, 1 lot for one package: about 3.2 h",
            &"x".repeat(250),
            "短い名前の GPU は 幅が 二倍",
            "",
        ] {
            for max in [1, 7, 40, 120] {
                let lines = wrap(text, max);
                assert!(lines.iter().all(|l| width(l) <= max.max(2)), "{text} {max}");
                let joined: String = lines.concat().chars().filter(|c| *c != ' ').collect();
                let original: String = text.chars().filter(|c| *c != ' ').collect();
                assert_eq!(joined, original);
            }
        }
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("abcdefg", 3), ["abc", "def", "g"]);
    }

    #[test]
    fn cut_counts_characters() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcd", 4), "abcd");
        assert_eq!(cut("éééééé", 3), "éé…");
    }
}
