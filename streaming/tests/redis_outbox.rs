//! The outbox dispatcher against a real Redis: in-order delivery per partition, retries
//! with the attempt counted in Redis, dead letters with reason and attempts, and a
//! dispatcher dropped mid-delivery whose successor delivers the rest with the same ids.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::AsyncCommands;
use streaming::mq::Mq;
use streaming::redis::outbox::{OutboxRecord, OutboxTarget, RedisOutboxDispatcher};
use streaming::{BoxError, Error};
use support::redis_server::TestRedis;
use support::{connect, eventually, fast_options, DEADLINE};

const TOPIC: &str = "orders";
const OUTBOX: &str = "mails";

/// One delivery as the target saw it: (partition, record id, attempt, payload).
type Delivery = (u32, String, u32, String);
type Log = Arc<Mutex<Vec<Delivery>>>;

/// Records every delivery; fails the ids in `fail` (as many times as the count says, or
/// always with `u32::MAX`), permanently for the ids in `permanent`.
#[derive(Default)]
struct Recorder {
    log: Log,
    fail: HashMap<String, u32>,
    permanent: Vec<String>,
    /// After this many deliveries: say so on `hung` and never finish the next one.
    hang_after: Option<(usize, tokio::sync::mpsc::UnboundedSender<()>)>,
    /// How long each delivery takes.
    delay: Duration,
}

impl OutboxTarget for Recorder {
    async fn deliver(&mut self, r: &OutboxRecord) -> Result<(), BoxError> {
        let text = r.text()?.to_owned();
        tokio::time::sleep(self.delay).await;
        let seen = {
            let mut log = self.log.lock().unwrap();
            log.push((r.partition, r.id.clone(), r.attempt, text));
            log.len()
        };
        if let Some((n, hung)) = &self.hang_after {
            if seen > *n {
                let _ = hung.send(());
                std::future::pending::<()>().await;
            }
        }
        if self.permanent.contains(&r.id) {
            return Err(Error::permanent(format!("{} is malformed", r.id)).into());
        }
        match self.fail.get_mut(&r.id) {
            Some(left) if *left > 0 => {
                *left = left.saturating_sub(u32::from(*left != u32::MAX));
                Err(format!("target down for {}", r.id).into())
            }
            _ => Ok(()),
        }
    }
}

struct Setup {
    _redis: TestRedis,
    mq: Mq,
    conn: redis::aio::MultiplexedConnection,
}

async fn setup(test: &str) -> Setup {
    let redis = TestRedis::shared();
    let mq = connect(redis.url(), fast_options(test).build().unwrap()).await;
    let conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    Setup {
        _redis: redis,
        mq,
        conn,
    }
}

fn dispatcher(mq: &Mq, partitions: u32) -> streaming::redis::outbox::RedisOutboxDispatcherBuilder {
    RedisOutboxDispatcher::builder(mq, OUTBOX, TOPIC)
        .partitions(0..partitions)
        .backoff(Duration::from_millis(10), Duration::from_millis(40))
        .poll_interval(Duration::from_millis(20))
        .batch_size(4)
}

/// The stable id the outbox sink gives record `index` of source entry `n`-0.
fn stable_id(partition: u32, n: usize) -> String {
    format!("job/{TOPIC}/{partition}/{n}-0/0")
}

/// Appends records `range` to partition `p`'s outbox as the sink does (fields id, payload,
/// ts); returns their entry ids.
async fn append(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    p: u32,
    range: std::ops::Range<usize>,
) -> Vec<String> {
    let mut ids = Vec::new();
    for n in range {
        let fields = [
            ("id", stable_id(p, n)),
            ("payload", format!("p{p}-r{n}")),
            ("ts", (1_000 + n).to_string()),
        ];
        ids.push(conn.xadd(key, "*", &fields).await.unwrap());
    }
    ids
}

async fn xlen(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> usize {
    conn.xlen(key).await.unwrap()
}

fn by_partition(log: &Log) -> BTreeMap<u32, Vec<String>> {
    let mut out: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (p, id, _, _) in log.lock().unwrap().iter() {
        out.entry(*p).or_default().push(id.clone());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivers_each_partition_in_order_then_acks_and_trims() {
    let mut s = setup("outbox-order").await;
    let d = dispatcher(&s.mq, 3).build().unwrap();
    let prefix = &s.mq.options().key_prefix;
    assert_eq!(
        d.outbox_key(2),
        format!("{prefix}:outbox:{OUTBOX}:{{{TOPIC}:2}}")
    );
    assert_eq!(d.dlq_key(2), format!("{}:dlq", d.outbox_key(2)));
    // Half before the start (the group starts at 0), half while it runs.
    for p in 0..3 {
        append(&mut s.conn, &d.outbox_key(p), p, 0..10).await;
    }
    let log = Log::default();
    let keys: Vec<String> = (0..3).map(|p| d.outbox_key(p)).collect();
    let running = d
        .start(Recorder {
            log: log.clone(),
            ..Recorder::default()
        })
        .await
        .unwrap();
    for (p, key) in (0u32..).zip(&keys) {
        append(&mut s.conn, key, p, 10..20).await;
    }
    eventually("60 deliveries", DEADLINE, || {
        let n = running.stats().delivered;
        async move { (n == 60).then_some(()) }
    })
    .await;
    let got = by_partition(&log);
    for p in 0..3 {
        let want: Vec<String> = (0..20).map(|n| stable_id(p, n)).collect();
        assert_eq!(got[&p], want, "partition {p} in order, each once");
    }
    let payloads: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|d| d.0 == 1)
        .map(|d| d.3.clone())
        .take(2)
        .collect();
    assert_eq!(payloads, ["p1-r0", "p1-r1"]);
    assert!(
        log.lock().unwrap().iter().all(|d| d.2 == 1),
        "first attempts only"
    );
    for key in &keys {
        assert_eq!(xlen(&mut s.conn, key).await, 0, "{key} trimmed");
        let pending: redis::streams::StreamPendingReply =
            s.conn.xpending(key, "dispatcher").await.unwrap();
        assert_eq!(pending.count(), 0);
    }
    assert_eq!(running.stats().failed, 0);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_failing_twice_blocks_its_partition_then_is_delivered_once_more_each_time() {
    let mut s = setup("outbox-retry").await;
    let d = dispatcher(&s.mq, 1).build().unwrap();
    let key = d.outbox_key(0);
    append(&mut s.conn, &key, 0, 0..3).await;
    let log = Log::default();
    let target = Recorder {
        log: log.clone(),
        fail: HashMap::from([(stable_id(0, 1), 2)]),
        ..Recorder::default()
    };
    let running = d.start(target).await.unwrap();
    eventually("3 records delivered", DEADLINE, || {
        let n = running.stats().delivered;
        async move { (n == 3).then_some(()) }
    })
    .await;
    let seen: Vec<(String, u32)> = log
        .lock()
        .unwrap()
        .iter()
        .map(|d| (d.1.clone(), d.2))
        .collect();
    assert_eq!(
        seen,
        vec![
            (stable_id(0, 0), 1),
            (stable_id(0, 1), 1),
            (stable_id(0, 1), 2),
            (stable_id(0, 1), 3),
            (stable_id(0, 2), 1),
        ],
        "record 2 waits for record 1; each retry is one more delivery"
    );
    let stats = running.stats();
    assert_eq!((stats.failed, stats.dead_lettered), (2, 0));
    assert_eq!(xlen(&mut s.conn, &key).await, 0);
    assert_eq!(xlen(&mut s.conn, &d.dlq_key(0)).await, 0);
    let counts: usize = s.conn.hlen(format!("{key}:attempts")).await.unwrap();
    assert_eq!(counts, 0, "the attempt count goes with the record");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_always_failing_is_dead_lettered_after_max_attempts_with_reason() {
    let mut s = setup("outbox-dlq").await;
    let d = dispatcher(&s.mq, 1).max_attempts(3).build().unwrap();
    let key = d.outbox_key(0);
    let entry_ids = append(&mut s.conn, &key, 0, 0..3).await;
    let log = Log::default();
    let target = Recorder {
        log: log.clone(),
        fail: HashMap::from([(stable_id(0, 0), u32::MAX)]),
        permanent: vec![stable_id(0, 1)],
        ..Recorder::default()
    };
    let running = d.start(target).await.unwrap();
    eventually("2 dead letters and 1 delivery", DEADLINE, || {
        let st = running.stats();
        async move { (st.dead_lettered == 2 && st.delivered == 1).then_some(()) }
    })
    .await;
    let seen: Vec<(String, u32)> = log
        .lock()
        .unwrap()
        .iter()
        .map(|d| (d.1.clone(), d.2))
        .collect();
    assert_eq!(
        seen,
        vec![
            (stable_id(0, 0), 1),
            (stable_id(0, 0), 2),
            (stable_id(0, 0), 3),
            (stable_id(0, 1), 1),
            (stable_id(0, 2), 1),
        ]
    );
    let dlq: redis::streams::StreamRangeReply = s.conn.xrange_all(d.dlq_key(0)).await.unwrap();
    let fields: Vec<HashMap<String, String>> = dlq
        .ids
        .iter()
        .map(|e| {
            e.map
                .iter()
                .map(|(k, v)| (k.clone(), redis::from_redis_value::<String>(v).unwrap()))
                .collect()
        })
        .collect();
    assert_eq!(fields.len(), 2);
    assert_eq!(fields[0]["id"], stable_id(0, 0));
    assert_eq!(fields[0]["payload"], "p0-r0");
    assert_eq!(fields[0]["ts"], "1000");
    assert_eq!(
        fields[0]["reason"],
        format!("target down for {}", stable_id(0, 0))
    );
    assert_eq!(fields[0]["attempts"], "3");
    assert_eq!(fields[0]["outbox_entry_id"], entry_ids[0]);
    assert_eq!(fields[1]["id"], stable_id(0, 1));
    assert_eq!(
        fields[1]["reason"],
        format!("{} is malformed", stable_id(0, 1))
    );
    assert_eq!(
        fields[1]["attempts"], "1",
        "a permanent error is dead-lettered at once"
    );
    assert_eq!(xlen(&mut s.conn, &key).await, 0);
    let pending: redis::streams::StreamPendingReply =
        s.conn.xpending(&key, "dispatcher").await.unwrap();
    assert_eq!(
        pending.count(),
        0,
        "dead letters are acknowledged with the move"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_dropped_mid_delivery_is_succeeded_by_one_that_delivers_the_rest() {
    // The same consumer name: the successor reads the pending entries at once.
    crash_and_resume("outbox-crash", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_of_another_name_claims_the_pending_records_after_claim_idle() {
    crash_and_resume("outbox-claim", Some("successor")).await;
}

/// Drops a dispatcher while its target hangs in the 12th delivery (of 30 over two
/// partitions), starts another (as consumer `successor` when given, claiming after
/// 300 ms), and checks that every record is delivered at least once with its stable id,
/// the successor in order from each partition's first unacknowledged record.
async fn crash_and_resume(test: &str, successor: Option<&str>) {
    let mut s = setup(test).await;
    let d = dispatcher(&s.mq, 2).build().unwrap();
    let d2 = match successor {
        Some(name) => dispatcher(&s.mq, 2)
            .consumer(name)
            .claim_idle(Duration::from_millis(300))
            .build()
            .unwrap(),
        None => d.clone(),
    };
    let mut entry_count = 0;
    for p in 0..2 {
        entry_count += append(&mut s.conn, &d.outbox_key(p), p, 0..15).await.len();
    }
    let first = Log::default();
    let (hung_tx, mut hung) = tokio::sync::mpsc::unbounded_channel();
    let target = Recorder {
        log: first.clone(),
        hang_after: Some((11, hung_tx)),
        ..Recorder::default()
    };
    let running = d.start(target).await.unwrap();
    tokio::time::timeout(DEADLINE, hung.recv())
        .await
        .expect("12th delivery began");
    // The 12th record reached the target but was never acknowledged: a crash.
    drop(running);
    let first_seen = first.lock().unwrap().clone();
    assert_eq!(first_seen.len(), 12);
    let hung_id = first_seen[11].1.clone();

    let second = Log::default();
    let running = d2
        .start(Recorder {
            log: second.clone(),
            ..Recorder::default()
        })
        .await
        .unwrap();
    let mut probe = s.conn.clone();
    let keys: Vec<String> = (0..2).map(|p| d.outbox_key(p)).collect();
    eventually("both outboxes drained", DEADLINE, || {
        let (mut c, keys) = (probe.clone(), keys.clone());
        async move {
            let mut left = 0;
            for k in &keys {
                left += xlen(&mut c, k).await;
            }
            (left == 0).then_some(())
        }
    })
    .await;
    let second_seen = second.lock().unwrap().clone();
    assert!(
        second_seen.iter().any(|d| d.1 == hung_id),
        "the record in delivery at the crash is delivered again, same id {hung_id}"
    );
    // Every record at least once over both runs; the successor's deliveries are in order
    // per partition and start at the first unacknowledged record.
    let mut all: Vec<String> = first_seen
        .iter()
        .chain(&second_seen)
        .map(|d| d.1.clone())
        .collect();
    all.sort();
    all.dedup();
    let mut want: Vec<String> = (0..2)
        .flat_map(|p| (0..15).map(move |n| stable_id(p, n)))
        .collect();
    want.sort();
    assert_eq!(all, want);
    assert_eq!(all.len(), entry_count);
    for (p, ids) in by_partition(&second) {
        let ns: Vec<usize> = ids
            .iter()
            .map(|id| {
                id.split('/')
                    .nth(3)
                    .unwrap()
                    .trim_end_matches("-0")
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(
            ns.windows(2).all(|w| w[0] + 1 == w[1]),
            "partition {p} in order: {ns:?}"
        );
        assert_eq!(*ns.last().unwrap(), 14);
        // Every delivery of the first run but the hung one was acknowledged.
        let acked_before = first_seen
            .iter()
            .filter(|d| d.0 == p && d.1 != hung_id)
            .count();
        assert_eq!(
            ns[0], acked_before,
            "partition {p} restarts at its first unacked record"
        );
    }
    let pending: redis::streams::StreamPendingReply =
        probe.xpending(&keys[0], "dispatcher").await.unwrap();
    assert_eq!(pending.count(), 0);
    running.stop().await;
}

#[tokio::test]
async fn bad_options_are_refused_by_name() {
    let s = setup("outbox-options").await;
    let field = |b: streaming::redis::outbox::RedisOutboxDispatcherBuilder| match b.build() {
        Err(Error::InvalidConfig { field, .. }) => field,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    assert_eq!(field(dispatcher(&s.mq, 1).max_attempts(0)), "max_attempts");
    assert_eq!(field(dispatcher(&s.mq, 1).partitions([])), "partitions");
    assert_eq!(field(dispatcher(&s.mq, 1).batch_size(0)), "batch_size");
    assert_eq!(
        field(dispatcher(&s.mq, 1).backoff(Duration::from_secs(2), Duration::from_secs(1))),
        "backoff"
    );
    assert_eq!(
        field(RedisOutboxDispatcher::builder(&s.mq, "bad name", TOPIC)),
        "name"
    );
}

/// Appends one entry holding `n` records as a batch commit writes it (fields `n`, `id`
/// prefix, `ts`, `p{j}`); returns the entry id.
async fn append_batch(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    p: u32,
    n: usize,
) -> String {
    let mut fields = vec![
        ("n".to_owned(), n.to_string()),
        ("id".to_owned(), format!("job/{TOPIC}/{p}/7-0/")),
        ("ts".to_owned(), "1000".to_owned()),
    ];
    for j in 0..n {
        fields.push((format!("p{j}"), format!("b{j}")));
    }
    conn.xadd(key, "*", &fields).await.unwrap()
}

/// One entry per batch commit: its records are delivered one by one, in order; a record
/// dead-lettered in the middle goes to the dead-letter stream alone; a dispatcher dropped
/// in the middle of an entry is followed by one that goes on at the next record (the
/// progress is kept in Redis), not at the entry's first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_of_a_batch_delivers_its_records_in_order_and_resumes_mid_entry() {
    let mut s = setup("outbox-batch").await;
    let d = dispatcher(&s.mq, 1).build().unwrap();
    let key = d.outbox_key(0);
    let entry = append_batch(&mut s.conn, &key, 0, 4).await;
    let id = |j: usize| format!("job/{TOPIC}/0/7-0/{j}");
    // Record 1 is malformed; the dispatcher hangs in record 3's delivery (dropped there).
    let (hung, mut hung_rx) = tokio::sync::mpsc::unbounded_channel();
    let first = Recorder {
        permanent: vec![id(1)],
        hang_after: Some((3, hung)),
        ..Recorder::default()
    };
    let log = Arc::clone(&first.log);
    let running = d.start(first).await.unwrap();
    tokio::time::timeout(DEADLINE, hung_rx.recv())
        .await
        .unwrap();
    drop(running);
    let seen: Vec<String> = log.lock().unwrap().iter().map(|d| d.1.clone()).collect();
    assert_eq!(seen, [id(0), id(1), id(2), id(3)]);
    let dlq: redis::streams::StreamRangeReply = s.conn.xrange_all(d.dlq_key(0)).await.unwrap();
    assert_eq!(dlq.ids.len(), 1, "only the malformed record");
    let field = |f: &str| dlq.ids[0].get::<String>(f).unwrap();
    assert_eq!(
        (field("id"), field("payload"), field("outbox_entry_id")),
        (id(1), "b1".to_owned(), entry.clone())
    );
    // Its successor (same consumer name) delivers record 3 only, then settles the entry.
    let second = Recorder::default();
    let log = Arc::clone(&second.log);
    let running = d.start(second).await.unwrap();
    eventually("the entry settled", DEADLINE, || {
        let mut c = s.conn.clone();
        let key = key.clone();
        async move { (xlen(&mut c, &key).await == 0).then_some(()) }
    })
    .await;
    running.stop().await;
    let seen: Vec<(String, u32)> = (log.lock().unwrap().iter())
        .map(|d| (d.1.clone(), d.2))
        .collect();
    assert_eq!(seen, [(id(3), 1)], "resumed at record 3, its first attempt");
    let attempts: HashMap<String, String> =
        s.conn.hgetall(format!("{key}:attempts")).await.unwrap();
    assert!(attempts.is_empty(), "{attempts:?}");
}

/// An entry whose records take longer together than `claim_idle` stays with the
/// dispatcher delivering it: each record delivered resets its idle time, so a second
/// dispatcher of the group does not claim it half-way and deliver its records again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_entry_is_not_claimed_from_the_live_dispatcher_delivering_it() {
    let mut s = setup("outbox-long-entry").await;
    let build = |consumer: &str| {
        dispatcher(&s.mq, 1)
            .consumer(consumer)
            .claim_idle(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let (a, b) = (build("a"), build("b"));
    append_batch(&mut s.conn, &a.outbox_key(0), 0, 8).await;
    let slow = |log: &Log| Recorder {
        log: Arc::clone(log),
        delay: Duration::from_millis(150),
        ..Recorder::default()
    };
    let log: Log = Arc::default();
    let first = a.start(slow(&log)).await.unwrap();
    eventually("a started on the entry", DEADLINE, || {
        let log = Arc::clone(&log);
        async move { (!log.lock().unwrap().is_empty()).then_some(()) }
    })
    .await;
    let second = b.start(slow(&log)).await.unwrap();
    let key = a.outbox_key(0);
    eventually("the entry settled", DEADLINE, || {
        let mut c = s.conn.clone();
        let key = key.clone();
        async move { (xlen(&mut c, &key).await == 0).then_some(()) }
    })
    .await;
    first.stop().await;
    second.stop().await;
    let ids: Vec<String> = log.lock().unwrap().iter().map(|d| d.1.clone()).collect();
    let want: Vec<String> = (0..8).map(|j| format!("job/{TOPIC}/0/7-0/{j}")).collect();
    assert_eq!(
        ids, want,
        "each record once, in order (1.2 s of deliveries, claim_idle 0.5 s)"
    );
}

/// Two dispatchers of a group, `a` started first: what `b` delivered must stay empty while
/// `a` is alive and delivering — a record `a` retries with backoff, and entries queued
/// behind a slow one, keep their idle time reset (`claim_idle` 500 ms, backoff up to
/// 300 ms, deliveries of 300 ms).
async fn only_the_first_dispatcher_delivers(s: &mut Setup, first: Recorder, entries: usize) -> Log {
    let build = |consumer: &str| {
        dispatcher(&s.mq, 1)
            .consumer(consumer)
            .backoff(Duration::from_millis(100), Duration::from_millis(300))
            .claim_idle(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let (a, b) = (build("a"), build("b"));
    let key = a.outbox_key(0);
    append(&mut s.conn, &key, 0, 0..entries).await;
    let log = Arc::clone(&first.log);
    let running_a = a.start(first).await.unwrap();
    eventually("a started", DEADLINE, || {
        let log = Arc::clone(&log);
        async move { (!log.lock().unwrap().is_empty()).then_some(()) }
    })
    .await;
    let b_log: Log = Arc::default();
    let running_b = b
        .start(Recorder {
            log: Arc::clone(&b_log),
            ..Recorder::default()
        })
        .await
        .unwrap();
    eventually("the outbox settled", DEADLINE, || {
        let mut c = s.conn.clone();
        let key = key.clone();
        async move { (xlen(&mut c, &key).await == 0).then_some(()) }
    })
    .await;
    running_a.stop().await;
    running_b.stop().await;
    assert!(
        b_log.lock().unwrap().is_empty(),
        "b delivered {:?}",
        b_log.lock().unwrap()
    );
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_retried_with_backoff_stays_with_its_dispatcher() {
    let mut s = setup("outbox-retry-kept").await;
    let first = Recorder {
        fail: HashMap::from([(stable_id(0, 0), 5)]),
        ..Recorder::default()
    };
    let log = only_the_first_dispatcher_delivers(&mut s, first, 1).await;
    let attempts: Vec<u32> = log.lock().unwrap().iter().map(|d| d.2).collect();
    assert_eq!(
        attempts,
        [1, 2, 3, 4, 5, 6],
        "five failures, then delivered, all by a"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_queued_behind_a_slow_one_stay_with_their_dispatcher() {
    let mut s = setup("outbox-queue-kept").await;
    let first = Recorder {
        delay: Duration::from_millis(300),
        ..Recorder::default()
    };
    let log = only_the_first_dispatcher_delivers(&mut s, first, 4).await;
    let ids: Vec<String> = log.lock().unwrap().iter().map(|d| d.1.clone()).collect();
    let want: Vec<String> = (0..4).map(|n| stable_id(0, n)).collect();
    assert_eq!(ids, want, "in order, all by a");
}
