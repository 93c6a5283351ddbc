//! End-to-end throughput of the Redis engine: a keyed count (`ValueState` per key) over a
//! 4-partition topic, against a hand-written redis-rs loop (XREADGROUP COUNT 100 → HINCRBY
//! per record → XACK per batch).
//!
//! ```text
//! cargo run --release -p streaming --example redis_engine_bench -- [--redis-url URL] [--messages N]
//! cargo run --release -p streaming --example redis_engine_bench -- --latency [--redis-url URL] [--rate MSG_PER_S] [--seconds S]
//! cargo run --release -p streaming --example redis_engine_bench -- --windows [--redis-url URL] [--messages N] [--ts-step-ms MS]
//! cargo run --release -p streaming --example redis_engine_bench -- --window-only KEYS PARALLELISM [--redis-url URL] [--messages N]
//! cargo run --release -p streaming --example redis_engine_bench -- --takeover [--redis-url URL] [--keys N]
//! cargo run --release -p streaming --example redis_engine_bench -- --lua-args [--redis-url URL]
//! cargo run --release -p streaming --example redis_engine_bench -- --checkpoint [--redis-url URL] [--messages N]
//! cargo run --release -p streaming --example redis_engine_bench [--features postgres] -- --sinks [--redis-url URL] [--messages N] [--postgres CONNECTION] [--sink-kinds NAMES]
//! cargo run --release -p streaming --example redis_engine_bench -- --only KEYS xack|offset PARALLELISM [--messages N]
//! cargo run --release -p streaming --example redis_engine_bench -- --cluster-url redis+cluster://H:P,... [--redis-url URL] [--messages N] [--repeats R]
//! cargo run --release -p streaming --example redis_engine_bench -- --spans [--redis-url URL] [--messages N] [--repeats R]
//! cargo run --release -p streaming --example redis_engine_bench -- --two-inputs [--redis-url URL] [--messages N] [--repeats R]
//! ```
//! `--two-inputs` compares a keyed co-process job over two co-partitioned topics with the
//! keyed count over one, on the same total records (see `bench_support/two_inputs.rs`).
//! `--spans` compares the keyed count (16 keys, Offset, parallelism 1) with the engine's
//! tracing spans not listened to and listened to (see `bench_support/spans.rs`).
//! `--cluster-url` compares the keyed count on one Redis and on a cluster, without and
//! with `commit_replica_wait` (see `cluster_main`).
//! `--only` runs one engine scenario of throughput mode (e.g. under `perf record`);
//! `--window-only` the tumbling window count of window mode.
//! Needs a running Redis (default `redis://127.0.0.1:6379`); everything it writes is under
//! fresh key prefixes. Throughput mode: messages are produced first; the figure is messages
//! per second from `blocking_start` until every message is committed. Latency mode: a
//! producer sends at a steady rate (default 10,000 msg/s, 10 s) while the job runs; each
//! message carries its send time, the job's [`RedisListSink`] appends it in the batch's
//! commit script, and a watcher reading the lists takes the time from send to the commit
//! being visible in Redis. Window mode (issue #6 §5): on the same input (messages with
//! event times `T0 + i × ts-step-ms`, default 1 ms, `T0` on a minute boundary), the keyed
//! count and a 1-minute tumbling event-time window count per key
//! (`key_by → window(TumblingEventTimeWindows::of(60 s)) → count()`), each timed from
//! `blocking_start` until every message is committed, with the windows fired by then and,
//! after an idle flush (not timed), the total against the expected number of
//! (key, window) pairs. Takeover mode: see `bench_support/takeover.rs`; checkpoint mode:
//! `bench_support/checkpoint.rs`; sink mode: `bench_support/sinks.rs`; script-argument
//! mode: `bench_support/lua_args.rs`. All modes print a
//! Markdown table.

use std::time::{Duration, Instant};

use streaming::api::ValueStateDescriptor;
use streaming::mq::{
    ArcStr, Message, Mq, MqOptions, OutgoingMessage, StartPolicy, SubscriptionOptions,
};
use streaming::redis::{
    AckMode, JobClient, RedisEnv, RedisListSink, RedisRuntimeConfig, ReplicaWait,
};
use streaming::time::TumblingEventTimeWindows;
use streaming::{pipeline, BoxError};

#[path = "bench_support/checkpoint.rs"]
mod checkpoint;
#[path = "bench_support/lua_args.rs"]
mod lua_args;
#[path = "bench_support/sinks.rs"]
mod sinks;
#[path = "bench_support/spans.rs"]
mod spans;
#[path = "bench_support/takeover.rs"]
mod takeover;
#[path = "bench_support/two_inputs.rs"]
mod two_inputs;

const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

/// A sink that drops records (the benchmark measures the engine, not a sink).
#[derive(Clone, Copy)]
struct Discard;

impl<T> streaming::api::Sink<T> for Discard {
    fn invoke(&mut self, _value: T) -> Result<(), BoxError> {
        Ok(())
    }
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("bench-{tag}-{}-{nanos}", std::process::id())
}

/// Event time of the first message in window mode: a minute boundary (2023-11-14T22:14Z),
/// so the first 1-minute window is a whole one.
const T0_MS: i64 = 28_333_334 * 60_000;

/// Length of the benchmark's tumbling windows.
const WINDOW_MS: i64 = 60_000;

/// Event time of message `i` when timestamps advance `step` ms per message (window mode).
fn event_time(i: usize, step: i64) -> i64 {
    T0_MS + i as i64 * step
}

/// Fills a fresh 4-partition topic with `n` messages keyed `k{i % keys}` (payload = key);
/// with `ts_step = Some(step)`, message `i` carries the event time [`event_time`]`(i, step)`
/// (otherwise the producer's clock).
fn produce(
    rt: &tokio::runtime::Runtime,
    mq: &Mq,
    topic: &str,
    n: usize,
    keys: usize,
    ts_step: Option<i64>,
) {
    produce_to(rt, mq, (topic, 4), n, keys, ts_step);
}

/// [`produce`] to a topic of `partitions` partitions.
fn produce_to(
    rt: &tokio::runtime::Runtime,
    mq: &Mq,
    (topic, partitions): (&str, u32),
    n: usize,
    keys: usize,
    ts_step: Option<i64>,
) {
    rt.block_on(mq.create_topic(topic, partitions))
        .expect("create topic");
    let producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = (0..n)
        .map(|i| {
            let k = format!("k{}", i % keys);
            let m = OutgoingMessage::new(k.clone()).key(k);
            match ts_step {
                Some(step) => m.timestamp_ms(event_time(i, step)),
                None => m,
            }
        })
        .collect();
    for chunk in msgs.chunks(1000) {
        rt.block_on(producer.send_batch(topic, chunk))
            .expect("produce");
    }
}

/// Registers the keyed count over topic `t`, group `g` (from the beginning, batches of
/// 500): `map(key) → key_by → process(ValueState<u64> count + 1) → discard`.
pub(crate) fn register_keyed_count(env: &RedisEnv) {
    register_keyed_count_into(env, Discard);
}

/// [`register_keyed_count`] ending in `sink` (records `(key, count)`).
pub(crate) fn register_keyed_count_into<S>(env: &RedisEnv, sink: S)
where
    S: streaming::api::Sink<(String, u64)> + Clone + Send + 'static,
{
    let source = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(500)
        .build()
        .unwrap();
    env.from_mq_topic_with_options("t", "g", source)
        .map(|m: Message| m.key.unwrap_or_default())
        .key_by(|k: &ArcStr| k.clone())
        .process(|k: ArcStr, ctx, out| {
            let mut c = ctx.state(&COUNT)?;
            let n = c.value() + 1;
            c.update(n);
            // The sinks under test take `(String, u64)`.
            out.collect((k.to_string(), n));
            Ok(())
        })
        .sink(sink)
        .unwrap();
}

fn engine_run(
    url: &str,
    rt: &tokio::runtime::Runtime,
    n: usize,
    keys: usize,
    mode: AckMode,
    parallelism: u32,
) -> f64 {
    let run = CountRun {
        keys,
        mode,
        parallelism,
        partitions: 4,
        replica_wait: None,
        checkpoint_interval: None,
        sink: sinks::SinkKind::Discard,
    };
    count_run(url, rt, n, &run)
}

/// One keyed-count scenario.
struct CountRun {
    keys: usize,
    mode: AckMode,
    parallelism: u32,
    partitions: u32,
    replica_wait: Option<ReplicaWait>,
    /// Periodic checkpoints (`None`: off).
    checkpoint_interval: Option<Duration>,
    /// Where the counts go.
    sink: sinks::SinkKind,
}

/// The keyed count of `run` over `n` messages on `url` (one server or a cluster): msg/s
/// from `blocking_start` until every message is committed.
fn count_run(url: &str, rt: &tokio::runtime::Runtime, n: usize, run: &CountRun) -> f64 {
    let &CountRun {
        keys,
        mode,
        parallelism,
        partitions,
        replica_wait,
        checkpoint_interval,
        sink,
    } = run;
    let prefix = unique("mq");
    let opts = MqOptions::builder()
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    produce_to(rt, &mq, ("t", partitions), n, keys, None);
    if sink == sinks::SinkKind::Topic {
        rt.block_on(mq.create_topic(sinks::TOPIC_TARGET, 4))
            .unwrap();
    }
    let state_prefix = unique("state");
    let config = RedisRuntimeConfig::builder()
        .job_name("bench")
        .state_key_prefix(&state_prefix)
        .mq_options(opts)
        .ack_mode(mode)
        .pipeline_parallelism(parallelism)
        .commit_replica_wait(replica_wait)
        .checkpoint_key_prefix(format!("{state_prefix}:ck:"))
        .checkpoint_interval(checkpoint_interval.unwrap_or(Duration::ZERO))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    let sink_name = unique("sink");
    sink.register(&env, &sink_name);
    let started = Instant::now();
    let job = env.blocking_start().unwrap();
    loop {
        let done: u64 = job
            .diagnostics()
            .partitions
            .iter()
            .map(|p| p.records + p.failed)
            .sum();
        if done >= n as u64 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "too slow");
        std::thread::sleep(Duration::from_millis(2));
    }
    if sink == sinks::SinkKind::Topic {
        while topic_len(url, &mq, sinks::TOPIC_TARGET, 4) < n {
            assert!(started.elapsed() < Duration::from_secs(600), "too slow");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let secs = started.elapsed().as_secs_f64();
    job.cancel();
    job.blocking_await_termination(Duration::from_secs(10));
    rt.block_on(mq.delete_topic("t")).ok();
    rt.block_on(mq.delete_topic(sinks::TOPIC_TARGET)).ok();
    delete_prefix(url, &prefix);
    delete_prefix(url, &state_prefix);
    delete_prefix(url, &sink_name);
    n as f64 / secs
}

/// Messages in `topic`'s `partitions` streams.
fn topic_len(url: &str, mq: &Mq, topic: &str, partitions: u32) -> usize {
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .expect("connect");
    (0..partitions)
        .map(|q| {
            redis::cmd("XLEN")
                .arg(mq.keys().stream(topic, q))
                .query::<usize>(&mut conn)
                .unwrap_or(0)
        })
        .sum()
}

/// Deletes every key under `prefix:` (SCAN + UNLINK, which frees large hashes without
/// blocking the server): the benchmark's own fresh prefixes only.
fn delete_prefix(url: &str, prefix: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut conn) = client.get_connection() else {
        return;
    };
    let keys: Vec<String> = match redis::cmd("SCAN")
        .cursor_arg(0)
        .arg("MATCH")
        .arg(format!("{prefix}:*"))
        .arg("COUNT")
        .arg(1000)
        .clone()
        .iter(&mut conn)
    {
        Ok(it) => it.collect(),
        Err(_) => return,
    };
    for chunk in keys.chunks(500) {
        let _: Result<(), _> = redis::cmd("UNLINK").arg(chunk).query(&mut conn);
    }
}

/// The two jobs of window mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventJob {
    /// `key_by → process(ValueState<u64> count + 1)`, as in throughput mode.
    KeyedCount,
    /// `key_by → window(TumblingEventTimeWindows::of(60 s)) → count()`.
    TumblingCount,
}

/// Figures of one window-mode run.
struct EventFigures {
    /// Messages per second, `blocking_start` → every message committed.
    rate: f64,
    /// Window firings committed when the last message was committed.
    fired_in_run: u64,
    /// Window firings after the idle flush (not timed).
    fired_total: u64,
    /// Late elements dropped (0 expected: event times rise within each partition).
    late: u64,
}

fn sum_partitions(job: &JobClient, f: impl Fn(&streaming::redis::PartitionProgress) -> u64) -> u64 {
    job.diagnostics().partitions.iter().map(f).sum()
}

/// The (key, window) pairs the input holds: what the window job fires in all.
fn expected_windows(n: usize, keys: usize, step: i64) -> u64 {
    let mut pairs = std::collections::HashSet::new();
    for i in 0..n {
        pairs.insert((i % keys, event_time(i, step).div_euclid(WINDOW_MS)));
    }
    pairs.len() as u64
}

/// The input of window mode: `n` messages over `keys` keys, event times `step` ms apart.
#[derive(Clone, Copy)]
struct Input {
    n: usize,
    keys: usize,
    step: i64,
}

/// One window-mode run: a fresh topic with event times advancing `step` ms per message,
/// `job` over it (Offset ack mode, `watermark_idle_timeout` 1 s on both jobs), timed from
/// `blocking_start` until every message is committed; then, untimed, the window job waits
/// (≤ 60 s) for the idle flush to fire the last windows and reports the total.
fn event_time_run(
    url: &str,
    rt: &tokio::runtime::Runtime,
    input: Input,
    parallelism: u32,
    job_kind: EventJob,
    expected: u64,
) -> EventFigures {
    let Input { n, keys, step } = input;
    let mq_prefix = unique("win-mq");
    let state_prefix = unique("win-state");
    let opts = MqOptions::builder()
        .key_prefix(mq_prefix.clone())
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    produce(rt, &mq, "t", n, keys, Some(step));
    let config = RedisRuntimeConfig::builder()
        .job_name("bench")
        .state_key_prefix(&state_prefix)
        .mq_options(opts)
        .ack_mode(AckMode::Offset)
        .pipeline_parallelism(parallelism)
        .watermark_idle_timeout(Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    let source = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(500)
        .build()
        .unwrap();
    let keyed = env
        .from_mq_topic_with_options("t", "g", source)
        .map(|m: Message| m.key.unwrap_or_default())
        .key_by(|k: &ArcStr| k.clone());
    match job_kind {
        EventJob::KeyedCount => keyed
            .process(|k: ArcStr, ctx, out| {
                let mut c = ctx.state(&COUNT)?;
                let n = c.value() + 1;
                c.update(n);
                out.collect((k, n));
                Ok(())
            })
            .sink(Discard)
            .unwrap(),
        EventJob::TumblingCount => keyed
            .window(TumblingEventTimeWindows::of(Duration::from_millis(WINDOW_MS as u64)).unwrap())
            .count()
            .sink(Discard)
            .unwrap(),
    }
    let started = Instant::now();
    let job = env.blocking_start().unwrap();
    loop {
        if sum_partitions(&job, |p| p.records + p.failed) >= n as u64 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "too slow");
        std::thread::sleep(Duration::from_millis(2));
    }
    let secs = started.elapsed().as_secs_f64();
    let fired_in_run = sum_partitions(&job, |p| p.window_fired);
    if job_kind == EventJob::TumblingCount {
        let deadline = Instant::now() + Duration::from_secs(60);
        while sum_partitions(&job, |p| p.window_fired) < expected && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let fired_total = sum_partitions(&job, |p| p.window_fired);
    let late = sum_partitions(&job, |p| p.window_late_dropped);
    job.cancel();
    job.blocking_await_termination(Duration::from_secs(10));
    rt.block_on(mq.delete_topic("t")).ok();
    delete_prefix(url, &mq_prefix);
    delete_prefix(url, &state_prefix);
    EventFigures {
        rate: n as f64 / secs,
        fired_in_run,
        fired_total,
        late,
    }
}

/// Window mode: for 16 and 10,000 keys and parallelism 1 and 2, the keyed count and the
/// tumbling window count on the same input, one after the other; prints a Markdown table.
fn windows_main(url: &str, n: usize, step: i64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "{n} messages, event time +{step} ms per message ({:.1} min of event time), Offset ack mode",
        (n as i64 * step) as f64 / WINDOW_MS as f64
    );
    println!();
    println!("| keys | parallelism | keyed count msg/s | 1-min tumbling count msg/s | window / keyed | windows fired in timed run | fired after idle flush / expected | late |");
    println!("|---|---|---|---|---|---|---|---|");
    for keys in [16, 10_000] {
        let expected = expected_windows(n, keys, step);
        let input = Input { n, keys, step };
        for parallelism in [1, 2] {
            let keyed = event_time_run(url, &rt, input, parallelism, EventJob::KeyedCount, 0);
            let win = event_time_run(
                url,
                &rt,
                input,
                parallelism,
                EventJob::TumblingCount,
                expected,
            );
            assert_eq!(keyed.fired_total, 0, "the keyed count has no windows");
            println!(
                "| {keys} | {parallelism} | {:.0} | {:.0} | {:.2} | {} | {} / {expected} | {} |",
                keyed.rate,
                win.rate,
                win.rate / keyed.rate,
                win.fired_in_run,
                win.fired_total,
                win.late
            );
        }
    }
}

/// XREADGROUP COUNT 100 → HINCRBY per record (one round trip each, or `pipelined`: one
/// pipeline per batch) → XACK per batch, one partition after the other, on one connection.
/// Not atomic: a crash between the HINCRBYs and the XACK double-counts.
fn hand_loop(
    url: &str,
    rt: &tokio::runtime::Runtime,
    n: usize,
    keys: usize,
    pipelined: bool,
) -> f64 {
    let prefix = unique("hand");
    let opts = MqOptions::builder()
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let mq = rt.block_on(Mq::connect(url, opts)).expect("connect");
    produce(rt, &mq, "t", n, keys, None);
    let client = redis::Client::open(url).unwrap();
    let mut conn = rt
        .block_on(client.get_multiplexed_async_connection())
        .unwrap();
    let streams: Vec<String> = (0..4).map(|p| mq.keys().stream("t", p)).collect();
    let started = Instant::now();
    rt.block_on(async {
        for s in &streams {
            let _: redis::Value = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(s)
                .arg("g")
                .arg("0")
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let counts = format!("{prefix}:counts");
        let mut done = 0usize;
        while done < n {
            for s in &streams {
                let reply: redis::Value = redis::cmd("XREADGROUP")
                    .arg("GROUP")
                    .arg("g")
                    .arg("c")
                    .arg("COUNT")
                    .arg(100)
                    .arg("STREAMS")
                    .arg(s)
                    .arg(">")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let mut ids = Vec::new();
                let mut pipe = redis::pipe();
                for (id, k) in entries(&reply) {
                    if pipelined {
                        pipe.cmd("HINCRBY").arg(&counts).arg(k).arg(1).ignore();
                    } else {
                        let _: i64 = redis::cmd("HINCRBY")
                            .arg(&counts)
                            .arg(k)
                            .arg(1)
                            .query_async(&mut conn)
                            .await
                            .unwrap();
                    }
                    ids.push(id);
                }
                if pipelined && !ids.is_empty() {
                    let _: () = pipe.query_async(&mut conn).await.unwrap();
                }
                if !ids.is_empty() {
                    done += ids.len();
                    let _: i64 = redis::cmd("XACK")
                        .arg(s)
                        .arg("g")
                        .arg(&ids)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
            }
        }
    });
    let secs = started.elapsed().as_secs_f64();
    rt.block_on(mq.delete_topic("t")).ok();
    delete_prefix(url, &prefix);
    n as f64 / secs
}

/// (id, field `k`) of each entry of an XREADGROUP reply on one stream.
fn entries(reply: &redis::Value) -> Vec<(String, Vec<u8>)> {
    use redis::Value;
    let mut out = Vec::new();
    let Value::Array(streams) = reply else {
        return out;
    };
    for s in streams {
        let Value::Array(pair) = s else { continue };
        let Some(Value::Array(es)) = pair.get(1) else {
            continue;
        };
        for e in es {
            let Value::Array(parts) = e else { continue };
            let (Some(Value::BulkString(id)), Some(Value::Array(fields))) =
                (parts.first(), parts.get(1))
            else {
                continue;
            };
            let mut key = Vec::new();
            for fv in fields.chunks(2) {
                if let [Value::BulkString(f), Value::BulkString(v)] = fv {
                    if f == b"k" {
                        key = v.clone();
                    }
                }
            }
            out.push((String::from_utf8_lossy(id).into_owned(), key));
        }
    }
    out
}

/// Microseconds since the Unix epoch (the producer's and the watcher's common clock).
fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Latency figures in milliseconds.
struct Latency {
    messages: usize,
    p50: f64,
    p99: f64,
    max: f64,
    achieved_rate: f64,
}

/// A steady producer at `rate` msg/s for `seconds` (1 ms ticks of `rate / 1000` messages,
/// paced on absolute times) into a 4-partition topic while the keyed-count job runs; the
/// job appends each message's send time (µs) to a [`RedisListSink`] in its commit script;
/// a watcher polls the lists (every 200 µs) and records `now − send time` per entry.
fn latency_run(
    url: &str,
    mode: AckMode,
    rate: usize,
    seconds: u64,
    batch: usize,
    poll: Duration,
) -> Latency {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mq_prefix = unique("lat-mq");
    let state_prefix = unique("lat-state");
    let opts = MqOptions::builder()
        .key_prefix(mq_prefix.clone())
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    rt.block_on(mq.create_topic("t", 4)).expect("create topic");
    let config = RedisRuntimeConfig::builder()
        .job_name("latency")
        .state_key_prefix(&state_prefix)
        .mq_options(opts)
        .ack_mode(mode)
        .pipeline_parallelism(1)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    let source = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(batch)
        .poll_timeout(poll)
        .build()
        .unwrap();
    let list = unique("lat-out");
    pipeline! {
        env.from_mq_topic_with_options("t", "g", source)
            .map(|m: Message| {
                let sent: u64 = m.text().ok().and_then(|t| t.parse().ok()).unwrap_or(0);
                (m.key.unwrap_or_default(), sent)
            })
            .key_by(|p: &(ArcStr, u64)| p.0.clone())
            .state(count: ValueState<u64> = 0)
            .process(|p: (ArcStr, u64), ctx, out| {
                let mut c = ctx.state(count)?;
                c.update(c.value() + 1);
                out.collect(p.1);
                Ok(())
            })
            .sink(RedisListSink::<u64>::text(list.clone()))
    }
    .unwrap();
    let job = env.blocking_start().unwrap();
    // Let the subtask take its partitions before the clock starts.
    std::thread::sleep(Duration::from_secs(1));

    let total = rate * seconds as usize;
    let per_tick = (rate / 1000).max(1);
    let producer_url = url.to_string();
    let producer_opts = mq.options().clone();
    let producer = std::thread::spawn(move || {
        // Its own runtime and connection: the main thread's runtime is idle meanwhile.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let producer_mq = rt
            .block_on(Mq::connect(&producer_url, producer_opts))
            .expect("connect");
        let producer = producer_mq.producer();
        let start = Instant::now();
        let mut sent = 0usize;
        let mut tick = 0u64;
        while sent < total {
            let due = start + Duration::from_millis(tick);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let t = now_micros();
            let msgs: Vec<OutgoingMessage> = (0..per_tick.min(total - sent))
                .map(|i| OutgoingMessage::new(t.to_string()).key(format!("k{}", (sent + i) % 1000)))
                .collect();
            sent += msgs.len();
            rt.block_on(producer.send_batch("t", &msgs))
                .expect("produce");
            tick += 1;
        }
        total as f64 / start.elapsed().as_secs_f64()
    });

    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_connection().unwrap();
    let keys: Vec<String> = (0..4)
        .map(|p| RedisListSink::<u64>::key_for(&list, "t", p))
        .collect();
    let mut next = [0isize; 4];
    let mut lat_us: Vec<u64> = Vec::with_capacity(total);
    let deadline = Instant::now() + Duration::from_secs(seconds + 60);
    while lat_us.len() < total && Instant::now() < deadline {
        let mut pipe = redis::pipe();
        for (k, from) in keys.iter().zip(next) {
            pipe.cmd("LRANGE").arg(k).arg(from).arg(-1);
        }
        let got: Vec<Vec<u64>> = pipe.query(&mut conn).unwrap();
        let now = now_micros();
        for (i, values) in got.iter().enumerate() {
            next[i] += values.len() as isize;
            lat_us.extend(values.iter().map(|sent| now.saturating_sub(*sent)));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let achieved_rate = producer.join().unwrap();
    job.cancel();
    job.blocking_await_termination(Duration::from_secs(10));
    let _: Result<(), _> = redis::cmd("DEL").arg(&keys).query(&mut conn);
    rt.block_on(mq.delete_topic("t")).ok();
    delete_prefix(url, &mq_prefix);
    delete_prefix(url, &state_prefix);
    assert_eq!(
        lat_us.len(),
        total,
        "every message reached the sink's lists"
    );
    lat_us.sort_unstable();
    let at =
        |q: f64| lat_us[((lat_us.len() as f64 * q) as usize).min(lat_us.len() - 1)] as f64 / 1000.0;
    Latency {
        messages: lat_us.len(),
        p50: at(0.50),
        p99: at(0.99),
        max: lat_us[lat_us.len() - 1] as f64 / 1000.0,
        achieved_rate,
    }
}

fn latency_main(url: &str, rate: usize, seconds: u64) {
    println!("| ack mode | batch_count | poll_timeout | rate (msg/s) | messages | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|---|");
    for (mode, batch, poll) in [
        (AckMode::Xack, 100, Duration::from_millis(1)),
        (AckMode::Offset, 100, Duration::from_millis(1)),
        (AckMode::Offset, 100, Duration::from_secs(1)),
    ] {
        let l = latency_run(url, mode, rate, seconds, batch, poll);
        println!(
            "| {mode:?} | {batch} | {poll:?} | {:.0} | {} | {:.2} | {:.2} | {:.2} |",
            l.achieved_rate, l.messages, l.p50, l.p99, l.max
        );
    }
}

/// Cluster mode: the keyed count (10,000 keys, offset mode, 12 partitions) on one Redis
/// (`url`) and on a cluster (`cluster_url`), parallelism 1 and 2, then on the cluster with
/// `commit_replica_wait` 1 replica / 1 s; each scenario `repeats` times, the median.
fn cluster_main(url: &str, cluster_url: &str, n: usize, repeats: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("| deployment | replica wait | parallelism | msg/s (median of {repeats}) |");
    println!("|---|---|---|---|");
    let wait = ReplicaWait::new(1, Duration::from_secs(1));
    for (name, target, replica_wait) in [
        ("one Redis", url, None),
        ("cluster, 3 masters", cluster_url, None),
        ("cluster, 3 masters", cluster_url, Some(wait)),
    ] {
        for parallelism in [1, 2] {
            let run = CountRun {
                keys: 10_000,
                mode: AckMode::Offset,
                parallelism,
                partitions: 12,
                replica_wait,
                checkpoint_interval: None,
                sink: sinks::SinkKind::Discard,
            };
            let mut rates: Vec<f64> = (0..repeats)
                .map(|_| count_run(target, &rt, n, &run))
                .collect();
            rates.sort_by(f64::total_cmp);
            let waits = replica_wait.map_or("none".to_string(), |w| {
                format!("WAIT {} {}", w.replicas, w.timeout.as_millis())
            });
            println!(
                "| {name} | {waits} | {parallelism} | {:.0} |",
                rates[rates.len() / 2]
            );
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut url = "redis://127.0.0.1:6379".to_string();
    let mut n = 200_000usize;
    let mut latency = false;
    let mut windows = false;
    let mut takeover_keys = None;
    let mut only: Option<(usize, AckMode, u32)> = None;
    let mut window_only: Option<(usize, u32)> = None;
    let mut lua_args = false;
    let mut checkpoint_mode = false;
    let mut sinks_mode = false;
    let mut messages_set = false;
    let mut ts_step = 1i64;
    let mut rate = 10_000usize;
    let mut seconds = 10u64;
    let mut cluster_url: Option<String> = None;
    let mut repeats = 3usize;
    let mut spans_mode = false;
    let mut two_inputs_mode = false;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cluster-url" => cluster_url = Some(args.next().expect("--cluster-url URL")),
            "--repeats" => {
                repeats = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|r: &usize| *r > 0)
                    .expect("--repeats N (> 0)")
            }
            "--latency" => latency = true,
            "--spans" => spans_mode = true,
            "--two-inputs" => two_inputs_mode = true,
            "--windows" => windows = true,
            "--lua-args" => lua_args = true,
            "--window-only" => {
                let keys = args.next().and_then(|v| v.parse().ok());
                let par = args.next().and_then(|v| v.parse().ok());
                window_only = Some(keys.zip(par).expect("--window-only KEYS PARALLELISM"));
            }
            "--takeover" => takeover_keys = Some(1_000_000u64),
            "--checkpoint" => checkpoint_mode = true,
            "--sinks" => sinks_mode = true,
            "--postgres" => sinks::set_postgres(args.next().expect("--postgres CONNECTION")),
            "--sink-kinds" => sinks::set_sink_kinds(&args.next().expect("--sink-kinds NAMES")),
            "--only" => {
                let keys = args.next().and_then(|v| v.parse().ok());
                let mode = match args.next().as_deref() {
                    Some("xack") => Some(AckMode::Xack),
                    Some("offset") => Some(AckMode::Offset),
                    _ => None,
                };
                let par = args.next().and_then(|v| v.parse().ok());
                only = Some(
                    keys.zip(mode)
                        .zip(par)
                        .map(|((k, m), p)| (k, m, p))
                        .expect("--only KEYS xack|offset PARALLELISM"),
                );
            }
            "--keys" => {
                takeover_keys = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|k: &u64| *k >= 100)
                        .expect("--keys N (≥ 100)"),
                )
            }
            "--ts-step-ms" => {
                ts_step = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|s: &i64| *s > 0)
                    .expect("--ts-step-ms MS (> 0)")
            }
            "--rate" => rate = args.next().and_then(|v| v.parse().ok()).expect("--rate N"),
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--seconds S")
            }
            "--redis-url" => url = args.next().expect("--redis-url URL"),
            "--messages" => {
                n = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--messages N");
                messages_set = true;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    if latency {
        latency_main(&url, rate, seconds);
        return;
    }
    if let Some(cluster_url) = cluster_url {
        cluster_main(&url, &cluster_url, n, repeats);
        return;
    }
    if two_inputs_mode {
        two_inputs::two_inputs_main(&url, n, repeats);
        return;
    }
    if windows {
        windows_main(&url, n, ts_step);
        return;
    }
    if lua_args {
        lua_args::lua_args_main(&url, unique);
        return;
    }
    if let Some((keys, parallelism)) = window_only {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let input = Input {
            n,
            keys,
            step: ts_step,
        };
        let expected = expected_windows(n, keys, ts_step);
        let win = event_time_run(
            &url,
            &rt,
            input,
            parallelism,
            EventJob::TumblingCount,
            expected,
        );
        println!(
            "1-min tumbling count, {keys} keys, parallelism {parallelism}: {:.0} msg/s",
            win.rate
        );
        return;
    }
    if let Some(keys) = takeover_keys {
        takeover::takeover_main(&url, keys, unique);
        return;
    }
    if sinks_mode {
        sinks::sinks_main(&url, if messages_set { n } else { 500_000 });
        return;
    }
    if checkpoint_mode {
        checkpoint::checkpoint_main(&url, if messages_set { n } else { 1_000_000 }, unique);
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if spans_mode {
        spans::spans_main(n, repeats, |n| {
            engine_run(&url, &rt, n, 16, AckMode::Offset, 1)
        });
        return;
    }
    if let Some((keys, mode, parallelism)) = only {
        let rate = engine_run(&url, &rt, n, keys, mode, parallelism);
        println!(
            "engine keyed count, {keys} keys, {mode:?}, parallelism {parallelism}: {rate:.0} msg/s"
        );
        return;
    }
    println!("| scenario | keys | ack mode | parallelism | msg/s |");
    println!("|---|---|---|---|---|");
    for keys in [16, 10_000] {
        for mode in [AckMode::Xack, AckMode::Offset] {
            for parallelism in [1, 2] {
                let rate = engine_run(&url, &rt, n, keys, mode, parallelism);
                println!("| engine keyed count | {keys} | {mode:?} | {parallelism} | {rate:.0} |");
            }
        }
        let hand_n = (n / 4).max(1000);
        let rate = hand_loop(&url, &rt, hand_n, keys, false);
        println!("| hand loop (HINCRBY per record) | {keys} | XACK per batch | 1 | {rate:.0} |");
        let rate = hand_loop(&url, &rt, n, keys, true);
        println!("| hand loop (HINCRBYs pipelined per batch) | {keys} | XACK per batch | 1 | {rate:.0} |");
    }
}
