//! The SVG chart: its public entry point, the order of its series, the memory axis and the
//! tick labels; the drawing itself is in [`draw`].

mod draw;

use super::{Report, ReportFile};
use crate::{Error, Result};

/// Renders the SVG chart: peak allocated and reserved per phase (one pair of bars per file),
/// and warm-forward wall and GPU times per repetition, with one legend for both in a column on
/// the right.
///
/// Series are ordered by configuration, numerically: implementation, dtype, batch, context,
/// width (then the order given); files with the same configuration share a colour. Up to 10
/// configurations get distinct colours; beyond, the colours run along a dark-blue-to-green
/// gradient in that order, so that they follow size. The legend lists at most
/// [`SVG_LEGEND_MAX`] files, then "… and K more" (the text report lists them all). The memory
/// axis ends just above the largest bar (log scale when the bars span more than a factor 50).
pub fn render_svg(report: &Report) -> Result<String> {
    draw::render(report).map_err(|e| Error::runtime(format!("cannot draw the chart: {e}")))
}

/// Most files named in the SVG legend; the others are counted in one last line.
pub const SVG_LEGEND_MAX: usize = 40;

/// The order of the chart's series: indices into `report.files`, sorted by implementation,
/// dtype, batch, context and width (numbers compared as numbers), then by position.
pub fn chart_order(report: &Report) -> Vec<usize> {
    let mut order: Vec<usize> = (0..report.files.len()).collect();
    order.sort_by_key(|&i| config_key(&report.files[i]));
    order
}

fn config_key(file: &ReportFile) -> (String, &'static str, u64, u64, u64) {
    let c = &file.configuration;
    (
        file.implementation.clone(),
        c.dtype.name(),
        c.batch,
        c.context,
        c.width,
    )
}

/// A chart tick label: no useless decimals, thousands grouped with commas (`0.05`, `1.5`,
/// `20`, `100,000`).
pub fn tick_label(value: f64) -> String {
    if !value.is_finite() {
        return String::new();
    }
    let magnitude = value.abs();
    if magnitude >= 1000.0 {
        let digits = format!("{:.0}", magnitude);
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        return if value < 0.0 {
            format!("-{grouped}")
        } else {
            grouped
        };
    }
    let decimals = if magnitude >= 1.0 || magnitude == 0.0 {
        2
    } else {
        // three significant digits at most
        (2.0 - magnitude.log10().floor()).clamp(0.0, 12.0) as usize
    };
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// The memory axis of the chart, MiB: `(low, high, log scale)`. Linear from 0 when the bars
/// span at most a factor 50, else logarithmic from the power of ten below the smallest
/// non-zero bar; either way it ends at 1.2 × the largest bar (1 MiB when every bar is 0).
pub fn memory_axis(values: &[f64]) -> (f64, f64, bool) {
    let max = values.iter().copied().fold(0.0_f64, f64::max);
    let min_positive = values
        .iter()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    if max <= 0.0 {
        return (0.0, 1.0, false);
    }
    let high = max * 1.2;
    if min_positive.is_finite() && max / min_positive > 50.0 {
        let mut low = 10f64.powf(min_positive.log10().floor());
        if low >= min_positive * 0.999 {
            // the smallest bar would have no height
            low /= 10.0;
        }
        (low, high, true)
    } else {
        (0.0, high, false)
    }
}
