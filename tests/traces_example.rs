//! `examples/traces.rs` against a private redis-server: the engine's spans reach the
//! OpenTelemetry stdout exporter — `take`, `batch`, `commit` and `checkpoint`, each with
//! the job, topic, group and partition as attributes.

#[path = "../streaming/tests/support/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

use std::collections::BTreeMap;
use std::process::Command;

/// Builds and runs the example (the same cargo; a no-op build when it is up to date).
fn run_example(url: &str) -> (String, String) {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", "traces"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("cargo build --example traces");
    assert!(status.success());
    // This test runs from <target>/<profile>/deps/.
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let out = Command::new(profile_dir.join("examples").join("traces"))
        .env_remove("RUST_LOG")
        .args(["--redis-url", url, "--messages", "12"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stderr}");
    (stdout, stderr)
}

/// Each exported span of the stdout exporter's text: its name and attributes.
fn spans(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut spans = Vec::new();
    for block in text.split("Span #").skip(1) {
        let mut name = String::new();
        let mut attributes = BTreeMap::new();
        for line in block.lines().map(str::trim) {
            if let Some(n) = line.strip_prefix("Name         : ") {
                if !n.starts_with('"') {
                    name = n.to_string();
                }
            } else if let Some(attr) = line.strip_prefix("->  ") {
                if let Some((k, v)) = attr.split_once(": ") {
                    // `String(Owned("traces"))` → `traces`, `I64(3)` → `3`
                    let v = match v.strip_prefix("I64(") {
                        Some(n) => n.trim_end_matches(')'),
                        None => {
                            (v.rsplit_once("(\"")).map_or(v, |(_, v)| v.trim_end_matches("\"))"))
                        }
                    };
                    attributes.entry(k.to_string()).or_insert(v.to_string());
                }
            } else if line.starts_with("Events:") {
                break;
            }
        }
        spans.push((name, attributes));
    }
    spans
}

#[test]
fn the_engines_spans_reach_the_opentelemetry_exporter_with_their_attributes() {
    let redis = redis_server::RedisServer::start();
    let (stdout, stderr) = run_example(&redis.url());
    assert!(stderr.contains("counted 12 messages"), "{stderr}");
    let spans = spans(&stdout);
    for name in ["take", "batch", "commit", "checkpoint"] {
        let found: Vec<_> = spans.iter().filter(|(n, _)| n == name).collect();
        assert!(!found.is_empty(), "no `{name}` span in:\n{stdout}");
        for (_, a) in found {
            assert_eq!(
                a.get("job").map(String::as_str),
                Some("traces"),
                "{name}: {a:?}"
            );
            assert_eq!(
                a.get("topic").map(String::as_str),
                Some("traces"),
                "{name}: {a:?}"
            );
            assert_eq!(
                a.get("group").map(String::as_str),
                Some("counter"),
                "{name}: {a:?}"
            );
            assert!(
                matches!(a.get("partition").map(String::as_str), Some("0" | "1")),
                "{name}: {a:?}"
            );
        }
    }
    let records: u64 = (spans.iter())
        .filter(|(n, _)| n == "batch")
        .map(|(_, a)| a["records"].parse::<u64>().unwrap())
        .sum();
    assert_eq!(records, 12, "every message in one exported batch span");
    assert!(
        stdout.contains("partition: I64("),
        "numbers exported as numbers"
    );
}
