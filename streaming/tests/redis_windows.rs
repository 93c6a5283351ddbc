//! Event time on the Redis engine (issue #6): windows, per-partition watermarks, idle
//! flush, late elements, keyed process timers, restarts — each compared with the memory
//! engine running the same pipeline text on the same input.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use streaming::time::{
    BoundedOutOfOrderness, EventTimeSessionWindows, SlidingEventTimeWindows, TimeWindow,
    TumblingEventTimeWindows,
};
use streaming::MemoryEnv;
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

struct Setup {
    redis: TestRedis,
    prefix: String,
    mq_opts: streaming::mq::MqOptions,
}

fn setup(test: &str) -> Setup {
    Setup {
        redis: TestRedis::shared(),
        prefix: unique_prefix(test),
        mq_opts: fast_options(test).build().unwrap(),
    }
}

impl Setup {
    fn mq(&self, rt: &tokio::runtime::Runtime) -> Mq {
        rt.block_on(Mq::connect(self.redis.url(), self.mq_opts.clone()))
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
        RedisEnv::create_with_config(self.redis.url(), config.build().unwrap()).unwrap()
    }
}

fn earliest() -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(7)
        .poll_timeout(Duration::from_millis(20))
        .build()
        .unwrap()
}

/// Sends `(key, event time)` pairs as `key,ts` text keyed by `key`, in order.
fn send(rt: &tokio::runtime::Runtime, mq: &Mq, topic: &str, events: &[(String, i64)]) {
    let mut producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = events
        .iter()
        .map(|(k, ts)| {
            OutgoingMessage::new(format!("{k},{ts}"))
                .key(k.clone())
                .timestamp_ms(*ts)
        })
        .collect();
    rt.block_on(producer.send_batch(topic, &msgs)).unwrap();
}

fn parse(m: &Message) -> (String, i64) {
    let (k, ts) = m.text().unwrap().split_once(',').unwrap();
    (k.to_string(), ts.parse().unwrap())
}

/// Polls `check` every 20 ms until true; panics after a generous deadline (bounds a
/// failing test; not what the test asserts).
fn wait_until(what: &str, job: &JobClient, mut check: impl FnMut(&JobClient) -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while !check(job) {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}: {:#?}",
            job.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn records(job: &JobClient) -> u64 {
    job.diagnostics().partitions.iter().map(|p| p.records).sum()
}

fn flushed(job: &JobClient) -> bool {
    let d = job.diagnostics();
    !d.partitions.is_empty() && d.partitions.iter().all(|p| p.idle_flushes > 0)
}

/// Out-of-order events over 5 keys: timestamps drift forward with jitter of up to 40 ms,
/// and every 13th event is very late.
fn events(n: usize) -> Vec<(String, i64)> {
    (0..n)
        .map(|i| {
            let i = i as i64;
            let jitter = (i * 37 % 41) - 20;
            let late = if i % 13 == 12 { -90 } else { 0 };
            (format!("k{}", i % 5), (i * 10 + jitter + late).max(0))
        })
        .collect()
}

type Counted = (String, TimeWindow, u64);

fn sorted(mut v: Vec<Counted>) -> Vec<Counted> {
    v.sort_by_key(|(k, w, n)| (k.clone(), w.start(), w.end(), *n));
    v
}

/// The same window pipeline after the engine's source and a map to `(key, ts)`.
macro_rules! windowed {
    ($stream:expr, $assigner:expr, $lateness:expr) => {
        $stream
            .assign_timestamps_and_watermarks_with(
                |e: &(String, i64), _ts: i64| e.1,
                BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
            )
            .key_by(|e: &(String, i64)| e.0.clone())
            .window($assigner)
            .allowed_lateness(Duration::from_millis($lateness))
            .count()
    };
}

macro_rules! run_differential {
    ($name:expr, $assigner:expr, $lateness:expr) => {{
        let (name, assigner, lateness) = ($name, $assigner, $lateness);
        let s = setup(name);
        let rt = rt();
        let mq = s.mq(&rt);
        let input = events(300);
        let expected = sorted(
            windowed!(
                MemoryEnv::new().from_collection(input.clone()),
                assigner.clone(),
                lateness
            )
            .collect_vec()
            .unwrap(),
        );
        assert!(expected.len() > 20, "{}", expected.len());
        for mode in [AckMode::Offset, AckMode::Xack] {
            let topic = format!("ev-{mode:?}");
            rt.block_on(mq.create_topic(&topic, 1)).unwrap();
            send(&rt, &mq, &topic, &input);
            let env = s.env(
                s.config(&format!("{name}-{mode:?}"), mode)
                    .watermark_idle_timeout(Some(Duration::from_millis(300))),
            );
            let out = CollectSink::new();
            windowed!(
                env.from_mq_topic_with_options(&topic, "g", earliest())
                    .map(|m: Message| parse(&m)),
                assigner.clone(),
                lateness
            )
            .sink(out.clone())
            .unwrap();
            let job = env.execute_async().unwrap();
            wait_until("all records and an idle flush", &job, |j| {
                records(j) == 300 && flushed(j)
            });
            job.cancel();
            assert!(job.await_termination(Duration::from_secs(10)));
            assert_eq!(sorted(out.snapshot()), expected, "{name} {mode:?}");
            let d = job.diagnostics();
            let late: u64 = d.partitions.iter().map(|p| p.window_late_dropped).sum();
            let fired: u64 = d.partitions.iter().map(|p| p.window_fired).sum();
            assert_eq!(fired, expected.len() as u64, "{mode:?}");
            let mem_summary = windowed!(
                MemoryEnv::new().from_collection(input.clone()),
                assigner.clone(),
                lateness
            )
            .for_each(|_| {})
            .unwrap();
            assert_eq!(late, mem_summary.late_elements, "{mode:?}");
        }
    }};
}

#[test]
fn tumbling_windows_equal_the_memory_engine() {
    run_differential!(
        "win-tumbling",
        TumblingEventTimeWindows::of(Duration::from_millis(50)).unwrap(),
        0
    );
}

#[test]
fn sliding_windows_with_lateness_equal_the_memory_engine() {
    run_differential!(
        "win-sliding",
        SlidingEventTimeWindows::of(Duration::from_millis(60), Duration::from_millis(20)).unwrap(),
        30
    );
}

#[test]
fn session_windows_equal_the_memory_engine() {
    run_differential!(
        "win-session",
        EventTimeSessionWindows::with_gap(Duration::from_millis(35)).unwrap(),
        10
    );
}

/// Open windows and their trigger timers are in Redis: a job cancelled mid-stream and
/// started again (new `RedisEnv`, same job name) ends with the output of one
/// uninterrupted run, and the watermark continues from its committed value.
#[test]
fn restart_with_open_windows_gives_the_uninterrupted_output() {
    let s = setup("win-restart");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let input = events(240);
    let assigner = TumblingEventTimeWindows::of(Duration::from_millis(50)).unwrap();
    let expected = sorted(
        windowed!(
            MemoryEnv::new().from_collection(input.clone()),
            assigner,
            20
        )
        .collect_vec()
        .unwrap(),
    );
    let out = CollectSink::new();
    let run = |idle: Option<Duration>, until: u64, flush: bool| {
        let env = s.env(
            s.config("restart", AckMode::Offset)
                .watermark_idle_timeout(idle),
        );
        windowed!(
            env.from_mq_topic_with_options("ev", "g", earliest())
                .map(|m: Message| parse(&m)),
            assigner,
            20
        )
        .sink(out.clone())
        .unwrap();
        let job = env.execute_async().unwrap();
        wait_until("records", &job, |j| {
            records(j) == until && (!flush || flushed(j))
        });
        let wm = job.diagnostics().partitions[0].watermark;
        job.cancel();
        assert!(job.await_termination(Duration::from_secs(10)));
        wm
    };
    send(&rt, &mq, "ev", &input[..130]);
    let wm1 = run(None, 130, false).expect("a committed watermark");
    // The first run's watermark is the bound below the highest timestamp so far.
    let max_ts = input[..130].iter().map(|e| e.1).max().unwrap();
    assert_eq!(wm1, max_ts - 25);
    assert!(
        out.len() < expected.len(),
        "windows are still open after the first run"
    );
    send(&rt, &mq, "ev", &input[130..]);
    run(Some(Duration::from_millis(300)), 110, true);
    assert_eq!(sorted(out.snapshot()), expected);
}

/// Per-partition watermarks: a partition whose data is far ahead does not make another
/// partition's elements late, and a silent partition does not hold back the others'
/// windows.
#[test]
fn partitions_keep_their_own_watermarks() {
    let s = setup("win-partitions");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 2)).unwrap();
    // Two keys in different partitions.
    let (fast, slow) = {
        let p = |k: &str| streaming::mq::partition_for_key(k, 2);
        let keys: Vec<String> = (0..20).map(|i| format!("key{i}")).collect();
        let a = keys.iter().find(|k| p(k) == 0).unwrap().clone();
        let b = keys.iter().find(|k| p(k) == 1).unwrap().clone();
        (a, b)
    };
    let mut input: Vec<(String, i64)> = (0..10).map(|i| (fast.clone(), 1000 + i * 100)).collect();
    input.push((slow.clone(), 5));
    input.push((slow.clone(), 7));
    send(&rt, &mq, "ev", &input);
    let env = s.env(s.config("partitions", AckMode::Offset));
    let out = CollectSink::new();
    windowed!(
        env.from_mq_topic_with_options("ev", "g", earliest())
            .map(|m: Message| parse(&m)),
        TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap(),
        0
    )
    .sink(out.clone())
    .unwrap();
    let job = env.execute_async().unwrap();
    // The fast partition fires its windows [1000,1100) .. [1700,1800) on its own
    // watermark (1900 - 25 = 1875), although the slow partition's watermark is at -18;
    // [1800,1900) stays open (no idle flush configured).
    wait_until("fast windows", &job, |_| out.len() == 8);
    wait_until("all records", &job, |j| records(j) == 12);
    job.cancel();
    assert!(job.await_termination(Duration::from_secs(10)));
    let got = sorted(out.snapshot());
    let want: Vec<Counted> = (0..8)
        .map(|i| {
            (
                fast.clone(),
                TimeWindow::new(1000 + i * 100, 1100 + i * 100),
                1,
            )
        })
        .collect();
    assert_eq!(got, want);
    let d = job.diagnostics();
    let mut wms: BTreeMap<u32, Option<i64>> = BTreeMap::new();
    for p in &d.partitions {
        wms.insert(p.partition, p.watermark);
    }
    let fp = streaming::mq::partition_for_key(&fast, 2);
    assert_eq!(wms[&fp], Some(1900 - 25));
    assert_eq!(wms[&(1 - fp)], Some(7 - 25));
    // No element was late: with one watermark per subtask the slow key's events (5, 7)
    // would have been behind the fast key's watermark.
    assert!(d.partitions.iter().all(|p| p.window_late_dropped == 0));
}
