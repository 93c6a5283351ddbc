//! [`RedisTopicForwarder`]: its options, starting it, and the handle of a running one.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use crate::mq::topic::validate_name;
use crate::mq::{connect, Backoff, Mq};
use crate::redis::outbox::outbox_key;
use crate::redis::sinks::topics::outbox_name;
use crate::redis::sinks::topics::run::{ErrorSink, Lane, Run, Share, Stop};
use crate::redis::sinks::topics::target::{marks_key, Forwarded, TopicTarget};
use crate::Error;

/// Moves the outputs a [`RedisTopicSink`](crate::redis::sinks::topics::RedisTopicSink) for topic `target`
/// committed, from the outboxes of the source topic's partitions into `target`, exactly
/// once (keys and guarantees below). A job whose pipeline ends in such a sink starts one
/// itself in each of its processes (see
/// [`RedisTopicSink::forwarded_by_job`](crate::redis::sinks::topics::RedisTopicSink::forwarded_by_job)); start
/// one yourself, as a tokio task in any process, for a sink that opted out. By default it
/// covers every partition of the source topic, and more than one may run (see
/// *Position*).
///
/// # Key layout
/// With queue key prefix `P`, target topic `T` and target partition `q`:
/// - `P:{T:q}:s` — the target partition's stream (as a [`Producer`](crate::mq::Producer)
///   writes it; `MAXLEN ~` the queue's `max_len` when set);
/// - `P:{T:q}:forwarded` — the forwarding marks: a hash of outbox stream → the position
///   `{outbox entry id}/{index in the entry}` of the last record forwarded into this
///   partition, field `{outbox name}/{source topic}/{source partition}` (one field per
///   source partition and outbox, so its size does not grow with the records).
///
/// # Messages
/// A forwarded message is a queue message like any other: payload `p` (the sink's
/// encoding of the output), timestamp `ts`, key `k` when the sink has a key function, and
/// header [`HEADER_IDEMPOTENCY_KEY`](crate::mq::HEADER_IDEMPOTENCY_KEY) = the output's
/// stable [`OutboxRecord::id`](crate::redis::outbox::OutboxRecord::id)
/// (`{job}/{group}/{source topic}/{p}/{offset}/{index}`). Its partition: with a key,
/// [`partition_for_key`](crate::mq::partition_for_key) (like the producer); without one,
/// the source partition modulo the target's partition count (never round robin: a record
/// forwarded again must go to the same partition, where its mark is).
///
/// # Guarantees
/// - *Exactly once into the target topic.* Outbox entry ids grow within an outbox stream,
///   and a forwarder hands a source partition's records to each target partition in that
///   order (per target partition and read, one request of transactions of up to 1,000
///   records each, stopping at the first that fails), so a record whose position is not
///   after its target partition's mark was appended already (by another forwarder
///   running beside it, or by this one when the reply was lost). A transaction's guard
///   script lets its plain `XADD`s append only when the mark is before all of its
///   records, and its tail script moves the mark past them; otherwise the transaction
///   changes nothing and its records go through a script that appends only those after
///   the mark, one by one. The check and the append are one transaction (or one
///   script), so there is no window between them. (This relies on the outbox stream's
///   ids growing: do not delete an outbox stream while the server's clock may be behind
///   its last id.)
/// - *Order.* A source partition's outputs reach each target partition in output order.
/// - *Position.* A forwarder keeps no state of its own: it reads each source partition's
///   outbox from the start of the stream, forwards a read (up to `batch_size` entries) in
///   one pipelined round trip per target partition and trims the outbox up to it
///   (`XTRIM MINID`) once all of it went through, so the outbox holds only what no
///   forwarder confirmed yet and a restart after a crash re-reads at most one read's worth
///   (skipped by the marks). Two forwarders over the same partitions (say one in each
///   process of a job) are harmless: each record is appended once, by whichever gets
///   there first; the other's transaction changes nothing, and its script skips the
///   record.
/// - *No dead letters.* A forward fails only on a Redis error (the target stream of the
///   wrong type, Redis unreachable); it is logged and retried with backoff without limit,
///   and the partition's later records wait: nothing leaves the topic silently.
/// - The target topic's partition count must not change while records are being
///   forwarded (a re-forward could pick another partition, whose mark does not know it).
///
/// ```no_run
/// # async fn demo(mq: streaming::mq::Mq) -> Result<(), streaming::Error> {
/// use streaming::redis::RedisTopicForwarder;
///
/// // The job reads "orders" and ends with RedisTopicSink::new("enriched"); the forwarder
/// // covers every partition of "orders".
/// let forwarding = RedisTopicForwarder::builder(&mq, "orders", "enriched")
///     .build()?
///     .start()
///     .await?;
/// // ... later:
/// forwarding.stop().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisTopicForwarder {
    mq: Mq,
    source: String,
    target: String,
    /// The source partitions given; `None`: every partition of the source topic.
    partitions: Option<Vec<u32>>,
    batch_size: usize,
    poll_interval: Duration,
    backoff: (Duration, Duration),
}

/// Options of a [`RedisTopicForwarder`]; [`build`](Self::build) checks them.
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisTopicForwarderBuilder {
    f: RedisTopicForwarder,
}

impl RedisTopicForwarder {
    /// Options for forwarding what the job reading `source` produced for topic `target`,
    /// on `mq`'s Redis and key prefix (the job's queue options). Defaults: every partition
    /// of the source topic (read when it starts), batch size 100, longest idle wait
    /// ([`poll_interval`](RedisTopicForwarderBuilder::poll_interval)) 100 ms,
    /// backoff after a Redis error 100 ms doubling to 30 s.
    pub fn builder(mq: &Mq, source: &str, target: &str) -> RedisTopicForwarderBuilder {
        RedisTopicForwarderBuilder {
            f: RedisTopicForwarder {
                mq: mq.clone(),
                source: source.to_owned(),
                target: target.to_owned(),
                partitions: None,
                batch_size: 100,
                poll_interval: Duration::from_millis(100),
                backoff: (Duration::from_millis(100), Duration::from_secs(30)),
            },
        }
    }

    /// The outbox stream of source partition `partition`,
    /// `{mq prefix}:outbox:topic.{target}:{S:p}`.
    pub fn outbox_key(&self, partition: u32) -> String {
        let prefix = &self.mq.options().key_prefix;
        let name = outbox_name(&self.target);
        outbox_key(self.mq.keys(), prefix, &name, &self.source, partition)
    }

    /// The forwarding marks of target partition `partition`, `{mq prefix}:{T:q}:forwarded`.
    pub fn marks_key(&self, partition: u32) -> String {
        let prefix = &self.mq.options().key_prefix;
        marks_key(self.mq.keys(), prefix, &self.target, partition)
    }

    /// Reads the target topic's partition count (and the source's, when no
    /// [`partitions`](RedisTopicForwarderBuilder::partitions) were given), then forwards
    /// on a tokio task until [`TopicForwarding::stop`] or until the handle is dropped.
    /// Each source partition starts after its forwarded position (see above), so outputs
    /// committed before the first start are forwarded too, and a start after a stop or a
    /// crash appends nothing twice. Redis errors while running are logged and retried;
    /// they do not end the task.
    ///
    /// # Errors
    /// [`Error::Mq`] when the target topic (or, without partitions given, the source
    /// topic) does not exist; [`Error::Connect`] when no connection can be made;
    /// [`Error::Redis`].
    pub async fn start(&self) -> Result<TopicForwarding, Error> {
        self.start_reporting(None, None).await
    }

    /// [`start`](Self::start), with each failed round also reported to `on_error` (a
    /// job's errors, for the forwarders a job runs).
    pub(crate) async fn start_reporting(
        &self,
        on_error: Option<ErrorSink>,
        share: Option<Share>,
    ) -> Result<TopicForwarding, Error> {
        let sources = match &self.partitions {
            Some(ps) => ps.clone(),
            None => (0..self.mq.partitions(&self.source).await?).collect(),
        };
        let partitions = self.mq.partitions(&self.target).await?;
        let opts = self.mq.options();
        let conn = connect(self.mq.endpoint(), opts.response_timeout, Duration::ZERO).await?;
        let counts = Arc::new(Forwarded::default());
        let run = Run {
            target: TopicTarget {
                conn,
                keys: self.mq.keys().clone(),
                prefix: opts.key_prefix.clone(),
                target: self.target.clone(),
                partitions,
                max_len: opts.max_len,
                mark_field: format!("{}/{}/", outbox_name(&self.target), self.source),
                counts: Arc::clone(&counts),
            },
            lanes: (sources.iter())
                .map(|&p| {
                    let backoff = Backoff::new(self.backoff.0, self.backoff.1);
                    Lane::new(p, self.outbox_key(p), backoff)
                })
                .collect(),
            batch_size: self.batch_size,
            poll_interval: self.poll_interval,
            idle_wait: self.poll_interval,
            on_error,
            share,
        };
        let (stop, stopped) = watch::channel(Stop::No);
        let task = tokio::spawn(run.run(stopped));
        info!(source = %self.source, target = %self.target, partitions = sources.len(), "topic forwarder started");
        Ok(TopicForwarding {
            stop,
            task: Some(task),
            counts,
        })
    }
}

impl RedisTopicForwarderBuilder {
    /// The source partitions whose outboxes this forwarder reads (default: all of the
    /// source topic's); duplicates are ignored.
    pub fn partitions(mut self, partitions: impl IntoIterator<Item = u32>) -> Self {
        let mut ps: Vec<u32> = partitions.into_iter().collect();
        ps.sort_unstable();
        ps.dedup();
        self.f.partitions = Some(ps);
        self
    }
    /// Entries read from an outbox per read (1..=10 000; default 100).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.f.batch_size = n;
        self
    }
    /// The longest an idle forwarder waits before reading its outboxes again (> 0;
    /// default 100 ms). After a round that forwarded records it waits 5 ms, doubling with
    /// each round that finds nothing up to this, so outputs of a busy source go on within
    /// milliseconds and an idle one is read every `poll_interval`.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.f.poll_interval = d;
        self
    }
    /// The wait after a Redis error (`initial` > 0) and the most it grows to by doubling
    /// (`max` ≥ `initial`); defaults 100 ms and 30 s.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.f.backoff = (initial, max);
        self
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad option: `topic` (the source or the
    /// target: empty, over 200 bytes or outside `[A-Za-z0-9_.-]`), `partitions` (given
    /// and empty), `batch_size`, `poll_interval` (zero), `backoff` (zero initial or max
    /// below initial).
    pub fn build(self) -> Result<RedisTopicForwarder, Error> {
        let f = self.f;
        validate_name("topic", &f.source)?;
        validate_name("topic", &f.target)?;
        let bad = |field: &'static str, reason: &str| {
            Err(Error::InvalidConfig {
                field,
                reason: reason.to_owned(),
            })
        };
        if f.partitions.as_ref().is_some_and(Vec::is_empty) {
            return bad("partitions", "at least one partition when given");
        }
        if !(1..=10_000).contains(&f.batch_size) {
            return bad("batch_size", "must be in 1..=10000");
        }
        if f.poll_interval.is_zero() {
            return bad("poll_interval", "must be > 0");
        }
        if f.backoff.0.is_zero() || f.backoff.1 < f.backoff.0 {
            return bad("backoff", "initial must be > 0 and max >= initial");
        }
        Ok(f)
    }
}

/// What a forwarder has done since it started (this process only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicForwardStats {
    /// Records appended to the target topic.
    pub appended: u64,
    /// Records found forwarded already (by their mark) and not appended again.
    pub skipped: u64,
    /// Rounds ended by a Redis error (each retried after a backoff).
    pub failed: u64,
}

/// A running [`RedisTopicForwarder`]. [`stop`](Self::stop) ends it after the forward in
/// progress; dropping the handle aborts it at its next await (a forward in flight then
/// either applied or not: the next start finds out from the marks).
#[derive(Debug)]
pub struct TopicForwarding {
    stop: watch::Sender<Stop>,
    task: Option<JoinHandle<()>>,
    counts: Arc<Forwarded>,
}

impl TopicForwarding {
    /// Counters since the start.
    pub fn stats(&self) -> TopicForwardStats {
        TopicForwardStats {
            appended: self.counts.appended.load(Ordering::Relaxed),
            skipped: self.counts.skipped.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
        }
    }

    /// Asks the task to stop and waits until it has.
    pub async fn stop(mut self) {
        let _ = self.stop.send(Stop::Now);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Forwards what the outboxes hold now (records committed before the call), then
    /// stops; waits at most `timeout` for that, then stops after the record in flight.
    /// What is left stays in the outboxes for the next forwarder.
    pub async fn drain(mut self, timeout: Duration) {
        let until = tokio::time::Instant::now() + timeout;
        let _ = self.stop.send(Stop::Drain(until));
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for TopicForwarding {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
