//! The `counts` job on both engines: per carrier, a running count of departed flights in
//! keyed `ValueState`.

use super::data::Dataset;
use super::topic::with_fresh_topic;
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};
use streaming::fragment::{Fragment, Input};
use streaming::mq::{Message, Mq, MqOptions, OutgoingMessage, StartPolicy, SubscriptionOptions};
use streaming::redis::{CollectSink, RedisEnv, RedisRuntimeConfig};
use streaming::time::NoEventTime;
use streaming::{pipeline, BoxError, Error, MemoryEnv};

/// The `counts` pipeline, written once for both engines: per carrier code, a running count
/// of its flights in keyed `ValueState` (which the Redis engine keeps in Redis).
pub fn count_by_carrier(
    carriers: Input<String, NoEventTime>,
) -> impl Fragment<String, NoEventTime, Out = (String, u64)> {
    pipeline! {
        carriers
            .key_by(|carrier: &String| carrier.clone())
            .state(flights: ValueState<u64> = 0)
            .process(|carrier: String, ctx, out| {
                let mut flights = ctx.state(flights)?;
                let n = flights.value() + 1;
                flights.update(n);
                out.collect((carrier, n));
                Ok(())
            })
    }
}

/// One carrier's final count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountLine {
    /// The carrier code.
    pub carrier: String,
    /// Its departed flights.
    pub flights: u64,
}

/// `carrier,flights`.
impl fmt::Display for CountLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.carrier, self.flights)
    }
}

/// What the `counts` job reports after its lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountsSummary {
    /// Rows skipped because `dep_time` or `dep_delay` is `NA`.
    pub skipped: usize,
    /// Carriers (= lines).
    pub carriers: usize,
}

/// `# skipped=N`.
impl fmt::Display for CountsSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "# skipped={}", self.skipped)
    }
}

fn finish<E: Into<BoxError>>(
    data: &Dataset,
    last: BTreeMap<String, u64>,
    mut out: impl FnMut(&CountLine) -> Result<(), E>,
) -> Result<CountsSummary, BoxError> {
    let carriers = last.len();
    for (carrier, flights) in last {
        out(&CountLine { carrier, flights }).map_err(Into::into)?;
    }
    Ok(CountsSummary {
        skipped: data.skipped_na_departure,
        carriers,
    })
}

/// The `counts` job on the in-memory engine; `out` receives one [`CountLine`] per carrier,
/// by carrier code.
///
/// # Errors
/// An error returned by `out`.
pub fn counts<E: Into<BoxError>>(
    data: &Dataset,
    out: impl FnMut(&CountLine) -> Result<(), E>,
) -> Result<CountsSummary, BoxError> {
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let env = MemoryEnv::new();
    let carriers = data.flights.iter().map(|f| f.carrier.to_string());
    env.from_collection(carriers)
        .transform(count_by_carrier)
        .for_each(|(carrier, n)| {
            last.insert(carrier, n);
        })?;
    finish(data, last, out)
}

/// Settings of the `counts` job on the Redis engine.
#[derive(Clone, Debug)]
pub struct RedisCounts {
    /// The server, e.g. `redis://127.0.0.1:6379`.
    pub url: String,
    /// Partitions of the topic the flights are produced into.
    pub partitions: u32,
    /// Subtasks of the job.
    pub parallelism: u32,
    /// The queue's key prefix (default `mq`).
    pub mq_prefix: String,
    /// The state key prefix (default `streaming:runtime`).
    pub state_prefix: String,
    /// Longest wait for the job to acknowledge every flight.
    pub deadline: Duration,
}

impl RedisCounts {
    /// Defaults: 4 partitions, parallelism 2, the default prefixes, a 10-minute deadline.
    pub fn new(url: impl Into<String>) -> Self {
        RedisCounts {
            url: url.into(),
            partitions: 4,
            parallelism: 2,
            mq_prefix: "mq".into(),
            state_prefix: "streaming:runtime".into(),
            deadline: Duration::from_secs(600),
        }
    }
}

/// The `counts` job on the Redis engine: produces the flights into a fresh topic
/// (`flights-counts-<pid>-<nanos>`, keyed by carrier, payload `carrier,sched_ms,dep_delay`), runs
/// the job (job name = the topic name) until every message is acknowledged, prints like
/// [`counts`], and deletes the topic. The job's state hashes stay (they are what the job
/// computed; see [`streaming::redis`] for their keys).
///
/// # Errors
/// Redis unreachable, a job error (reported by the job's diagnostics), the deadline, or an
/// error returned by `out`.
pub fn counts_redis<E: Into<BoxError>>(
    data: &Dataset,
    opts: &RedisCounts,
    out: impl FnMut(&CountLine) -> Result<(), E>,
) -> Result<CountsSummary, BoxError> {
    let last = with_fresh_topic(
        &opts.url,
        &opts.mq_prefix,
        "counts",
        opts.partitions,
        |rt, mq, mq_opts, topic| run_on_redis(data, opts, rt, mq, mq_opts, topic),
    )?;
    finish(data, last, out)
}

fn run_on_redis(
    data: &Dataset,
    opts: &RedisCounts,
    rt: &tokio::runtime::Runtime,
    mq: &Mq,
    mq_opts: MqOptions,
    topic: &str,
) -> Result<BTreeMap<String, u64>, BoxError> {
    let started = Instant::now();
    let producer = mq.producer();
    let msgs: Vec<OutgoingMessage> = data
        .flights
        .iter()
        .map(|f| {
            OutgoingMessage::new(format!("{},{},{}", f.carrier, f.sched_ms, f.dep_delay))
                .key(f.carrier.to_string())
                .timestamp_ms(f.sched_ms)
        })
        .collect();
    for chunk in msgs.chunks(1000) {
        rt.block_on(producer.send_batch(topic, chunk))?;
    }
    tracing::info!(
        topic,
        messages = msgs.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "produced"
    );

    let config = RedisRuntimeConfig::builder()
        .job_name(topic)
        .state_key_prefix(&opts.state_prefix)
        .pipeline_parallelism(opts.parallelism)
        .mq_options(mq_opts)
        .build()?;
    let env = RedisEnv::try_with_config(opts.url.as_str(), config)?;
    let sink = CollectSink::new();
    let source = SubscriptionOptions::builder()
        .start(StartPolicy::Earliest)
        .batch_count(500)
        .build()?;
    pipeline! {
        env.from_mq_topic_with_options(topic, "counts", source)
            .try_map(|m: Message| -> Result<String, Error> {
                let text = m.text()?;
                Ok(text.split(',').next().unwrap_or(text).to_string())
            })
            .transform(count_by_carrier)
            .sink(sink.clone())
    }?;
    let started = Instant::now();
    let job = env.blocking_start()?;
    let total = msgs.len() as u64;
    // Every flight was produced before the job started: once the job has caught up with the
    // topic, each one is committed (counted) or dead-lettered.
    if !job.blocking_await_caught_up(opts.deadline)? {
        let d = job.diagnostics();
        let done: u64 = d.partitions.iter().map(|p| p.records).sum();
        return Err(if d.running_subtasks == 0 {
            format!("the job stopped: {:?}", d.errors)
        } else {
            format!(
                "{done} of {total} flights counted after {:?}: {:?}",
                opts.deadline, d.errors
            )
        }
        .into());
    }
    job.blocking_shutdown(Duration::MAX);
    let info = rt.block_on(mq.describe_topic(topic))?;
    let dead: u64 = info.partition_info.iter().map(|p| p.dead_letters).sum();
    if dead > 0 {
        return Err(format!("{dead} flights failed and went to the dead-letter queue").into());
    }
    tracing::info!(
        messages = total,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "counted on redis"
    );
    // The collecting sink is at-least-once: keep each carrier's highest running count.
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for (carrier, n) in sink.snapshot() {
        let e = last.entry(carrier).or_default();
        *e = (*e).max(n);
    }
    Ok(last)
}
