//! [`RedisOutboxDispatcher`]'s options and their builder.

use std::time::Duration;

use crate::mq::topic::validate_name;
use crate::mq::Mq;
use crate::Error;

/// Delivers the records of an outbox to an [`OutboxTarget`](super::OutboxTarget): per source partition, in
/// order, acknowledging and deleting each delivered record, retrying a failed one with
/// exponential backoff and dead-lettering it after `max_attempts` (see the
/// [module docs](super) for keys and guarantees).
///
/// ```no_run
/// # async fn demo(mq: streaming::mq::Mq) -> Result<(), streaming::Error> {
/// use std::time::Duration;
/// use streaming::redis::outbox::{OutboxRecord, OutboxTarget, RedisOutboxDispatcher};
///
/// struct Log;
/// impl OutboxTarget for Log {
///     async fn deliver(&mut self, r: &OutboxRecord) -> Result<(), streaming::BoxError> {
///         println!("{}: {}", r.id, r.text()?);
///         Ok(())
///     }
/// }
///
/// let running = RedisOutboxDispatcher::builder(&mq, "mails", "orders")
///     .partitions(0..4)
///     .max_attempts(5)
///     .backoff(Duration::from_millis(200), Duration::from_secs(30))
///     .build()?
///     .start(Log)
///     .await?;
/// // ... later:
/// running.stop().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisOutboxDispatcher {
    pub(super) mq: Mq,
    pub(super) name: String,
    pub(super) topic: String,
    pub(super) partitions: Vec<u32>,
    pub(super) group: String,
    pub(super) consumer: String,
    pub(super) max_attempts: u32,
    pub(super) backoff_initial: Duration,
    pub(super) backoff_max: Duration,
    pub(super) batch_size: usize,
    pub(super) poll_interval: Duration,
    pub(super) claim_idle: Duration,
}

/// Options of a [`RedisOutboxDispatcher`]; [`build`](Self::build) checks them.
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisOutboxDispatcherBuilder {
    d: RedisOutboxDispatcher,
}

impl RedisOutboxDispatcher {
    /// Options for the outbox `name` of source topic `topic`, on `mq`'s Redis and under its
    /// key prefix. Defaults: partition 0 only, group `dispatcher`, consumer `dispatcher`,
    /// `max_attempts` 10, backoff 100 ms doubling to 30 s, batch size 100, poll interval
    /// 100 ms, `claim_idle` 60 s.
    pub fn builder(mq: &Mq, name: &str, topic: &str) -> RedisOutboxDispatcherBuilder {
        RedisOutboxDispatcherBuilder {
            d: Self {
                mq: mq.clone(),
                name: name.to_owned(),
                topic: topic.to_owned(),
                partitions: vec![0],
                group: "dispatcher".to_owned(),
                consumer: "dispatcher".to_owned(),
                max_attempts: 10,
                backoff_initial: Duration::from_millis(100),
                backoff_max: Duration::from_secs(30),
                batch_size: 100,
                poll_interval: Duration::from_millis(100),
                claim_idle: Duration::from_secs(60),
            },
        }
    }

    /// The outbox stream of source partition `partition`,
    /// `{mq prefix}:outbox:{name}:{T:n}`.
    pub fn outbox_key(&self, partition: u32) -> String {
        let prefix = &self.mq.options().key_prefix;
        super::outbox_key(self.mq.keys(), prefix, &self.name, &self.topic, partition)
    }

    /// The dead-letter stream of source partition `partition`, `{outbox key}:dlq`.
    pub fn dlq_key(&self, partition: u32) -> String {
        super::dlq_key(&self.outbox_key(partition))
    }
}

impl RedisOutboxDispatcherBuilder {
    /// The source partitions whose outboxes this dispatcher delivers (default `[0]`);
    /// duplicates are ignored. Several dispatchers may split a topic's partitions.
    pub fn partitions(mut self, partitions: impl IntoIterator<Item = u32>) -> Self {
        let mut ps: Vec<u32> = partitions.into_iter().collect();
        ps.sort_unstable();
        ps.dedup();
        self.d.partitions = ps;
        self
    }
    /// The consumer group on the outbox streams (default `dispatcher`).
    pub fn group(mut self, group: &str) -> Self {
        group.clone_into(&mut self.d.group);
        self
    }
    /// The consumer name in the group (default `dispatcher`); a restarted dispatcher with
    /// the same name takes over the records its predecessor left pending at once.
    pub fn consumer(mut self, consumer: &str) -> Self {
        consumer.clone_into(&mut self.d.consumer);
        self
    }
    /// Deliveries a record gets before it is dead-lettered (≥ 1; default 10).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.d.max_attempts = n;
        self
    }
    /// The wait after a record's first failure (`initial` > 0) and the most it grows to by
    /// doubling (`max` ≥ `initial`); each wait is jittered down by up to a half. Defaults:
    /// 100 ms and 30 s.
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.d.backoff_initial = initial;
        self.d.backoff_max = max;
        self
    }
    /// Entries read from a partition's outbox per read (1..=10 000; default 100).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.d.batch_size = n;
        self
    }
    /// How long an idle dispatcher waits before reading its outboxes again (> 0; default
    /// 100 ms).
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.d.poll_interval = d;
        self
    }
    /// How long a record must have been pending with another consumer of the group (a
    /// crashed dispatcher of another name) before this dispatcher claims it (`XAUTOCLAIM`;
    /// default 60 s, must be above the backoff's max); its partition delivers nothing
    /// newer until then. A dispatcher resets the idle time of the entries it holds when it
    /// starts an entry, after each record, and before a delivery once a third of
    /// `claim_idle` passed since the last reset (a record retried with backoff, entries
    /// queued behind a long one), so set it well above the longest single `deliver` call
    /// plus the backoff's max: a record pending that long with a live dispatcher is taken
    /// from it and delivered twice.
    pub fn claim_idle(mut self, d: Duration) -> Self {
        self.d.claim_idle = d;
        self
    }

    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad option: `name`, `topic`, `group`,
    /// `consumer` (empty, over 200 bytes or outside `[A-Za-z0-9_.-]`), `partitions`
    /// (none), `max_attempts` (0), `backoff` (zero initial or max below initial),
    /// `batch_size`, `poll_interval` (zero), `claim_idle` (not above the backoff's
    /// max).
    pub fn build(self) -> Result<RedisOutboxDispatcher, Error> {
        let d = self.d;
        validate_name("name", &d.name)?;
        validate_name("topic", &d.topic)?;
        validate_name("group", &d.group)?;
        validate_name("consumer", &d.consumer)?;
        let bad = |field: &'static str, reason: &str| {
            Err(Error::InvalidConfig {
                field,
                reason: reason.to_owned(),
            })
        };
        if d.partitions.is_empty() {
            return bad("partitions", "at least one partition");
        }
        if d.max_attempts == 0 {
            return bad("max_attempts", "must be at least 1");
        }
        if d.backoff_initial.is_zero() || d.backoff_max < d.backoff_initial {
            return bad("backoff", "initial must be > 0 and max >= initial");
        }
        if !(1..=10_000).contains(&d.batch_size) {
            return bad("batch_size", "must be in 1..=10000");
        }
        if d.poll_interval.is_zero() {
            return bad("poll_interval", "must be > 0");
        }
        if d.claim_idle <= d.backoff_max {
            return bad(
                "claim_idle",
                "must be above the backoff's max (a record waiting its backoff would be taken from the live dispatcher retrying it)",
            );
        }
        Ok(d)
    }
}
