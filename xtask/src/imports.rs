//! The import graph of `lab/src` and `xtask/src`, checked against the floors of the tree
//! (`docs/ARCHITECTURE.md`, "Floors"): a module may use a module on its own floor or below,
//! never one above, and no set of modules uses each other in a circle.
//!
//! The graph is read from the source text, not from the compiler: every `crate::a::b`,
//! `lab::a::b` and `super::a` path outside comments and outside the `#[cfg(test)] mod tests`
//! at the end of a file is an edge to the longest module it names. A module's use of its own
//! parent (`super::Shared`) or children is not an edge: the tree itself says they belong
//! together. `cargo xtask imports` prints the graph; the verify step fails on a finding.

use crate::Ctx;
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floors, lowest first: the top-level modules of `lab` (by their first path segment under
/// `lab/src`), then `lab`'s binaries, then `xtask`. Mirrored in `docs/ARCHITECTURE.md`.
pub const FLOORS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "lab::error",
            "lab::text",
            "lab::units",
            "lab::digest",
            "lab::table",
            "lab::stdout",
            "lab::stderr",
            "lab::output",
            "lab::input",
            "lab::device",
        ],
    ),
    ("data", &["lab::catalog", "lab::gpu_name", "lab::document"]),
    (
        "arithmetic",
        &[
            "lab::pricing",
            "lab::estimate",
            "lab::compare",
            "lab::plan",
            "lab::timing",
            "lab::decoder",
            "lab::kit",
            "lab::report",
            "lab::record",
            "lab::results",
        ],
    ),
    (
        "gpu work",
        &[
            "lab::worker",
            "lab::environment",
            "lab::measure",
            "lab::measure_model",
            "lab::fleet",
            "lab::sweep",
        ],
    ),
    ("flag grammar", &["lab::values"]),
    ("commands", &["lab::cli"]),
    ("binaries", &["lab::main", "lab::bin"]),
    ("xtask", &["xtask"]),
];

/// A module path, `lab::plan::config` or `xtask::verify`.
type Module = Vec<String>;

fn name(module: &[String]) -> String {
    module.join("::")
}

/// The floor of `module`: the entry of [`FLOORS`] that is a prefix of it.
fn floor_of(module: &[String]) -> Option<usize> {
    let text = name(module);
    FLOORS.iter().position(|(_, members)| {
        members
            .iter()
            .any(|m| text == *m || text.starts_with(&format!("{m}::")))
    })
}

/// Every `.rs` file under `dir`, with its path relative to `dir`, sorted.
fn sources(dir: &Path) -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
                found.push((relative, std::fs::read_to_string(&path)?));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The module a file is: `plan/mod.rs` -> `lab::plan`, `lib.rs` -> `lab`, `main.rs` ->
/// `lab::main`, `bin/x.rs` -> `lab::bin::x`; `None` for a test module file (`tests.rs`).
fn module_of(krate: &str, relative: &str) -> Option<Module> {
    let stem = relative.strip_suffix(".rs")?;
    let mut parts: Vec<String> = std::iter::once(krate.to_owned())
        .chain(stem.split('/').map(str::to_owned))
        .collect();
    match parts.last().map(String::as_str) {
        Some("tests") => return None,
        Some("mod") | Some("lib") => {
            parts.pop();
        }
        Some("main") if krate == "xtask" => {
            parts.pop();
        }
        _ => {}
    }
    Some(parts)
}

/// The text that counts: comments and the contents of string literals removed (a message
/// may name a path), and the trailing `#[cfg(test)] mod tests` cut off.
fn code(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for skipped in chars.by_ref() {
                    if skipped == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            // A char literal holding a quote: '"' or '\"'.
            '\'' if chars.clone().take(2).eq(['"', '\'']) => {
                chars.nth(1);
            }
            '\'' if chars.clone().take(3).eq(['\\', '"', '\'']) => {
                chars.nth(2);
            }
            'r' if !out.chars().next_back().is_some_and(is_ident)
                && matches!(chars.peek(), Some('#') | Some('"')) =>
            {
                let mut hashes = 0;
                while chars.peek() == Some(&'#') {
                    chars.next();
                    hashes += 1;
                }
                if chars.next() != Some('"') {
                    continue; // `r#ident`: a raw identifier, not a string
                }
                // Skip to the quote followed by as many hashes.
                loop {
                    match chars.next() {
                        None => break,
                        Some('"') if (0..hashes).all(|_| chars.next_if_eq(&'#').is_some()) => break,
                        Some(_) => {}
                    }
                }
                out.push_str("\"\"");
            }
            '"' => {
                while let Some(inner) = chars.next() {
                    match inner {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths following `prefix::` at the start of `rest`: `a::b::C` gives one, a group
/// `{a::{self, b}, C}` one per leaf (`a`, `a::b`, `C`).
fn paths(rest: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut at = rest;
    loop {
        if let Some(group) = at.strip_prefix('{') {
            let mut depth = 0;
            let mut end = group.len();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = i;
                        break;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let inner = &group[..end];
            let mut items = Vec::new();
            let (mut depth, mut start) = (0, 0);
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&inner[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            items.push(&inner[start..]);
            let mut all = Vec::new();
            for item in items {
                for tail in paths(item.trim()) {
                    let mut full = segments.clone();
                    if tail.first().map(String::as_str) != Some("self") {
                        full.extend(tail);
                    }
                    all.push(full);
                }
            }
            return all;
        }
        let len = at.find(|c: char| !is_ident(c)).unwrap_or(at.len());
        if len == 0 {
            break;
        }
        segments.push(at[..len].to_owned());
        match at[len..].strip_prefix("::") {
            Some(next) => at = next,
            None => break,
        }
    }
    vec![segments]
}

/// The import graph: for each module, the modules it uses (see the module documentation).
pub fn graph(root: &Path) -> Result<BTreeMap<Module, BTreeSet<Module>>> {
    let mut files = Vec::new();
    for (krate, dir) in [("lab", "lab/src"), ("xtask", "xtask/src")] {
        for (relative, text) in sources(&root.join(dir))? {
            if let Some(module) = module_of(krate, &relative) {
                files.push((krate, module, text));
            }
        }
    }
    let modules: BTreeSet<Module> = files.iter().map(|(_, m, _)| m.clone()).collect();
    // Items the crate root re-exports or exports as macros, by the module that defines them.
    let mut root_items: BTreeMap<(String, String), Module> = BTreeMap::new();
    for (krate, module, text) in &files {
        for line in code(text).lines() {
            if let Some(rest) = line.trim().strip_prefix("macro_rules! ") {
                let macro_name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
                root_items.insert((krate.to_string(), macro_name), module.clone());
            }
            if module.len() == 1 {
                if let Some(rest) = line.trim().strip_prefix("pub use ") {
                    for path in paths(rest.trim_end_matches(';')) {
                        if let (Some(first), Some(last)) = (path.first(), path.last()) {
                            let target = vec![krate.to_string(), first.clone()];
                            root_items.insert((krate.to_string(), last.clone()), target);
                        }
                    }
                }
            }
        }
    }
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (krate, module, text) in &files {
        let text = code(text);
        let mut targets = BTreeSet::new();
        for (prefix, base) in [
            ("crate::", vec![krate.to_string()]),
            ("lab::", vec!["lab".to_owned()]),
            ("super::", module[..module.len().saturating_sub(1)].to_vec()),
        ] {
            let mut from = 0;
            while let Some(found) = text[from..].find(prefix) {
                let at = from + found;
                from = at + prefix.len();
                if text[..at].chars().next_back().is_some_and(is_ident) {
                    continue; // `xcrate::` or `my_lab::`: another name
                }
                for path in paths(&text[from..]) {
                    let mut full = base.clone();
                    full.extend(path.iter().cloned());
                    // The longest known module the path names, else a root item's module.
                    let mut target = full.clone();
                    while target.len() > 1 && !modules.contains(&target) {
                        target.pop();
                    }
                    if target.len() == 1 {
                        if let Some(first) = path.first() {
                            match root_items.get(&(target[0].clone(), first.clone())) {
                                Some(defined) => target = defined.clone(),
                                None => continue,
                            }
                        }
                    }
                    let related = target.starts_with(module) || module.starts_with(&target);
                    if !related {
                        targets.insert(target);
                    }
                }
            }
        }
        edges.insert(module.clone(), targets);
    }
    Ok(edges)
}

/// The circles of `edges` (strongly connected components of more than one module).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    // Tarjan's algorithm, iterative enough for a tree of a few hundred modules.
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low.get(w).copied().unwrap_or(usize::MAX));
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.found
}

/// What is wrong with the graph: circles (between modules, and between top-level modules),
/// a module on no floor, an edge to a higher floor. Empty when the tree keeps its floors.
pub fn findings(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut problems = Vec::new();
    // Top-level modules: `lab::plan::config` counts as `lab::plan`, all of xtask as `xtask`.
    let top = |m: &Module| -> Module {
        let keep = if m[0] == "xtask" { 2 } else { 2.min(m.len()) };
        m[..keep.min(m.len())].to_vec()
    };
    let mut collapsed: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, targets) in edges {
        let entry = collapsed.entry(top(from)).or_default();
        entry.extend(targets.iter().map(top).filter(|t| *t != top(from)));
    }
    for circle in circles(edges).into_iter().chain(circles(&collapsed)) {
        let names: Vec<String> = circle.iter().map(|m| name(m)).collect();
        problems.push(format!("import circle: {}", names.join(" <-> ")));
    }
    for (from, targets) in edges {
        if from.len() == 1 {
            continue; // a crate root declares its modules
        }
        let Some(floor) = floor_of(from) else {
            problems.push(format!(
                "{} is on no floor: add it to FLOORS in xtask/src/imports.rs and to \
                 docs/ARCHITECTURE.md",
                name(from)
            ));
            continue;
        };
        for target in targets {
            match floor_of(target) {
                Some(to) if to > floor => problems.push(format!(
                    "{} (floor {}) uses {} (floor {}, above it)",
                    name(from),
                    FLOORS[floor].0,
                    name(target),
                    FLOORS[to].0
                )),
                _ => {}
            }
        }
    }
    problems
}

/// Verify step: the import graph has no circle and no edge upwards.
pub fn step(ctx: &Ctx) -> Result<()> {
    let problems = findings(&graph(&ctx.root)?);
    if problems.is_empty() {
        return Ok(());
    }
    bail!(
        "{} problem(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    )
}

/// `cargo xtask imports`: prints every module and what it uses, then the findings.
pub fn run(root: &Path) -> Result<()> {
    let edges = graph(root)?;
    let mut out = String::new();
    for (from, targets) in &edges {
        let names: Vec<String> = targets.iter().map(|t| name(t)).collect();
        out.push_str(&format!("{} -> {}\n", name(from), names.join(" ")));
    }
    let problems = findings(&edges);
    let edge_count: usize = edges.values().map(BTreeSet::len).sum();
    out.push_str(&format!(
        "{} modules, {edge_count} edges, {} problem(s)\n",
        edges.len(),
        problems.len()
    ));
    for problem in &problems {
        out.push_str(&format!("  {problem}\n"));
    }
    lab::stdout::print(&out)?;
    if problems.is_empty() {
        Ok(())
    } else {
        bail!("the import graph breaks the floors")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Module {
        text.split("::").map(str::to_owned).collect()
    }

    #[test]
    fn paths_follow_groups_and_self() {
        assert_eq!(paths("document::graph::X;"), vec![m("document::graph::X")]);
        assert_eq!(
            paths("{document::{self, Dtype}, Error}"),
            vec![m("document"), m("document::Dtype"), m("Error")]
        );
        assert_eq!(module_of("lab", "plan/mod.rs"), Some(m("lab::plan")));
        assert_eq!(module_of("lab", "lib.rs"), Some(m("lab")));
        assert_eq!(module_of("xtask", "main.rs"), Some(m("xtask")));
        assert_eq!(module_of("lab", "document/tests.rs"), None);
        assert_eq!(
            code("use a; // crate::b\n#[cfg(test)]\nmod tests {}"),
            "use a; \n"
        );
    }

    #[test]
    fn circles_and_upward_edges_are_found() {
        let mut edges = BTreeMap::new();
        edges.insert(m("lab::fleet"), BTreeSet::from([m("lab::values")]));
        edges.insert(m("lab::values"), BTreeSet::from([m("lab::fleet")]));
        edges.insert(m("lab::text"), BTreeSet::from([m("lab::cli")]));
        edges.insert(m("lab::cli"), BTreeSet::new());
        edges.insert(m("lab::newthing"), BTreeSet::new());
        let found = findings(&edges).join("\n");
        assert!(
            found.contains("import circle: lab::fleet <-> lab::values"),
            "{found}"
        );
        assert!(
            found.contains(
                "lab::fleet (floor gpu work) uses lab::values (floor flag grammar, above it)"
            ),
            "{found}"
        );
        assert!(
            found.contains("lab::text (floor base) uses lab::cli"),
            "{found}"
        );
        assert!(found.contains("lab::newthing is on no floor"), "{found}");
    }

    #[test]
    fn the_tree_keeps_its_floors() {
        let edges = graph(&crate::project_root()).unwrap();
        // The graph is read at all: the measurement uses the worker.
        assert!(edges[&m("lab::measure")].contains(&m("lab::worker")));
        assert_eq!(findings(&edges), Vec::<String>::new());
    }
}
