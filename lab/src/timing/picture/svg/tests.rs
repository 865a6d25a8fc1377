use super::{render, Drawing, TITLE_LINES};
use crate::catalog::Catalog;
use crate::plan::{gpu_memory, Mode, Request, WeightsFormat};
use crate::timing::picture::points;
use crate::timing::roofline::Profile;
use crate::timing::workload::{Method, Targets, Workload};
use crate::timing::{estimate, gpu_perf, Ask, TimePlan};
use rust_decimal::Decimal;
use std::path::PathBuf;

/// A real plan of an example model on the embedded catalog.
pub(crate) fn plan(model: &str, workload: Workload, gpus: &[&str], days: &[u32]) -> TimePlan {
    let catalog = Catalog::embedded().unwrap();
    let memory = gpu_memory::load(None, &catalog).unwrap();
    let perf = gpu_perf::load(None, &catalog).unwrap();
    let ask = Ask {
        request: Request {
            model: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../examples/models")
                .join(model),
            batch: 1,
            context: 1,
            weights: WeightsFormat::Stored,
            kv_dtype: None,
            mode: Mode::Inference,
            checkpointing: false,
            fixed: Default::default(),
        },
        workload,
        batch: None,
        days: days.to_vec(),
        gpus: gpus.iter().map(|g| (*g).to_string()).collect(),
        profile: Profile::Eager,
        network_gb_s: Decimal::new(125, 1),
    };
    estimate(&ask, &catalog, &memory, &perf).unwrap().1
}

pub(crate) fn serving() -> Workload {
    Workload::Inference {
        requests: 20_000,
        input_tokens: 512,
        output_tokens: 256,
    }
}

fn training() -> Workload {
    Workload::Training {
        tokens: 50_000_000,
        sequence: 2048,
        method: Method::Lora,
        rank: 16,
        targets: Targets::All,
    }
}

/// Names no renderer should trust.
const NASTY: [&str; 6] = [
    "<script>alert('x')</script>",
    "a&b \"quoted\" 'single' ]]> <!-- -->",
    "ctl\u{0}\u{1}\u{8}\u{b}\u{c}\u{1b}\u{7f}\u{85}\u{FFFE}\u{FFFF}end",
    "\u{5e9}\u{5dc}\u{5d5}\u{5dd} \u{202e}RTL override\u{202c} \u{627}\u{644}\u{639}\u{631}\u{628}\u{64a}\u{629}",
    "",
    "wide 名前が とても 長い 😀",
];

fn long_name() -> String {
    "very-long-gpu-name-".repeat(40)
}

/// The plan with every GPU id, setup and factor label replaced by hostile text.
fn hostile(mut t: TimePlan) -> TimePlan {
    let long = long_name();
    for (i, r) in t.rows.iter_mut().enumerate() {
        let name = if i % 7 == 6 {
            long.as_str()
        } else {
            NASTY[i % 6]
        };
        r.gpu = format!("{name}{i}");
        r.factors = NASTY[(i + 1) % 6].to_string();
        for s in r.setup.iter_mut().chain(r.alternatives.iter_mut()) {
            s.using = NASTY[(i + 2) % 6].to_string();
            if let Some(f) = &mut s.finish {
                f.how = NASTY[(i + 3) % 6].to_string();
            }
        }
    }
    t
}

/// Parses the SVG as XML and returns it with its `g.point` elements' attributes.
fn parse(d: &Drawing) -> Vec<Vec<(String, String)>> {
    let doc = roxmltree::Document::parse(&d.svg).unwrap_or_else(|e| panic!("{e}\n{}", d.svg));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.attribute("class") == Some("point"))
        .map(|n| {
            n.attributes()
                .map(|a| (a.name().to_string(), a.value().to_string()))
                .collect()
        })
        .collect()
}

/// The layout's promises: the title inside the canvas, at most [`TITLE_LINES`] lines, and no
/// other text, nor the plot, touching it; every text inside the canvas.
fn assert_clear(d: &Drawing) {
    let l = &d.layout;
    assert!(l.title_lines.len() <= TITLE_LINES && !l.title_lines.is_empty());
    assert!(l.canvas.holds(&l.title), "{:?}", l.title);
    assert!(!l.title.overlaps(&l.plot));
    for (what, b) in &l.texts {
        assert!(
            !l.title.overlaps(b),
            "{what} {b:?} overlaps the title {:?}",
            l.title
        );
        assert!(l.canvas.holds(b), "{what} {b:?} outside {:?}", l.canvas);
    }
    assert!(l.canvas.holds(&l.plot));
}

#[test]
fn any_names_give_well_formed_xml_with_every_point() {
    for (model, workload) in [
        ("llama-3.1-8b", serving()),
        ("qwen2.5-0.5b", training()),
        ("mixtral-8x7b", serving()),
    ] {
        let t = hostile(plan(model, workload, &[], &[3, 7, 30]));
        let pts = points(&t);
        assert!(pts.len() >= t.rows.iter().filter(|r| r.finish.is_some()).count());
        for answer in NASTY.iter().map(|s| (*s).to_string()).chain([long_name()]) {
            for m in NASTY.iter().map(|s| (*s).to_string()).chain([long_name()]) {
                let d = render(&m, &t, &answer);
                let found = parse(&d);
                assert_eq!(found.len(), pts.len());
                assert_clear(&d);
            }
        }
        // The names come back whole through the XML parser (escaped, not dropped), with the
        // characters XML cannot hold replaced.
        let d = render("m", &t, "a");
        let gpus: Vec<String> = parse(&d)
            .iter()
            .map(|a| a.iter().find(|(k, _)| k == "data-gpu").unwrap().1.clone())
            .collect();
        for p in &pts {
            let want = crate::timing::picture::escape(&p.gpu);
            let want = want
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&");
            assert!(gpus.contains(&want), "{want:?}");
        }
    }
}

#[test]
fn points_carry_the_plans_numbers() {
    let t = plan("llama-3.1-8b", serving(), &[], &[3, 7, 30]);
    let d = render("llama", &t, "answer");
    let found = parse(&d);
    let pts = points(&t);
    assert!(pts.len() > 10, "{}", pts.len());
    for (p, attrs) in pts.iter().zip(&found) {
        let get = |k: &str| attrs.iter().find(|(n, _)| n == k).unwrap().1.as_str();
        let _ = get("data-gpu");
        // Dominated points are drawn first: match by identity, not order.
        let same = found.iter().any(|a| {
            let g = |k: &str| a.iter().find(|(n, _)| n == k).unwrap().1.clone();
            g("data-gpu") == p.gpu
                && g("data-days") == p.days.to_string()
                && g("data-using") == p.using
                && g("data-hours") == p.hours.to_string()
                && g("data-ceiling-hours") == p.ceiling_hours.to_string()
                && g("data-cost-usd") == p.cost_usd.to_string()
                && g("data-factors") == p.factors
                && g("data-dominated") == p.dominated.to_string()
        });
        assert!(same, "{p:?}");
        assert!(p.ceiling_hours <= p.hours, "{p:?}");
    }
    // The frontier's cheapest point is the plan's answer (rank 1).
    let first = t.rows.iter().find(|r| r.rank == Some(1)).unwrap();
    let cheapest = pts.iter().min_by_key(|p| (p.cost_cents, p.hours)).unwrap();
    assert_eq!(
        cheapest.cost_cents,
        first.finish.as_ref().unwrap().cost_cents
    );
    assert!(!cheapest.dominated);
    assert!(pts.iter().any(|p| p.dominated));
}

#[test]
fn extremes_keep_the_title_clear() {
    let long_answer = format!("answer: {} for 7 days", long_name());
    // One GPU fits: a single point.
    let one = plan("llama-3.1-8b", serving(), &["h100"], &[7]);
    assert_eq!(points(&one).len(), 1 + one.rows[0].alternatives.len());
    // None fits: the rows kept, no finish.
    let mut none = one.clone();
    for r in &mut none.rows {
        r.finish = None;
        for s in r.setup.iter_mut().chain(r.alternatives.iter_mut()) {
            s.finish = None;
        }
    }
    assert!(points(&none).is_empty());
    // All tie: every finish the same hours and cost.
    let mut tie = plan("qwen2.5-0.5b", serving(), &[], &[3, 7, 30]);
    let same = tie.rows[0].finish.clone().unwrap();
    for r in &mut tie.rows {
        for s in r.setup.iter_mut().chain(r.alternatives.iter_mut()) {
            if s.finish.is_some() {
                s.finish = Some(same.clone());
            }
        }
    }
    let tied = points(&tie);
    assert!(tied.len() > 3 && tied.iter().all(|p| !p.dominated));
    assert_eq!(crate::timing::picture::frontier(&tied).len(), 1);
    for t in [&one, &none, &tie] {
        for answer in [
            "answer: no package can run this workload",
            long_answer.as_str(),
        ] {
            let d = render("m", t, answer);
            parse(&d);
            assert_clear(&d);
        }
    }
    let d = render("m", &none, "answer: none");
    assert!(d.layout.texts.iter().any(|(w, _)| w == "empty"));
    let d = render("m", &one, &long_answer);
    assert_eq!(d.layout.title_lines.len(), TITLE_LINES);
    assert!(d.layout.title_lines[TITLE_LINES - 1].ends_with('…'));
}

#[test]
fn frontier_steps_down_and_dominated_are_beaten() {
    let t = plan("mistral-7b-v0.1", serving(), &[], &[3, 7, 30]);
    let pts = points(&t);
    let steps = crate::timing::picture::frontier(&pts);
    assert!(
        steps.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 > w[1].1),
        "{steps:?}"
    );
    for p in &pts {
        let beaten = pts.iter().any(|q| {
            q.hours <= p.hours
                && q.cost_cents <= p.cost_cents
                && (q.hours < p.hours || q.cost_cents < p.cost_cents)
        });
        assert_eq!(beaten, p.dominated);
    }
    let d = render("m", &t, "a");
    let doc = roxmltree::Document::parse(&d.svg).unwrap();
    let frontier = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("frontier"))
        .unwrap();
    // One horizontal and one vertical move per step after the first, then to the right edge.
    let moves = frontier
        .attribute("d")
        .unwrap()
        .split(' ')
        .filter(|m| m.starts_with(['H', 'V']))
        .count();
    assert_eq!(moves, 2 * (steps.len() - 1) + 1);
    let packages: Vec<_> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("package"))
        .map(|n| n.attribute("data-hours").unwrap().to_string())
        .collect();
    assert_eq!(packages, ["72", "168", "720"]);
}
