//! The two-phase-commit PostgreSQL sink (`streaming::redis::two_phase::PostgresSink`)
//! against a private PostgreSQL cluster and a private Redis: every input row lands in the
//! table exactly once and no prepared transaction is left behind, across `kill -9` of the
//! job's processes at random points and crashes injected right after `PREPARE
//! TRANSACTION` and between the Redis commit and `COMMIT PREPARED`.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::two_phase::{
    PostgresParams, PostgresSink, TwoPhaseCommitSink, TwoPhaseSink, TxnScope,
};
use streaming::redis::{RedisEnv, RedisRuntimeConfig};
use streaming::BoxError;
use support::postgres::TestPostgres;
use support::redis_server::TestRedis;

const TOPIC: &str = "t";
const PARTITIONS: u32 = 4;
const COUNT: ValueStateDescriptor<i64> = ValueStateDescriptor::persistent("count", 0);

/// One output row: (input id, word, the word's running count).
type Row = (String, String, i64);

/// Where a worker crashes on purpose (`W_FAULT`), at its `W_FAULT_AT`-th call there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Right after `PREPARE TRANSACTION`, before the Redis commit records it.
    AfterPrepare,
    /// After the Redis commit, before `COMMIT PREPARED`.
    BeforeCommitPrepared,
    /// Right after `COMMIT PREPARED`.
    AfterCommitPrepared,
}

/// The fault hook: a [`PostgresSink`] that aborts the process at a chosen point.
#[derive(Clone)]
struct Faulty {
    inner: PostgresSink<Row>,
    fault: Option<(Fault, u32)>,
    calls: Arc<AtomicU32>,
}

impl Faulty {
    fn maybe_crash(&self, at: Fault) {
        if let Some((f, n)) = self.fault {
            if f == at && self.calls.fetch_add(1, Ordering::SeqCst) + 1 == n {
                println!("FAULT {at:?}");
                std::io::stdout().flush().unwrap();
                std::process::abort();
            }
        }
    }
}

impl TwoPhaseCommitSink<Row> for Faulty {
    async fn pre_commit(&mut self, scope: &TxnScope, rows: Vec<Row>) -> Result<String, BoxError> {
        let gid = self.inner.pre_commit(scope, rows).await?;
        self.maybe_crash(Fault::AfterPrepare);
        Ok(gid)
    }
    async fn commit(&mut self, handle: &str) -> Result<(), BoxError> {
        self.maybe_crash(Fault::BeforeCommitPrepared);
        self.inner.commit(handle).await?;
        self.maybe_crash(Fault::AfterCommitPrepared);
        Ok(())
    }
    async fn abort(&mut self, handle: &str) -> Result<(), BoxError> {
        self.inner.abort(handle).await
    }
    async fn recover_and_commit(&mut self, handle: &str) -> Result<(), BoxError> {
        self.inner.recover_and_commit(handle).await
    }
    async fn recover_and_abort(&mut self, scope: &TxnScope) -> Result<(), BoxError> {
        self.inner.recover_and_abort(scope).await
    }
}

/// The child side: runs the job until stdin closes (started by [`PgWorker::spawn`]).
#[test]
fn worker() {
    if std::env::var("STREAMING_PG_WORKER").as_deref() != Ok("1") {
        return;
    }
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
    let fault = match std::env::var("W_FAULT").as_deref() {
        Ok("prepare") => Some((Fault::AfterPrepare, var("W_FAULT_AT").parse().unwrap())),
        Ok("commit") => Some((
            Fault::BeforeCommitPrepared,
            var("W_FAULT_AT").parse().unwrap(),
        )),
        Ok("committed") => Some((
            Fault::AfterCommitPrepared,
            var("W_FAULT_AT").parse().unwrap(),
        )),
        _ => None,
    };
    let rows = PostgresSink::new(
        &var("W_PG"),
        "INSERT INTO rows (id, word, n) VALUES ($1, $2, $3)",
        |(id, word, n): &Row| -> PostgresParams {
            vec![Box::new(id.clone()), Box::new(word.clone()), Box::new(*n)]
        },
    )
    .and_then(|sink| sink.timeout(Duration::from_secs(10)))
    .unwrap();
    let sink = TwoPhaseSink::new(Faulty {
        inner: rows,
        fault,
        calls: Arc::new(AtomicU32::new(0)),
    });
    let opts = support::fast_options("pg")
        .key_prefix(var("W_PREFIX"))
        .build()
        .unwrap();
    let config = RedisRuntimeConfig::builder()
        .job_name("pg")
        .mq_options(opts)
        .pipeline_parallelism(2)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(var("W_URL").as_str(), config).unwrap();
    let subscription = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(25)
        .build()
        .unwrap();
    env.from_mq_topic_with_options(TOPIC, "g", subscription)
        // The payload is the input's number (entry ids repeat across partitions).
        .map(|m: Message| {
            (
                m.text().unwrap().to_owned(),
                m.key.as_deref().unwrap_or_default().to_owned(),
            )
        })
        .key_by(|(_, w): &(String, String)| w.clone())
        .process(|(id, w): (String, String), ctx, out| {
            // Widens the window in which a batch is in flight.
            std::thread::sleep(Duration::from_micros(1500));
            let mut c = ctx.state(&COUNT)?;
            let n = c.value() + 1;
            c.update(n);
            out.collect((id, w, n));
            Ok(())
        })
        .sink(sink)
        .unwrap();
    let job = env.blocking_start().unwrap();
    println!("STARTED");
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    job.blocking_shutdown(Duration::from_secs(30));
    std::process::exit(0);
}

/// A worker process of the job.
struct PgWorker {
    child: Child,
}

impl PgWorker {
    fn spawn(redis: &str, prefix: &str, pg: &str, fault: Option<(&str, u32)>) -> PgWorker {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = Command::new(exe);
        cmd.args(["worker", "--exact", "--nocapture", "--test-threads", "1"])
            .env("STREAMING_PG_WORKER", "1")
            .env("W_URL", redis)
            .env("W_PREFIX", prefix)
            .env("W_PG", pg)
            .env_remove("W_FAULT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some((point, at)) = fault {
            cmd.env("W_FAULT", point).env("W_FAULT_AT", at.to_string());
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("STARTED") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("worker started");
        PgWorker { child }
    }

    /// Whether it has exited (a fault hook aborted it).
    fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Waits (at most 90 s) for it to exit and returns the signal that ended it.
    fn crashed(mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        for _ in 0..9_000 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.signal();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        panic!("the worker's fault hook did not fire within 90 s");
    }

    /// `kill -9`.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes stdin (the job shuts down) and waits for the exit.
    fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

async fn gids(pg: &tokio_postgres::Client) -> Vec<String> {
    let rows = pg
        .query("SELECT gid FROM pg_prepared_xacts ORDER BY gid", &[])
        .await
        .unwrap();
    rows.iter().map(|r| r.get::<_, String>(0)).collect()
}

async fn count(pg: &tokio_postgres::Client, sql: &str) -> i64 {
    pg.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_lands_once_across_kill_9_and_crashes_around_the_commit() {
    let redis = TestRedis::private();
    let postgres = TestPostgres::start();
    let pg = postgres.connect().await;
    pg.batch_execute("CREATE TABLE rows (id text NOT NULL, word text NOT NULL, n bigint NOT NULL)")
        .await
        .unwrap();
    let prefix = support::unique_prefix("pg2pc");
    let mq = support::connect(
        redis.url(),
        support::fast_options("pg")
            .key_prefix(&prefix)
            .build()
            .unwrap(),
    )
    .await;
    mq.create_topic(TOPIC, PARTITIONS).await.unwrap();
    const N: usize = 16_000;
    let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let producer = mq.producer();
    let mut sent: BTreeMap<String, i64> = BTreeMap::new();
    for chunk in (0..N).collect::<Vec<_>>().chunks(500) {
        let msgs: Vec<OutgoingMessage> = chunk
            .iter()
            .map(|i| {
                let w = &words[(i * 7 + i / 13) % words.len()];
                *sent.entry(w.clone()).or_default() += 1;
                OutgoingMessage::new(format!("{i}")).key(w)
            })
            .collect();
        producer.send_batch(TOPIC, &msgs).await.unwrap();
    }

    let seed: u64 = std::env::var("PG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("PG_SEED={seed}");
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let (url, pgp) = (redis.url().to_owned(), postgres.params());
    let spawn = |fault: Option<(&str, u32)>| PgWorker::spawn(&url, &prefix, &pgp, fault);
    // The fault hooks, one process at a time (it owns every partition): a crash right
    // after PREPARE TRANSACTION (Redis never records it: the next take aborts it), one
    // between the Redis commit and COMMIT PREPARED (Redis recorded it: the next take
    // commits it), one right after COMMIT PREPARED (nothing left to do).
    const SIGABRT: i32 = 6;
    const POINTS: [&str; 3] = ["prepare", "commit", "committed"];
    for point in POINTS.iter().chain(&POINTS) {
        let w = spawn(Some((point, rng.random_range(2..5))));
        assert_eq!(w.crashed(), Some(SIGABRT), "fault hook `{point}`");
    }
    let mut workers = vec![spawn(None), spawn(None)];
    let (mut kills, mut faults) = (0, 2 * POINTS.len());
    // 30 external kill -9s at random points; every third replacement carries one of the
    // fault hooks too.
    let mut round = 0;
    while kills < 30 {
        round += 1;
        assert!(round < 200, "30 kills in 200 rounds");
        tokio::time::sleep(Duration::from_millis(rng.random_range(150..1200))).await;
        let i = rng.random_range(0..workers.len());
        for w in &mut workers {
            if w.exited() {
                faults += 1;
            }
        }
        workers.retain_mut(|w| !w.exited());
        if i < workers.len() {
            workers.swap_remove(i).kill();
            kills += 1;
        }
        while workers.len() < 2 {
            let fault = (round % 3 == 0).then(|| {
                (
                    POINTS[rng.random_range(0..POINTS.len())],
                    rng.random_range(1..6),
                )
            });
            workers.push(spawn(fault));
        }
    }
    for w in workers {
        w.kill();
        kills += 1;
    }
    let written = count(&pg, "SELECT count(*) FROM rows").await;
    println!("rows after the kills: {written} of {N}");
    // Clean workers finish the input; their takes recover what the crashes left.
    let finishers = vec![spawn(None), spawn(None)];
    support::eventually("every row in the table", Duration::from_secs(180), || {
        let pg = &pg;
        async move { (count(pg, "SELECT count(*) FROM rows").await >= N as i64).then_some(()) }
    })
    .await;
    // Time for a stray duplicate to show before the workers stop.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for w in finishers {
        w.stop();
    }
    println!("kills={kills} faults={faults}");
    assert!(kills >= 30, "{kills} kills");
    assert_eq!(count(&pg, "SELECT count(*) FROM rows").await, N as i64);
    assert_eq!(
        count(&pg, "SELECT count(DISTINCT id) FROM rows").await,
        N as i64
    );
    assert_eq!(
        count(&pg, "SELECT count(*) FROM pg_prepared_xacts").await,
        0
    );
    // Each word's running counts are exactly 1..=sent (state and rows committed together).
    let rows = pg
        .query(
            "SELECT word, count(*), max(n), count(DISTINCT n) FROM rows GROUP BY word",
            &[],
        )
        .await
        .unwrap();
    let mut got = BTreeMap::new();
    for r in rows {
        let (w, c, max, distinct): (String, i64, i64, i64) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        assert_eq!(
            (c, max, distinct),
            (c, c, c),
            "word {w}: counts not 1..={c}"
        );
        got.insert(w, c);
    }
    assert_eq!(got, sent);
}

/// The recovery rules of `PostgresSink` itself (no engine): recovery aborts only earlier
/// owners' transactions of its own namespace, needs no statement, and a commit of a
/// transaction rolled back behind the sink's back fails instead of passing silently.
#[tokio::test(flavor = "current_thread")]
async fn postgres_sink_recovery_aborts_only_earlier_owners_and_reports_lost_commits() {
    let postgres = TestPostgres::start();
    let pg = postgres.connect().await;
    pg.batch_execute("CREATE TABLE r (v bigint NOT NULL)")
        .await
        .unwrap();
    let sink = |statement: &str| {
        PostgresSink::new(&postgres.params(), statement, |v: &i64| -> PostgresParams {
            vec![Box::new(*v)]
        })
        .unwrap()
    };
    let mut rows = sink("INSERT INTO r (v) VALUES ($1)");
    let scope = |ns: &str, token: u64, sequence: u64| {
        let mut s = TxnScope::new(ns, "job", "g", "t", 0, "main");
        (s.fencing_token, s.sequence, s.offset) = (token, sequence, "1-0".into());
        s
    };
    // Owner 2 prepares; a stalled recovery of owner 1 leaves it alone; another
    // namespace's recovery too.
    let h2 = rows
        .pre_commit(&scope("aaaa0001", 2, 1), vec![1, 2])
        .await
        .unwrap();
    assert!(h2.ends_with(":aaaa0001/job/g/t/0/main/2.1"), "{h2}");
    let mut recovery = sink("INSERT INTO missing_table VALUES ($1)");
    recovery
        .recover_and_abort(&scope("aaaa0001", 1, 0))
        .await
        .unwrap();
    recovery
        .recover_and_abort(&scope("bbbb0002", 9, 0))
        .await
        .unwrap();
    assert_eq!(gids(&pg).await, ["aaaa0001/job/g/t/0/main/2.1"]);
    // Owner 3's recovery (with a statement on a missing table: recovery needs none)
    // aborts it.
    recovery
        .recover_and_abort(&scope("aaaa0001", 3, 0))
        .await
        .unwrap();
    assert!(gids(&pg).await.is_empty());
    // Committing it now: it was rolled back, its rows are lost — an error, not Ok.
    let err = rows.commit(&h2).await.unwrap_err().to_string();
    assert!(err.contains("was not committed but is aborted"), "{err}");
    // A commit that already happened is committed again without error.
    let h3 = rows
        .pre_commit(&scope("aaaa0001", 3, 2), vec![3])
        .await
        .unwrap();
    rows.commit(&h3).await.unwrap();
    rows.recover_and_commit(&h3).await.unwrap();
    let n: i64 = pg
        .query_one("SELECT count(*) FROM r", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "only owner 3's row");
    // A name too long for a transaction id fails at the take, naming it.
    let long = TxnScope::new("aaaa0001", &"j".repeat(190), "g", "t", 0, "main");
    let err = recovery
        .recover_and_abort(&long)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("PostgreSQL allows 199"), "{err}");
}

/// A sink's first batch of a take aborts what an earlier owner prepared after that take's
/// recovery (a paused owner that resumed and prepared, then died).
#[tokio::test(flavor = "current_thread")]
async fn a_new_owners_first_batch_sweeps_an_earlier_owners_late_prepare() {
    let postgres = TestPostgres::start();
    let pg = postgres.connect().await;
    pg.batch_execute("CREATE TABLE r (v bigint NOT NULL)")
        .await
        .unwrap();
    let sink = || {
        PostgresSink::new(
            &postgres.params(),
            "INSERT INTO r (v) VALUES ($1)",
            |v: &i64| -> PostgresParams { vec![Box::new(*v)] },
        )
        .unwrap()
    };
    let scope = |token: u64, sequence: u64| {
        let mut s = TxnScope::new("cccc0003", "job", "g", "t", 1, "main");
        (s.fencing_token, s.sequence, s.offset) = (token, sequence, "1-0".into());
        s
    };
    let mut old = sink();
    let late = old.pre_commit(&scope(4, 1), vec![7]).await.unwrap();
    let mut new = sink();
    let h = new.pre_commit(&scope(5, 2), vec![8]).await.unwrap();
    new.commit(&h).await.unwrap();
    let left: i64 = pg
        .query_one("SELECT count(*) FROM pg_prepared_xacts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the late prepare {late} was swept");
    let v: Vec<i64> = pg
        .query("SELECT v FROM r", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(v, [8]);
}

/// A bad setting is an error naming the field, at construction: a connection string that
/// does not parse, an empty statement, a zero timeout.
#[test]
fn a_bad_setting_is_an_error_naming_its_field() {
    let params = |_: &u64| -> PostgresParams { Vec::new() };
    let field = |r: Result<PostgresSink<u64>, streaming::Error>| match r {
        Err(streaming::Error::InvalidConfig { field, .. }) => field,
        other => panic!("{:?}", other.map(|_| ())),
    };
    assert_eq!(
        field(PostgresSink::new("host=", "SELECT 1", params)),
        "connection"
    );
    assert_eq!(
        field(PostgresSink::new("host=127.0.0.1", " ", params)),
        "statement"
    );
    let sink = PostgresSink::new("host=127.0.0.1", "SELECT 1", params).unwrap();
    assert_eq!(field(sink.timeout(Duration::ZERO)), "timeout");
}
