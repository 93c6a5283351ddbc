//! Sink mode of `redis_engine_bench` (`--sinks [--messages N]`): the keyed count of
//! throughput mode (10,000 keys, 4 partitions, Offset mode, parallelism 1, batches of 500,
//! N messages, default 500,000) ending in each sink — a plain sink called before the
//! commit (at-least-once; it drops the records), `RedisListSink`, `RedisOutboxSink`,
//! `RedisIdempotentListSink` (key = the record's key and count, TTL 1 h),
//! `RedisTopicSink` (into a 4-partition topic, keyed; timed until the job's forwarder has
//! put every output into the topic) and, with
//! `--postgres CONNECTION` (feature `postgres`), `TwoPhaseSink<PostgresSink>` (one row per
//! record into `bench_counts(k text, n bigint)`, created when missing and emptied before
//! each run) — interleaved, three rounds each: medians and their ratio to the plain sink.

use std::sync::OnceLock;
use std::time::Duration;

use streaming::redis::outbox::RedisOutboxSink;
use streaming::redis::{AckMode, RedisEnv, RedisIdempotentListSink, RedisListSink, RedisTopicSink};

/// The sink a keyed-count run ends in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SinkKind {
    /// Drops records, called before the commit (at-least-once).
    Discard,
    List,
    Outbox,
    Idempotent,
    /// `TwoPhaseSink<PostgresSink>` into the `--postgres` server.
    Postgres,
    /// `RedisTopicSink` into topic [`TOPIC_TARGET`] (4 partitions, keyed by the count's
    /// key), forwarded by the job: timed until every output is in the target topic.
    Topic,
}

/// The target topic of [`SinkKind::Topic`].
pub(crate) const TOPIC_TARGET: &str = "fwd";

/// The PostgreSQL server of `--postgres`.
static POSTGRES: OnceLock<String> = OnceLock::new();

/// Sets the PostgreSQL server the sink benchmark also writes to.
pub(crate) fn set_postgres(connection: String) {
    if !cfg!(feature = "postgres") {
        panic!("--postgres needs the example built with `--features postgres`");
    }
    POSTGRES.set(connection).expect("--postgres given once");
}

#[cfg(feature = "postgres")]
fn register_postgres(env: &RedisEnv) {
    use streaming::redis::two_phase::{PostgresParams, PostgresSink, TwoPhaseSink};
    let conn = POSTGRES.get().expect("--postgres");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, c) = tokio_postgres::connect(conn, tokio_postgres::NoTls)
            .await
            .expect("connect to --postgres");
        tokio::spawn(c);
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS bench_counts (k text NOT NULL, n bigint NOT NULL);
                 TRUNCATE bench_counts",
            )
            .await
            .expect("create bench_counts");
    });
    let rows = PostgresSink::new(
        conn,
        "INSERT INTO bench_counts (k, n) VALUES ($1, $2)",
        |(k, n): &(String, u64)| -> PostgresParams {
            vec![Box::new(k.clone()), Box::new(*n as i64)]
        },
    )
    .unwrap();
    super::register_keyed_count_into(env, TwoPhaseSink::new(rows));
}

#[cfg(not(feature = "postgres"))]
fn register_postgres(_: &RedisEnv) {
    unreachable!("set_postgres refuses --postgres without the feature")
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
            SinkKind::Postgres => register_postgres(env),
            SinkKind::Topic => super::register_keyed_count_into(
                env,
                RedisTopicSink::new(TOPIC_TARGET)
                    .unwrap()
                    .key(|r: &(String, u64)| r.0.clone()),
            ),
        }
    }

    fn name(self) -> &'static str {
        match self {
            SinkKind::Discard => "plain sink (at-least-once)",
            SinkKind::List => "`RedisListSink`",
            SinkKind::Outbox => "`RedisOutboxSink`",
            SinkKind::Idempotent => "`RedisIdempotentListSink`",
            SinkKind::Postgres => "`TwoPhaseSink<PostgresSink>` (rows)",
            SinkKind::Topic => "`RedisTopicSink`, until forwarded into the topic",
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
    let mut kinds = vec![
        SinkKind::Discard,
        SinkKind::List,
        SinkKind::Outbox,
        SinkKind::Idempotent,
        SinkKind::Topic,
    ];
    if POSTGRES.get().is_some() {
        kinds.push(SinkKind::Postgres);
    }
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
