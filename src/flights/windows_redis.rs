//! The windowed jobs (`delays`, `sessions`) on the Redis engine: the flights are produced
//! into a fresh N-partition topic and the same pipeline text as on the memory engine runs
//! after a map from [`Message`] to [`Flight`].

use super::data::{Dataset, Flight};
use super::jobs::{
    sessions_summary, DelayLine, DelaysOptions, DelaysSummary, LateCounter, SessionLine,
    SessionsOptions, SessionsSummary,
};
use super::topic::with_fresh_topic;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use streaming::mq::{
    partition_for_key, Message, OutgoingMessage, StartPolicy, SubscriptionOptions,
};
use streaming::redis::{CollectSink, JobClient, RedisEnv, RedisRuntimeConfig};
use streaming::{BoxError, Error};

/// Settings of `delays` and `sessions` on the Redis engine.
#[derive(Clone, Debug)]
pub struct RedisWindowed {
    /// The server, e.g. `redis://127.0.0.1:6379`.
    pub url: String,
    /// Partitions of the topic the flights are produced into (`--partitions`, at least 1).
    pub partitions: u32,
    /// Subtasks of the job (at most `partitions` are used).
    pub parallelism: u32,
    /// The queue's key prefix (default `mq`).
    pub mq_prefix: String,
    /// The state key prefix (default `streaming:runtime`).
    pub state_prefix: String,
    /// The job's `watermark_idle_timeout`: a partition that read nothing for this long
    /// flushes its watermark to the maximum, which fires its last windows.
    pub idle_timeout: Duration,
    /// Longest wait for the job to process every flight and flush every partition.
    pub deadline: Duration,
}

impl RedisWindowed {
    /// Defaults: 1 partition, parallelism 2, the default prefixes, a 500 ms idle timeout,
    /// a 10-minute deadline.
    pub fn new(url: impl Into<String>) -> Self {
        RedisWindowed {
            url: url.into(),
            partitions: 1,
            parallelism: 2,
            mq_prefix: "mq".into(),
            state_prefix: "streaming:runtime".into(),
            idle_timeout: Duration::from_millis(500),
            deadline: Duration::from_secs(600),
        }
    }
}

/// `carrier,tailnum,sched_ms,dep_delay,row` (`tailnum` empty when `NA`).
fn payload(f: &Flight) -> String {
    format!(
        "{},{},{},{},{}",
        f.carrier,
        f.tailnum.as_deref().unwrap_or(""),
        f.sched_ms,
        f.dep_delay,
        f.row
    )
}

/// The inverse of [`payload`].
fn parse_flight(m: Message) -> Result<Flight, BoxError> {
    let text = m.text()?;
    let bad = || format!("not a flight record: `{text}`");
    let mut fields = text.split(',');
    let mut next = || fields.next().ok_or_else(bad);
    let carrier: Arc<str> = Arc::from(next()?);
    let tailnum = Some(next()?).filter(|t| !t.is_empty()).map(Arc::from);
    let sched_ms = next()?.parse().map_err(|_| bad())?;
    let dep_delay = next()?.parse().map_err(|_| bad())?;
    let row = next()?.parse().map_err(|_| bad())?;
    Ok(Flight {
        carrier,
        tailnum,
        sched_ms,
        dep_delay,
        row,
    })
}

/// What a Redis run collected.
struct Collected<T> {
    /// The job's output, stable-sorted by partition (each partition's firing order kept).
    lines: Vec<T>,
    /// Late elements over all partitions (`window_late_dropped`).
    late: u64,
}

/// How a job registers its pipeline: `(env, topic, group, source options, late side
/// output, sink)`.
type Register<'a, T> = dyn FnOnce(
        RedisEnv,
        &str,
        &str,
        SubscriptionOptions,
        LateCounter,
        CollectSink<T>,
    ) -> Result<(), Error>
    + 'a;

/// Produces the flights into a fresh topic (`flights-<job>-<pid>-<nanos>`, keyed by `key`,
/// message timestamp = `timestamp`), runs the pipeline `register` builds (job name = the
/// topic name) until it is finished (see [`await_finished`]), deletes the topic and returns
/// the output in the memory engine's order: partition by partition.
fn run_windowed<T: Clone + Send + 'static>(
    data: &Dataset,
    redis: &RedisWindowed,
    job_kind: &str,
    key: impl Fn(&Flight) -> Option<&str>,
    timestamp: impl Fn(&Flight) -> i64,
    line_key: impl Fn(&T) -> &str,
    register: Box<Register<'_, T>>,
) -> Result<Collected<T>, BoxError> {
    if redis.partitions == 0 {
        return Err("the topic needs at least 1 partition".into());
    }
    with_fresh_topic(
        &redis.url,
        &redis.mq_prefix,
        job_kind,
        redis.partitions,
        |rt, mq, mq_opts, topic| {
            let started = Instant::now();
            let producer = mq.producer();
            let msgs: Vec<OutgoingMessage> = data
                .flights
                .iter()
                .map(|f| {
                    let m = OutgoingMessage::new(payload(f)).timestamp_ms(timestamp(f));
                    match key(f) {
                        Some(k) => m.key(k.to_string()),
                        None => m,
                    }
                })
                .collect();
            for chunk in msgs.chunks(1000) {
                rt.block_on(producer.send_batch(topic, chunk))?;
            }
            tracing::info!(
                topic,
                partitions = redis.partitions,
                messages = msgs.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "produced"
            );
            let config = RedisRuntimeConfig::builder()
                .job_name(topic)
                .state_key_prefix(&redis.state_prefix)
                .pipeline_parallelism(redis.parallelism.clamp(1, redis.partitions))
                .watermark_idle_timeout(Some(redis.idle_timeout))
                .mq_options(mq_opts.clone())
                .build()?;
            let env = RedisEnv::try_with_config(redis.url.as_str(), config)?;
            let sink = CollectSink::new();
            let source = SubscriptionOptions::builder()
                .start(StartPolicy::Earliest)
                .batch_count(500)
                .build()?;
            register(
                env.clone(),
                topic,
                job_kind,
                source,
                LateCounter::default(),
                sink.clone(),
            )?;
            let started = Instant::now();
            let job = env.blocking_start()?;
            let finished = await_finished(&job, msgs.len() as u64, redis.deadline);
            job.blocking_shutdown(Duration::MAX);
            finished?;
            let d = job.diagnostics();
            let info = rt.block_on(mq.describe_topic(topic))?;
            let dead: u64 = info.partition_info.iter().map(|p| p.dead_letters).sum();
            if dead > 0 {
                return Err(
                    format!("{dead} flights failed and went to the dead-letter queue").into(),
                );
            }
            let fired: u64 = d.partitions.iter().map(|p| p.window_fired).sum();
            let late: u64 = d.partitions.iter().map(|p| p.window_late_dropped).sum();
            let mut lines = sink.snapshot();
            if lines.len() as u64 != fired {
                // The collecting sink is at-least-once: a batch that failed after its output
                // reached the sink is processed again.
                return Err(format!(
                "the sink received {} lines for {fired} committed window firings (a batch was retried: {:?}); run again",
                lines.len(),
                d.errors
            )
            .into());
            }
            tracing::info!(
                messages = msgs.len(),
                fired,
                late,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "ran on redis"
            );
            // Each partition's lines reached the sink in its firing order; partitions
            // interleave. The memory engine prints partition 0's lines, then partition 1's, …
            lines.sort_by_cached_key(|l| partition_for_key(line_key(l), redis.partitions));
            Ok(Collected { lines, late })
        },
    )
}

/// Waits until the job has processed all `total` flights and emitted its last windows:
/// [`JobClient::blocking_await_flushed`] — caught up (every message produced before the start is
/// committed or dead-lettered) and every partition that received flights idle-flushed
/// (watermark `i64::MAX`: every remaining window fired and committed). Flights were all
/// produced before the job started, so a partition reads nothing — and flushes — only
/// once drained.
fn await_finished(job: &JobClient, total: u64, deadline: Duration) -> Result<(), BoxError> {
    if job.blocking_await_flushed(deadline)? {
        return Ok(());
    }
    let d = job.diagnostics();
    let done: u64 = d.partitions.iter().map(|p| p.records).sum();
    Err(if d.running_subtasks == 0 {
        format!("the job stopped: {:?}", d.errors).into()
    } else {
        format!(
            "{done} of {total} flights processed, not finished after {deadline:?}: {:?}",
            d.errors
        )
        .into()
    })
}

/// The `delays` job on the Redis engine: produces the flights (in replay order) into a
/// fresh `redis.partitions`-partition topic keyed by carrier (payload
/// `carrier,tailnum,sched_ms,dep_delay,row`, message timestamp = the job's event time),
/// runs the pipeline of [`delays`](super::delays) after a map from message to flight, and
/// gives `out` the lines the memory engine's
/// [`delays_partitioned`](super::delays_partitioned) gives with the same number of
/// partitions, in the same order; deletes the topic. `late` is the job's
/// `window_late_dropped`.
///
/// # Errors
/// Redis unreachable, a job error, a retried batch (duplicated output), the deadline, or an
/// error returned by `out`.
pub fn delays_redis<E: Into<BoxError>>(
    data: &Dataset,
    opts: &DelaysOptions,
    redis: &RedisWindowed,
    mut out: impl FnMut(&DelayLine) -> Result<(), E>,
) -> Result<DelaysSummary, BoxError> {
    let opts = *opts;
    let ran = run_windowed(
        data,
        redis,
        "delays",
        |f| Some(&f.carrier),
        |f| opts.event_time.of(f),
        |l: &DelayLine| &l.carrier,
        Box::new(move |env, topic, group, source, late, sink| {
            streaming::pipeline! {
                env.from_mq_topic_with_options(topic, group, source)
                    .try_map(parse_flight)
                    .transform(|flights| super::delays_fragment(flights, opts, late))
                    .sink(sink)
            }
        }),
    )?;
    let mut fired: HashSet<(&str, i64)> = HashSet::new();
    for line in &ran.lines {
        out(line).map_err(Into::into)?;
        fired.insert((&line.carrier, line.window_start_ms));
    }
    Ok(DelaysSummary {
        skipped: data.skipped_na_departure,
        late: ran.late,
        windows: fired.len(),
        firings: ran.lines.len() as u64,
    })
}

/// The `sessions` job on the Redis engine, as [`delays_redis`] with the topic keyed by
/// tail number (flights without one are produced without a key, so they go round robin,
/// and are filtered out by the job) and the pipeline of [`sessions`](super::sessions);
/// the lines equal [`sessions_partitioned`](super::sessions_partitioned)'s with the same
/// number of partitions, in the same order.
///
/// # Errors
/// As [`delays_redis`].
pub fn sessions_redis<E: Into<BoxError>>(
    data: &Dataset,
    opts: &SessionsOptions,
    redis: &RedisWindowed,
    mut out: impl FnMut(&SessionLine) -> Result<(), E>,
) -> Result<SessionsSummary, BoxError> {
    let opts = *opts;
    let ran = run_windowed(
        data,
        redis,
        "sessions",
        |f| f.tailnum.as_deref(),
        |f| f.sched_ms,
        |l: &SessionLine| &l.tailnum,
        Box::new(move |env, topic, group, source, late, sink| {
            streaming::pipeline! {
                env.from_mq_topic_with_options(topic, group, source)
                    .try_map(parse_flight)
                    .transform(|flights| super::sessions_fragment(flights, opts, late))
                    .sink(sink)
            }
        }),
    )?;
    for line in &ran.lines {
        out(line).map_err(Into::into)?;
    }
    Ok(sessions_summary(data, ran.lines.len() as u64, ran.late))
}
