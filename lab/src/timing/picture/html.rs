//! One self-contained HTML page: the answer line, the SVG inline, the table of points and the
//! GPUs that cannot run the workload. No script, no network, no font file: a
//! Content-Security-Policy of `default-src 'none'` (inline style only) says so to the browser.

use super::svg::Drawing;
use super::{escape, points, workload_line};
use crate::timing::TimePlan;
use std::fmt::Write as _;

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#111;background:#fff}\
h1{font-size:1.1em;overflow-wrap:anywhere}p{overflow-wrap:anywhere}\
table{border-collapse:collapse;font-size:.85em}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;overflow-wrap:anywhere}\
td.n{text-align:right}tr.dominated{color:#777}svg{max-width:100%;height:auto}";

/// The page for `model`'s plan `time`, with `answer` (the text's answer line) and `drawing`
/// (from [`super::svg::render`] of the same plan).
pub fn render(model: &str, time: &TimePlan, answer: &str, drawing: &Drawing) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n<p>model: {}<br>{}</p>\n{}",
        escape(answer),
        escape(answer),
        escape(model),
        escape(&workload_line(time)),
        drawing.svg
    );
    out.push_str(
        "<table>\n<thead><tr><th>rank</th><th>gpu</th><th>days</th><th>setup</th>\
<th>hours expected</th><th>hours ceiling</th><th>factors</th><th>in one package</th>\
<th>finish</th><th>cost USD</th><th>dominated</th></tr></thead>\n<tbody>\n",
    );
    let rank = |gpu: &str, days: u32, chosen: bool| {
        time.rows
            .iter()
            .find(|r| chosen && r.gpu == gpu && r.days == days)
            .and_then(|r| r.rank)
            .map_or_else(String::new, |r| r.to_string())
    };
    let mut pts = points(time);
    pts.sort_by(|a, b| {
        (a.cost_cents, a.hours, &a.gpu, a.days).cmp(&(b.cost_cents, b.hours, &b.gpu, b.days))
    });
    for p in &pts {
        let _ = writeln!(
            out,
            "<tr{}><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td>\
<td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
<td class=\"n\">{}</td><td>{}</td></tr>",
            if p.dominated {
                " class=\"dominated\""
            } else {
                ""
            },
            rank(&p.gpu, p.days, p.chosen),
            escape(&p.gpu),
            p.days,
            escape(&p.using),
            p.hours,
            p.ceiling_hours,
            escape(&p.factors),
            if p.within_package() { "yes" } else { "no" },
            escape(&p.how),
            p.cost_usd,
            if p.dominated { "yes" } else { "no" },
        );
    }
    out.push_str("</tbody>\n</table>\n");
    let cannot: Vec<_> = time.rows.iter().filter(|r| r.finish.is_none()).collect();
    if !cannot.is_empty() {
        out.push_str("<p>cannot run:</p>\n<ul>\n");
        for r in cannot {
            let _ = writeln!(
                out,
                "<li>{} for {} days: {}</li>",
                escape(&r.gpu),
                r.days,
                escape(&r.notes.join("; "))
            );
        }
        out.push_str("</ul>\n");
    }
    let _ = write!(out, "<p>{}</p>\n</body>\n</html>\n", escape(&time.label));
    out
}

#[cfg(test)]
mod tests {
    use super::render;
    use crate::timing::picture::svg::tests::{plan, serving};
    use crate::timing::picture::{points, svg};

    #[test]
    fn the_page_holds_the_drawing_and_a_row_per_point_and_nothing_external() {
        let mut t = plan("llama-3.1-8b", serving(), &[], &[3, 7]);
        t.rows[0].gpu = "<b>&\"x'\u{1}".into();
        let answer = "answer: <i>cheap</i> & fast";
        let d = svg::render("m<odel>", &t, answer);
        let page = render("m<odel>", &t, answer, &d);
        assert!(page.contains(&d.svg));
        assert_eq!(page.matches("<tr").count(), points(&t).len() + 1);
        assert!(page.contains("<h1>answer: &lt;i&gt;cheap&lt;/i&gt; &amp; fast</h1>"));
        assert!(page.contains("&lt;b&gt;&amp;&quot;x&#39;\u{FFFD}"));
        for banned in [
            "<script",
            "<link",
            "src=",
            "href=",
            "@import",
            "url(",
            "@font-face",
        ] {
            assert!(!page.contains(banned), "{banned}");
        }
        // Well-formed as XML too (a strict reader of the page finds every element closed),
        // once the doctype is set aside.
        let body = page
            .trim_start_matches("<!DOCTYPE html>\n")
            .replace("<br>", "<br/>");
        let body = body.replace("<meta charset=\"utf-8\">", "<meta charset=\"utf-8\"/>");
        let body = body.replace("'unsafe-inline'\">", "'unsafe-inline'\"/>");
        roxmltree::Document::parse(&body).unwrap_or_else(|e| panic!("{e}"));
    }
}
