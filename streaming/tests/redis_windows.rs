//! Event time on the Redis engine (issue #6): windows, per-partition watermarks, idle
//! flush, late elements, keyed process timers, restarts — each compared with the memory
//! engine running the same pipeline text on the same input.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use streaming::mq::{Message, Mq, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use streaming::time::{
    BoundedOutOfOrderness, ContinuousEventTimeTrigger, CountTrigger, EventTimeSessionWindows,
    GlobalWindows, PurgingTrigger, SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows,
};
use streaming::MemoryEnv;
use support::engine::{earliest, rt, wait_until};
use support::redis_cluster::TestCluster;
use support::redis_server::TestRedis;
use support::{fast_options, unique_prefix};

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
    Setup {
        redis,
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
        RedisEnv::try_with_config(self.redis.url(), config.build().unwrap()).unwrap()
    }
}

/// Sends `(key, event time)` pairs as `key,ts` text keyed by `key`, in order.
fn send(rt: &tokio::runtime::Runtime, mq: &Mq, topic: &str, events: &[(String, i64)]) {
    let producer = mq.producer();
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
    ($name:expr, $assigner:expr, $lateness:expr) => {
        run_differential!(on TestRedis::shared(), $name, $assigner, $lateness)
    };
    (on $redis:expr, $name:expr, $assigner:expr, $lateness:expr) => {{
        let (name, assigner, lateness) = ($name, $assigner, $lateness);
        let s = setup_on($redis, name);
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
                env.from_mq_topic_with_options(&topic, "g", earliest(7))
                    .map(|m: Message| parse(&m)),
                assigner.clone(),
                lateness
            )
            .sink(out.clone())
            .unwrap();
            let job = env.blocking_start().unwrap();
            assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
            assert_eq!(records(&job), 300);
            assert!(flushed(&job));
            job.cancel();
            assert!(job.blocking_await_termination(Duration::from_secs(10)));
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
            let gap: u64 = d.partitions.iter().map(|p| p.window_gap_dropped).sum();
            assert_eq!(gap, mem_summary.window_gap_dropped, "{mode:?}");
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
fn tumbling_windows_on_a_cluster_equal_the_memory_engine() {
    run_differential!(
        on TestCluster::start().into_test_redis(),
        "win-tumbling-cluster",
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

#[test]
fn session_windows_on_a_cluster_equal_the_memory_engine() {
    run_differential!(
        on TestCluster::start().into_test_redis(),
        "win-session-cluster",
        EventTimeSessionWindows::with_gap(Duration::from_millis(35)).unwrap(),
        10
    );
}

/// Sliding windows with `slide > size` leave gaps: an element in a gap is in no window,
/// goes to the late output only when late and is otherwise dropped and counted — the
/// same on both engines.
#[test]
fn sliding_windows_with_gaps_equal_the_memory_engine() {
    let mem = windowed!(
        MemoryEnv::new().from_collection(events(300)),
        SlidingEventTimeWindows::of(Duration::from_millis(20), Duration::from_millis(50)).unwrap(),
        10
    )
    .for_each(|_| {})
    .unwrap();
    assert!(mem.window_gap_dropped > 100, "{mem:?}");
    run_differential!(
        "win-sliding-gaps",
        SlidingEventTimeWindows::of(Duration::from_millis(20), Duration::from_millis(50)).unwrap(),
        10
    );
}

/// Runs `events` (one key) through session windows with `apply` on both engines and
/// returns each session's element timestamps as `apply` saw them (memory, Redis).
fn session_arrivals(name: &str, input: &[(String, i64)]) -> (Vec<Vec<i64>>, Vec<Vec<i64>>) {
    macro_rules! sessions {
        ($stream:expr) => {
            $stream
                .assign_timestamps_and_watermarks_with(
                    |e: &(String, i64), _ts: i64| e.1,
                    BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
                )
                .key_by(|e: &(String, i64)| e.0.clone())
                .window(EventTimeSessionWindows::with_gap(Duration::from_millis(10)).unwrap())
                .apply(
                    |_k: &String,
                     _w: &TimeWindow,
                     items: &[(String, i64)],
                     out: &mut streaming::api::Collector<'_, Vec<i64>>| {
                        out.collect(items.iter().map(|e| e.1).collect());
                        Ok(())
                    },
                )
        };
    }
    let mem = sessions!(MemoryEnv::new().from_collection(input.to_vec()))
        .collect_vec()
        .unwrap();
    let s = setup(name);
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    send(&rt, &mq, "ev", input);
    let env = s.env(
        s.config(name, AckMode::Offset)
            .watermark_idle_timeout(Some(Duration::from_millis(200))),
    );
    let out = CollectSink::new();
    sessions!(env
        .from_mq_topic_with_options("ev", "g", earliest(2))
        .map(|m: Message| parse(&m)))
    .sink(out.clone())
    .unwrap();
    let job = env.blocking_start().unwrap();
    assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    (mem, out.snapshot())
}

/// A merged session pane hands `apply` its elements in arrival order (not in the order
/// of the sessions it merged), on both engines — with panes kept in Redis between
/// batches of two records.
#[test]
fn merged_sessions_keep_arrival_order_on_both_engines() {
    let input: Vec<(String, i64)> = [0, 20, 2, 10, 25]
        .iter()
        .map(|&t| ("a".to_string(), t))
        .collect();
    let (mem, redis) = session_arrivals("win-session-order", &input);
    assert_eq!(mem, vec![vec![0, 20, 2, 10, 25]]);
    assert_eq!(redis, mem);
}

/// A record whose window bounds do not fit in `i64` is rejected and the others go on:
/// with a rejected-element output it arrives there on both engines; without one the
/// memory engine counts it and the Redis engine dead-letters it. A rejected record does
/// not move the watermark (the user's generator's nor the engine's own, which is what the
/// partition persists): the records after `i64::MAX` are on time. Windows are the same.
#[test]
fn overflowing_window_bounds_reject_the_record_on_both_engines() {
    let input: Vec<(String, i64)> = vec![
        ("a".into(), 10),
        ("a".into(), i64::MIN),
        ("a".into(), 20),
        ("a".into(), i64::MAX),
        ("a".into(), 30),
        ("a".into(), 150),
    ];
    let assigner = TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap();
    let mem_rejected = CollectSink::new();
    let mem = sorted(
        windowed!(MemoryEnv::new().from_collection(input.clone()), assigner, 0)
            .collect_vec()
            .unwrap(),
    );
    assert_eq!(
        mem,
        vec![
            ("a".into(), TimeWindow::new(0, 100), 3),
            ("a".into(), TimeWindow::new(100, 200), 1)
        ]
    );
    let summary = MemoryEnv::new()
        .from_collection(input.clone())
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(assigner)
        .side_output_rejected(mem_rejected.clone())
        .count()
        .for_each(|_| {})
        .unwrap();
    assert_eq!(summary.window_bounds_rejected, 2);
    assert_eq!(summary.late_elements, 0);
    // Without a rejected-element output the memory engine dead-letters them, like Redis.
    let mut mem_dead = Vec::new();
    let without_output = windowed!(
        MemoryEnv::new()
            .from_collection(input.clone())
            .side_output_dead_letters(|d| mem_dead.push(d)),
        assigner,
        0
    )
    .collect_vec()
    .unwrap();
    assert_eq!(sorted(without_output), mem);
    let mem_letters: Vec<_> = mem_dead
        .iter()
        .map(|d| {
            (
                d.record.clone(),
                d.error_type,
                d.dead_letter_type.as_str(),
                d.attempts,
            )
        })
        .collect();
    assert_eq!(
        mem_letters,
        [
            (
                ("a".to_string(), i64::MIN),
                "window_bounds",
                "window_bounds",
                1
            ),
            (
                ("a".to_string(), i64::MAX),
                "window_bounds",
                "window_bounds",
                1
            ),
        ]
    );
    let s = setup("win-bounds");
    let rt = rt();
    let mq = s.mq(&rt);
    // (topic, with a rejected-element output, with the user's generator after the
    // engine's own watermark operator)
    for (topic, with_output, user_generator) in [
        ("ev-out", true, true),
        ("ev-dlq", false, true),
        ("ev-head", true, false),
    ] {
        rt.block_on(mq.create_topic(topic, 1)).unwrap();
        send(&rt, &mq, topic, &input);
        // The default error policy (retry): a rejected record is a permanent error and is
        // dead-lettered at once, without retries. The idle timeout leaves time to read the
        // watermark before the idle flush raises it to `i64::MAX`.
        let env = s.env(
            s.config(&format!("bounds-{topic}"), AckMode::Offset)
                .watermark_out_of_orderness(Duration::from_millis(25))
                .watermark_idle_timeout(Some(Duration::from_millis(1500))),
        );
        let (out, rejected) = (CollectSink::new(), CollectSink::new());
        let parsed = env
            .from_mq_topic_with_options(topic, "g", earliest(7))
            .map(|m: Message| parse(&m));
        match (with_output, user_generator) {
            (true, true) => parsed
                .assign_timestamps_and_watermarks_with(
                    |e: &(String, i64), _ts: i64| e.1,
                    BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
                )
                .key_by(|e: &(String, i64)| e.0.clone())
                .window(assigner)
                .side_output_rejected(rejected.clone())
                .count()
                .sink(out.clone())
                .unwrap(),
            (false, true) => parsed
                .assign_timestamps_and_watermarks_with(
                    |e: &(String, i64), _ts: i64| e.1,
                    BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
                )
                .key_by(|e: &(String, i64)| e.0.clone())
                .window(assigner)
                .count()
                .sink(out.clone())
                .unwrap(),
            (_, false) => parsed
                .key_by(|e: &(String, i64)| e.0.clone())
                .window(assigner)
                .side_output_rejected(rejected.clone())
                .count()
                .sink(out.clone())
                .unwrap(),
        }
        let job = env.blocking_start().unwrap();
        if with_output {
            wait_until("all records", &job, || records(&job) == 6);
            let d = job.diagnostics();
            assert_eq!(d.partitions[0].watermark, Some(150 - 25), "{topic}");
            assert_eq!(d.partitions[0].window_late_dropped, 0, "{topic}");
        }
        assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
        assert_eq!(sorted(out.snapshot()), mem, "{topic}");
        let failed: u64 = job.diagnostics().partitions.iter().map(|p| p.failed).sum();
        if with_output {
            assert_eq!(failed, 0);
            let got: Vec<streaming::api::RejectedElement<(String, i64)>> = rejected.snapshot();
            let want = mem_rejected.snapshot();
            assert_eq!(got.len(), 2, "{topic}");
            for (got, want) in got.iter().zip(&want) {
                assert_eq!(
                    (&got.element, got.timestamp),
                    (&want.element, want.timestamp)
                );
                assert!(got.operator.ends_with(":window-count"), "{got:?}");
            }
            assert_eq!(got[0].element, ("a".to_string(), i64::MIN));
            assert_eq!(got[1].element, ("a".to_string(), i64::MAX));
        } else {
            assert_eq!(failed, 2);
            assert!(rejected.is_empty());
            let letters = rt.block_on(mq.dead_letters(topic, 10)).unwrap();
            assert_eq!(letters.len(), 2, "{letters:?}");
            for (letter, mem) in letters.iter().zip(&mem_dead) {
                assert_eq!(letter.error_type, "window_bounds");
                assert_eq!(letter.attempts, 1);
                let (k, ts) = &mem.record;
                assert_eq!(&letter.payload[..], format!("{k},{ts}").as_bytes());
                // The same message but for the source id in the operator's.
                let tail = |m: &str| m.split_once("`:").unwrap().1.to_string();
                assert_eq!(tail(&letter.error), tail(&mem.message));
            }
        }
    }
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
            env.from_mq_topic_with_options("ev", "g", earliest(7))
                .map(|m: Message| parse(&m)),
            assigner,
            20
        )
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("records", &job, || {
            records(&job) == until && (!flush || flushed(&job))
        });
        let wm = job.diagnostics().partitions[0].watermark;
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
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
        env.from_mq_topic_with_options("ev", "g", earliest(7))
            .map(|m: Message| parse(&m)),
        TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap(),
        0
    )
    .sink(out.clone())
    .unwrap();
    let job = env.blocking_start().unwrap();
    // The fast partition fires its windows [1000,1100) .. [1700,1800) on its own
    // watermark (1900 - 25 = 1875), although the slow partition's watermark is at -18;
    // [1800,1900) stays open (no idle flush configured).
    wait_until("fast windows", &job, || out.len() == 8);
    wait_until("all records", &job, || records(&job) == 12);
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
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

/// Counts elements per key and, 100 ms of event time after a key's first element, emits
/// `(key, fire time, count so far)` from an event-time timer.
#[derive(Clone)]
struct CountThenReport;

const SEEN: streaming::api::ValueStateDescriptor<u64> =
    streaming::api::ValueStateDescriptor::persistent("seen", 0);

impl streaming::api::KeyedProcessFunction<String, (String, i64)> for CountThenReport {
    type Out = (String, i64, u64);

    fn process_element(
        &mut self,
        value: (String, i64),
        ctx: &mut streaming::api::KeyedContext<'_, String>,
        _out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        let mut seen = ctx.state(&SEEN)?;
        let n = seen.value() + 1;
        seen.update(n);
        if n == 1 {
            ctx.register_event_time_timer(value.1 + 100)?;
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut streaming::api::TimerContext<'_, String>,
        out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        let n = ctx.state(&SEEN)?.value();
        out.collect((ctx.current_key().clone(), timestamp, n));
        Ok(())
    }
}

macro_rules! timed {
    ($stream:expr) => {
        $stream
            .assign_timestamps_and_watermarks_with(
                |e: &(String, i64), _ts: i64| e.1,
                BoundedOutOfOrderness::new(Duration::from_millis(0)).unwrap(),
            )
            .key_by(|e: &(String, i64)| e.0.clone())
            .process_function(CountThenReport)
    };
}

/// Event-time timers are kept in Redis: timers registered before a restart fire after it,
/// with the key that registered them, and the output equals one uninterrupted run (and the
/// memory engine's).
#[test]
fn process_timers_survive_a_restart_and_fire_with_their_key() {
    let s = setup("timers-restart");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    // Keys a, b, c start at 0, 10, 20; the stream advances 5 ms per element to 300.
    let input: Vec<(String, i64)> = (0..60)
        .map(|i| (["a", "b", "c"][i % 3].to_string(), (i as i64) * 5))
        .collect();
    let mut expected = timed!(MemoryEnv::new().from_collection(input.clone()))
        .collect_vec()
        .unwrap();
    expected.sort();
    // Each key fires once, at its first element + 100, with its elements up to then
    // (a: 0, 15, .., 90 — the watermark reaches 100 with b's element at 100).
    assert_eq!(
        expected,
        vec![
            ("a".to_string(), 100, 7),
            ("b".to_string(), 105, 7),
            ("c".to_string(), 110, 7),
        ]
    );
    let out = CollectSink::new();
    let run = |until: u64| {
        let env = s.env(s.config("timers", AckMode::Offset));
        timed!(env
            .from_mq_topic_with_options("ev", "g", earliest(7))
            .map(|m: Message| parse(&m)))
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("records", &job, || records(&job) == until);
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
    };
    // The first run stops at event time 95: every timer is still pending.
    send(&rt, &mq, "ev", &input[..20]);
    run(20);
    assert!(out.is_empty(), "{:?}", out.snapshot());
    send(&rt, &mq, "ev", &input[20..]);
    run(40);
    let mut got = out.snapshot();
    got.sort();
    assert_eq!(got, expected);
}

/// `event_time_timer_max_size`: a record whose timer would exceed the bound fails and goes
/// to the dead-letter queue (never a silently dropped timer); the others are processed.
#[test]
fn a_full_event_time_timer_queue_fails_the_record() {
    let s = setup("timers-full");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    // Five keys, each registering one timer far in the future; the bound is 3.
    let input: Vec<(String, i64)> = (0..5).map(|i| (format!("k{i}"), i)).collect();
    send(&rt, &mq, "ev", &input);
    let env = s.env(
        s.config("timers-full", AckMode::Offset)
            .event_time_timer_max_size(3)
            .processing_error_result(streaming::redis::ProcessingErrorResult::DeadLetter),
    );
    timed!(env
        .from_mq_topic_with_options("ev", "g", earliest(7))
        .map(|m: Message| parse(&m)))
    .sink(CollectSink::new())
    .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("records", &job, || {
        let d = job.diagnostics();
        d.partitions
            .iter()
            .map(|p| p.records + p.failed)
            .sum::<u64>()
            == 5
    });
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    let d = job.diagnostics();
    assert_eq!(d.partitions[0].records, 3);
    assert_eq!(d.partitions[0].failed, 2);
    let dead = rt.block_on(mq.dead_letters("ev", 10)).unwrap();
    let keys: Vec<&str> = dead.iter().filter_map(|m| m.key.as_deref()).collect();
    assert_eq!(keys, ["k3", "k4"]);
    assert!(
        dead.iter()
            .all(|m| m.error.contains("event_time_timer_max_size")
                && m.error_type == "timer_queue_full"),
        "{dead:?}"
    );
}

mod differential {
    //! Property test: random out-of-order input, window kind, lateness, out-of-orderness
    //! and trigger; the Redis engine (one partition, idle flush at the end) gives the
    //! memory engine's output. Bounded cases: each case runs a Redis job.
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use streaming::time::{CountTrigger, EventTimeTrigger};

    macro_rules! prop_pipeline {
        ($stream:expr, $assigner:expr, $lateness:expr, $ooo:expr, $trigger:expr) => {
            $stream
                .assign_timestamps_and_watermarks_with(
                    |e: &(String, i64), _ts: i64| e.1,
                    BoundedOutOfOrderness::new(Duration::from_millis($ooo)).unwrap(),
                )
                .key_by(|e: &(String, i64)| e.0.clone())
                .window($assigner)
                .trigger($trigger)
                .allowed_lateness(Duration::from_millis($lateness))
                .count()
        };
    }

    fn check<A, Tr>(
        s: &Setup,
        input: &[(String, i64)],
        assigner: A,
        (lateness, ooo, max_fires): (u64, u64, Option<u32>),
        trigger: Tr,
    ) -> Result<(), TestCaseError>
    where
        A: streaming::time::WindowAssigner + Clone + Send + 'static,
        A::DefaultTrigger: streaming::time::Trigger<(String, i64)>,
        Tr: streaming::time::Trigger<(String, i64)>
            + serde::Serialize
            + serde::de::DeserializeOwned
            + Send,
        streaming::time::EventTime: streaming::time::Offers<A::Time>
            + streaming::time::Offers<<Tr as streaming::time::Trigger<(String, i64)>>::Time>,
    {
        static CASE: AtomicU32 = AtomicU32::new(0);
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        let rt = rt();
        let mq = s.mq(&rt);
        let topic = format!("prop{case}");
        rt.block_on(mq.create_topic(&topic, 1)).unwrap();
        send(&rt, &mq, &topic, input);
        let expected = sorted(
            prop_pipeline!(
                MemoryEnv::new().from_collection(input.to_vec()),
                assigner.clone(),
                lateness,
                ooo,
                trigger.clone()
            )
            .collect_vec()
            .unwrap(),
        );
        let mut config = s
            .config(&format!("prop{case}"), AckMode::Offset)
            .watermark_idle_timeout(Some(Duration::from_millis(200)));
        if let Some(n) = max_fires {
            config = config.window_max_fires_per_record(n);
        }
        let env = s.env(config);
        let out = CollectSink::new();
        prop_pipeline!(
            env.from_mq_topic_with_options(&topic, "g", earliest(7))
                .map(|m: Message| parse(&m)),
            assigner,
            lateness,
            ooo,
            trigger
        )
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        let n = input.len() as u64;
        prop_assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
        prop_assert_eq!(records(&job), n);
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
        prop_assert_eq!(sorted(out.snapshot()), expected);
        Ok(())
    }

    fn input() -> impl Strategy<Value = Vec<(String, i64)>> {
        prop::collection::vec((0u8..3, 0i64..60, any::<bool>()), 1..60).prop_map(|steps| {
            let mut t = 0i64;
            steps
                .into_iter()
                .map(|(k, dt, back)| {
                    t += dt / 4;
                    let ts = if back { (t - dt).max(0) } else { t + dt / 8 };
                    (format!("k{k}"), ts)
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        #[test]
        fn redis_windows_equal_memory_windows(
            input in input(),
            kind in 0u8..3,
            lateness in 0u64..40,
            ooo in 0u64..30,
            count_trigger in prop::option::of(1u64..4),
            max_fires in prop::option::of(1u32..4),
        ) {
            let s = setup("win-prop");
            let size = Duration::from_millis(40);
            macro_rules! with_trigger {
                ($assigner:expr) => {
                    match count_trigger {
                        Some(n) => check(&s, &input, $assigner, (lateness, ooo, max_fires), CountTrigger::of(n).unwrap()),
                        None => check(&s, &input, $assigner, (lateness, ooo, max_fires), EventTimeTrigger),
                    }
                };
            }
            match kind {
                0 => with_trigger!(TumblingEventTimeWindows::of(size).unwrap())?,
                1 => with_trigger!(SlidingEventTimeWindows::of(size, Duration::from_millis(15)).unwrap())?,
                _ => with_trigger!(EventTimeSessionWindows::with_gap(Duration::from_millis(25)).unwrap())?,
            }
        }
    }
}

/// The idle flush fires every open window; the next records start a new watermark epoch
/// from their own event time (not late against the flushed `i64::MAX`): the output is
/// that of two separate memory runs, one per epoch.
#[test]
fn idle_flush_ends_an_epoch_and_the_next_records_start_a_new_one() {
    let s = setup("win-epoch");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let first: Vec<(String, i64)> = (0..50).map(|i| ("a".to_string(), i * 10)).collect();
    let second: Vec<(String, i64)> = (0..20).map(|i| ("a".to_string(), 50 + i * 5)).collect();
    let assigner = TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap();
    let mut expected = Vec::new();
    for part in [&first, &second] {
        expected.extend(
            windowed!(MemoryEnv::new().from_collection(part.clone()), assigner, 0)
                .collect_vec()
                .unwrap(),
        );
    }
    let expected = sorted(expected);
    let env = s.env(
        s.config("epoch", AckMode::Offset)
            .watermark_idle_timeout(Some(Duration::from_millis(200))),
    );
    let out = CollectSink::new();
    windowed!(
        env.from_mq_topic_with_options("ev", "g", earliest(7))
            .map(|m: Message| parse(&m)),
        assigner,
        0
    )
    .sink(out.clone())
    .unwrap();
    let job = env.blocking_start().unwrap();
    send(&rt, &mq, "ev", &first);
    wait_until("first epoch flushed", &job, || {
        records(&job) == 50 && job.diagnostics().partitions[0].idle_flushes == 1
    });
    assert_eq!(job.diagnostics().partitions[0].watermark, Some(i64::MAX));
    send(&rt, &mq, "ev", &second);
    wait_until("second epoch flushed", &job, || {
        records(&job) == 70 && job.diagnostics().partitions[0].idle_flushes == 2
    });
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    let d = job.diagnostics();
    assert_eq!(d.partitions[0].window_late_dropped, 0);
    assert_eq!(sorted(out.snapshot()), expected);
    // [0,100) and [100,200) of the second epoch are windows of their own.
    assert_eq!(
        out.snapshot()
            .iter()
            .filter(|(_, w, _)| w.start() == 100)
            .map(|(_, _, n)| *n)
            .collect::<Vec<_>>(),
        [10, 10]
    );
}

/// A generator that marks its input idle when it sees key `idle`.
#[derive(Clone)]
struct IdleOnMarker;

impl streaming::time::WatermarkGenerator<(String, i64)> for IdleOnMarker {
    fn on_event(
        &mut self,
        event: &(String, i64),
        timestamp: i64,
        output: &mut streaming::time::WatermarkOutput,
    ) {
        if event.0 == "idle" {
            output.mark_idle();
        } else {
            output.raise(timestamp);
        }
    }
}

/// `mark_idle` flushes at once (the idle timeout here is far longer than the test), and a
/// generator that never raises leaves the watermark at `i64::MIN` (nothing fires).
#[test]
fn mark_idle_flushes_and_a_silent_generator_keeps_min() {
    let s = setup("win-mark-idle");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let env = s.env(
        s.config("mark-idle", AckMode::Offset)
            .watermark_idle_timeout(Some(Duration::from_secs(3600))),
    );
    let out = CollectSink::new();
    env.from_mq_topic_with_options("ev", "g", earliest(7))
        .map(|m: Message| parse(&m))
        .assign_timestamps_and_watermarks_with(|e: &(String, i64), _ts: i64| e.1, IdleOnMarker)
        .filter(|e: &(String, i64)| e.0 != "idle")
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .count()
        .sink(out.clone())
        .unwrap();
    let silent = CollectSink::new();
    env.from_mq_topic_with_options("ev", "silent", earliest(7))
        .map(|m: Message| parse(&m))
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            streaming::time::NoWatermarks,
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .count()
        .sink(silent.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let input: Vec<(String, i64)> = vec![
        ("a".into(), 10),
        ("a".into(), 20),
        ("a".into(), 150),
        ("idle".into(), 0),
    ];
    send(&rt, &mq, "ev", &input);
    wait_until("the idle mark flushes", &job, || {
        let d = job.diagnostics();
        d.partitions
            .iter()
            .any(|p| p.group == "g" && p.idle_flushes == 1)
    });
    wait_until("the silent pipeline read everything", &job, || {
        job.diagnostics()
            .partitions
            .iter()
            .any(|p| p.group == "silent" && p.records == 4)
    });
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    assert_eq!(
        sorted(out.snapshot()),
        vec![
            ("a".to_string(), TimeWindow::new(0, 100), 2),
            ("a".to_string(), TimeWindow::new(100, 200), 1),
        ]
    );
    assert!(silent.is_empty(), "{:?}", silent.snapshot());
    let d = job.diagnostics();
    let silent_p = d.partitions.iter().find(|p| p.group == "silent").unwrap();
    assert_eq!(silent_p.watermark, Some(i64::MIN));
    assert_eq!(silent_p.idle_flushes, 0);
}

/// `window_max_fires_per_record`: with a cap of 1, five windows that become due together
/// fire one per record, before each following record; none is lost.
#[test]
fn window_fires_per_record_are_capped_and_carried_over() {
    let s = setup("win-cap");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let env = s.env(
        s.config("cap", AckMode::Offset)
            .window_max_fires_per_record(1),
    );
    let out = CollectSink::new();
    let one = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(1)
        .poll_timeout(Duration::from_millis(20))
        .build()
        .unwrap();
    windowed!(
        env.from_mq_topic_with_options("ev", "g", one)
            .map(|m: Message| parse(&m)),
        TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap(),
        0
    )
    .sink(out.clone())
    .unwrap();
    let job = env.blocking_start().unwrap();
    let fired = |j: &JobClient| j.diagnostics().partitions[0].window_fired;
    // Five keys with a window [0, 100) each.
    let keys: Vec<(String, i64)> = (0..5).map(|i| (format!("k{i}"), i)).collect();
    send(&rt, &mq, "ev", &keys);
    // Watermark to 300 - 25: all five windows are due; one fires.
    send(&rt, &mq, "ev", &[("z".to_string(), 300)]);
    wait_until("6 records", &job, || records(&job) == 6);
    assert_eq!(fired(&job), 1);
    // Each further record first fires one more carried-over window.
    for (i, ts) in [301, 302, 303, 304].into_iter().enumerate() {
        send(&rt, &mq, "ev", &[("z".to_string(), ts)]);
        wait_until("next record", &job, || records(&job) == 7 + i as u64);
        assert_eq!(fired(&job), 2 + i as u64);
    }
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    let got = sorted(out.snapshot());
    let want: Vec<Counted> = (0..5)
        .map(|i| (format!("k{i}"), TimeWindow::new(0, 100), 1))
        .collect();
    assert_eq!(got, want);
}

/// Late elements go to the typed late side output on the Redis engine too, and are
/// counted in the partition's `window_late_dropped`.
#[test]
fn late_elements_reach_the_side_output() {
    let s = setup("win-late");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let input: Vec<(String, i64)> = vec![
        ("a".into(), 10),
        ("a".into(), 250),
        ("a".into(), 20), // late: [0,100) closed at watermark 225
        ("a".into(), 260),
        ("a".into(), 99), // late
    ];
    let mem_late = CollectSink::new();
    let assigner = TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap();
    let mem = sorted(
        MemoryEnv::new()
            .from_collection(input.clone())
            .assign_timestamps_and_watermarks_with(
                |e: &(String, i64), _ts: i64| e.1,
                BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
            )
            .key_by(|e: &(String, i64)| e.0.clone())
            .window(assigner)
            .side_output_late_data(mem_late.clone())
            .count()
            .collect_vec()
            .unwrap(),
    );
    send(&rt, &mq, "ev", &input);
    let env = s.env(
        s.config("late", AckMode::Offset)
            .watermark_idle_timeout(Some(Duration::from_millis(200))),
    );
    let (out, late) = (CollectSink::new(), CollectSink::new());
    env.from_mq_topic_with_options("ev", "g", earliest(7))
        .map(|m: Message| parse(&m))
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            BoundedOutOfOrderness::new(Duration::from_millis(25)).unwrap(),
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(assigner)
        .side_output_late_data(late.clone())
        .count()
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    wait_until("records and flush", &job, || {
        records(&job) == 5 && flushed(&job)
    });
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    assert_eq!(sorted(out.snapshot()), mem);
    assert_eq!(
        late.snapshot(),
        vec![("a".to_string(), 20), ("a".to_string(), 99)]
    );
    assert_eq!(late.snapshot(), mem_late.snapshot());
    assert_eq!(job.diagnostics().partitions[0].window_late_dropped, 2);
}

/// On the Redis engine processing time is the wall clock: a processing-time timer fires
/// while the partition has no input, with its key — also after a restart (timers are in
/// Redis).
#[derive(Clone)]
struct RemindLater(i64);

impl streaming::api::KeyedProcessFunction<String, (String, i64)> for RemindLater {
    type Out = String;

    fn process_element(
        &mut self,
        _value: (String, i64),
        ctx: &mut streaming::api::KeyedContext<'_, String>,
        _out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        let now = ctx.current_processing_time();
        ctx.register_processing_time_timer(now + self.0);
        Ok(())
    }

    fn on_timer(
        &mut self,
        _timestamp: i64,
        ctx: &mut streaming::api::TimerContext<'_, String>,
        out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        out.collect(ctx.current_key().clone());
        Ok(())
    }
}

#[test]
fn processing_time_timers_fire_on_the_wall_clock_and_survive_a_restart() {
    let s = setup("timers-wall");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let input: Vec<(String, i64)> = ["a", "b", "c"].iter().map(|k| (k.to_string(), 0)).collect();
    send(&rt, &mq, "ev", &input);
    let out = CollectSink::new();
    let start = |out: &CollectSink<String>| {
        let env = s.env(s.config("wall", AckMode::Offset));
        env.from_mq_topic_with_options("ev", "g", earliest(7))
            .map(|m: Message| parse(&m))
            .key_by(|e: &(String, i64)| e.0.clone())
            .process_function(RemindLater(3000))
            .sink(out.clone())
            .unwrap();
        env.blocking_start().unwrap()
    };
    let job = start(&out);
    wait_until("3 records", &job, || records(&job) == 3);
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    // Cancelled well before the 3 s timers were due (unless this machine stalled).
    let early = out.len();
    let job = start(&out);
    wait_until("the timers", &job, || out.len() == 3);
    job.cancel();
    assert!(job.blocking_await_termination(Duration::from_secs(10)));
    let mut got = out.snapshot();
    got.sort();
    assert_eq!(got, ["a", "b", "c"]);
    assert_eq!(early, 0, "timers fired before they were due");
}

/// `await_flushed` needs an idle timeout (otherwise nothing ever flushes): an error that
/// names the setting.
#[test]
fn await_flushed_without_an_idle_timeout_is_a_config_error() {
    let s = setup("win-no-idle");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let env = s.env(s.config("no-idle", AckMode::Offset));
    env.from_mq_topic_with_options("ev", "g", earliest(7))
        .map(|m: Message| parse(&m))
        .sink(CollectSink::new())
        .unwrap();
    let job = env.blocking_start().unwrap();
    let e = job
        .blocking_await_flushed(Duration::from_secs(1))
        .unwrap_err();
    assert!(
        matches!(
            e,
            streaming::Error::InvalidConfig {
                field: "watermark_idle_timeout",
                ..
            }
        ),
        "{e}"
    );
    job.blocking_shutdown(Duration::MAX);
}

/// A fire cap never changes results: with 40 sessions due at once and a cap of 4, each key's
/// due session fires before that key's next element is added (it neither merges into the
/// overdue session nor is added to it) — the output equals the memory engine's.
#[test]
fn the_fire_cap_does_not_change_results() {
    let s = setup("win-cap-results");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    let keys: Vec<String> = (0..40).map(|i| format!("k{i:02}")).collect();
    let mut input: Vec<(String, i64)> = keys.iter().map(|k| (k.clone(), 0)).collect();
    input.push(("z".to_string(), 1000));
    input.extend(keys.iter().rev().map(|k| (k.clone(), 500)));
    let session = EventTimeSessionWindows::with_gap(Duration::from_millis(1000)).unwrap();
    let expected = sorted(
        MemoryEnv::new()
            .from_collection(input.clone())
            .assign_timestamps_and_watermarks_with(
                |e: &(String, i64), _ts: i64| e.1,
                BoundedOutOfOrderness::new(Duration::ZERO).unwrap(),
            )
            .key_by(|e: &(String, i64)| e.0.clone())
            .window(session)
            .count()
            .collect_vec()
            .unwrap(),
    );
    // Memory: each k's session [0, 1000) fires at watermark 1000 (touching is not enough:
    // it is cleaned up first), and its element at 500 starts a new one: 81 sessions.
    assert_eq!(expected.len(), 81);
    send(&rt, &mq, "ev", &input);
    let env = s.env(
        s.config("cap-results", AckMode::Offset)
            .window_max_fires_per_record(4)
            .watermark_idle_timeout(Some(Duration::from_millis(200))),
    );
    let out = CollectSink::new();
    env.from_mq_topic_with_options("ev", "g", earliest(100))
        .map(|m: Message| parse(&m))
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            BoundedOutOfOrderness::new(Duration::ZERO).unwrap(),
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(session)
        .count()
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(sorted(out.snapshot()), expected);
}

/// After an idle flush the partition reports `i64::MAX` until a record starts the next
/// epoch — also when a processing-time timer commits in between.
#[test]
fn the_flushed_watermark_stays_reported_until_the_next_epoch() {
    let s = setup("win-flushed-wm");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    send(&rt, &mq, "ev", &[("a".to_string(), 10)]);
    let env = s.env(
        s.config("flushed-wm", AckMode::Offset)
            .watermark_idle_timeout(Some(Duration::from_millis(100))),
    );
    let out = CollectSink::new();
    env.from_mq_topic_with_options("ev", "g", earliest(7))
        .map(|m: Message| parse(&m))
        .key_by(|e: &(String, i64)| e.0.clone())
        .process_function(RemindLater(1000))
        .sink(out.clone())
        .unwrap();
    let job = env.blocking_start().unwrap();
    // The flush (after 100 ms) comes before the timer (after 1 s) commits its output. The
    // sink sees the output just before the commit, so wait for the commit's report.
    let timer_committed = || (job.diagnostics().partitions.iter()).any(|p| p.batches >= 2);
    wait_until("the timer's commit reported", &job, timer_committed);
    let p = job.diagnostics().partitions[0].clone();
    job.blocking_shutdown(Duration::MAX);
    assert_eq!(out.len(), 1, "the timer's output");
    assert_eq!(p.idle_flushes, 1);
    assert_eq!(p.watermark, Some(i64::MAX));
}

const DEADLINE: streaming::api::ValueStateDescriptor<i64> =
    streaming::api::ValueStateDescriptor::persistent("deadline", i64::MIN);

/// Debounce: each element deletes its key's pending event-time timer and registers one
/// 30 ms after it; a timer emits `(key, time)`: the end of the key's burst.
#[derive(Clone)]
struct Debounce;

impl streaming::api::KeyedProcessFunction<String, (String, i64)> for Debounce {
    type Out = (String, i64);

    fn process_element(
        &mut self,
        value: (String, i64),
        ctx: &mut streaming::api::KeyedContext<'_, String>,
        _out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        let old = ctx.state(&DEADLINE)?.value();
        if old != i64::MIN {
            ctx.delete_event_time_timer(old);
        }
        ctx.register_event_time_timer(value.1 + 30)?;
        ctx.state(&DEADLINE)?.update(value.1 + 30);
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut streaming::api::TimerContext<'_, String>,
        out: &mut streaming::api::Collector<'_, Self::Out>,
    ) -> Result<(), streaming::BoxError> {
        out.collect((ctx.current_key().clone(), timestamp));
        Ok(())
    }
}

/// A deleted event-time timer never fires on either engine, also when it was deleted
/// before a restart (the deletion commits with its batch) or registered before one.
#[test]
fn deleted_timers_stay_deleted_across_a_restart_on_both_engines() {
    macro_rules! debounced {
        ($stream:expr) => {
            $stream
                .assign_timestamps_and_watermarks_with(
                    |e: &(String, i64), _ts: i64| e.1,
                    BoundedOutOfOrderness::new(Duration::from_millis(0)).unwrap(),
                )
                .key_by(|e: &(String, i64)| e.0.clone())
                .process_function(Debounce)
        };
    }
    let s = setup("timers-delete");
    let rt = rt();
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("ev", 1)).unwrap();
    // a at 0, 10, 20 deletes timers 30 and 40; b at 5, 15 deletes 35 | restart | b at 40
    // deletes 45 (registered before the restart); a at 100 (seen before its watermark)
    // deletes 50, a at 110 deletes 130; c far ahead fires the rest.
    let input: Vec<(String, i64)> = [
        ("a", 0),
        ("b", 5),
        ("a", 10),
        ("b", 15),
        ("a", 20),
        ("b", 40),
        ("a", 100),
        ("a", 110),
        ("c", 1000),
    ]
    .iter()
    .map(|(k, t)| (k.to_string(), *t))
    .collect();
    let mem = debounced!(MemoryEnv::new().from_collection(input.clone()))
        .collect_vec()
        .unwrap();
    let s_ = |k: &str, t: i64| (k.to_string(), t);
    assert_eq!(mem, vec![s_("b", 70), s_("a", 140), s_("c", 1030)]);
    let out = CollectSink::new();
    let run = |until: u64| {
        let env = s.env(s.config("timers-delete", AckMode::Offset));
        debounced!(env
            .from_mq_topic_with_options("ev", "g", earliest(2))
            .map(|m: Message| parse(&m)))
        .sink(out.clone())
        .unwrap();
        let job = env.blocking_start().unwrap();
        wait_until("records", &job, || records(&job) == until);
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
    };
    send(&rt, &mq, "ev", &input[..5]);
    run(5);
    assert!(out.is_empty(), "{:?}", out.snapshot());
    send(&rt, &mq, "ev", &input[5..]);
    run(4);
    // c's timer is pending (no later watermark); the rest equals the memory engine.
    assert_eq!(out.snapshot(), mem[..2]);
}

/// Runs the same pipeline tail on both engines over `input` (`(key, event time)` with a
/// bounded-out-of-orderness watermark of `$ooo` ms; Redis: one partition, batches of 3,
/// ended by an idle flush) and returns (memory output, Redis output), each in emission
/// order.
macro_rules! both_engines {
    ($name:expr, $input:expr, $ooo:expr, |$s:ident| $tail:expr) => {{
        let (name, input): (&str, Vec<(String, i64)>) = ($name, $input);
        let mem = {
            let $s = MemoryEnv::new()
                .from_collection(input.clone())
                .assign_timestamps_and_watermarks_with(
                    |e: &(String, i64), _ts: i64| e.1,
                    BoundedOutOfOrderness::new(Duration::from_millis($ooo)).unwrap(),
                );
            $tail.collect_vec().unwrap()
        };
        let s = setup(name);
        let rt = rt();
        let mq = s.mq(&rt);
        rt.block_on(mq.create_topic("ev", 1)).unwrap();
        send(&rt, &mq, "ev", &input);
        let env = s.env(
            s.config(name, AckMode::Offset)
                .watermark_idle_timeout(Some(Duration::from_millis(200))),
        );
        let out = CollectSink::new();
        {
            let $s = env
                .from_mq_topic_with_options("ev", "g", earliest(3))
                .map(|m: Message| parse(&m))
                .assign_timestamps_and_watermarks_with(
                    |e: &(String, i64), _ts: i64| e.1,
                    BoundedOutOfOrderness::new(Duration::from_millis($ooo)).unwrap(),
                );
            $tail.sink(out.clone()).unwrap();
        }
        let job = env.blocking_start().unwrap();
        assert!(job.blocking_await_flushed(Duration::from_secs(60)).unwrap());
        assert_eq!(records(&job), input.len() as u64);
        job.cancel();
        assert!(job.blocking_await_termination(Duration::from_secs(10)));
        (mem, out.snapshot())
    }};
}

fn keyed_input(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(k, t)| (k.to_string(), *t)).collect()
}

/// `PurgingTrigger::of(CountTrigger)`: every firing emits only the elements since the
/// last one; the leftovers are emitted once when the window is cleaned up.
#[test]
fn purging_count_trigger_equals_the_memory_engine() {
    let input = keyed_input(&[
        ("a", 1),
        ("b", 2),
        ("a", 3),
        ("a", 5),
        ("b", 6),
        ("a", 7),
        ("a", 9),
        ("b", 120),
    ]);
    let (mem, redis) = both_engines!("trig-purging", input, 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .trigger(PurgingTrigger::of(CountTrigger::of(2).unwrap()))
        .sum_by(|e: &(String, i64)| e.1)
        .map(|(k, w, sum): (String, TimeWindow, i64)| (k, w.start(), sum)));
    let s_ = |k: &str, start: i64, sum: i64| (k.to_string(), start, sum);
    assert_eq!(
        mem,
        vec![
            s_("a", 0, 4),
            s_("b", 0, 8),
            s_("a", 0, 12),
            // b at 120 moves the watermark past [0, 100): a's leftover 9 is emitted once.
            s_("a", 0, 9),
            // End of input: b's leftover 120.
            s_("b", 100, 120),
        ]
    );
    assert_eq!(redis, mem);
}

/// `ContinuousEventTimeTrigger`: early cumulative results every interval of event time,
/// then the final result when the watermark passes the window's end.
#[test]
fn continuous_event_time_trigger_equals_the_memory_engine() {
    let input = keyed_input(&[
        ("a", 5),
        ("a", 12),
        ("b", 15),
        ("a", 31),
        ("a", 45),
        ("b", 72),
        ("a", 150),
    ]);
    let (mem, redis) = both_engines!("trig-continuous", input, 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .trigger(ContinuousEventTimeTrigger::of(Duration::from_millis(20)).unwrap())
        .count()
        .map(|(k, w, n): (String, TimeWindow, u64)| (k, w.start(), n)));
    let s_ = |k: &str, start: i64, n: u64| (k.to_string(), start, n);
    assert_eq!(
        mem,
        vec![
            // An element is counted before the watermark it moves. Watermark 31: the
            // firings at 20 (scheduled by a at 5 and b at 15), then 40, 60, 80 as the
            // watermark passes them, and the window's end (99).
            s_("a", 0, 3),
            s_("b", 0, 1),
            s_("a", 0, 4),
            s_("b", 0, 1),
            s_("a", 0, 4),
            s_("b", 0, 2),
            s_("a", 0, 4),
            s_("b", 0, 2),
            s_("a", 0, 4),
            s_("b", 0, 2),
            // a at 150 schedules 160 (the next multiple of 20), then 180, then the end (199).
            s_("a", 100, 1),
            s_("a", 100, 1),
            s_("a", 100, 1),
        ]
    );
    assert_eq!(redis, mem);
}

/// `GlobalWindows`: one window per key that fires only by its trigger; contents never
/// emitted are emitted once by the final watermark (memory: end of input; Redis: the idle
/// flush).
#[test]
fn global_windows_with_count_triggers_equal_the_memory_engine() {
    let input = keyed_input(&[
        ("a", 1),
        ("b", 2),
        ("a", 3),
        ("a", 4),
        ("b", 5),
        ("a", 6),
        ("a", 7),
        ("a", 8),
    ]);
    let (mem, redis) = both_engines!("global-count", input.clone(), 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(GlobalWindows::create())
        .trigger(CountTrigger::of(3).unwrap())
        .sum_by(|e: &(String, i64)| e.1)
        .map(|(k, w, sum): (String, TimeWindow, i64)| {
            assert_eq!(w, TimeWindow::GLOBAL);
            (k, sum)
        }));
    let s_ = |k: &str, sum: i64| (k.to_string(), sum);
    // Cumulative firings every 3 elements; b's 2 elements are emitted at the end.
    assert_eq!(mem, vec![s_("a", 8), s_("a", 29), s_("b", 7)]);
    assert_eq!(redis, mem);
    let (mem, redis) = both_engines!("global-purging", input, 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(GlobalWindows::create())
        .allowed_lateness(Duration::from_millis(1))
        .trigger(PurgingTrigger::of(CountTrigger::of(3).unwrap()))
        .sum_by(|e: &(String, i64)| e.1)
        .map(|(k, _w, sum): (String, TimeWindow, i64)| (k, sum)));
    assert_eq!(mem, vec![s_("a", 8), s_("a", 21), s_("b", 7)]);
    assert_eq!(redis, mem);
}

/// Keyed rolling `sum_by`, `min_by`, `max_by`: one output per element, the same on both
/// engines (the running values live in Redis between batches).
#[test]
fn rolling_sum_min_max_by_equal_the_memory_engine() {
    let input = keyed_input(&[
        ("a", 5),
        ("b", 9),
        ("a", 2),
        ("a", 8),
        ("b", 3),
        ("a", 2),
        ("b", 12),
    ]);
    let (mem, redis) = both_engines!("rolling-sum-by", input.clone(), 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .sum_by(|e: &(String, i64)| e.1));
    let s_ = |k: &str, v: i64| (k.to_string(), v);
    assert_eq!(
        mem,
        [
            s_("a", 5),
            s_("b", 9),
            s_("a", 7),
            s_("a", 15),
            s_("b", 12),
            s_("a", 17),
            s_("b", 24)
        ]
    );
    assert_eq!(redis, mem);
    // By value modulo 5: a's elements 5, 2, 8, 2 are 0, 2, 3, 2; b's 9, 3, 12 are 4, 3, 2.
    let (mem, redis) = both_engines!("rolling-min-by", input.clone(), 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .min_by(|e: &(String, i64)| e.1 % 5));
    assert_eq!(
        mem,
        [
            s_("a", 5),
            s_("b", 9),
            s_("a", 5),
            s_("a", 5),
            s_("b", 3),
            s_("a", 5),
            s_("b", 12)
        ]
    );
    assert_eq!(redis, mem);
    let (mem, redis) = both_engines!("rolling-max-by", input, 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .max_by(|e: &(String, i64)| e.1 % 5));
    assert_eq!(
        mem,
        [
            s_("a", 5),
            s_("b", 9),
            s_("a", 2),
            s_("a", 8),
            s_("b", 9),
            // Ties keep the earliest element.
            s_("a", 8),
            s_("b", 9)
        ]
    );
    assert_eq!(redis, mem);
}

/// Windowed `sum_by`, `min_by`, `max_by` over tumbling windows with allowed lateness (a
/// late-but-allowed element fires the window again).
#[test]
fn windowed_sum_min_max_by_equal_the_memory_engine() {
    let input = keyed_input(&[
        ("a", 5),
        ("b", 9),
        ("a", 2),
        ("a", 18),
        ("b", 13),
        ("a", 7),
        ("b", 31),
        ("a", 40),
    ]);
    macro_rules! windowed_by {
        ($name:expr, $method:ident) => {
            both_engines!($name, input.clone(), 0, |s| s
                .key_by(|e: &(String, i64)| e.0.clone())
                .window(TumblingEventTimeWindows::of(Duration::from_millis(10)).unwrap())
                .allowed_lateness(Duration::from_millis(5))
                .$method(|e: &(String, i64)| e.1 % 4))
        };
    }
    let (mem, redis) = both_engines!("windowed-sum-by", input.clone(), 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)).unwrap())
        .allowed_lateness(Duration::from_millis(5))
        .sum_by(|e: &(String, i64)| e.1)
        .map(|(k, w, sum): (String, TimeWindow, i64)| (k, w.start(), sum)));
    let s_ = |k: &str, start: i64, v: i64| (k.to_string(), start, v);
    assert_eq!(
        mem,
        [
            // An element counts before the watermark it moves: b at 9 fires [0, 10).
            s_("a", 0, 5),
            s_("b", 0, 9),
            // a at 2 is late but within the lateness (cleanup at 9 + 5 > watermark 9):
            // the window fires again. a at 7 comes after watermark 18 >= 14: dropped.
            s_("a", 0, 7),
            // b at 31: [10, 20) of a and b.
            s_("a", 10, 18),
            s_("b", 10, 13),
            s_("b", 30, 31),
            s_("a", 40, 40),
        ]
    );
    assert_eq!(redis, mem);
    let (mem, redis) = windowed_by!("windowed-min-by", min_by);
    assert_eq!(redis, mem);
    assert_eq!(mem.len(), 7, "{mem:?}");
    let (mem2, redis) = windowed_by!("windowed-max-by", max_by);
    assert_eq!(redis, mem2);
    // a's [0, 10) fires again with 5 and 2 (1 and 2 modulo 4): min 5, max 2.
    assert_eq!(mem[2], ("a".to_string(), 5));
    assert_eq!(mem2[2], ("a".to_string(), 2));
    // b's [10, 20) holds 13 alone.
    assert_eq!(mem[4], ("b".to_string(), 13));
}

/// The windows one element creates in sliding windows fire in descending start order on
/// both engines: on the element (a count trigger) and on one watermark step (periodic
/// firings at the same time).
#[test]
fn sliding_windows_fire_in_descending_start_order_on_both_engines() {
    let input = keyed_input(&[("a", 25), ("a", 26), ("a", 61)]);
    let (mem, redis) = both_engines!("sliding-order-count", input.clone(), 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(
            SlidingEventTimeWindows::of(Duration::from_millis(30), Duration::from_millis(10))
                .unwrap()
        )
        .trigger(PurgingTrigger::of(CountTrigger::of(1).unwrap()))
        .count()
        .map(|(_k, w, n): (String, TimeWindow, u64)| (w.start(), n)));
    assert_eq!(
        mem,
        [
            (20, 1),
            (10, 1),
            (0, 1),
            (20, 1),
            (10, 1),
            (0, 1),
            (60, 1),
            (50, 1),
            (40, 1)
        ]
    );
    assert_eq!(redis, mem);
    let (mem, redis) = both_engines!("sliding-order-continuous", input, 0, |s| s
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(
            SlidingEventTimeWindows::of(Duration::from_millis(30), Duration::from_millis(10))
                .unwrap()
        )
        .trigger(ContinuousEventTimeTrigger::of(Duration::from_millis(100)).unwrap())
        .count()
        .map(|(_k, w, n): (String, TimeWindow, u64)| (w.start(), n)));
    // Every window's periodic firing is capped at its end; a at 61 moves the watermark
    // past the ends 29, 39, 49 (time order), and the final watermark fires the rest.
    assert_eq!(mem[..3], [(0, 2), (10, 2), (20, 2)]);
    assert_eq!(redis, mem);
}

/// A window feeding a keyed `reduce`: the reduce's keys are fetched when windows fire at
/// an idle flush, also at the second flush of a process (after the first, the partition's
/// chain is renewed and the reduce's keys may not be in memory).
#[test]
fn windows_feeding_a_keyed_reduce_fire_at_every_idle_flush() {
    let rt = rt();
    let s = setup("win-reduce");
    let mq = s.mq(&rt);
    rt.block_on(mq.create_topic("wr", 1)).unwrap();
    let env = s.env(
        s.config("win-reduce", AckMode::Offset)
            .watermark_idle_timeout(Some(Duration::from_millis(200))),
    );
    let out = CollectSink::new();
    env.from_mq_topic_with_options("wr", "g", earliest(50))
        .map(|m: Message| parse(&m))
        .assign_timestamps_and_watermarks_with(
            |e: &(String, i64), _ts: i64| e.1,
            BoundedOutOfOrderness::new(Duration::from_millis(5)).unwrap(),
        )
        .key_by(|e: &(String, i64)| e.0.clone())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(100)).unwrap())
        .count()
        .map(|(k, _w, n): (String, TimeWindow, u64)| (k, n))
        .key_by(|e: &(String, u64)| e.0.clone())
        .reduce(|a: (String, u64), b: (String, u64)| (a.0, a.1 + b.1))
        .sink(out.clone())
        .unwrap();
    let phase = |from: i64| -> Vec<(String, i64)> {
        (0..20).map(|i| (format!("w{}", i % 4), from + i)).collect()
    };
    let job = env.blocking_start().unwrap();
    send(&rt, &mq, "wr", &phase(0));
    wait_until("the first flush", &job, || out.len() == 4);
    send(&rt, &mq, "wr", &phase(100));
    wait_until("the second flush", &job, || out.len() == 8);
    job.blocking_shutdown(Duration::MAX);
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for (k, n) in out.snapshot() {
        last.insert(k, n);
    }
    let expected: BTreeMap<String, u64> = (0..4).map(|i| (format!("w{i}"), 10)).collect();
    assert_eq!(last, expected, "each key: 5 in each window");
    assert!(
        job.diagnostics().errors.is_empty(),
        "{:?}",
        job.diagnostics().errors
    );
}
