//! The Grafana dashboard in `dashboards/grafana-streaming.json` queries only series the
//! engine reports: every `streaming_*` name in its queries is in the metrics table of the
//! guide (`streaming/docs/metrics.md`), a `_bucket`/`_sum`/`_count` suffix only on a
//! histogram, and every series of that table is one the engine's source names (a string
//! literal, or a `format!` pattern such as `streaming_checkpoints_{outcome}_total`).

use serde_json::Value;
use std::collections::BTreeMap;

const DASHBOARD: &str = include_str!("../dashboards/grafana-streaming.json");
const METRICS_TABLE: &str = include_str!("../streaming/docs/metrics.md");

/// The table's series: name → type (`counter`, `gauge`, `gauge (0/1)`, `histogram`).
fn table() -> BTreeMap<String, String> {
    let mut series = BTreeMap::new();
    for row in METRICS_TABLE.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // | seed metric | series | type | labels | updated |
        if let (Some(name), Some(kind)) = (cells.get(2), cells.get(3)) {
            if let Some(name) = name.strip_prefix("`streaming_") {
                let name = format!("streaming_{}", name.trim_end_matches('`'));
                series.insert(name, kind.to_string());
            }
        }
    }
    series
}

/// The `streaming_*` names in a PromQL expression.
fn names_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("streaming_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// Every query of the dashboard: the panels' targets and the template variables'.
fn queries(dashboard: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let targets = panel["targets"]
            .as_array()
            .expect("every panel has targets");
        assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        for t in targets {
            out.push(t["expr"].as_str().expect("a PromQL expr").to_string());
        }
    }
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        out.push(var["query"]["query"].as_str().expect("a query").to_string());
    }
    out
}

#[test]
fn every_series_the_dashboard_queries_is_in_the_metrics_table() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let table = table();
    assert!(table.len() >= 30, "the table was not read: {table:?}");
    let mut queried = 0;
    for expr in queries(&dashboard) {
        for name in names_in(&expr) {
            queried += 1;
            let histogram_part = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s));
            let kind = match (table.get(&name), histogram_part) {
                (Some(kind), _) => kind,
                (None, Some(base)) => {
                    let kind = table.get(base).unwrap_or_else(|| {
                        panic!("`{name}` (in `{expr}`) is not in the metrics table")
                    });
                    assert_eq!(kind, "histogram", "`{name}`: `{base}` is a {kind}");
                    kind
                }
                (None, None) => panic!("`{name}` (in `{expr}`) is not in the metrics table"),
            };
            if kind != "histogram" {
                assert!(
                    !expr.contains("histogram_quantile") || !expr.contains(&name),
                    "`{name}` is a {kind}, not a histogram: `{expr}`"
                );
            }
        }
    }
    assert!(queried >= 30, "only {queried} series queried");
}

/// The `"streaming_…"` string literals of the Redis engine's source.
fn engine_literals() -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for piece in text.split("\"streaming_").skip(1) {
                    let end = piece.find('"').unwrap_or(0);
                    out.push(format!("streaming_{}", &piece[..end]));
                }
            }
        }
    }
    let mut out = Vec::new();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("streaming/src/redis");
    walk(&src, &mut out);
    out
}

/// Whether `name` matches `pattern`, where each `{…}` of the pattern stands for one or more
/// name characters.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('{') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            let after = rest.split_once('}').map_or("", |(_, a)| a);
            (1..=tail.len()).any(|i| matches(after, &tail[i..]))
        }
    }
}

#[test]
fn every_series_of_the_table_is_named_by_the_engine() {
    let literals = engine_literals();
    assert!(literals.len() >= 25, "the engine's source was not read");
    for name in table().keys() {
        assert!(
            literals.iter().any(|l| matches(l, name)),
            "`{name}` is in the metrics table but no string of streaming/src/redis names it"
        );
    }
    assert!(matches(
        "streaming_checkpoints_{outcome}_total",
        "streaming_checkpoints_failed_total"
    ));
    assert!(!matches(
        "streaming_checkpoints_{outcome}_total",
        "streaming_checkpoints__total"
    ));
}

#[test]
fn panels_have_unique_ids_a_datasource_and_do_not_overlap() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids: Vec<i64> = panels.iter().map(|p| p["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), panels.len(), "panel ids repeat");
    let rect = |p: &Value| {
        let g = &p["gridPos"];
        let v = |k: &str| g[k].as_i64().unwrap();
        (v("x"), v("y"), v("x") + v("w"), v("y") + v("h"))
    };
    for (i, a) in panels.iter().enumerate() {
        assert_eq!(a["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", a["title"]);
        let (ax0, ay0, ax1, ay1) = rect(a);
        assert!(ax1 <= 24, "{} is wider than the grid", a["title"]);
        for b in &panels[i + 1..] {
            let (bx0, by0, bx1, by1) = rect(b);
            let apart = ax1 <= bx0 || bx1 <= ax0 || ay1 <= by0 || by1 <= ay0;
            assert!(apart, "{} overlaps {}", a["title"], b["title"]);
        }
    }
}

#[test]
fn the_name_scanner_finds_names_and_their_suffixes() {
    assert_eq!(
        names_in("histogram_quantile(0.99, rate(streaming_commit_seconds_bucket{a=\"b\"}[1m])) + streaming_x"),
        ["streaming_commit_seconds_bucket", "streaming_x"]
    );
}
