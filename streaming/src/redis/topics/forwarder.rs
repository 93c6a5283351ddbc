//! [`RedisTopicForwarder`]: its options, starting it, and the handle of a running one.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use super::outbox_name;
use super::target::{marks_key, Forwarded, TopicTarget};
use crate::mq::topic::validate_name;
use crate::mq::{connect, Mq};
use crate::redis::outbox::{OutboxDispatch, RedisOutboxDispatcher, RedisOutboxDispatcherBuilder};
use crate::Error;

/// Moves the outputs a [`RedisTopicSink`](super::RedisTopicSink) for topic `target`
/// committed, from the outboxes of the source topic's partitions into `target`, exactly
/// once (keys and guarantees below). It runs as a tokio task beside the job (in the job's
/// process or another one; the engine does not start it): start one per (source topic,
/// target topic), or split the source partitions between several.
///
/// # Key layout
/// With queue key prefix `P`, target topic `T` and target partition `q`:
/// - `P:{T:q}:s` — the target partition's stream (as a [`Producer`](crate::mq::Producer)
///   writes it; `MAXLEN ~` the queue's `max_len` when set);
/// - `P:{T:q}:forwarded` — the forwarding marks: a hash of outbox stream → the id of the
///   last outbox entry forwarded into this partition, field
///   `{outbox name}/{source topic}/{source partition}` (one field per source partition
///   and outbox, so its size does not grow with the records).
///
/// # Messages
/// A forwarded message is a queue message like any other: payload `p` (the sink's
/// encoding of the output), timestamp `ts`, key `k` when the sink has a key function, and
/// header [`HEADER_IDEMPOTENCY_KEY`](crate::mq::HEADER_IDEMPOTENCY_KEY) = the output's
/// stable [`OutboxRecord::id`](crate::redis::outbox::OutboxRecord::id)
/// (`{job}/{source topic}/{p}/{offset}/{index}`). Its partition: with a key,
/// [`partition_for_key`](crate::mq::partition_for_key) (like the producer); without one,
/// the source partition modulo the target's partition count (never round robin: a record
/// forwarded again must go to the same partition, where its mark is).
///
/// # Guarantees
/// - *Exactly once into the target topic.* Outbox entry ids grow within an outbox stream,
///   and the forwarder hands a source partition's records over in that order, so a record
///   whose id is not after its target partition's mark was appended already (a forwarder
///   that crashed after the append and before the acknowledgement, or whose reply was
///   lost, forwards it again): the script appends nothing and moves nothing. The check and
///   the append are one script, so there is no window between them.
/// - *Order.* A source partition's outputs reach each target partition in output order.
/// - Run one forwarder per (target topic, source partition) at a time: two running side by
///   side (same group) could forward a partition's records out of order, and a record
///   arriving after a later one of its partition is then skipped as forwarded (lost).
///   Restarting the forwarder after a crash (with the same consumer name) is the intended
///   recovery; one with another name takes over after `claim_idle`.
/// - *Dead letters.* By default a forward is retried without limit (with backoff): a
///   record that cannot be forwarded blocks its source partition's later records rather
///   than leaving the topic. With
///   [`max_attempts`](RedisTopicForwarderBuilder::max_attempts) set, a record that failed
///   that many times moves to the outbox's dead-letter stream and is **not** forwarded
///   (the ones after it are); forwarding it later is up to you.
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
    /// The options (checked), without the partitions when they are all of them.
    outbox: RedisOutboxDispatcherBuilder,
    /// The source partitions set by the builder; `None`: every partition of the source.
    partitions: Option<Vec<u32>>,
    /// The options built as they are (for the key names).
    dispatcher: RedisOutboxDispatcher,
}

/// Options of a [`RedisTopicForwarder`]; [`build`](Self::build) checks them.
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisTopicForwarderBuilder {
    mq: Mq,
    source: String,
    target: String,
    outbox: RedisOutboxDispatcherBuilder,
    partitions: Option<Vec<u32>>,
}

impl RedisTopicForwarder {
    /// Options for forwarding what the job reading `source` produced for topic `target`,
    /// on `mq`'s Redis and key prefix (the job's queue options). Defaults: every partition
    /// of the source topic (read when it starts), group and consumer `forwarder`,
    /// unlimited attempts, backoff
    /// 100 ms doubling to 30 s, batch size 100, poll interval 100 ms, `claim_idle` 30 s.
    pub fn builder(mq: &Mq, source: &str, target: &str) -> RedisTopicForwarderBuilder {
        let outbox = RedisOutboxDispatcher::builder(mq, &outbox_name(target), source)
            .group("forwarder")
            .consumer("forwarder")
            .max_attempts(u32::MAX);
        RedisTopicForwarderBuilder {
            mq: mq.clone(),
            source: source.to_owned(),
            target: target.to_owned(),
            outbox,
            partitions: None,
        }
    }

    /// The outbox stream of source partition `partition`,
    /// `{mq prefix}:outbox:topic.{target}:{S:p}`.
    pub fn outbox_key(&self, partition: u32) -> String {
        self.dispatcher.outbox_key(partition)
    }

    /// The dead-letter stream of source partition `partition`'s outbox (used only with
    /// [`max_attempts`](RedisTopicForwarderBuilder::max_attempts)).
    pub fn dlq_key(&self, partition: u32) -> String {
        self.dispatcher.dlq_key(partition)
    }

    /// The forwarding marks of target partition `partition`, `{mq prefix}:{T:q}:forwarded`.
    pub fn marks_key(&self, partition: u32) -> String {
        let prefix = &self.mq.options().key_prefix;
        marks_key(self.mq.keys(), prefix, &self.target, partition)
    }

    /// Reads the target topic's partition count (and the source's, when no
    /// [`partitions`](RedisTopicForwarderBuilder::partitions) were given), creates the
    /// consumer group on each
    /// source partition's outbox where missing (at id `0`: outputs committed before the
    /// first start are forwarded too), then forwards on a tokio task until
    /// [`TopicForwarding::stop`] or until the handle is dropped. Starting again after a
    /// stop or a crash goes on where the last run left off and appends nothing twice.
    /// Redis errors while running are logged and retried; they do not end the task.
    ///
    /// # Errors
    /// [`Error::Mq`] when the target topic (or, without partitions given, the source
    /// topic) does not exist; [`Error::Connect`] when no
    /// connection can be made; [`Error::Redis`].
    pub async fn start(&self) -> Result<TopicForwarding, Error> {
        let dispatcher = match &self.partitions {
            Some(_) => self.dispatcher.clone(),
            None => {
                let n = self.mq.partitions(&self.source).await?;
                self.outbox.clone().partitions(0..n).build()?
            }
        };
        let partitions = self.mq.partitions(&self.target).await?;
        let opts = self.mq.options();
        let conn = connect(self.mq.endpoint(), opts.response_timeout, Duration::ZERO).await?;
        let counts = Arc::new(Forwarded::default());
        let target = TopicTarget {
            conn,
            keys: self.mq.keys().clone(),
            prefix: opts.key_prefix.clone(),
            target: self.target.clone(),
            partitions,
            max_len: opts.max_len,
            mark_field: format!("{}/{}/", outbox_name(&self.target), self.source),
            counts: Arc::clone(&counts),
        };
        let dispatch = dispatcher.start(target).await?;
        info!(source = %self.source, target = %self.target, "topic forwarder started");
        Ok(TopicForwarding { dispatch, counts })
    }
}

impl RedisTopicForwarderBuilder {
    /// The source partitions whose outboxes this forwarder reads (default: all of the
    /// source topic's); duplicates are ignored. Give each source partition to one
    /// forwarder.
    pub fn partitions(mut self, partitions: impl IntoIterator<Item = u32>) -> Self {
        let ps: Vec<u32> = partitions.into_iter().collect();
        self.outbox = self.outbox.partitions(ps.clone());
        self.partitions = Some(ps);
        self
    }
    /// The consumer group on the outbox streams (default `forwarder`).
    pub fn group(mut self, group: &str) -> Self {
        self.outbox = self.outbox.group(group);
        self
    }
    /// The consumer name in the group (default `forwarder`); a forwarder restarted with
    /// the same name goes on at once with what its predecessor left unacknowledged.
    pub fn consumer(mut self, consumer: &str) -> Self {
        self.outbox = self.outbox.consumer(consumer);
        self
    }
    /// Forwards a record gets before it is dead-lettered and not forwarded (≥ 1; default
    /// `u32::MAX`, in effect unlimited: a failing record holds its partition back).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.outbox = self.outbox.max_attempts(n);
        self
    }
    /// The wait after a failed forward and the most it grows to (defaults 100 ms, 30 s).
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.outbox = self.outbox.backoff(initial, max);
        self
    }
    /// Entries read from an outbox per read (1..=10 000; default 100).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.outbox = self.outbox.batch_size(n);
        self
    }
    /// How long an idle forwarder waits before reading its outboxes again (default 100 ms).
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.outbox = self.outbox.poll_interval(d);
        self
    }
    /// How long a record must have been pending with another consumer of the group before
    /// this forwarder claims it (default 30 s).
    pub fn claim_idle(mut self, d: Duration) -> Self {
        self.outbox = self.outbox.claim_idle(d);
        self
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad option: `topic` (the source or the
    /// target: empty, over 200 bytes or outside `[A-Za-z0-9_.-]`), then as
    /// [`RedisOutboxDispatcherBuilder::build`].
    pub fn build(self) -> Result<RedisTopicForwarder, Error> {
        validate_name("topic", &self.source)?;
        validate_name("topic", &self.target)?;
        Ok(RedisTopicForwarder {
            dispatcher: self.outbox.clone().build()?,
            outbox: self.outbox,
            partitions: self.partitions,
            mq: self.mq,
            source: self.source,
            target: self.target,
        })
    }
}

/// What a forwarder has done since it started (this process only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TopicForwardStats {
    /// Records appended to the target topic.
    pub appended: u64,
    /// Records found forwarded already (by the marks) and acknowledged without appending.
    pub skipped: u64,
    /// Failed forwards (each retried, or dead-lettered with `max_attempts`).
    pub failed: u64,
    /// Records moved to the outbox's dead-letter stream (not forwarded).
    pub dead_lettered: u64,
}

/// A running [`RedisTopicForwarder`]. [`stop`](Self::stop) ends it after the forward in
/// progress; dropping the handle aborts it at its next await (what it was forwarding is
/// forwarded by the next start, at most once).
#[derive(Debug)]
pub struct TopicForwarding {
    dispatch: OutboxDispatch,
    counts: Arc<Forwarded>,
}

impl TopicForwarding {
    /// Counters since the start.
    pub fn stats(&self) -> TopicForwardStats {
        let d = self.dispatch.stats();
        TopicForwardStats {
            appended: self.counts.appended.load(Ordering::Relaxed),
            skipped: self.counts.skipped.load(Ordering::Relaxed),
            failed: d.failed,
            dead_lettered: d.dead_lettered,
        }
    }

    /// Asks the task to stop and waits until it has.
    pub async fn stop(self) {
        self.dispatch.stop().await;
    }
}
