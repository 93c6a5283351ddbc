//! End-to-end throughput of the Redis engine: a keyed count (`ValueState` per key) over a
//! 4-partition topic, against a hand-written redis-rs loop (XREADGROUP COUNT 100 → HINCRBY
//! per record → XACK per batch).
//!
//! ```text
//! cargo run --release -p streaming --example redis_engine_bench -- [--redis-url URL] [--messages N]
//! cargo run --release -p streaming --example redis_engine_bench -- --latency [--redis-url URL] [--rate MSG_PER_S] [--seconds S]
//! ```
//! Needs a running Redis (default `redis://127.0.0.1:6379`); everything it writes is under
//! fresh key prefixes. Throughput mode: messages are produced first; the figure is messages
//! per second from `execute_async` until every message is committed. Latency mode: a
//! producer sends at a steady rate (default 10,000 msg/s, 10 s) while the job runs; each
//! message carries its send time, the job's [`RedisListSink`] appends it in the batch's
//! commit script, and a watcher reading the lists takes the time from send to the commit
//! being visible in Redis. Both print a Markdown table.

use std::time::{Duration, Instant};

use streaming::api::ValueStateDescriptor;
use streaming::mq::{Message, Mq, MqOptions, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, RedisEnv, RedisListSink, RedisRuntimeConfig};
use streaming::{pipeline, BoxError};

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

fn produce(rt: &tokio::runtime::Runtime, mq: &Mq, topic: &str, n: usize, keys: usize) {
    rt.block_on(mq.create_topic(topic, 4))
        .expect("create topic");
    let mut producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = (0..n)
        .map(|i| {
            let k = format!("k{}", i % keys);
            OutgoingMessage::new(k.clone()).key(k)
        })
        .collect();
    for chunk in msgs.chunks(1000) {
        rt.block_on(producer.send_batch(topic, chunk))
            .expect("produce");
    }
}

fn engine_run(
    url: &str,
    rt: &tokio::runtime::Runtime,
    n: usize,
    keys: usize,
    mode: AckMode,
    parallelism: u32,
) -> f64 {
    let prefix = unique("mq");
    let opts = MqOptions::builder()
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    produce(rt, &mq, "t", n, keys);
    let config = RedisRuntimeConfig::builder()
        .job_name("bench")
        .state_key_prefix(&unique("state"))
        .mq_options(opts)
        .ack_mode(mode)
        .pipeline_parallelism(parallelism)
        .build()
        .unwrap();
    let env = RedisEnv::create_with_config(url, config).unwrap();
    let source = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(500)
        .build()
        .unwrap();
    env.from_mq_topic_with_options("t", "g", source)
        .map(|m: Message| m.key.unwrap_or_default())
        .key_by(|k: &String| k.clone())
        .process(|k: String, ctx, out| {
            let mut c = ctx.state(&COUNT)?;
            let n = c.value() + 1;
            c.update(n);
            out.collect((k, n));
            Ok(())
        })
        .sink(Discard)
        .unwrap();
    let started = Instant::now();
    let job = env.execute_async().unwrap();
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
    let secs = started.elapsed().as_secs_f64();
    job.cancel();
    rt.block_on(mq.delete_topic("t")).ok();
    n as f64 / secs
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
    produce(rt, &mq, "t", n, keys);
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
    let opts = MqOptions::builder()
        .key_prefix(unique("lat-mq"))
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    rt.block_on(mq.create_topic("t", 4)).expect("create topic");
    let config = RedisRuntimeConfig::builder()
        .job_name("latency")
        .state_key_prefix(&unique("lat-state"))
        .mq_options(opts)
        .ack_mode(mode)
        .pipeline_parallelism(1)
        .build()
        .unwrap();
    let env = RedisEnv::create_with_config(url, config).unwrap();
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
            .key_by(|p: &(String, u64)| p.0.clone())
            .state(count: ValueState<u64> = 0)
            .process(|p: (String, u64), ctx, out| {
                let mut c = ctx.state(count)?;
                c.update(c.value() + 1);
                out.collect(p.1);
                Ok(())
            })
            .sink(RedisListSink::<u64>::text(list.clone()))
    }
    .unwrap();
    let job = env.execute_async().unwrap();
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
        let mut producer = producer_mq.producer();
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
    job.await_termination(Duration::from_secs(10));
    let _: Result<(), _> = redis::cmd("DEL").arg(&keys).query(&mut conn);
    rt.block_on(mq.delete_topic("t")).ok();
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

fn main() {
    let mut args = std::env::args().skip(1);
    let mut url = "redis://127.0.0.1:6379".to_string();
    let mut n = 200_000usize;
    let mut latency = false;
    let mut rate = 10_000usize;
    let mut seconds = 10u64;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--latency" => latency = true,
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
                    .expect("--messages N")
            }
            other => panic!("unknown argument {other}"),
        }
    }
    if latency {
        latency_main(&url, rate, seconds);
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
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
