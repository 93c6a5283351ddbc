//! The crate's layers point one way, read from the source: which module names which through
//! `crate::` and `super::` paths (comments and doc lines do not count).
//!
//! `cargo test -p streaming --test layers`

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The file's module path below `src/`: `redis/persist.rs` → `["redis", "persist"]`.
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The file's code without comments, doc lines and string contents' line breaks.
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The modules `module` names, as absolute paths below the crate root, cut to `depth`
/// segments.
fn named(module: &[String], code: &str, depth: usize) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    for (i, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
            continue;
        }
        let path: Vec<&str> = code[i..]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap()
            .split("::")
            .filter(|s| !s.is_empty())
            .collect();
        let mut abs: Vec<String> = match path[0] {
            "crate" => Vec::new(),
            _ => module.to_vec(),
        };
        for seg in &path {
            match *seg {
                "crate" => {}
                "super" => {
                    abs.pop();
                }
                s => abs.push(s.to_string()),
            }
        }
        // Items of the crate root: its error types are the `error` module's.
        if abs.first().is_some_and(|s| s == "Error" || s == "BoxError") {
            abs = vec!["error".to_string()];
        }
        abs.truncate(depth);
        if !abs.is_empty() {
            out.insert(abs);
        }
    }
    out
}

/// Edges between modules cut to `depth` segments (a module's edges to itself dropped).
fn graph(depth: usize) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut g: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in files(&src()) {
        let mut module = module_of(&file);
        let code = code(&file);
        let targets = named(&module, &code, depth);
        module.truncate(depth);
        let edges = g.entry(module.clone()).or_default();
        edges.extend(targets.into_iter().filter(|t| *t != module));
    }
    g
}

/// A cycle through `start`, if any.
fn cycle_through(
    g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    start: &Vec<String>,
) -> Option<Vec<Vec<String>>> {
    fn walk(
        g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        start: &Vec<String>,
        at: &Vec<String>,
        path: &mut Vec<Vec<String>>,
        seen: &mut BTreeSet<Vec<String>>,
    ) -> bool {
        for next in g.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.clone()];
    walk(g, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn the_engine_neutral_layers_import_no_engine() {
    let g = graph(1);
    for lower in ["api", "time", "ops", "dataflow"] {
        let edges = &g[&vec![lower.to_string()]];
        for engine in ["memory", "redis"] {
            assert!(
                !edges.contains(&vec![engine.to_string()]),
                "`{lower}` imports `{engine}`"
            );
        }
    }
}

#[test]
fn the_layers_point_one_way() {
    // time and mq are leaves; api → time; ops → api, time; dataflow → ops and below.
    let allowed: [(&str, &[&str]); 5] = [
        ("time", &["error"]),
        ("api", &["time", "error"]),
        ("ops", &["api", "time", "error"]),
        ("dataflow", &["ops", "api", "time", "error"]),
        ("mq", &["error"]),
    ];
    let g = graph(1);
    for (module, may) in allowed {
        for target in &g[&vec![module.to_string()]] {
            assert!(
                may.contains(&target[0].as_str()),
                "`{module}` imports `{}`",
                target[0]
            );
        }
    }
}

#[test]
fn the_redis_state_modules_form_no_cycle() {
    let g = graph(2);
    for module in ["keys", "schema", "persist", "process_state", "runtime"] {
        let m = vec!["redis".to_string(), module.to_string()];
        if let Some(cycle) = cycle_through(&g, &m) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            panic!("module cycle: {} -> back", names.join(" -> "));
        }
    }
}
