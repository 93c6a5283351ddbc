//! The Redis engine against a private redis-server: the same pipelines on both engines
//! (differential), cancel and restart without loss or double counting (both ack modes),
//! failing records and malformed entries to the dead-letter queue, registration rules.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use redis::AsyncCommands;
use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, OutgoingMessage};
use streaming::redis::{
    AckMode, CollectSink, JobClient, ProcessingErrorResult, RedisEnv, RedisListSink,
    RedisRuntimeConfig, HEADER_RUNTIME_ERROR_MESSAGE, HEADER_RUNTIME_ERROR_TYPE,
    HEADER_RUNTIME_GROUP, HEADER_RUNTIME_JOB,
};
use streaming::{BoxError, Error, MemoryEnv};
use support::engine::{earliest, rt, wait_until};
use support::redis_cluster::TestCluster;
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

struct Setup {
    redis: TestRedis,
    prefix: String,
    mq_opts: streaming::mq::MqOptions,
}

fn setup(test: &str) -> Setup {
    setup_on(TestRedis::shared(), test)
}

/// A [`Setup`] for `test` on `redis` (a private cluster, say).
fn setup_on(redis: TestRedis, test: &str) -> Setup {
    let mq_opts = fast_options(test).build().unwrap();
    Setup {
        prefix: unique_prefix(test),
        redis,
        mq_opts,
    }
}

impl Setup {
    fn mq(&self, rt: &tokio::runtime::Runtime) -> Mq {
        rt.block_on(Mq::connect(self.redis.url(), self.mq_opts.clone()))
            .unwrap()
    }

    fn config(&self, job: &str, mode: AckMode, parallelism: u32) -> RedisRuntimeConfig {
        RedisRuntimeConfig::builder()
            .job_name(job)
            .job_instance_id("test")
            .state_key_prefix(&self.prefix)
            .mq_options(self.mq_opts.clone())
            .ack_mode(mode)
            .pipeline_parallelism(parallelism)
            .build()
            .unwrap()
    }

    fn env(&self, job: &str, mode: AckMode, parallelism: u32) -> RedisEnv {
        RedisEnv::try_with_config(self.redis.url(), self.config(job, mode, parallelism)).unwrap()
    }
}

fn send_all(rt: &tokio::runtime::Runtime, mq: &Mq, topic: &str, words: &[String]) {
    let producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = words
        .iter()
        .map(|w| OutgoingMessage::new(w.clone()).key(w.clone()))
        .collect();
    for chunk in msgs.chunks(500) {
        rt.block_on(producer.send_batch(topic, chunk)).unwrap();
    }
}

fn committed_records(job: &JobClient) -> u64 {
    job.diagnostics()
        .partitions
        .iter()
        .map(|p| p.records + p.failed)
        .sum()
}

fn words(n: usize, keys: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("w{}", (i * 7 + i / 3) % keys))
        .collect()
}

/// Per key, the sequence of outputs in order.
fn by_key<V: Clone>(out: &[(String, V)]) -> BTreeMap<String, Vec<V>> {
    let mut m: BTreeMap<String, Vec<V>> = BTreeMap::new();
    for (k, v) in out {
        m.entry(k.clone()).or_default().push(v.clone());
    }
    m
}

macro_rules! count_pipeline {
    ($stream:expr) => {
        $stream
            .key_by(|w: &String| w.clone())
            .process(|w: String, ctx, out| {
                let mut count = ctx.state(&COUNT)?;
                let n = count.value() + 1;
                count.update(n);
                out.collect((w, n));
                Ok(())
            })
    };
}

#[test]
fn keyed_value_state_count_is_the_same_on_both_engines() {
    keyed_count_equals_memory(setup("eng-count"));
}

/// On a cluster the 4 partitions spread over the masters; every commit script still runs
/// in one slot.
#[test]
fn keyed_value_state_count_on_a_cluster_is_the_same_as_on_memory() {
    keyed_count_equals_memory(setup_on(
        TestCluster::start().into_test_redis(),
        "eng-count-cluster",
    ));
}

fn keyed_count_equals_memory(s: Setup) {
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("words", 4)).unwrap();
    let input = words(600, 16);
    let expected = by_key(
        &count_pipeline!(MemoryEnv::new().from_collection(input.clone()))
            .collect_vec()
            .unwrap(),
    );
    send_all(&rt, &mq, "words", &input);
    for (mode, parallelism) in [(AckMode::Xack, 1), (AckMode::Offset, 2)] {
        let env = s.env(&format!("count-{mode:?}"), mode, parallelism);
        let out = CollectSink::new();
        count_pipeline!(env
            .from_mq_topic_with_options("words", &format!("g-{mode:?}"), earliest(50))
            .map(|m: Message| m.text().unwrap().to_string()))
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("every record", &job, || committed_records(&job) == 600);
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
        assert_eq!(by_key(&out.snapshot()), expected, "{mode:?}");
        let d = job.diagnostics();
        assert_eq!(d.partitions.len(), 4);
        assert!(d.partitions.iter().all(|p| p.last_committed_id.is_some()));
        assert_eq!(d.parallelism, parallelism);
    }
}

#[test]
fn rolling_reduce_is_the_same_on_both_engines_and_state_is_readable_json() {
    let s = setup("eng-reduce");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("nums", 4)).unwrap();
    let input: Vec<String> = (1..=400).map(|i| i.to_string()).collect();
    let mem: Vec<(String, i64)> = MemoryEnv::new()
        .from_collection(input.clone())
        .map(|t: String| t.parse::<i64>().unwrap())
        .key_by(|v: &i64| v % 5)
        .reduce(|a, b| a + b)
        .map(|v| (String::new(), v))
        .collect_vec()
        .unwrap();
    let mut mem_sorted: Vec<i64> = mem.into_iter().map(|(_, v)| v).collect();
    mem_sorted.sort_unstable();
    // Key by residue: send with the residue as message key, so one residue is in one
    // partition and its order is kept.
    let producer = mq.producer();
    for t in &input {
        let r = (t.parse::<i64>().unwrap() % 5).to_string();
        rt.block_on(producer.send("nums", Some(&r), t.clone()))
            .unwrap();
    }
    let env = s.env("reduce", AckMode::Xack, 2);
    let out = CollectSink::new();
    env.from_mq_topic_with_options("nums", "g", earliest(64))
        .map(|m: Message| m.text().unwrap().parse::<i64>().unwrap())
        .key_by(|v: &i64| v % 5)
        .reduce(|a, b| a + b)
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("every record", &job, || committed_records(&job) == 400);
    job.blocking_shutdown(Duration::MAX);
    let mut got = out.snapshot();
    got.sort_unstable();
    assert_eq!(got, mem_sorted);
    // The state hash: field = key as JSON, value = JSON; final sum per residue.
    let mut conn = rt
        .block_on(
            redis::Client::open(s.redis.url())
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let mut sums: BTreeMap<i64, i64> = BTreeMap::new();
    for p in 0..4 {
        let key = format!("{}:reduce:{{nums:{p}}}:g:nums.g/3:reduce:rolling", s.prefix);
        let h: BTreeMap<String, String> = rt.block_on(conn.hgetall(&key)).unwrap();
        for (k, v) in h {
            sums.insert(k.parse().unwrap(), v.parse().unwrap());
        }
    }
    let expect: BTreeMap<i64, i64> = (0..5)
        .map(|r| (r, (1..=400).filter(|i| i % 5 == r).sum()))
        .collect();
    assert_eq!(sums, expect);
}

fn cancel_and_restart(mode: AckMode) {
    let s = setup("eng-restart");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("t", 4)).unwrap();
    let first = words(3000, 10);
    let second = words(1000, 10);
    send_all(&rt, &mq, "t", &first);
    let run = |expect_at_least: u64| {
        let env = s.env("restart", mode, 2);
        count_pipeline!(env
            .from_mq_topic_with_options("t", "g", earliest(10))
            .map(|m: Message| m.text().unwrap().to_string()))
        .map(|(w, n)| format!("{w}={n}"))
        .sink(RedisListSink::<String>::text("out").unwrap())
        .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("some records", &job, || {
            committed_records(&job) >= expect_at_least
        });
        job
    };
    // First run: cancel mid-stream.
    let job = run(1);
    job.blocking_shutdown(Duration::MAX);
    // Usually mid-stream (batches of 10); the checks below hold wherever it stopped.
    let done_first = committed_records(&job);
    assert!(done_first > 0 && done_first <= 3000);
    drop(job);
    send_all(&rt, &mq, "t", &second);
    // Second run: finishes everything (both batches of input).
    let job = run(0);
    wait_until("every record", &job, || {
        committed_records(&job) + done_first == 4000
    });
    job.blocking_shutdown(Duration::MAX);
    // Exactly-once state and list sink: each key's outputs are 1..=count, once each.
    let mut conn = rt
        .block_on(
            redis::Client::open(s.redis.url())
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let mut outputs: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for p in 0..4 {
        let list: Vec<String> = rt
            .block_on(conn.lrange(RedisListSink::<String>::key_for("out", "t", p), 0, -1))
            .unwrap();
        for line in list {
            let (w, n) = line.split_once('=').unwrap();
            outputs
                .entry(w.to_string())
                .or_default()
                .push(n.parse().unwrap());
        }
    }
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for w in first.iter().chain(&second) {
        *expected.entry(w.clone()).or_default() += 1;
    }
    assert_eq!(outputs.len(), expected.len());
    for (w, n) in &expected {
        assert_eq!(outputs[w], (1..=*n).collect::<Vec<_>>(), "{mode:?} key {w}");
    }
}

#[test]
fn cancel_and_restart_continue_without_loss_or_double_counting_xack() {
    cancel_and_restart(AckMode::Xack);
}

#[test]
fn cancel_and_restart_continue_without_loss_or_double_counting_offset() {
    cancel_and_restart(AckMode::Offset);
}

fn failing_records(mode: AckMode, result: ProcessingErrorResult) {
    let s = setup("eng-fail");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("f", 2)).unwrap();
    let mut input = words(200, 4);
    input[17] = "boom".into();
    input[101] = "panic".into();
    send_all(&rt, &mq, "f", &input);
    // A malformed entry (no payload field) straight into partition 0's stream.
    let mut conn = rt
        .block_on(
            redis::Client::open(s.redis.url())
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let stream = mq.keys().stream("f", 0);
    let _: String = rt
        .block_on(
            redis::cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("junk")
                .arg("1")
                .query_async(&mut conn),
        )
        .unwrap();
    let mut config = s.config("failing", mode, 1);
    config = RedisRuntimeConfig::builder()
        .job_name(config.job_name())
        .job_instance_id("test")
        .state_key_prefix(config.state_key_prefix())
        .mq_options(
            fast_options("eng-fail-mq")
                .key_prefix(s.mq_opts.key_prefix.clone())
                .retry(
                    streaming::mq::RetryPolicy::builder()
                        .max_retries(1)
                        .initial_backoff(Duration::from_millis(20))
                        .multiplier(1.0)
                        .max_backoff(Duration::from_millis(20))
                        .jitter(0.0)
                        .build()
                        .unwrap(),
                )
                .build()
                .unwrap(),
        )
        .ack_mode(mode)
        .processing_error_result(result)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = CollectSink::new();
    env.from_mq_topic_with_options("f", "g", earliest(32))
        .map(|m: Message| m.text().unwrap().to_string())
        .key_by(|w: &String| w.clone())
        .process(|w: String, ctx, out| {
            // Change state first, then fail: the engine must roll the change back.
            let mut count = ctx.state(&COUNT)?;
            let n = count.value() + 1;
            count.update(n);
            if w == "boom" {
                return Err::<(), BoxError>("boom is not a word".into());
            }
            if w == "panic" {
                panic!("cannot count panics");
            }
            out.collect((w, n));
            Ok(())
        })
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let dead = |mq: &Mq| rt.block_on(mq.dead_letters("f", 100)).unwrap();
    wait_until("the dead letters", &job, || dead(&mq).len() == 3);
    wait_until("the good records", &job, || out.len() == 198);
    job.blocking_shutdown(Duration::MAX);
    let mut expected: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for w in input.iter().filter(|w| w.starts_with('w')) {
        let v = expected.entry(w.clone()).or_default();
        v.push(v.len() as u64 + 1);
    }
    assert_eq!(by_key(&out.snapshot()), expected);
    let letters = dead(&mq);
    let malformed = letters
        .iter()
        .filter(|d| d.error_type == "malformed")
        .count();
    assert_eq!(malformed, 1);
    for d in letters.iter().filter(|d| d.error_type != "malformed") {
        let payload = std::str::from_utf8(&d.payload).unwrap();
        let kind = if payload == "boom" {
            "user_function"
        } else {
            "panic"
        };
        assert_eq!(
            d.headers.get(HEADER_RUNTIME_JOB).map(String::as_str),
            Some("failing")
        );
        assert_eq!(
            d.headers.get(HEADER_RUNTIME_GROUP).map(String::as_str),
            Some("g")
        );
        assert_eq!(
            d.headers.get(HEADER_RUNTIME_ERROR_TYPE).map(String::as_str),
            Some(kind)
        );
        let msg = &d.headers[HEADER_RUNTIME_ERROR_MESSAGE];
        assert!(
            msg.len() <= 512
                && (msg.contains("boom is not a word") || msg.contains("cannot count panics")),
            "{msg}"
        );
        match result {
            ProcessingErrorResult::Retry => {
                assert_eq!(d.error_type, format!("retries_exhausted:{kind}"));
                assert_eq!(d.attempts, 2, "first delivery + one retry");
            }
            ProcessingErrorResult::DeadLetter => assert_eq!(d.error_type, kind),
            ProcessingErrorResult::Fail => assert_eq!(d.error_type, format!("fail:{kind}")),
        }
    }
}

#[test]
fn failing_records_are_retried_then_dead_lettered_with_runtime_headers_xack() {
    failing_records(AckMode::Xack, ProcessingErrorResult::Retry);
}

#[test]
fn failing_records_are_dead_lettered_with_runtime_headers_offset() {
    failing_records(AckMode::Offset, ProcessingErrorResult::DeadLetter);
}

#[test]
fn failing_records_with_fail_offset_retry() {
    failing_records(AckMode::Offset, ProcessingErrorResult::Retry);
    failing_records(AckMode::Xack, ProcessingErrorResult::Fail);
}

fn engine_reason(e: Error) -> String {
    match e {
        Error::Engine { reason, .. } => reason,
        other => panic!("expected Error::Engine, got {other:?}"),
    }
}

#[test]
fn registration_rules() {
    let env = RedisEnv::try_new("redis://127.0.0.1:1/").unwrap();
    let e = env.blocking_start().unwrap_err();
    assert!(engine_reason(e).contains("no pipeline registered"));

    env.from_mq_topic("t", "g")
        .map(|m: Message| m.id)
        .sink(CollectSink::new())
        .unwrap();
    let e = env
        .from_mq_topic("t", "g")
        .sink(CollectSink::<Message>::new())
        .unwrap_err();
    let reason = engine_reason(e);
    assert!(reason.contains("topic `t` as group `g`"), "{reason}");
    assert!(reason.contains("own group"), "{reason}");
    assert!(reason.contains("g-fork2"), "{reason}");

    let e = env
        .from_mq_topic_with_id("bad id!", "t", "other")
        .sink(CollectSink::<Message>::new())
        .unwrap_err();
    assert!(engine_reason(e).contains("[A-Za-z0-9_.-]"));

    // Subscription options built by hand are checked when the pipeline registers.
    let mut bad = earliest(10);
    bad.batch_count = 0;
    match env
        .from_mq_topic_with_options("t", "zero", bad)
        .sink(CollectSink::<Message>::new())
    {
        Err(Error::InvalidConfig { field, reason }) => {
            assert_eq!(field, "subscription_options");
            assert!(reason.starts_with("batch_count"), "{reason}");
        }
        other => panic!("{other:?}"),
    }

    // Redis unreachable: blocking_start fails, naming the address, and starts nothing.
    match env.blocking_start() {
        Err(Error::Connect { addr, .. }) => assert_eq!(addr, "127.0.0.1:1"),
        other => panic!("expected a connect error, got {other:?}"),
    }

    // Started on a reachable server (topic `t` does not exist there: its subtasks stop,
    // and the job still counts as started).
    let s = setup("eng-reg");
    let env =
        RedisEnv::try_with_config(s.redis.url(), s.config("reg", AckMode::Offset, 1)).unwrap();
    env.from_mq_topic("t", "g")
        .map(|m: Message| m.id)
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let e = env
        .from_mq_topic("t", "late")
        .sink(CollectSink::<Message>::new())
        .unwrap_err();
    assert!(engine_reason(e).contains("already started"));
    assert!(engine_reason(env.blocking_start().unwrap_err()).contains("already"));
    assert!(job.blocking_await_termination(Duration::from_secs(60)));
    assert!(!job.diagnostics().errors.is_empty());
    job.blocking_shutdown(Duration::MAX);
    job.blocking_shutdown(Duration::MAX);
}

#[test]
fn pause_resume_and_in_flight() {
    let s = setup("eng-pause");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("p", 1)).unwrap();
    let env = RedisEnv::with_client(
        redis::Client::open(s.redis.url()).unwrap(),
        s.config("pause", AckMode::Offset, 1),
    );
    let out = CollectSink::new();
    env.from_mq_topic_with_options("p", "g", earliest(10))
        .map(|m: Message| m.text().unwrap().to_string())
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    job.pause();
    assert!(job.diagnostics().paused);
    send_all(&rt, &mq, "p", &words(20, 3));
    // While paused nothing is read (checked after the subtask took its partition).
    wait_until("the partition to be taken", &job, || {
        job.diagnostics().partitions.len() == 1
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(out.len(), 0);
    job.resume();
    wait_until("every record", &job, || out.len() == 20);
    // The sink sees a batch before its commit; in-flight drops to 0 once it committed.
    wait_until("nothing in flight", &job, || {
        committed_records(&job) == 20 && job.in_flight() == 0
    });
    job.blocking_shutdown(Duration::MAX);
}

#[test]
fn state_ttl_expires_each_state_hash() {
    let s = setup("eng-ttl");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ttl", 1)).unwrap();
    send_all(&rt, &mq, "ttl", &words(5, 2));
    let config = RedisRuntimeConfig::builder()
        .job_name("ttl")
        .job_instance_id("test")
        .state_key_prefix(&s.prefix)
        .mq_options(s.mq_opts.clone())
        .state_ttl(Some(Duration::from_secs(60)))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    count_pipeline!(env
        .from_mq_topic_with_options("ttl", "g", earliest(10))
        .map(|m: Message| m.text().unwrap().to_string()))
    .sink(CollectSink::new())
    .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("every record", &job, || committed_records(&job) == 5);
    job.blocking_shutdown(Duration::MAX);
    let mut conn = rt
        .block_on(
            redis::Client::open(s.redis.url())
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let key = format!("{}:ttl:{{ttl:0}}:g:ttl.g/3:process:count", s.prefix);
    let counts: BTreeMap<String, u64> = rt.block_on(conn.hgetall(&key)).unwrap();
    assert_eq!(counts.values().sum::<u64>(), 5, "{key}: {counts:?}");
    let pttl: i64 = rt.block_on(conn.pttl(&key)).unwrap();
    assert!(pttl > 0 && pttl <= 60_000, "PTTL {pttl}");
}

const SEEN_AT: streaming::api::ListStateDescriptor<u32> =
    streaming::api::ListStateDescriptor::persistent("seen_at");
const BY_LEN: streaming::api::MapStateDescriptor<u32, u64> =
    streaming::api::MapStateDescriptor::persistent("by_len");
const SUFFIXES: streaming::api::SetStateDescriptor<String> =
    streaming::api::SetStateDescriptor::persistent("suffixes");

/// Per first letter: positions seen (list), count per word length (map), last characters
/// (set); emits the three sizes and the map entry of this word's length.
macro_rules! collections_pipeline {
    ($stream:expr) => {
        $stream
            .key_by(|w: &String| w[..1].to_string())
            .process(|w: String, ctx, out| {
                let len = w.len() as u32;
                let mut list = ctx.state(&SEEN_AT)?;
                list.add(len * 10);
                let n_list = list.get().len();
                let mut map = ctx.state(&BY_LEN)?;
                let c = map.get(&len).copied().unwrap_or(0) + 1;
                map.put(len, c);
                let n_map = map.len();
                let mut set = ctx.state(&SUFFIXES)?;
                set.add(w[w.len() - 1..].to_string());
                let n_set = set.len();
                out.collect((w[..1].to_string(), (n_list, n_map, n_set, c)));
                Ok(())
            })
    };
}

#[test]
fn list_map_and_set_state_survive_a_restart_and_match_memory() {
    let s = setup("eng-coll");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("c", 4)).unwrap();
    let input: Vec<String> = (0..400)
        .map(|i| {
            let first = ["a", "b", "c", "d", "e"][i % 5];
            format!("{first}{}", "xyz".repeat(i % 3 + 1) + &(i % 7).to_string())
        })
        .collect();
    let expected = by_key(
        &collections_pipeline!(MemoryEnv::new().from_collection(input.clone()))
            .collect_vec()
            .unwrap(),
    );
    // Send keyed by the first letter (the pipeline's key), so per-key order is kept.
    let producer = mq.producer();
    let send = |producer: &streaming::mq::Producer, words: &[String]| {
        let msgs: Vec<OutgoingMessage> = words
            .iter()
            .map(|w| OutgoingMessage::new(w.clone()).key(w[..1].to_string()))
            .collect();
        rt.block_on(producer.send_batch("c", &msgs)).unwrap();
    };
    let out = CollectSink::new();
    let run = |expect: u64| {
        let env = s.env("coll", AckMode::Offset, 2);
        collections_pipeline!(env
            .from_mq_topic_with_options("c", "g", earliest(16))
            .map(|m: Message| m.text().unwrap().to_string()))
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("the records", &job, || committed_records(&job) == expect);
        job.blocking_shutdown(Duration::MAX);
    };
    send(&producer, &input[..250]);
    run(250);
    send(&producer, &input[250..]);
    run(150);
    assert_eq!(by_key(&out.snapshot()), expected);
}

/// The id of the last entry of `stream`, if any.
fn last_entry_id(rt: &tokio::runtime::Runtime, url: &str, stream: &str) -> Option<String> {
    let mut conn = rt
        .block_on(
            redis::Client::open(url)
                .unwrap()
                .get_multiplexed_async_connection(),
        )
        .unwrap();
    let v: redis::Value = rt
        .block_on(
            redis::cmd("XREVRANGE")
                .arg(stream)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query_async(&mut conn),
        )
        .unwrap();
    match v {
        redis::Value::Array(entries) => match entries.first() {
            Some(redis::Value::Array(entry)) => {
                Some(redis::from_redis_value::<String>(&entry[0]).unwrap())
            }
            _ => None,
        },
        _ => None,
    }
}

/// Issue #4 on the engine: two pipelines read one topic with different groups; every
/// record of group `bad` panics (retried, then dead-lettered). Group `good` counts each
/// record exactly once: the retries are addressed to `bad` and `good` skips them (without
/// counting them as records) while still committing past them.
fn foreign_retries_are_skipped(mode: AckMode) {
    let s = setup("eng-foreign-retry");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("t", 1)).unwrap();
    let input = words(40, 4);
    send_all(&rt, &mq, "t", &input);
    let config = RedisRuntimeConfig::builder()
        .job_name("foreign")
        .job_instance_id("test")
        .state_key_prefix(&s.prefix)
        .mq_options(
            fast_options("eng-foreign-retry-mq")
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
                .unwrap(),
        )
        .ack_mode(mode)
        .processing_error_result(ProcessingErrorResult::Retry)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(s.redis.url(), config).unwrap();
    let out = CollectSink::new();
    count_pipeline!(env
        .from_mq_topic_with_options("t", "good", earliest(8))
        .map(|m: Message| m.text().unwrap().to_string()))
    .sink(out.clone())
    .unwrap();
    env.from_mq_topic_with_options("t", "bad", earliest(8))
        .map(|m: Message| -> String { panic!("group bad cannot handle {}", m.id) })
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let stream = mq.keys().stream("t", 0);
    wait_until(
        "bad's dead letters and good's commit at the end",
        &job,
        || {
            let letters = rt.block_on(mq.dead_letters("t", 1000)).unwrap().len();
            let info = rt.block_on(mq.describe_topic("t")).unwrap();
            let p = &info.partition_info[0];
            let last = last_entry_id(&rt, s.redis.url(), &stream);
            letters >= 40
                && p.retry_scheduled == 0
                && p.groups
                    .iter()
                    .any(|g| g.name == "good" && g.frontier == last)
        },
    );
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    let mut expected: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for w in &input {
        let v = expected.entry(w.clone()).or_default();
        v.push(v.len() as u64 + 1);
    }
    assert_eq!(by_key(&out.snapshot()), expected, "{mode:?}");
    let d = job.diagnostics();
    let good: Vec<_> = d.partitions.iter().filter(|p| p.group == "good").collect();
    assert_eq!(good.len(), 1);
    assert_eq!((good[0].records, good[0].failed), (40, 0), "{mode:?}");
    let bad: Vec<_> = d.partitions.iter().filter(|p| p.group == "bad").collect();
    assert_eq!((bad[0].records, bad[0].failed), (0, 120), "{mode:?}");
    let letters = rt.block_on(mq.dead_letters("t", 1000)).unwrap();
    assert_eq!(letters.len(), 40);
    assert!(letters
        .iter()
        .all(|l| l.group == "bad" && l.attempts == 3 && l.error_type == "retries_exhausted:panic"));
    // The stream: 40 originals and bad's two retries of each.
    let info = rt.block_on(mq.describe_topic("t")).unwrap();
    assert_eq!(info.partition_info[0].length, 120);
}

#[test]
fn a_failing_group_does_not_make_another_group_count_twice_xack() {
    foreign_retries_are_skipped(AckMode::Xack);
}

#[test]
fn a_failing_group_does_not_make_another_group_count_twice_offset() {
    foreign_retries_are_skipped(AckMode::Offset);
}
