//! Peak memory of a generated source does not grow with input length.
//!
//! `cargo run --release -p streaming --example bounded_memory` runs a keyed rolling sum
//! (1,000 keys) over 1 M and then 10 M generated records in one process and prints the
//! process's peak resident set (VmHWM from /proc/self/status) after each. The source is
//! pulled one record at a time, so the second figure equals the first.

use streaming::MemoryEnv;

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn run(n: u64) -> u64 {
    let mut last = 0;
    MemoryEnv::new()
        .from_collection((0..n).map(|i| i.wrapping_mul(2_654_435_761) % 1000))
        .key_by(|x| *x)
        .sum()
        .sink(|(_, s)| last = s)
        .expect("pipeline runs");
    last
}

fn main() {
    for n in [1_000_000u64, 10_000_000] {
        let last = run(n);
        println!(
            "records={n} last_sum={last} peak_rss_kib={}",
            peak_rss_kib()
        );
    }
}
