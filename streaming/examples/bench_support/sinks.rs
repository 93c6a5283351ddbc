//! Sink mode of `redis_engine_bench` (`--sinks [--messages N]`): the keyed count of
//! throughput mode (10,000 keys, 4 partitions, Offset mode, parallelism 1, batches of 500,
//! N messages, default 500,000) ending in each sink — a plain sink called before the
//! commit (at-least-once; it drops the records), `RedisListSink`, `RedisOutboxSink`,
//! `RedisIdempotentListSink` (key = the record's key and count, TTL 1 h),
//! `RedisTopicSink` (into a 4-partition topic, keyed; timed until the job's forwarder has
//! put every output into the topic) and, with
//! `--postgres CONNECTION` (feature `postgres`), `TwoPhaseSink<PostgresSink>` (one row per
//! record into `bench_counts(k text, n bigint)`, created when missing and emptied before
//! each run; once `per_batch` with one `INSERT … UNNEST` per batch, once `new` with an
//! `INSERT` per record) and two plain (at-least-once) PostgreSQL sinks into `bench_plain`: one
//! `INSERT` per record in `invoke`, or the batch's rows in one `INSERT … UNNEST` in
//! `Sink::flush` — interleaved, three rounds each: medians and their ratio to the plain
//! sink. `--sink-kinds NAMES` runs only the plain sink and the named ones.

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
    /// `TwoPhaseSink<PostgresSink>` into the `--postgres` server, one `INSERT … UNNEST`
    /// per batch (`PostgresSink::per_batch`).
    Postgres,
    /// `TwoPhaseSink<PostgresSink>` into the `--postgres` server, one `INSERT` per record
    /// (`PostgresSink::new`).
    PostgresTwoPhasePerRecord,
    /// A plain (at-least-once) sink into the `--postgres` server: one `INSERT` per record.
    PostgresPerRecord,
    /// A plain (at-least-once) sink into the `--postgres` server buffering in `invoke`:
    /// one multi-row `INSERT` per batch, in `Sink::flush`.
    PostgresFlushed,
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

/// The sinks `--sink-kinds` chose (all when unset).
static ONLY: OnceLock<Vec<SinkKind>> = OnceLock::new();

/// Restricts the sink benchmark to the plain sink and `names` (comma-separated: `list`,
/// `outbox`, `idempotent`, `topic`, `postgres`, `postgres-per-record`, `pg-record`,
/// `pg-flush`).
pub(crate) fn set_sink_kinds(names: &str) {
    let kinds = names
        .split(',')
        .map(|n| match n {
            "list" => SinkKind::List,
            "outbox" => SinkKind::Outbox,
            "idempotent" => SinkKind::Idempotent,
            "topic" => SinkKind::Topic,
            "postgres" => SinkKind::Postgres,
            "postgres-per-record" => SinkKind::PostgresTwoPhasePerRecord,
            "pg-record" => SinkKind::PostgresPerRecord,
            "pg-flush" => SinkKind::PostgresFlushed,
            other => panic!("--sink-kinds: unknown sink `{other}`"),
        })
        .collect();
    ONLY.set(kinds).expect("--sink-kinds given once");
}

#[cfg(feature = "postgres")]
fn register_postgres(env: &RedisEnv, per_batch: bool) {
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
    let rows = if per_batch {
        PostgresSink::per_batch(
            conn,
            "INSERT INTO bench_counts (k, n) SELECT * FROM UNNEST($1::text[], $2::bigint[])",
            |batch: &[(String, u64)]| -> PostgresParams {
                let ks: Vec<String> = batch.iter().map(|(k, _)| k.clone()).collect();
                let ns: Vec<i64> = batch.iter().map(|(_, n)| *n as i64).collect();
                vec![Box::new(ks), Box::new(ns)]
            },
        )
    } else {
        PostgresSink::new(
            conn,
            "INSERT INTO bench_counts (k, n) VALUES ($1, $2)",
            |(k, n): &(String, u64)| -> PostgresParams {
                vec![Box::new(k.clone()), Box::new(*n as i64)]
            },
        )
    }
    .unwrap();
    super::register_keyed_count_into(env, TwoPhaseSink::new(rows));
}

#[cfg(not(feature = "postgres"))]
fn register_postgres(_: &RedisEnv, _: bool) {
    unreachable!("set_postgres refuses --postgres without the feature")
}

#[cfg(feature = "postgres")]
fn register_plain_postgres(env: &RedisEnv, batched: bool) {
    let conn = POSTGRES.get().expect("--postgres").clone();
    plain_pg::create_table(&conn);
    super::register_keyed_count_into(env, plain_pg::PlainPostgres::new(conn, batched));
}

#[cfg(not(feature = "postgres"))]
fn register_plain_postgres(_: &RedisEnv, _: bool) {
    unreachable!("set_postgres refuses --postgres without the feature")
}

/// A plain PostgreSQL sink as a user writes one without the two-phase hooks: a worker
/// thread owns a `tokio_postgres` client (the engine's subtask runs on a runtime of its
/// own, so the sink does not block on one there) and answers each request.
#[cfg(feature = "postgres")]
mod plain_pg {
    use std::sync::mpsc::{channel, sync_channel, Sender, SyncSender};
    use streaming::api::Sink;
    use streaming::BoxError;

    type Rows = Vec<(String, i64)>;
    type Request = (Rows, SyncSender<Result<(), String>>);

    /// `bench_plain(k text, n bigint)`, created when missing and emptied.
    pub(super) fn create_table(conn: &str) {
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
                    "CREATE TABLE IF NOT EXISTS bench_plain (k text NOT NULL, n bigint NOT NULL);
                     TRUNCATE bench_plain",
                )
                .await
                .expect("create bench_plain");
        });
    }

    /// Writes each record at once (`batched: false`) or the batch's records in `flush`.
    pub(crate) struct PlainPostgres {
        conn: String,
        batched: bool,
        writer: Option<Sender<Request>>,
        buffer: Rows,
    }

    impl Clone for PlainPostgres {
        fn clone(&self) -> Self {
            PlainPostgres::new(self.conn.clone(), self.batched)
        }
    }

    impl PlainPostgres {
        pub(crate) fn new(conn: String, batched: bool) -> Self {
            PlainPostgres {
                conn,
                batched,
                writer: None,
                buffer: Vec::new(),
            }
        }

        /// Inserts `rows` (one statement) and waits for the answer.
        fn write(&mut self, rows: Rows) -> Result<(), BoxError> {
            let conn = self.conn.clone();
            let writer = self.writer.get_or_insert_with(|| spawn_writer(conn));
            let (reply, answer) = sync_channel(1);
            writer
                .send((rows, reply))
                .map_err(|_| "the writer thread ended")?;
            Ok(answer.recv().map_err(|_| "the writer thread ended")??)
        }
    }

    fn spawn_writer(conn: String) -> Sender<Request> {
        let (tx, rx) = channel::<Request>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let (client, c) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
                    .await
                    .expect("connect to --postgres");
                tokio::spawn(c);
                let one = client
                    .prepare("INSERT INTO bench_plain (k, n) VALUES ($1, $2)")
                    .await
                    .unwrap();
                let many = client
                    .prepare(
                        "INSERT INTO bench_plain (k, n) SELECT * FROM UNNEST($1::text[], $2::bigint[])",
                    )
                    .await
                    .unwrap();
                while let Ok((rows, reply)) = rx.recv() {
                    let done = if let [(k, n)] = rows.as_slice() {
                        client.execute(&one, &[k, n]).await
                    } else {
                        let (ks, ns): (Vec<String>, Vec<i64>) = rows.into_iter().unzip();
                        client.execute(&many, &[&ks, &ns]).await
                    };
                    let _ = reply.send(done.map(|_| ()).map_err(|e| e.to_string()));
                }
            });
        });
        tx
    }

    impl Sink<(String, u64)> for PlainPostgres {
        fn invoke(&mut self, (k, n): (String, u64)) -> Result<(), BoxError> {
            if self.batched {
                self.buffer.push((k, n as i64));
                Ok(())
            } else {
                self.write(vec![(k, n as i64)])
            }
        }

        fn flush(&mut self) -> Result<(), BoxError> {
            if self.buffer.is_empty() {
                return Ok(());
            }
            let rows = std::mem::take(&mut self.buffer);
            self.write(rows)
        }
    }
}

impl SinkKind {
    /// Registers the keyed count ending in this sink, writing under `name` (a fresh key
    /// prefix of the run).
    pub(crate) fn register(self, env: &RedisEnv, name: &str) {
        match self {
            SinkKind::Discard => super::register_keyed_count(env),
            SinkKind::List => {
                super::register_keyed_count_into(env, RedisListSink::new(name).unwrap())
            }
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
            SinkKind::Postgres => register_postgres(env, true),
            SinkKind::PostgresTwoPhasePerRecord => register_postgres(env, false),
            SinkKind::PostgresPerRecord => register_plain_postgres(env, false),
            SinkKind::PostgresFlushed => register_plain_postgres(env, true),
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
            SinkKind::Postgres => "`TwoPhaseSink<PostgresSink>`, `per_batch` (one `UNNEST`)",
            SinkKind::PostgresTwoPhasePerRecord => {
                "`TwoPhaseSink<PostgresSink>`, `new` (an `INSERT` per record)"
            }
            SinkKind::PostgresPerRecord => "plain PostgreSQL sink, an `INSERT` per record",
            SinkKind::PostgresFlushed => "plain PostgreSQL sink, one `INSERT` per batch in `flush`",
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
        kinds.extend([
            SinkKind::Postgres,
            SinkKind::PostgresTwoPhasePerRecord,
            SinkKind::PostgresPerRecord,
            SinkKind::PostgresFlushed,
        ]);
    }
    if let Some(only) = ONLY.get() {
        // The baseline stays first: ratios are against it.
        kinds.retain(|k| *k == SinkKind::Discard || only.contains(k));
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
