//! The SVG drawing of a plan's points, and the layout boxes it was drawn from.
//!
//! Layout, top to bottom: the answer line as the title (wrapped, at most [`TITLE_LINES`]
//! lines), the model and workload, the plot (hours to finish and cost to finish, both on log
//! scales: one plan's costs span from one lot to hundreds), the axis labels, the legend. The
//! undominated points are labelled where a label fits without covering another (else the
//! point's tooltip and the page's table hold its figures). Text widths are estimated for a monospace font (0.6 em
//! per column, two for wide characters), which the root element asks for with generic
//! fallbacks only (no font file). Names are escaped ([`super::escape`]), cut to a length and
//! isolated for bidirectional text (U+2068 … U+2069) so a right-to-left name cannot reorder
//! the words around it.

use super::{cut, escape, frontier, points, width, workload_line, wrap, Point};
use crate::timing::TimePlan;
use rust_decimal::prelude::ToPrimitive as _;
use rust_decimal::Decimal;
use std::fmt::Write as _;

/// Canvas width, px.
pub const WIDTH: f64 = 960.0;
/// Most lines of the title; the last is cut with `…` (the page and the `<title>` hold it all).
pub const TITLE_LINES: usize = 4;
const PAD: f64 = 16.0;
const TITLE_SIZE: f64 = 15.0;
const TITLE_LEAD: f64 = 20.0;
const SMALL: f64 = 12.0;
const SMALL_LEAD: f64 = 16.0;
const LABEL: f64 = 11.0;
const PLOT_LEFT: f64 = 96.0;
const PLOT_RIGHT: f64 = 24.0;
const PLOT_HEIGHT: f64 = 420.0;
/// Fewest hours placed on the scale (a finish rounded to 0.00 h is drawn there).
const MIN_HOURS: f64 = 0.01;
/// Longest name in a point's label.
const NAME_MAX: usize = 24;
const FONT: &str = "DejaVu Sans Mono, Menlo, Consolas, monospace";
const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
];
const GREY: &str = "#b8b8b8";

/// A box on the canvas, px (y down).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub w: f64,
    /// Height.
    pub h: f64,
}

impl Rect {
    /// Whether the two boxes share any area.
    pub fn overlaps(&self, o: &Rect) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    /// Whether `o` lies inside this box.
    pub fn holds(&self, o: &Rect) -> bool {
        o.x >= self.x
            && o.y >= self.y
            && o.x + o.w <= self.x + self.w
            && o.y + o.h <= self.y + self.h
    }
}

/// Where things went.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The whole canvas.
    pub canvas: Rect,
    /// The title block (the answer line).
    pub title: Rect,
    /// The title's lines as drawn.
    pub title_lines: Vec<String>,
    /// The plot area.
    pub plot: Rect,
    /// Every other text's box, with what it is.
    pub texts: Vec<(String, Rect)>,
}

/// The SVG text and its layout.
#[derive(Debug, Clone)]
pub struct Drawing {
    /// The SVG document (no XML declaration, so it also goes inline in HTML).
    pub svg: String,
    /// Its boxes.
    pub layout: Layout,
}

/// Text box of `text` at `size` px, its left edge at `x` and its baseline at `y`.
fn text_box(text: &str, size: f64, x: f64, y: f64) -> Rect {
    Rect {
        x,
        y: y - size * 0.8,
        w: width(text) as f64 * size * 0.6,
        h: size,
    }
}

/// Bidi-isolated, cut and escaped name.
fn name(text: &str) -> String {
    format!("\u{2068}{}\u{2069}", escape(&cut(text, NAME_MAX)))
}

/// `v` rounded to 0.01 px: positions from `log10` print the same on every platform's libm
/// (the committed picture is compared byte for byte).
fn px(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn f(v: Decimal) -> f64 {
    v.to_f64().unwrap_or(0.0)
}

/// The decade labels of a log axis from 10^lo to 10^hi: `0.01`, `0.1`, `1`, `10`, ...
fn decade(k: i32) -> String {
    if k < 0 {
        Decimal::new(1, k.unsigned_abs()).to_string()
    } else {
        format!("1{}", "0".repeat(k.unsigned_abs() as usize))
    }
}

/// The cost ticks in cents from 10^lo to 10^hi cents: every power of ten, and 2 and 5 times
/// it when the axis spans at most three decades.
fn cost_ticks(lo: u32, hi: u32) -> Vec<i64> {
    let mut out = Vec::new();
    for e in lo..=hi {
        let unit = 10i64.saturating_pow(e);
        out.push(unit);
        if hi - lo <= 3 && e < hi {
            out.extend([unit.saturating_mul(2), unit.saturating_mul(5)]);
        }
    }
    out
}

/// Draws the plan: `model` and the workload under the `answer` line (the title).
pub fn render(model: &str, time: &TimePlan, answer: &str) -> Drawing {
    draw(model, time, answer, &points(time))
}

#[allow(clippy::too_many_lines)]
fn draw(model: &str, time: &TimePlan, answer: &str, pts: &[Point]) -> Drawing {
    let mut body = String::new();
    let mut texts: Vec<(String, Rect)> = Vec::new();
    let columns = |size: f64| ((WIDTH - 2.0 * PAD) / (size * 0.6)).floor() as usize;

    // Title.
    let mut title_lines = wrap(answer, columns(TITLE_SIZE));
    if title_lines.len() > TITLE_LINES {
        let rest = title_lines[TITLE_LINES - 1..].join(" ");
        title_lines.truncate(TITLE_LINES - 1);
        title_lines.push(cut(&rest, columns(TITLE_SIZE)));
    }
    let mut y = PAD + TITLE_SIZE * 0.8;
    let mut title = Rect {
        x: PAD,
        y: PAD,
        w: 0.0,
        h: 0.0,
    };
    for line in &title_lines {
        let b = text_box(line, TITLE_SIZE, PAD, y);
        title.w = title.w.max(b.w);
        title.h = b.y + b.h - PAD;
        let _ = writeln!(
            body,
            r#"<text class="title" x="{PAD}" y="{y}" font-size="{TITLE_SIZE}" font-weight="bold">{}</text>"#,
            escape(line)
        );
        y += TITLE_LEAD;
    }
    y += SMALL_LEAD - TITLE_LEAD + 4.0;
    for line in [
        format!("model: {}", cut(model, 80)),
        cut(&workload_line(time), columns(SMALL)),
    ] {
        let line = cut(&line, columns(SMALL));
        texts.push(("subtitle".into(), text_box(&line, SMALL, PAD, y)));
        let _ = writeln!(
            body,
            r#"<text x="{PAD}" y="{y}" font-size="{SMALL}">{}</text>"#,
            escape(&line)
        );
        y += SMALL_LEAD;
    }

    // Scales.
    let plot = Rect {
        x: PLOT_LEFT,
        y: y + 8.0,
        w: WIDTH - PLOT_LEFT - PLOT_RIGHT,
        h: PLOT_HEIGHT,
    };
    let mut days: Vec<u32> = time.rows.iter().map(|r| r.days).collect();
    days.sort_unstable();
    days.dedup();
    let colour = |d: u32| PALETTE[days.iter().position(|x| *x == d).unwrap_or(0) % PALETTE.len()];
    let hours = pts
        .iter()
        .flat_map(|p| [f(p.hours), f(p.ceiling_hours)])
        .chain(days.iter().map(|d| f64::from(*d) * 24.0))
        .map(|h| h.max(MIN_HOURS));
    let (lo, hi) = hours.fold((f64::MAX, f64::MIN), |(a, b), h| (a.min(h), b.max(h)));
    let (lo, hi) = if lo > hi {
        (MIN_HOURS, 1000.0)
    } else {
        (lo, hi)
    };
    let k_lo = lo.log10().floor() as i32;
    let k_hi = (hi.log10().ceil() as i32).max(k_lo + 1);
    let x_of = |h: f64| {
        let t = (h.max(MIN_HOURS).log10() - f64::from(k_lo)) / f64::from(k_hi - k_lo);
        px(plot.x + t * plot.w)
    };
    // Costs on a log scale too: a plan's costs span from one lot to hundreds.
    let cents = pts.iter().map(|p| p.cost_cents.max(1) as f64);
    let (c_lo, c_hi) = cents.fold((f64::MAX, f64::MIN), |(a, b), c| (a.min(c), b.max(c)));
    let (c_lo, c_hi) = if c_lo > c_hi {
        (100.0, 100_000.0)
    } else {
        (c_lo, c_hi)
    };
    let e_lo = c_lo.log10().floor().max(0.0) as u32;
    let e_hi = (c_hi.log10().ceil().max(0.0) as u32).max(e_lo + 1);
    let y_of = |c: i64| {
        let t = ((c.max(1) as f64).log10() - f64::from(e_lo)) / f64::from(e_hi - e_lo);
        px(plot.y + plot.h - t * plot.h)
    };

    // Frame, grid and ticks.
    let _ = writeln!(
        body,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        plot.x, plot.y, plot.w, plot.h
    );
    let bottom = plot.y + plot.h;
    for k in k_lo..=k_hi {
        let x = x_of(10f64.powi(k));
        let label = decade(k);
        let b = text_box(
            &label,
            SMALL,
            x - width(&label) as f64 * SMALL * 0.3,
            bottom + 16.0,
        );
        texts.push(("x tick".into(), b));
        let _ = writeln!(
            body,
            r##"<line x1="{x}" y1="{}" x2="{x}" y2="{bottom}" stroke="#e4e4e4"/><text x="{x}" y="{}" font-size="{SMALL}" text-anchor="middle">{label}</text>"##,
            plot.y,
            bottom + 16.0
        );
    }
    for c in cost_ticks(e_lo, e_hi) {
        let yy = y_of(c);
        let label = Decimal::new(c, 2).normalize().to_string();
        let w = width(&label) as f64 * SMALL * 0.6;
        texts.push((
            "y tick".into(),
            text_box(&label, SMALL, plot.x - 6.0 - w, yy + 4.0),
        ));
        let _ = writeln!(
            body,
            r##"<line x1="{}" y1="{yy}" x2="{}" y2="{yy}" stroke="#e4e4e4"/><text x="{}" y="{}" font-size="{SMALL}" text-anchor="end">{label}</text>"##,
            plot.x,
            plot.x + plot.w,
            plot.x - 6.0,
            yy + 4.0
        );
    }
    let x_title = "hours to finish (expected; bar: from the ceiling), log scale";
    let b = text_box(
        x_title,
        SMALL,
        plot.x + (plot.w - width(x_title) as f64 * SMALL * 0.6) / 2.0,
        bottom + 34.0,
    );
    texts.push(("x title".into(), b));
    let _ = writeln!(
        body,
        r#"<text x="{}" y="{}" font-size="{SMALL}">{x_title}</text>"#,
        b.x,
        bottom + 34.0
    );
    let y_title = "cost to finish, USD, log scale";
    let yw = width(y_title) as f64 * SMALL * 0.6;
    let (cx, cy) = (PAD + SMALL * 0.8, plot.y + plot.h / 2.0);
    texts.push((
        "y title".into(),
        Rect {
            x: PAD,
            y: cy - yw / 2.0,
            w: SMALL,
            h: yw,
        },
    ));
    let _ = writeln!(
        body,
        r#"<text x="{cx}" y="{cy}" font-size="{SMALL}" text-anchor="middle" transform="rotate(-90 {cx} {cy})">{y_title}</text>"#
    );

    // Package durations.
    for (i, d) in days.iter().enumerate() {
        let x = x_of(f64::from(*d) * 24.0);
        let label = format!("{d}-day package");
        let ly = plot.y + 14.0 + 14.0 * i as f64;
        let w = width(&label) as f64 * LABEL * 0.6;
        let lx = if x + 4.0 + w <= plot.x + plot.w {
            x + 4.0
        } else {
            x - 4.0 - w
        };
        texts.push(("package".into(), text_box(&label, LABEL, lx, ly)));
        let _ = writeln!(
            body,
            r#"<g class="package" data-days="{d}" data-hours="{}"><line x1="{x}" y1="{}" x2="{x}" y2="{bottom}" stroke="{}" stroke-width="1.5" stroke-dasharray="8 4"/><text x="{lx}" y="{ly}" font-size="{LABEL}" fill="{}">{label}</text></g>"#,
            u64::from(*d) * 24,
            plot.y,
            colour(*d),
            colour(*d)
        );
    }

    // Frontier.
    let steps = frontier(pts);
    if let Some(&(h0, c0)) = steps.first() {
        let mut path = format!("M{:.2} {:.2}", x_of(f(h0)), y_of(c0));
        for &(h, c) in &steps[1..] {
            let _ = write!(path, " H{:.2} V{:.2}", x_of(f(h)), y_of(c));
        }
        let _ = write!(path, " H{:.2}", plot.x + plot.w);
        let _ = writeln!(
            body,
            r##"<path class="frontier" d="{path}" fill="none" stroke="#222" stroke-width="2"/>"##
        );
    }

    // Points: dominated first, so the frontier's stay on top.
    let mut order: Vec<&Point> = pts.iter().collect();
    order.sort_by_key(|p| !p.dominated);
    for p in order {
        let (x, xc, yy) = (
            x_of(f(p.hours)),
            x_of(f(p.ceiling_hours)),
            y_of(p.cost_cents),
        );
        let fill = if p.dominated { GREY } else { colour(p.days) };
        let dash = match p.factors.as_str() {
            "measured" => "",
            "carried over" => r#" stroke-dasharray="5 3""#,
            _ => r#" stroke-dasharray="1.5 2.5""#,
        };
        let mark = if p.chosen {
            format!(r#"<circle cx="{x:.2}" cy="{yy:.2}" r="4.5" fill="{fill}"/>"#)
        } else {
            format!(
                r#"<path d="M{x:.2} {:.2} l5 5 l-5 5 l-5 -5 z" fill="{fill}"/>"#,
                yy - 5.0
            )
        };
        let _ = writeln!(
            body,
            r#"<g class="point" data-gpu="{}" data-days="{}" data-using="{}" data-hours="{}" data-ceiling-hours="{}" data-cost-usd="{}" data-factors="{}" data-dominated="{}"><title>{}</title><line x1="{xc:.2}" y1="{yy:.2}" x2="{x:.2}" y2="{yy:.2}" stroke="{fill}" stroke-width="2"{dash}/><line x1="{xc:.2}" y1="{:.2}" x2="{xc:.2}" y2="{:.2}" stroke="{fill}"/>{mark}</g>"#,
            escape(&p.gpu),
            p.days,
            escape(&p.using),
            p.hours,
            p.ceiling_hours,
            p.cost_usd,
            escape(&p.factors),
            p.dominated,
            escape(&format!(
                "{} for {} days, {}: {} h expected ({} h ceiling), {} USD ({}); factors {}",
                p.gpu, p.days, p.using, p.hours, p.ceiling_hours, p.cost_usd, p.how, p.factors
            )),
            yy - 4.0,
            yy + 4.0
        );
        if !p.dominated {
            let label = format!(
                "{} {}d, {} h, {} USD, {}",
                cut(&p.gpu, NAME_MAX),
                p.days,
                p.hours,
                p.cost_usd,
                p.factors
            );
            let w = width(&label) as f64 * LABEL * 0.6;
            let spots = [
                (x + 8.0, yy - 7.0),
                (x + 8.0, yy + 14.0),
                (x - 8.0 - w, yy - 7.0),
                (x - 8.0 - w, yy + 14.0),
                (x + 8.0, yy - 20.0),
                (x - 8.0 - w, yy - 20.0),
                (x + 8.0, yy + 27.0),
                (x - 8.0 - w, yy + 27.0),
            ];
            let inner = Rect {
                x: plot.x + 1.0,
                y: plot.y + 1.0,
                w: plot.w - 2.0,
                h: plot.h - 2.0,
            };
            let spot = spots.iter().copied().find(|&(lx, ly)| {
                let b = text_box(&label, LABEL, lx, ly);
                inner.holds(&b) && !texts.iter().any(|(_, o)| o.overlaps(&b))
            });
            let Some((lx, ly)) = spot else { continue };
            texts.push(("point label".into(), text_box(&label, LABEL, lx, ly)));
            let _ = writeln!(
                body,
                r#"<text class="label" x="{lx:.2}" y="{ly:.2}" font-size="{LABEL}">{} {}d, {} h, {} USD, {}</text>"#,
                name(&p.gpu),
                p.days,
                p.hours,
                p.cost_usd,
                escape(&p.factors)
            );
        }
    }
    if pts.is_empty() {
        let msg = "no setup of any catalog GPU holds this model for this workload";
        let b = text_box(
            msg,
            SMALL,
            plot.x + (plot.w - width(msg) as f64 * SMALL * 0.6) / 2.0,
            plot.y + plot.h / 2.0,
        );
        texts.push(("empty".into(), b));
        let _ = writeln!(
            body,
            r#"<text x="{}" y="{}" font-size="{SMALL}">{msg}</text>"#,
            b.x,
            plot.y + plot.h / 2.0
        );
    }

    // Legend.
    let l0 = bottom + 60.0;
    let mut ly = l0;
    let mut legend = |body: &mut String, swatch: String, text: &str| {
        let _ = writeln!(
            body,
            r#"<g class="legend">{swatch}<text x="{}" y="{ly}" font-size="{SMALL}">{}</text></g>"#,
            PAD + 40.0,
            escape(text)
        );
        texts.push(("legend".into(), text_box(text, SMALL, PAD + 40.0, ly)));
        ly += SMALL_LEAD;
    };
    let sy = |ly: f64| ly - 4.0;
    let line = |ly: f64, colour: &str, extra: &str| {
        format!(
            r#"<line x1="{PAD}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="2"{extra}/>"#,
            PAD + 30.0,
            y = sy(ly)
        )
    };
    legend(
        &mut body,
        line(l0, "#222", ""),
        "frontier: the cheapest finish by each deadline",
    );
    let l1 = l0 + SMALL_LEAD;
    legend(
        &mut body,
        format!(
            r#"<circle cx="{}" cy="{}" r="4.5" fill="{GREY}"/>"#,
            PAD + 15.0,
            sy(l1)
        ),
        "grey: dominated (another choice is as fast and as cheap, and better in one)",
    );
    let l2 = l1 + SMALL_LEAD;
    legend(
        &mut body,
        format!(
            r##"<circle cx="{}" cy="{y}" r="4.5" fill="#555"/><path d="M{} {} l5 5 l-5 5 l-5 -5 z" fill="#555"/>"##,
            PAD + 8.0,
            PAD + 24.0,
            sy(l2) - 5.0,
            y = sy(l2)
        ),
        "circle: the row's chosen setup; diamond: another setup of the same lot",
    );
    for (i, (label, extra)) in [
        ("measured", ""),
        ("carried over", r#" stroke-dasharray="5 3""#),
        ("assumed", r#" stroke-dasharray="1.5 2.5""#),
    ]
    .iter()
    .enumerate()
    {
        let l = l2 + SMALL_LEAD * (1 + i) as f64;
        legend(
            &mut body,
            line(l, PALETTE[0], extra),
            &format!("bar from ceiling to expected hours; efficiency factors {label}"),
        );
    }
    for (i, d) in days.iter().enumerate() {
        let l = l2 + SMALL_LEAD * (4 + i) as f64;
        legend(
            &mut body,
            format!(
                r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="{c}" stroke-width="1.5" stroke-dasharray="4 2"/><circle cx="{}" cy="{}" r="4.5" fill="{c}"/>"#,
                sy(l) - 6.0,
                sy(l) + 6.0,
                PAD + 24.0,
                sy(l),
                x = PAD + 8.0,
                c = colour(*d)
            ),
            &format!(
                "{d}-day packages ({} h): a point right of its line takes consecutive packages",
                u64::from(*d) * 24
            ),
        );
    }
    let height = (ly - SMALL_LEAD + PAD).ceil();
    let canvas = Rect {
        x: 0.0,
        y: 0.0,
        w: WIDTH,
        h: height,
    };
    let svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="{FONT}" role="img"><title>{}</title>
<rect width="100%" height="100%" fill="white"/>
{body}</svg>
"#,
        escape(answer)
    );
    Drawing {
        svg,
        layout: Layout {
            canvas,
            title,
            title_lines,
            plot,
            texts,
        },
    }
}

#[cfg(test)]
pub(crate) mod tests;
