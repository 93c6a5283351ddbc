//! `--two-inputs [--messages N] [--repeats R]`: a keyed co-process job over two
//! co-partitioned topics against the single-input keyed count over the same total records.
//!
//! - **one input**: the keyed count of throughput mode ([`super::register_keyed_count`])
//!   over N messages in one 4-partition topic;
//! - **two inputs**: two 4-partition topics of N/2 messages each, over the same keys
//!   (`k{i % keys}`, so every key's records are in the same partition of both), read as
//!   `map(key)` on each, `connect → key_by → process(CoCount)`: a
//!   `KeyedCoProcessFunction` whose two sides add one to the same persistent
//!   `ValueState<u64>` per key and emit `(key, count)` like the keyed count.
//!
//! All: Offset mode, parallelism 1, discard sink, timed from `blocking_start` until every
//! record is committed. `batch_count` is per input: with 500 on each, a batch of the
//! two-input job reads up to 500 records of each topic (1,000 in all), so it is also run
//! with 250 on each, the single-input job's 500 records per batch. Rounds alternate the
//! three jobs, at 16 and at 10,000 keys; per round each job's rate and records per batch
//! and the ratios (two inputs / one input), then the medians.

use std::time::{Duration, Instant};

use streaming::api::{Collector, KeyedContext};
use streaming::mq::{ArcStr, Message, Mq, MqOptions, StartPolicy, SubscriptionOptions};
use streaming::redis::{AckMode, RedisEnv, RedisRuntimeConfig};
use streaming::{BoxError, KeyedCoProcessFunction};

use super::{delete_prefix, produce_to, register_keyed_count, unique, Discard, COUNT};

/// Counts the records of both inputs per key in one `ValueState`.
#[derive(Clone, Copy)]
struct CoCount;

impl CoCount {
    fn count(
        k: ArcStr,
        ctx: &mut KeyedContext<'_, ArcStr>,
        out: &mut Collector<'_, (String, u64)>,
    ) -> Result<(), BoxError> {
        let mut c = ctx.state(&COUNT)?;
        let n = c.value() + 1;
        c.update(n);
        out.collect((k.to_string(), n));
        Ok(())
    }
}

impl KeyedCoProcessFunction<ArcStr, ArcStr, ArcStr> for CoCount {
    type Out = (String, u64);
    fn process_element1(
        &mut self,
        k: ArcStr,
        ctx: &mut KeyedContext<'_, ArcStr>,
        out: &mut Collector<'_, (String, u64)>,
    ) -> Result<(), BoxError> {
        Self::count(k, ctx, out)
    }
    fn process_element2(
        &mut self,
        k: ArcStr,
        ctx: &mut KeyedContext<'_, ArcStr>,
        out: &mut Collector<'_, (String, u64)>,
    ) -> Result<(), BoxError> {
        Self::count(k, ctx, out)
    }
}

fn source(batch: usize) -> SubscriptionOptions {
    SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(batch)
        .build()
        .unwrap()
}

/// `a.map(key).connect(b.map(key)).key_by(..).process(CoCount) → discard`, batches of
/// `batch` records per input.
fn register_co_count(env: &RedisEnv, batch: usize) {
    let key = |m: Message| m.key.unwrap_or_default();
    let a = env
        .from_mq_topic_with_options("a", "g", source(batch))
        .map(key);
    let b = env
        .from_mq_topic_with_options("b", "g", source(batch))
        .map(key);
    a.connect(b)
        .key_by(|k: &ArcStr| k.clone(), |k: &ArcStr| k.clone())
        .process(CoCount)
        .sink(Discard)
        .unwrap();
}

/// One run's figures.
struct Figures {
    /// Records per second, `blocking_start` → every record committed.
    rate: f64,
    /// Records per committed batch.
    per_batch: f64,
}

/// The keyed count over `n` records: in one topic (`two == None`, batches of 500) or in
/// two topics of `n / 2` each (`two == Some(batch)`, batches of `batch` per input).
fn run(
    url: &str,
    rt: &tokio::runtime::Runtime,
    n: usize,
    keys: usize,
    two: Option<usize>,
) -> Figures {
    let prefix = unique("two-mq");
    let opts = MqOptions::builder()
        .key_prefix(prefix.clone())
        .build()
        .unwrap();
    let mq = rt
        .block_on(Mq::connect(url, opts.clone()))
        .expect("connect");
    let topics: &[&str] = if two.is_some() { &["a", "b"] } else { &["t"] };
    for t in topics {
        produce_to(rt, &mq, (t, 4), n / topics.len(), keys, None);
    }
    let n = n / topics.len() * topics.len();
    let state_prefix = unique("two-state");
    let config = RedisRuntimeConfig::builder()
        .job_name("bench")
        .state_key_prefix(&state_prefix)
        .mq_options(opts)
        .ack_mode(AckMode::Offset)
        .pipeline_parallelism(1)
        .build()
        .unwrap();
    let env = RedisEnv::try_with_config(url, config).unwrap();
    match two {
        Some(batch) => register_co_count(&env, batch),
        None => register_keyed_count(&env),
    }
    let started = Instant::now();
    let job = env.blocking_start().unwrap();
    let (records, batches) = loop {
        let d = job.diagnostics();
        let records: u64 = d.partitions.iter().map(|p| p.records + p.failed).sum();
        if records >= n as u64 {
            break (records, d.partitions.iter().map(|p| p.batches).sum::<u64>());
        }
        assert!(started.elapsed() < Duration::from_secs(600), "too slow");
        std::thread::sleep(Duration::from_millis(2));
    };
    let secs = started.elapsed().as_secs_f64();
    job.cancel();
    job.blocking_await_termination(Duration::from_secs(10));
    for t in topics {
        rt.block_on(mq.delete_topic(t)).ok();
    }
    delete_prefix(url, &prefix);
    delete_prefix(url, &state_prefix);
    Figures {
        rate: n as f64 / secs,
        per_batch: records as f64 / batches.max(1) as f64,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prints, per key count, a Markdown table of `repeats` alternating rounds and the medians.
pub(crate) fn two_inputs_main(url: &str, n: usize, repeats: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for keys in [16, 10_000] {
        println!();
        println!("{keys} keys, {n} records in all (rec/s; records per batch in brackets):");
        println!();
        println!("| round | one input, 500 | two inputs, 500 + 500 | two inputs, 250 + 250 | ratio 500 + 500 | ratio 250 + 250 |");
        println!("|---|---|---|---|---|---|");
        let mut rates: [Vec<f64>; 3] = Default::default();
        let mut ratios: [Vec<f64>; 2] = Default::default();
        for r in 1..=repeats {
            let one = run(url, &rt, n, keys, None);
            let wide = run(url, &rt, n, keys, Some(500));
            let narrow = run(url, &rt, n, keys, Some(250));
            let cells: Vec<String> = [&one, &wide, &narrow]
                .iter()
                .map(|f| format!("{:.0} ({:.0})", f.rate, f.per_batch))
                .collect();
            let (a, b) = (wide.rate / one.rate, narrow.rate / one.rate);
            println!("| {r} | {} | {a:.3} | {b:.3} |", cells.join(" | "));
            for (v, f) in rates.iter_mut().zip([&one, &wide, &narrow]) {
                v.push(f.rate);
            }
            ratios[0].push(a);
            ratios[1].push(b);
        }
        let [one, wide, narrow] = rates.map(median);
        let [a, b] = ratios.map(median);
        println!("| median | {one:.0} | {wide:.0} | {narrow:.0} | {a:.3} | {b:.3} |");
    }
}
