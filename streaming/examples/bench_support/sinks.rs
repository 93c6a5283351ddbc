//! Sink mode of `redis_engine_bench` (`--sinks [--messages N]`): the keyed count of
//! throughput mode (10,000 keys, 4 partitions, Offset mode, parallelism 1, batches of 500,
//! N messages, default 500,000) ending in each sink — a plain sink called before the
//! commit (at-least-once; it drops the records), `RedisListSink`, `RedisOutboxSink`,
//! `RedisIdempotentListSink` (key = the record's key and count, TTL 1 h) — interleaved,
//! three rounds each: medians and their ratio to the plain sink.

use std::time::Duration;

use streaming::redis::outbox::RedisOutboxSink;
use streaming::redis::{AckMode, RedisEnv, RedisIdempotentListSink, RedisListSink};

/// The sink a keyed-count run ends in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SinkKind {
    /// Drops records, called before the commit (at-least-once).
    Discard,
    List,
    Outbox,
    Idempotent,
}

impl SinkKind {
    /// Registers the keyed count ending in this sink, writing under `name` (a fresh key
    /// prefix of the run).
    pub(crate) fn register(self, env: &RedisEnv, name: &str) {
        match self {
            SinkKind::Discard => super::register_keyed_count(env),
            SinkKind::List => super::register_keyed_count_into(env, RedisListSink::new(name)),
            SinkKind::Outbox => {
                super::register_keyed_count_into(env, RedisOutboxSink::new(name).unwrap())
            }
            SinkKind::Idempotent => super::register_keyed_count_into(
                env,
                RedisIdempotentListSink::new(
                    name,
                    Duration::from_secs(3600),
                    |r: &(String, u64)| format!("{}#{}", r.0, r.1),
                )
                .unwrap(),
            ),
        }
    }

    fn name(self) -> &'static str {
        match self {
            SinkKind::Discard => "plain sink (at-least-once)",
            SinkKind::List => "`RedisListSink`",
            SinkKind::Outbox => "`RedisOutboxSink`",
            SinkKind::Idempotent => "`RedisIdempotentListSink`",
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The sink benchmark; prints a Markdown table.
pub(crate) fn sinks_main(url: &str, n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let kinds = [
        SinkKind::Discard,
        SinkKind::List,
        SinkKind::Outbox,
        SinkKind::Idempotent,
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for _ in 0..3 {
        for (i, &sink) in kinds.iter().enumerate() {
            let run = super::CountRun {
                keys: 10_000,
                mode: AckMode::Offset,
                parallelism: 1,
                partitions: 4,
                replica_wait: None,
                checkpoint_interval: None,
                sink,
            };
            rates[i].push(super::count_run(url, &rt, n, &run));
        }
    }
    let base = median(rates[0].clone());
    println!("| keyed count, 10,000 keys, {n} messages, sink | runs (msg/s) | median | vs plain |");
    println!("|---|---|---|---|");
    for (kind, r) in kinds.iter().zip(&rates) {
        let runs: Vec<String> = r.iter().map(|x| format!("{x:.0}")).collect();
        let m = median(r.clone());
        println!(
            "| {} | {} | {m:.0} | {:.2} |",
            kind.name(),
            runs.join(", "),
            m / base
        );
    }
}
