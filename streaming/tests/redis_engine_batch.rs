//! What one batch of the Redis engine commits and delivers: side outputs with the batch,
//! idle flushes of every partition with event-time work (also one never leaving
//! `i64::MIN`, and after a restart), bad input straight to the dead-letter queue, the
//! acknowledged-id set, skipped entries.

mod support;

use std::time::Duration;

use redis::AsyncCommands;
use streaming::mq::{Message, Mq, OutgoingMessage};
use streaming::redis::{
    AckMode, CollectSink, JobClient, ProcessingErrorResult, RedisEnv, RedisListSink,
    RedisRuntimeConfig,
};
use streaming::time::{BoundedOutOfOrderness, TimeWindow, TumblingEventTimeWindows};
use streaming::BoxError;
use streaming::MemoryEnv;
use support::engine::{earliest, rt, wait_until};
use support::proxy::{Fault, FaultyProxy};
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

struct Setup {
    redis: TestRedis,
    prefix: String,
    mq_opts: streaming::mq::MqOptions,
    rt: tokio::runtime::Runtime,
}

fn setup(test: &str) -> Setup {
    Setup {
        redis: TestRedis::private(),
        prefix: unique_prefix(test),
        mq_opts: fast_options(test).build().unwrap(),
        rt: rt(),
    }
}

impl Setup {
    fn mq(&self) -> Mq {
        self.rt
            .block_on(Mq::connect(self.redis.url(), self.mq_opts.clone()))
            .unwrap()
    }

    fn config(&self, job: &str, mode: AckMode) -> streaming::redis::RedisRuntimeConfigBuilder {
        RedisRuntimeConfig::builder()
            .job_name(job)
            .job_instance_id("test")
            .state_key_prefix(&self.prefix)
            .mq_options(self.mq_opts.clone())
            .ack_mode(mode)
    }

    fn env(&self, config: streaming::redis::RedisRuntimeConfigBuilder) -> RedisEnv {
        RedisEnv::try_with_config(self.redis.url(), config.build().unwrap()).unwrap()
    }

    fn conn(&self) -> redis::aio::MultiplexedConnection {
        self.rt
            .block_on(
                redis::Client::open(self.redis.url())
                    .unwrap()
                    .get_multiplexed_async_connection(),
            )
            .unwrap()
    }

    /// Sends `payloads` (text) to `topic` in one batch, keyed by the payload.
    fn send(&self, topic: &str, payloads: &[&str]) {
        let mq = self.mq();
        let producer = mq.producer();
        let msgs: Vec<OutgoingMessage> = payloads
            .iter()
            .map(|p| OutgoingMessage::new(p.to_string()).key(p.to_string()))
            .collect();
        self.rt.block_on(producer.send_batch(topic, &msgs)).unwrap();
    }
}

fn records(job: &JobClient) -> u64 {
    job.diagnostics().partitions.iter().map(|p| p.records).sum()
}

fn failed(job: &JobClient) -> u64 {
    job.diagnostics().partitions.iter().map(|p| p.failed).sum()
}

/// `key,ts` → `(key, ts)`; anything else fails the record.
fn parse(m: &Message) -> Result<(String, i64), BoxError> {
    let text = m.text()?;
    let (k, ts) = text.split_once(',').ok_or("not `key,ts`")?;
    Ok((k.to_string(), ts.parse()?))
}

/// One batch: two windows of key `a`, one element late for the first, two records that
/// fail. Each failure rolls the batch back and runs it again.
const LATE_BATCH: [&str; 6] = ["a,10", "poison-1", "a,250", "a,20", "poison-2", "a,260"];

macro_rules! late_pipeline {
    ($env:expr, $topic:expr, $late:expr, $out:expr) => {
        $env.from_mq_topic_with_options($topic, "g", earliest(16))
            .try_map(|m: Message| parse(&m))
            .assign_timestamps_and_watermarks_with(
                |e: &(String, i64), _ts: i64| e.1,
                BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
            )
            .key_by(|e: &(String, i64)| e.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
            .side_output_late_data($late)
            .count()
            .sink($out)
            .unwrap()
    };
}

/// Runs [`LATE_BATCH`] through `late_pipeline!` with `late` as the side output; returns
/// the job once both poison records are dead-lettered and the rest committed.
fn run_late_batch(
    s: &Setup,
    topic: &str,
    late: impl streaming::api::Sink<(String, i64)> + Clone + Send + 'static,
) -> JobClient {
    let mq = s.mq();
    s.rt.block_on(mq.create_topic(topic, 1)).unwrap();
    s.send(topic, &LATE_BATCH);
    let env = s.env(
        s.config(&format!("late-{topic}"), AckMode::Offset)
            .processing_error_result(ProcessingErrorResult::DeadLetter),
    );
    late_pipeline!(
        env,
        topic,
        late,
        CollectSink::<(String, streaming::time::TimeWindow, u64)>::new()
    );
    let job = env.blocking_start().unwrap();
    wait_until("the batch", &job, || {
        records(&job) == 4 && failed(&job) == 2
    });
    let dead = s.rt.block_on(mq.dead_letters(topic, 10)).unwrap();
    assert_eq!(dead.len(), 2);
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    job
}

#[test]
fn a_late_element_reaches_each_side_output_once_despite_rolled_back_runs() {
    let s = setup("batch-late");
    // A collecting side output: delivered with the committed batch, not per run.
    let collected = CollectSink::new();
    let job = run_late_batch(&s, "late-collect", collected.clone());
    assert_eq!(collected.snapshot(), vec![("a".to_string(), 20)]);
    assert_eq!(job.diagnostics().partitions[0].window_late_dropped, 1);
    // A Redis list side output: written by the batch's commit script.
    let job = run_late_batch(&s, "late-list", RedisListSink::new("late").unwrap());
    assert_eq!(job.diagnostics().partitions[0].window_late_dropped, 1);
    let key = RedisListSink::<()>::key_for("late", "late-list", 0);
    let mut conn = s.conn();
    let list: Vec<String> = s.rt.block_on(conn.lrange(&key, 0, -1)).unwrap();
    assert_eq!(list, vec![r#"["a",20]"#.to_string()]);
}

type Counted = (String, TimeWindow, u64);

fn sorted(mut v: Vec<Counted>) -> Vec<Counted> {
    v.sort_by_key(|(k, w, n)| (k.clone(), w.start(), *n));
    v
}

/// Counts per key in 100 ms tumbling windows with out-of-orderness `ooo`.
macro_rules! windowed_count {
    ($stream:expr, $ooo:expr) => {
        $stream
            .assign_timestamps_and_watermarks_with(
                |e: &(String, i64), _ts: i64| e.1,
                BoundedOutOfOrderness::new($ooo).unwrap(),
            )
            .key_by(|e: &(String, i64)| e.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
            .count()
    };
}

fn memory_counts(input: &[&str], ooo: Duration) -> Vec<Counted> {
    let events: Vec<(String, i64)> = input
        .iter()
        .map(|p| {
            let (k, ts) = p.split_once(',').unwrap();
            (k.to_string(), ts.parse().unwrap())
        })
        .collect();
    sorted(
        windowed_count!(MemoryEnv::new().from_collection(events), ooo)
            .collect_vec()
            .unwrap(),
    )
}

/// Negative event times and an out-of-orderness that saturates: the watermark never
/// leaves `i64::MIN`. The idle flush still fires every window (as the memory engine does
/// at end of input), and `await_flushed` waits for it.
#[test]
fn a_watermark_stuck_at_min_is_still_flushed_and_awaited() {
    let s = setup("batch-min-wm");
    let mq = s.mq();
    let ooo = Duration::from_millis(i64::MAX as u64);
    let input = ["a,-1500", "a,-1420", "b,-300", "a,-20"];
    let expected = memory_counts(&input, ooo);
    assert_eq!(expected.len(), 3);
    for mode in [AckMode::Offset, AckMode::Xack] {
        let topic = format!("neg-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        s.send(&topic, &input);
        let env = s.env(
            s.config(&format!("neg-{mode:?}"), mode)
                .watermark_idle_timeout(Some(Duration::from_millis(200))),
        );
        let out = CollectSink::new();
        windowed_count!(
            env.from_mq_topic_with_options(&topic, "g", earliest(16))
                .try_map(|m: Message| parse(&m)),
            ooo
        )
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
        assert_eq!(records(&job), 4);
        assert_eq!(sorted(out.snapshot()), expected, "{mode:?}");
        job.blocking_shutdown(Duration::MAX);
    }
}

/// A job stops while windows are open; a new run with no new input fires them at its idle
/// flush, and `await_flushed` returns only after that flush committed.
#[test]
fn await_flushed_after_a_restart_waits_for_the_restored_windows() {
    let s = setup("batch-restart-flush");
    let mq = s.mq();
    let ooo = Duration::from_millis(25);
    let input = ["a,10", "b,20", "a,150", "b,260"];
    let expected = memory_counts(&input, ooo);
    assert_eq!(expected.len(), 4);
    for mode in [AckMode::Xack, AckMode::Offset] {
        let topic = format!("restart-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        s.send(&topic, &input);
        let run = |idle: Duration, out: &CollectSink<Counted>| {
            let env = s.env(
                s.config(&format!("restart-{mode:?}"), mode)
                    .watermark_idle_timeout(Some(idle)),
            );
            windowed_count!(
                env.from_mq_topic_with_options(&topic, "g", earliest(16))
                    .try_map(|m: Message| parse(&m)),
                ooo
            )
            .sink(out.clone())
            .unwrap();
            env.blocking_start().unwrap()
        };
        // First run: no idle flush, so the last windows stay open.
        let first = CollectSink::new();
        let job = run(Duration::from_secs(3600), &first);
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        assert_eq!(records(&job), 4);
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
        assert_eq!(first.len(), 3, "{:?}", first.snapshot());
        // Second run, no new input.
        let second = CollectSink::new();
        let job = run(Duration::from_millis(300), &second);
        assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
        let mut all = first.snapshot();
        all.extend(second.snapshot());
        assert_eq!(sorted(all), expected, "{mode:?}");
        assert_eq!(job.diagnostics().partitions[0].idle_flushes, 1);
        job.blocking_shutdown(Duration::MAX);
    }
}

/// Retries far apart: a retried record would not reach the dead-letter queue during the
/// test, so a dead letter there was sent at once.
fn slow_retries(s: &Setup, test: &str) -> streaming::mq::MqOptions {
    fast_options(test)
        .key_prefix(s.mq_opts.key_prefix.clone())
        .retry(
            streaming::mq::RetryPolicy::builder()
                .max_retries(3)
                .initial_backoff(Duration::from_secs(3600))
                .multiplier(1.0)
                .max_backoff(Duration::from_secs(3600))
                .jitter(0.0)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

/// A payload that does not decode (bad JSON; not UTF-8 where text is needed) is a
/// permanent error: dead-lettered at once under the retry policy, in both ack modes.
#[test]
fn undecodable_payloads_are_dead_lettered_without_retry() {
    let s = setup("batch-decode");
    let mq = s.mq();
    for mode in [AckMode::Xack, AckMode::Offset] {
        let topic = format!("decode-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        let msgs = vec![
            OutgoingMessage::new(r#"["a",10]"#).key("json"),
            OutgoingMessage::new("{not json").key("json"),
            OutgoingMessage::new(vec![0xffu8, 0xfe, 0x2c, 0x31]).key("text"),
            OutgoingMessage::new("b,20").key("text"),
        ];
        let producer = mq.producer();
        s.rt.block_on(producer.send_batch(&topic, &msgs)).unwrap();
        let env = s.env(
            s.config(&format!("decode-{mode:?}"), mode)
                .mq_options(slow_retries(&s, "batch-decode")),
        );
        let out = CollectSink::new();
        env.from_mq_topic_with_options(&topic, "g", earliest(16))
            .try_map(|m: Message| -> Result<(String, i64), BoxError> {
                if m.key.as_deref() == Some("json") {
                    Ok(m.json()?)
                } else {
                    parse(&m)
                }
            })
            .sink(out.clone())
            .unwrap();
        let job = env.blocking_start().unwrap();
        let dead = || s.rt.block_on(mq.dead_letters(&topic, 10)).unwrap();
        wait_until("two dead letters", &job, || dead().len() == 2);
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        job.blocking_shutdown(Duration::MAX);
        let mut letters = dead();
        letters.sort_by(|a, b| a.id.cmp(&b.id));
        for d in &letters {
            assert_eq!(
                (d.attempts, d.error_type.as_str()),
                (1, "decode"),
                "{mode:?}"
            );
        }
        assert_eq!(letters[0].payload.as_ref(), b"{not json");
        assert_eq!(letters[1].payload.as_ref(), [0xffu8, 0xfe, 0x2c, 0x31]);
        let mut got = out.snapshot();
        got.sort();
        assert_eq!(got, vec![("a".to_string(), 10), ("b".to_string(), 20)]);
    }
}

/// `Error::permanent` from a user function dead-letters the record at once; another error
/// keeps the retry policy.
#[test]
fn a_permanent_user_error_is_dead_lettered_at_once() {
    let s = setup("batch-permanent");
    let mq = s.mq();
    for mode in [AckMode::Xack, AckMode::Offset] {
        let topic = format!("perm-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        s.send(&topic, &["ok", "unknown-customer", "flaky"]);
        let env = s.env(
            s.config(&format!("perm-{mode:?}"), mode)
                .mq_options(slow_retries(&s, "batch-permanent")),
        );
        let out = CollectSink::new();
        env.from_mq_topic_with_options(&topic, "g", earliest(16))
            .try_map(|m: Message| -> Result<String, BoxError> {
                match m.text()? {
                    "unknown-customer" => {
                        Err(streaming::Error::permanent("no such customer").into())
                    }
                    "flaky" => Err("try again".into()),
                    t => Ok(t.to_string()),
                }
            })
            .sink(out.clone())
            .unwrap();
        let job = env.blocking_start().unwrap();
        let dead = || s.rt.block_on(mq.dead_letters(&topic, 10)).unwrap();
        wait_until("the permanent failure", &job, || {
            dead().len() == 1 && failed(&job) == 2
        });
        job.blocking_shutdown(Duration::MAX);
        let d = &dead()[0];
        assert_eq!(d.payload.as_ref(), b"unknown-customer");
        assert_eq!((d.attempts, d.error_type.as_str()), (1, "user_function"));
        assert!(d.error.contains("no such customer"), "{}", d.error);
        // The other failure waits for its retry (an hour away), not in the dead letters.
        assert_eq!(out.snapshot(), vec!["ok".to_string()]);
    }
}

/// Raw entries with 10,000 and 100,000 fields are dead-lettered (as malformed) and the
/// commit frontier passes them, in both ack modes.
#[test]
fn entries_with_huge_field_counts_are_dead_lettered() {
    let s = setup("batch-huge");
    let mq = s.mq();
    let mut conn = s.conn();
    for mode in [AckMode::Xack, AckMode::Offset] {
        let topic = format!("huge-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        let stream = mq.keys().stream(&topic, 0);
        for fields in [10_000, 100_000] {
            let mut cmd = redis::cmd("XADD");
            cmd.arg(&stream).arg("*");
            for i in 0..fields {
                cmd.arg(format!("f{i}")).arg(i);
            }
            let _: String = s.rt.block_on(cmd.query_async(&mut conn)).unwrap();
        }
        s.send(&topic, &["a,1"]);
        let last: Vec<(String, Vec<(String, String)>)> =
            s.rt.block_on(conn.xrevrange_count(&stream, "+", "-", 1))
                .map(|r: redis::streams::StreamRangeReply| {
                    r.ids.into_iter().map(|e| (e.id, Vec::new())).collect()
                })
                .unwrap();
        let last_id = last[0].0.clone();
        let env = s.env(s.config(&format!("huge-{mode:?}"), mode));
        let out = CollectSink::new();
        env.from_mq_topic_with_options(&topic, "g", earliest(16))
            .try_map(|m: Message| parse(&m))
            .sink(out.clone())
            .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("the valid record", &job, || out.len() == 1);
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        job.blocking_shutdown(Duration::MAX);
        let frontier = s.rt.block_on(mq.commit_frontier(&topic, "g", 0)).unwrap();
        assert_eq!(frontier.as_deref(), Some(last_id.as_str()), "{mode:?}");
        let letters = s.rt.block_on(mq.dead_letters(&topic, 10)).unwrap();
        assert_eq!(letters.len(), 2, "{mode:?}: {:?}", job.diagnostics().errors);
        assert!(letters.iter().all(|d| d.error_type == "malformed"));
        // Replaying such an entry is refused with a reason, and the dead letter stays.
        for d in &letters {
            let err =
                s.rt.block_on(mq.replay_dead_letter(&topic, 0, &d.dlq_id))
                    .unwrap_err();
            assert!(
                err.to_string().contains("fields; replay moves at most"),
                "{err}"
            );
        }
        assert_eq!(s.rt.block_on(mq.dead_letters(&topic, 10)).unwrap().len(), 2);
    }
}

/// In XACK mode the acknowledged-id set holds only ids above the commit frontier: none
/// are left behind by retries and dead letters once the job caught up.
#[test]
fn the_acked_set_keeps_no_ids_behind_the_frontier_after_failures() {
    let s = setup("batch-acked");
    let mq = s.mq();
    let topic = "acked";
    s.rt.block_on(mq.create_topic(topic, 1)).unwrap();
    let input: Vec<String> = (0..60)
        .map(|i| {
            if i % 10 == 3 {
                "bad".to_string()
            } else {
                format!("k{i},{i}")
            }
        })
        .collect();
    let refs: Vec<&str> = input.iter().map(String::as_str).collect();
    s.send(topic, &refs);
    let opts = fast_options("batch-acked")
        .key_prefix(s.mq_opts.key_prefix.clone())
        .retry(
            streaming::mq::RetryPolicy::builder()
                .max_retries(2)
                .initial_backoff(Duration::from_millis(20))
                .multiplier(1.0)
                .max_backoff(Duration::from_millis(20))
                .jitter(0.0)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let env = s.env(s.config("acked", AckMode::Xack).mq_options(opts));
    let out = CollectSink::new();
    env.from_mq_topic_with_options(topic, "g", earliest(8))
        .map(|m: Message| m.text().unwrap().to_string())
        .try_map(|t: String| -> Result<String, BoxError> {
            if t == "bad" {
                Err("bad record".into())
            } else {
                Ok(t)
            }
        })
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let dead = || s.rt.block_on(mq.dead_letters(topic, 100)).unwrap();
    wait_until("six dead letters", &job, || dead().len() == 6);
    assert!(job
        .blocking_await_caught_up(Duration::from_secs(60))
        .unwrap());
    // 6 bad records × 3 attempts each.
    assert_eq!(failed(&job), 18);
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(out.len(), 54);
    let mut conn = s.conn();
    let acked: Vec<String> =
        s.rt.block_on(conn.smembers(mq.keys().acked(topic, 0, "g")))
            .unwrap();
    assert_eq!(acked, Vec::<String>::new());
}

/// In XACK mode with `StartPolicy::Earliest`, a consumer group deleted while the job runs
/// is re-created after the commit frontier: nothing is counted twice. With
/// `restore_group_from_commit_frontier(false)` the start policy decides (a replay).
#[test]
fn a_lost_group_is_rebuilt_from_the_commit_frontier() {
    let s = setup("batch-group-loss");
    let mq = s.mq();
    for (restore, expected) in [(true, 15), (false, 25)] {
        let topic = format!("loss-{restore}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        let first: Vec<String> = (0..10).map(|i| format!("k{i},{i}")).collect();
        s.send(
            &topic,
            &first.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let env = s.env(
            s.config(&format!("loss-{restore}"), AckMode::Xack)
                .restore_group_from_commit_frontier(restore),
        );
        env.from_mq_topic_with_options(&topic, "g", earliest(4))
            .try_map(|m: Message| parse(&m))
            .sink(RedisListSink::new("seen").unwrap())
            .unwrap();
        let job = env.blocking_start().unwrap();
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        assert_eq!(records(&job), 10);
        let mut conn = s.conn();
        let stream = mq.keys().stream(&topic, 0);
        let _: i64 =
            s.rt.block_on(
                redis::cmd("XGROUP")
                    .arg("DESTROY")
                    .arg(&stream)
                    .arg("g")
                    .query_async(&mut conn),
            )
            .unwrap();
        let more: Vec<String> = (10..15).map(|i| format!("k{i},{i}")).collect();
        s.send(&topic, &more.iter().map(String::as_str).collect::<Vec<_>>());
        wait_until("the group is back and caught up", &job, || {
            records(&job) >= 15 && job.blocking_await_caught_up(Duration::ZERO).unwrap()
        });
        job.blocking_shutdown(Duration::MAX);
        let key = RedisListSink::<()>::key_for("seen", &topic, 0);
        let list: Vec<String> = s.rt.block_on(conn.lrange(&key, 0, -1)).unwrap();
        assert_eq!(list.len(), expected, "restore = {restore}: {list:?}");
        assert_eq!(records(&job), expected as u64);
    }
}

/// An entry whose retry-group field `rg` names another group is skipped, and counted as
/// skipped in the diagnostics (both ack modes).
#[test]
fn entries_for_another_group_are_counted_as_skipped() {
    let s = setup("batch-skipped");
    let mq = s.mq();
    let mut conn = s.conn();
    for mode in [AckMode::Xack, AckMode::Offset] {
        let topic = format!("skip-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        let stream = mq.keys().stream(&topic, 0);
        let _: String =
            s.rt.block_on(
                redis::cmd("XADD")
                    .arg(&stream)
                    .arg("*")
                    .arg("p")
                    .arg("x,1")
                    .arg("ts")
                    .arg(1)
                    .arg("rg")
                    .arg("someone-else")
                    .query_async(&mut conn),
            )
            .unwrap();
        s.send(&topic, &["a,2"]);
        let env = s.env(s.config(&format!("skip-{mode:?}"), mode));
        let out = CollectSink::new();
        env.from_mq_topic_with_options(&topic, "g", earliest(16))
            .try_map(|m: Message| parse(&m))
            .sink(out.clone())
            .unwrap();
        let job = env.blocking_start().unwrap();
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        job.blocking_shutdown(Duration::MAX);
        assert_eq!(out.snapshot(), vec![("a".to_string(), 2)]);
        let p = &job.diagnostics().partitions[0];
        assert_eq!((p.records, p.skipped), (1, 1), "{mode:?}");
    }
}

/// A producer's own `x-original-message-id` header does not become a dead letter's
/// original id: a first delivery's original id is its own id.
#[test]
fn a_producer_cannot_forge_the_original_id_of_a_dead_letter() {
    let s = setup("batch-forged");
    let mq = s.mq();
    let topic = "forged";
    s.rt.block_on(mq.create_topic(topic, 1)).unwrap();
    let producer = mq.producer();
    let msg = OutgoingMessage::new("not-an-event").header(streaming::mq::HEADER_ORIGINAL_ID, "1-1");
    s.rt.block_on(producer.send_batch(topic, &[msg])).unwrap();
    let env = s.env(
        s.config("forged", AckMode::Xack)
            .processing_error_result(ProcessingErrorResult::DeadLetter),
    );
    env.from_mq_topic_with_options(topic, "g", earliest(16))
        .try_map(|m: Message| parse(&m))
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let dead = || s.rt.block_on(mq.dead_letters(topic, 10)).unwrap();
    wait_until("the dead letter", &job, || dead().len() == 1);
    job.blocking_shutdown(Duration::MAX);
    let d = &dead()[0];
    assert_eq!(d.original_id, d.id);
    assert!(
        !d.headers.contains_key(streaming::mq::HEADER_ORIGINAL_ID),
        "{:?}",
        d.headers
    );
}

/// A batch commit Redis applied but whose reply was lost is counted once the next read of
/// the commit frontier confirms it: `records` ends at the input size (both ack modes).
#[test]
fn a_commit_whose_reply_was_lost_is_still_counted() {
    let s = setup("batch-lost-reply");
    let mq = s.mq();
    for mode in [AckMode::Offset, AckMode::Xack] {
        let topic = format!("lost-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        let input: Vec<String> = (0..50).map(|i| format!("k{i},{i}")).collect();
        s.send(
            &topic,
            &input.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let proxy = FaultyProxy::start(s.redis.url(), b"lost-reply-out", 0, Fault::LoseReply);
        let config = s.config(&format!("lost-{mode:?}"), mode).build().unwrap();
        let env = RedisEnv::try_with_config(proxy.url.as_str(), config).unwrap();
        env.from_mq_topic_with_options(&topic, "g", earliest(10))
            .try_map(|m: Message| parse(&m))
            .sink(RedisListSink::new("lost-reply-out").unwrap())
            .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("the lost reply", &job, || proxy.fired());
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        job.blocking_shutdown(Duration::MAX);
        let key = RedisListSink::<()>::key_for("lost-reply-out", &topic, 0);
        let mut conn = s.conn();
        let list: Vec<String> = s.rt.block_on(conn.lrange(&key, 0, -1)).unwrap();
        assert_eq!(list.len(), 50, "{mode:?}: exactly once in the sink");
        assert_eq!(records(&job), 50, "{mode:?}");
    }
}

/// A batch commit that reaches Redis only after its owner gave up on it (no reply: the
/// network held it) and took the partition again is refused: the take moved the lease to
/// a new fencing token. The batch is read again and committed once — in the sink, the
/// state and the counters (both ack modes).
#[test]
fn a_commit_that_reaches_redis_after_the_partition_was_taken_again_is_refused() {
    const SEEN: streaming::api::ValueStateDescriptor<u64> =
        streaming::api::ValueStateDescriptor::persistent("seen", 0);
    let s = setup("batch-late-commit");
    let mq = s.mq();
    for mode in [AckMode::Offset, AckMode::Xack] {
        let topic = format!("late-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        let input: Vec<String> = (0..50).map(|i| format!("k{},{i}", i % 5)).collect();
        s.send(
            &topic,
            &input.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        // The third commit (the script is cached by then) reaches Redis 1.5 s late, after
        // the partition was taken again and its batches committed.
        let fault = Fault::DeliverLate(Duration::from_millis(1500));
        let proxy = FaultyProxy::start(s.redis.url(), b"late-commit-out", 2, fault);
        let config = s.config(&format!("late-{mode:?}"), mode).build().unwrap();
        let env = RedisEnv::try_with_config(proxy.url.as_str(), config).unwrap();
        env.from_mq_topic_with_options(&topic, "g", earliest(10))
            .try_map(|m: Message| parse(&m))
            .key_by(|r: &(String, i64)| r.0.clone())
            .process(|r: (String, i64), ctx, out| {
                let mut n = ctx.state(&SEEN)?;
                let seen = n.value() + 1;
                n.update(seen);
                out.collect(format!("{}={seen}", r.0));
                Ok(())
            })
            .sink(RedisListSink::<String>::text("late-commit-out").unwrap())
            .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("the late commit", &job, || proxy.late_reply().is_some());
        assert!(job
            .blocking_await_caught_up(Duration::from_secs(60))
            .unwrap());
        job.blocking_shutdown(Duration::MAX);
        let reply = String::from_utf8_lossy(&proxy.late_reply().unwrap()).into_owned();
        assert!(
            reply.contains("fenced"),
            "{mode:?}: the late commit ran: {reply:?}"
        );
        let key = RedisListSink::<()>::key_for("late-commit-out", &topic, 0);
        let mut conn = s.conn();
        let mut list: Vec<String> = s.rt.block_on(conn.lrange(&key, 0, -1)).unwrap();
        list.sort();
        let mut expected: Vec<String> = (0..5)
            .flat_map(|k| (1..=10).map(move |n| format!("k{k}={n}")))
            .collect();
        expected.sort();
        assert_eq!(
            list, expected,
            "{mode:?}: each record once, state counted once"
        );
        assert_eq!(records(&job), 50, "{mode:?}");
        let pattern = format!("{}:late-{mode:?}:*:seen", s.prefix);
        let keys: Vec<String> = s.rt.block_on(conn.keys(&pattern)).unwrap();
        assert_eq!(keys.len(), 1, "{mode:?}: {keys:?}");
        let state: std::collections::BTreeMap<String, String> =
            s.rt.block_on(conn.hgetall(&keys[0])).unwrap();
        assert!(
            state.len() == 5 && state.values().all(|n| n == "10"),
            "{mode:?}: the late commit wrote its state over later ones: {state:?}"
        );
    }
}

/// A batch that takes longer than `lease_ttl` in a job nobody competes with commits: the
/// lease expired but no other owner took it (the fencing token is still ours), so the
/// commit takes it back instead of being fenced and read again forever.
#[test]
fn a_batch_longer_than_the_lease_commits_when_nobody_took_the_partition() {
    let s = setup("batch-slow");
    let mq = s.mq();
    let opts = fast_options("batch-slow")
        .key_prefix(s.mq_opts.key_prefix.clone())
        .lease_ttl(Duration::from_millis(200))
        .lease_renew_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    for mode in [AckMode::Xack, AckMode::Offset] {
        let topic = format!("slow-{mode:?}");
        s.rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        s.send(&topic, &["a", "slow", "b"]);
        let env = s.env(s.config(&topic, mode).mq_options(opts.clone()));
        env.from_mq_topic_with_options(&topic, "g", earliest(16))
            .map(|m: Message| {
                let text = m.text().unwrap().to_string();
                if text == "slow" {
                    // Longer than lease_ttl: the lease expires inside the batch.
                    std::thread::sleep(Duration::from_millis(500));
                }
                text
            })
            .sink(RedisListSink::<String>::text("slow-out").unwrap())
            .unwrap();
        let job = env.blocking_start().unwrap();
        assert!(
            job.blocking_await_caught_up(Duration::from_secs(30))
                .unwrap(),
            "{mode:?}: {:?}",
            job.diagnostics()
        );
        job.blocking_shutdown(Duration::MAX);
        let d = job.diagnostics();
        assert_eq!(d.partitions[0].fenced, 0, "{mode:?}: {d:?}");
        let mut conn = s.conn();
        let list: Vec<String> =
            s.rt.block_on(conn.lrange(
                RedisListSink::<String>::key_for("slow-out", &topic, 0),
                0,
                -1,
            ))
            .unwrap();
        assert_eq!(list, ["a", "slow", "b"], "{mode:?}: exactly once");
    }
}
