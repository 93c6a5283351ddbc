//! Options of the message queue ([`MqOptions`]) and of one subscription
//! ([`SubscriptionOptions`]), with builders that validate and name the offending field.
//!
//! The knobs: batch count and poll timeout per subscription; worker threads, leases, retry
//! and response timeout for the queue.

use std::time::Duration;

use crate::options::{at_least_one, invalid, key_part, options, positive};
use crate::Error;

/// The largest `batch_count`: one batch is acknowledged by one Lua script call whose
/// arguments are unpacked on the Lua stack (limit ~8000 values).
pub const MAX_BATCH_COUNT: usize = 5000;

options! {
    /// Exponential backoff with jitter for retried messages.
    ///
    /// The delay before retry number `n` (0-based: `n` = the message's retry count before this
    /// retry) is `base = min(max_backoff, initial_backoff * multiplier^n)`, then drawn uniformly
    /// from `[base * (1 - jitter), base * (1 + jitter)]` and capped at `max_backoff`.
    /// A message is retried while its retry count is below `max_retries`; the attempt that
    /// would exceed it goes to the dead-letter stream instead.
    ///
    /// # Retries are atomic
    ///
    /// Acknowledging the original and then re-adding the retry would be two steps, and a crash
    /// between them would lose the message. Here one Lua script (`ack_and_schedule`) does, in one slot:
    ///
    /// 1. `XACK` the original; if it was not pending any more (already acknowledged by a
    ///    previous run of this script or by another consumer after a claim) it stops and
    ///    returns 0, so a repeated call cannot schedule a second retry;
    /// 2. stores the retry entry's fields (msgpack) in `P:{T:n}:retry:data` under the token
    ///    [`retry_token`](crate::mq::retry_token)`(group, id)` = `G\n<id>` (the failing group, a newline, the failed
    ///    entry's id; group names cannot contain a newline, so the token is unambiguous), and
    ///    its due time (server `TIME` + backoff, ms) in `P:{T:n}:retry:due`;
    /// 3. advances the commit frontier ([`StartPolicy`]).
    ///
    /// A second script (`promote_due`), run by the partition's owner every
    /// [`crate::mq::MqOptions::retry_poll_interval`], moves due retries back into the stream as
    /// new entries (`XADD *`) and deletes them from the schedule, in one step. Either script
    /// runs whole or not at all, so a crash or a Redis restart (with AOF) between the attempts
    /// neither loses nor duplicates the retry. A retried message is never redelivered before
    /// its backoff has elapsed.
    ///
    /// The retry entry keeps key, payload, timestamp, partition (same stream) and headers;
    /// `rc` grows by one and header `x-original-message-id` names the first id.
    ///
    /// # Retries are per group
    ///
    /// The partition's stream is shared by every consumer group of the topic, so a retry
    /// entry carries the field `rg` = the group that failed ([`Message`](crate::mq::Message)); the
    /// stored fields include it, so promotion re-adds it. Only that group processes the entry:
    /// every other group's reader skips it without calling its handler (subscriptions and the
    /// Redis engine's `Xack` mode acknowledge it, which also moves their commit frontier past
    /// it; an [`crate::mq::ExclusiveReader`] reads past it, so the caller's committed offset
    /// does too). The token includes the group, so two groups failing the same entry schedule
    /// one retry each instead of overwriting each other (or, for `NOACK` readers, the second
    /// being dropped as "already scheduled").
    ///
    /// # Fencing
    ///
    /// For an owner holding the partition's lease (an [`crate::mq::ExclusiveReader`], the
    /// Redis engine), scheduling, promotion and dead-lettering first check the lease in the
    /// same script; a stale owner's call writes nothing and fails with
    /// [`Error::Fenced`]. Subscriptions call them without a lease.
    ///
    /// Retries scheduled by an older version (token = bare entry id, no `rg` field) are
    /// still promoted, as entries every group reads.
    #[derive(Debug, Clone, PartialEq)]
    pub struct RetryPolicy;
    /// Builder of [`RetryPolicy`]; [`RetryPolicyBuilder::build`] validates.
    pub struct RetryPolicyBuilder;
    /// Validates and returns the policy.
    ///
    /// # Errors
    /// As [`RetryPolicy::validate`].
    fn build = |p: RetryPolicy| p.validate().map(|()| p);
    /// Reads a retry policy from a file: as the `retry` table of [`MqOptions`]'s
    /// deserialization, then [`RetryPolicy::validate`].
    ///
    /// # Errors
    /// As for [`MqOptions`]; the field is named `retry.*`.
    impl Deserialize via RetryPolicyFile;
    {
        /// Retries before a message is dead-lettered (the first delivery is not a retry);
        /// `0` dead-letters on the first `Retry`. Default 3.
        pub max_retries: u32 = 3;
        /// Delay before the first retry. Default 1 s. Must be > 0.
        pub initial_backoff: Duration = Duration::from_secs(1),
            check(|_, d| positive("retry.initial_backoff", d));
        /// Growth factor per retry, ≥ 1.0. Default 2.0.
        pub multiplier: f64 = 2.0, check(|_, m| multiplier("retry.multiplier", m));
        /// Upper bound of any delay, ≥ `initial_backoff`. Default 60 s.
        pub max_backoff: Duration = Duration::from_secs(60);
        /// Relative jitter in `[0, 1]`; `0.2` spreads a delay over ±20 %. Default 0.2.
        pub jitter: f64 = 0.2, check(|_, j| jitter("retry.jitter", j));
    }
}

impl RetryPolicy {
    /// Checks the policy. Its errors name the queue's option: `retry.*`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `retry.initial_backoff` (zero),
    /// `retry.multiplier` (< 1 or not finite), `retry.jitter` (outside `[0, 1]`) or
    /// `retry.max_backoff` (< initial).
    pub fn validate(&self) -> Result<(), Error> {
        self.check_fields()?;
        if self.max_backoff < self.initial_backoff {
            return Err(invalid(
                "retry.max_backoff",
                "must be ≥ retry.initial_backoff",
            ));
        }
        Ok(())
    }
}

/// `retry.multiplier`: finite and at least 1.
fn multiplier(field: &'static str, m: &f64) -> Result<(), Error> {
    if !m.is_finite() || *m < 1.0 {
        return Err(invalid(
            field,
            format!("must be a finite number ≥ 1.0, got {m}"),
        ));
    }
    Ok(())
}

/// `retry.jitter`: in `[0, 1]`.
fn jitter(field: &'static str, j: &f64) -> Result<(), Error> {
    if !(0.0..=1.0).contains(j) {
        return Err(invalid(field, format!("must be in [0, 1], got {j}")));
    }
    Ok(())
}

/// Where a consumer group starts when it does not exist yet.
///
/// There is deliberately no implicit default that replays a whole stream: a missing group
/// must not silently replay a stream.
///
/// # Commit frontier
///
/// The frontier is the highest entry id `F` such that **every** entry of the partition's
/// stream with id ≤ `F` has been acknowledged by the group (or left the stream by
/// trimming). It is a contiguous prefix, not "the largest id acknowledged so far": with
/// entries 1, 2, 3 and acknowledgements in the order 3, 1, 2, "max acked" is 3 after the
/// first acknowledgement although 1 and 2 are still in flight, so restarting a group there
/// would skip them; the frontier stays `0-0`, then moves to 1, then jumps to 3.
///
/// Every acknowledgement the queue does (plain ack, ack + retry, ack + dead letter) runs in
/// one Lua script that also advances the frontier: acknowledged ids above the frontier are
/// parked in the set `P:{T:n}:acked:G`, and the script walks the stream forward from `F`
/// (`XRANGE (F + COUNT ..`) while the next entry is acknowledged; the set holds only ids
/// above the frontier (an id the frontier passes leaves it). The frontier key is
/// `P:{T:n}:frontier:G` (same hash tag as the stream, so the script is cluster-safe).
///
/// The frontier rebuilds a missing consumer group (the `Frontier*` policies) without
/// replaying acknowledged entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPolicy {
    /// Start after the commit frontier stored for (topic, group, partition) (see
    /// [the commit frontier](StartPolicy#commit-frontier)); when none is stored, start at
    /// the end of the stream (`$`).
    FrontierOrLatest,
    /// Start after the commit frontier; when none is stored, start at the beginning (`0`).
    FrontierOrEarliest,
    /// Start at the end of the stream (`XGROUP CREATE .. $`): only new entries.
    Latest,
    /// Start at the beginning (`XGROUP CREATE .. 0`): every entry still in the stream.
    Earliest,
}

/// Pins a subscription to the partitions with `partition % parallelism == subtask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Assignment {
    /// This consumer's index, `< parallelism`.
    pub subtask: u32,
    /// The number of subtasks, ≥ 1.
    pub parallelism: u32,
}

impl Assignment {
    /// A filter `partition % parallelism == subtask`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `assignment.parallelism` (zero) or
    /// `assignment.subtask` (≥ parallelism).
    pub fn try_new(subtask: u32, parallelism: u32) -> Result<Self, Error> {
        if parallelism == 0 {
            return Err(invalid("assignment.parallelism", "must be ≥ 1"));
        }
        if subtask >= parallelism {
            return Err(invalid(
                "assignment.subtask",
                format!("must be < parallelism ({parallelism}), got {subtask}"),
            ));
        }
        Ok(Self {
            subtask,
            parallelism,
        })
    }

    /// Whether `partition` belongs to this subtask.
    pub fn accepts(&self, partition: u32) -> bool {
        partition % self.parallelism == self.subtask
    }
}

options! {
    /// Options shared by every producer and subscription of one [`crate::mq::Mq`] handle.
    ///
    /// Build with [`MqOptions::builder`]; `MqOptions::default()` is the builder's defaults.
    #[derive(Debug, Clone, PartialEq)]
    pub struct MqOptions;
    /// Builder of [`MqOptions`]; [`MqOptionsBuilder::build`] validates.
    pub struct MqOptionsBuilder;
    /// Validates and returns the options.
    ///
    /// # Errors
    /// As [`MqOptions::validate`].
    fn build = |o: MqOptions| o.validate().map(|()| o);
    /// Reads the options from a file or the environment: every field is optional (the
    /// default of [`MqOptions::default`] otherwise), an unknown field is an error, durations
    /// are `humantime` strings (`"500ms"`, `"10s"`, `"1m 30s"`), `retry` is a table of
    /// [`RetryPolicy`]'s fields.
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts: streaming::mq::MqOptions = serde_json::from_str(
    ///     r#"{"key_prefix": "orders", "lease_ttl": "20s", "retry": {"max_retries": 5}}"#,
    /// )?;
    /// assert_eq!(opts.lease_ttl, Duration::from_secs(20));
    /// assert_eq!(opts.retry.max_retries, 5);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    ///
    /// # Errors
    /// The deserializer's error for an unknown field or a value of the wrong shape, or the
    /// message of [`MqOptions::validate`]'s [`Error::InvalidConfig`],
    /// which names the field (e.g. "invalid configuration `lease_renew_interval`: …").
    impl Deserialize via MqOptionsFile;
    {
        /// Prefix of every Redis key of the queue, default `mq` (see
        /// [`KeySpace`](crate::mq::KeySpace) for the key layout).
        pub key_prefix: String = "mq".to_owned(), set(into), check(key_part);
        /// The most partitions one subscription consumes at once (one worker task each).
        /// Default 16.
        pub worker_count: usize = 16, check(at_least_one);
        /// Time to live of a partition lease, default 10 s, from 100 ms to 1 day. A crashed
        /// owner's partitions are free again after at most this long.
        pub lease_ttl: Duration = Duration::from_secs(10), check(lease_ttl);
        /// How often a subscription renews its leases and rebalances, default 2 s; must be
        /// greater than zero and at most half of `lease_ttl`.
        pub lease_renew_interval: Duration = Duration::from_secs(2), check(positive);
        /// Idle time after which a pending entry of another consumer is claimed
        /// (`XAUTOCLAIM .. min-idle-time`), default 30 s.
        pub claim_idle: Duration = Duration::from_secs(30), check(positive);
        /// How often the owner of a partition moves due retries back into its stream,
        /// default 100 ms.
        pub retry_poll_interval: Duration = Duration::from_millis(100), check(positive);
        /// Retry backoff and the dead-letter threshold.
        pub retry: RetryPolicy = RetryPolicy::default(), check(|_, r| RetryPolicy::validate(r));
        /// Approximate `MAXLEN ~` applied by the producer on every `XADD`; `None` keeps
        /// every entry (default).
        pub max_len: Option<usize> = None, check(max_len);
        /// How long any one Redis call may wait for its reply — and one connection attempt
        /// for the server's greeting — before it fails with a timeout, default 5 s, from
        /// 10 ms to 1 day. A blocking read (`XREADGROUP .. BLOCK`) may take its block time
        /// on top. It bounds how long a frozen or silent server can hold a caller: the
        /// queue, the Redis engine's subtasks and its job client all use it.
        pub response_timeout: Duration = Duration::from_secs(5), check(response_timeout),
            note("10 ms to 1 day");
        /// TLS certificates to trust and to present, for a `rediss://` URL (see
        /// [`TlsOptions`](crate::mq::TlsOptions)); default none: the system's roots.
        pub tls: crate::mq::TlsOptions = crate::mq::TlsOptions::default(),
            check(|_, t| crate::mq::TlsOptions::validate(t));
    }
}

impl MqOptions {
    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first invalid field: `key_prefix` (empty or
    /// containing `{`, `}` or whitespace), `worker_count` (0), `lease_ttl` (< 100 ms or > 1 day),
    /// `lease_renew_interval` (zero), `claim_idle` (zero), `retry_poll_interval` (zero), a
    /// `retry.*` field, `max_len` (0), `response_timeout` (< 10 ms or > 1 day), then
    /// `lease_renew_interval` (> lease_ttl / 2).
    pub fn validate(&self) -> Result<(), Error> {
        self.check_fields()?;
        if self.lease_renew_interval > self.lease_ttl / 2 {
            return Err(invalid(
                "lease_renew_interval",
                "must be > 0 and at most half of lease_ttl",
            ));
        }
        Ok(())
    }
}

/// The largest [`MqOptions::response_timeout`]: it bounds every wait on Redis, and a longer
/// one would be no bound at all.
const MAX_RESPONSE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The largest [`MqOptions::lease_ttl`]: a dead owner's partitions wait this long.
const MAX_LEASE_TTL: Duration = Duration::from_secs(24 * 3600);

/// `lease_ttl`: from 100 ms to 1 day.
fn lease_ttl(field: &'static str, ttl: &Duration) -> Result<(), Error> {
    if *ttl < Duration::from_millis(100) || *ttl > MAX_LEASE_TTL {
        return Err(invalid(
            field,
            format!("must be between 100 ms and 1 day, got {ttl:?}"),
        ));
    }
    Ok(())
}

/// `response_timeout`: from 10 ms to 1 day.
fn response_timeout(field: &'static str, timeout: &Duration) -> Result<(), Error> {
    if *timeout < Duration::from_millis(10) || *timeout > MAX_RESPONSE_TIMEOUT {
        return Err(invalid(
            field,
            format!("must be between 10 ms and 1 day, got {timeout:?}"),
        ));
    }
    Ok(())
}

/// `max_len`: at least 1 when set.
fn max_len(field: &'static str, max_len: &Option<usize>) -> Result<(), Error> {
    if *max_len == Some(0) {
        return Err(invalid(field, "must be ≥ 1 when set"));
    }
    Ok(())
}

options! {
    /// Options of one subscription.
    #[derive(Debug, Clone, PartialEq)]
    pub struct SubscriptionOptions;
    /// Builder of [`SubscriptionOptions`]; [`SubscriptionOptionsBuilder::build`] validates.
    pub struct SubscriptionOptionsBuilder;
    /// Validates and returns the options.
    ///
    /// # Errors
    /// As [`SubscriptionOptions::validate`].
    fn build = |o: SubscriptionOptions| o.validate().map(|()| o);
    /// Reads subscription options from a file or the environment: every field optional (its
    /// default otherwise), unknown fields rejected, `poll_timeout` a `humantime` string,
    /// `start` one of `frontier_or_latest`, `frontier_or_earliest`, `latest`, `earliest`,
    /// `assignment` a table `{ subtask, parallelism }`.
    ///
    /// ```
    /// use streaming::mq::{StartPolicy, SubscriptionOptions};
    /// let sub: SubscriptionOptions =
    ///     serde_json::from_str(r#"{"batch_count": 500, "poll_timeout": "250ms", "start": "earliest"}"#)?;
    /// assert_eq!((sub.batch_count, sub.start), (500, StartPolicy::Earliest));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    ///
    /// # Errors
    /// The deserializer's error for an unknown field or a value of the wrong shape, or the
    /// message of [`SubscriptionOptions::validate`] (or [`Assignment::try_new`]), which names
    /// the field.
    impl Deserialize via SubscriptionOptionsFile;
    {
        /// Entries read per `XREADGROUP .. COUNT`, 1..=[`MAX_BATCH_COUNT`]. Default 100.
        pub batch_count: usize = 100, check(batch_count);
        /// `XREADGROUP .. BLOCK` time, ≥ 1 ms. Default 1 s. Stopping or pausing waits for at
        /// most this long plus the batch's handling. The Redis engine reads without
        /// blocking: a subtask none of whose partitions had input waits 1 ms, doubling per
        /// idle turn up to `min(poll_timeout, 10 ms)`, and back to 1 ms after input.
        pub poll_timeout: Duration = Duration::from_secs(1), check(poll_timeout);
        /// Where a missing consumer group starts. Default [`StartPolicy::FrontierOrLatest`].
        pub start: StartPolicy = StartPolicy::FrontierOrLatest;
        /// The consumer name inside the group; `None` generates a unique one
        /// (`<pid>-<random>`). Two live subscriptions must not share a name.
        pub consumer_name: Option<String> = None,
            set(|value: impl Into<String>| Some(value.into())), check(consumer_name);
        /// A partition filter for the engine's parallelism; `None` takes a fair share of all
        /// partitions. Changeable later with `Subscription::set_assignment`.
        pub assignment: Option<Assignment> = None, set(|value: Assignment| Some(value));
    }
}

impl SubscriptionOptions {
    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `batch_count` (0 or > [`MAX_BATCH_COUNT`]),
    /// `poll_timeout` (< 1 ms) or `consumer_name` (empty or not `[A-Za-z0-9_.-]`).
    pub fn validate(&self) -> Result<(), Error> {
        self.check_fields()
    }
}

/// `batch_count`: 1..=[`MAX_BATCH_COUNT`].
fn batch_count(field: &'static str, count: &usize) -> Result<(), Error> {
    if *count == 0 || *count > MAX_BATCH_COUNT {
        return Err(invalid(
            field,
            format!("must be in 1..={MAX_BATCH_COUNT}, got {count}"),
        ));
    }
    Ok(())
}

/// `poll_timeout`: at least 1 ms.
fn poll_timeout(field: &'static str, timeout: &Duration) -> Result<(), Error> {
    if *timeout < Duration::from_millis(1) {
        return Err(invalid(field, "must be ≥ 1 ms"));
    }
    Ok(())
}

/// `consumer_name`, when set: a valid name.
fn consumer_name(field: &'static str, name: &Option<String>) -> Result<(), Error> {
    match name {
        Some(name) => crate::mq::topic::validate_name(field, name),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(e: Error) -> &'static str {
        match e {
            Error::InvalidConfig { field, .. } => field,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid() {
        MqOptions::default().validate().unwrap();
        SubscriptionOptions::default().validate().unwrap();
    }

    #[test]
    fn errors_name_the_field() {
        let e = MqOptions::builder()
            .lease_ttl(Duration::from_secs(1))
            .lease_renew_interval(Duration::from_millis(600))
            .build()
            .unwrap_err();
        assert_eq!(field(e), "lease_renew_interval");
        let e = MqOptions::builder().key_prefix("a{b").build().unwrap_err();
        assert_eq!(field(e), "key_prefix");
        let e = MqOptions::builder()
            .retry(RetryPolicy {
                jitter: 1.5,
                ..RetryPolicy::default()
            })
            .build()
            .unwrap_err();
        assert_eq!(field(e), "retry.jitter");
        let e = MqOptions::builder()
            .response_timeout(Duration::from_millis(5))
            .build()
            .unwrap_err();
        assert_eq!(field(e), "response_timeout");
        let e = MqOptions::builder()
            .response_timeout(Duration::MAX)
            .build()
            .unwrap_err();
        assert_eq!(field(e), "response_timeout");
        // Durations at the type's limit are judged, not overflowed.
        let huge = MqOptions::builder()
            .lease_ttl(Duration::MAX)
            .lease_renew_interval(Duration::MAX)
            .build()
            .unwrap_err();
        assert_eq!(field(huge), "lease_ttl");
        let huge = MqOptions::builder()
            .lease_ttl(Duration::from_secs(3600))
            .lease_renew_interval(Duration::MAX)
            .build()
            .unwrap_err();
        assert_eq!(field(huge), "lease_renew_interval");
        assert_eq!(
            MqOptions::default().response_timeout,
            Duration::from_secs(5)
        );
        let e = SubscriptionOptions::builder()
            .batch_count(0)
            .build()
            .unwrap_err();
        assert_eq!(field(e), "batch_count");
        let e = SubscriptionOptions::builder()
            .consumer_name("a b")
            .build()
            .unwrap_err();
        assert_eq!(field(e), "consumer_name");
        assert_eq!(
            field(Assignment::try_new(2, 2).unwrap_err()),
            "assignment.subtask"
        );
    }

    #[test]
    fn assignment_filter() {
        let a = Assignment::try_new(1, 3).unwrap();
        let taken: Vec<u32> = (0..8).filter(|p| a.accepts(*p)).collect();
        assert_eq!(taken, vec![1, 4, 7]);
    }
}

