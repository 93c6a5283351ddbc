//! [`RedisRuntimeConfig`]: the Redis engine's options, with defaults and validation.

use crate::mq::MqOptions;
use crate::Error;
use std::time::Duration;

mod checkpoint;
mod checkpoint_options;
mod checks;
mod file;
mod policies;

pub(crate) use checkpoint_options::CheckpointOptions;
use checks::{invalid, key_part};

pub use policies::{AckMode, HotKeyPolicy, ProcessingErrorResult, SchemaMismatchPolicy};

/// How a batch commit waits for replicas: `WAIT replicas timeout`, sent right after the
/// commit's transaction on the same connection to the node that ran it (on a Redis Cluster, the
/// master of the partition's hash slot), before the batch counts as done.
///
/// Set it with [`RedisRuntimeConfigBuilder::commit_replica_wait`]; see
/// [`RedisRuntimeConfig::commit_replica_wait`] for what it guarantees and what happens
/// when fewer replicas acknowledge in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaWait {
    /// Replicas that must acknowledge the commit (`numreplicas` of `WAIT`), at least 1.
    pub replicas: u32,
    /// Longest wait for them (`timeout` of `WAIT`, whole milliseconds, at least 1 ms and
    /// shorter than the queue's response timeout).
    pub timeout: Duration,
}

impl ReplicaWait {
    /// Waits for `replicas` replicas, at most `timeout`, after every batch commit.
    pub fn new(replicas: u32, timeout: Duration) -> Self {
        ReplicaWait { replicas, timeout }
    }

    /// The `WAIT` timeout argument: whole milliseconds, at least 1 (0 would block forever).
    pub(crate) fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// The Redis engine's options, built with
/// [`RedisRuntimeConfig::builder`]; each field's default is on its getter.
#[derive(Clone, Debug)]
pub struct RedisRuntimeConfig {
    job_name: String,
    job_instance_id: String,
    state_key_prefix: String,
    state_ttl: Option<Duration>,
    state_size_report_every_n_writes: u64,
    keyed_state_shard_count: u32,
    state_cache_max_entries: u64,
    hot_key_fields_warn_threshold: u64,
    hot_key_warn_interval: Duration,
    hot_key_policy: HotKeyPolicy,
    hot_key_throttle_max: Duration,
    state_schema_evolution_enabled: bool,
    state_schema_mismatch_policy: SchemaMismatchPolicy,
    restore_group_from_commit_frontier: bool,
    sink_deduplication_enabled: bool,
    sink_deduplication_ttl: Duration,
    sink_dedup_key_prefix: String,
    pipeline_parallelism: u32,
    timer_threads: u32,
    mdc_enabled: bool,
    mdc_sample_rate: f64,
    mq_options: MqOptions,
    processing_error_result: ProcessingErrorResult,
    ack_mode: AckMode,
    watermark_out_of_orderness: Duration,
    watermark_idle_timeout: Option<Duration>,
    window_max_fires_per_record: u32,
    event_time_timer_max_size: u32,
    commit_replica_wait: Option<ReplicaWait>,
    stalled_after: Duration,
    checkpoint: CheckpointOptions,
}

macro_rules! getters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        impl RedisRuntimeConfig {
            $($(#[$doc])* pub fn $name(&self) -> $ty { self.$name.clone() })*
        }
    };
}

getters! {
    /// Isolates state, checkpoint and dedup key spaces. Default `redis-streaming-job`.
    ///
    /// The default is the same for every job: two different jobs that keep the default
    /// (and the same `state_key_prefix`) share their state keys
    /// `{prefix}:{job}:{T:n}:{group}:{operator}:{state}` wherever topic, group and operator
    /// id coincide, and their schema fingerprints — give every job its own name. Instances
    /// of one job (restarts, takeover) must keep the same name to find their state.
    job_name: String;
    /// Part of the consumer names `{job}-{instance}-{seq}` (`seq` counts the subtasks this
    /// process started, so a name is never used twice by one process). Default:
    /// `{host}-{pid}-{random hex}`, unique per process (the host name is `local` when it
    /// cannot be read). Partition ownership never depends on it: leases are held under
    /// fencing tokens, so two processes given the same id still never own a partition at
    /// the same time.
    job_instance_id: String;
    /// Prefix of keyed-state keys. Default `streaming:runtime`.
    state_key_prefix: String;
    /// Expiry of each state hash (and of each key's collection), renewed by every commit
    /// that writes it; `None` (the default) keeps state forever, and so does
    /// `Some(Duration::ZERO)` (read as `None`). Otherwise from 1 ms to 100 years
    /// ([`build`](RedisRuntimeConfigBuilder::build) fails outside).
    state_ttl: Option<Duration>;
    /// Sample the size of a state hash (HLEN) every N writes; 0 (default) = off.
    state_size_report_every_n_writes: u64;
    /// Keyed state hashes per (operator, state), split by FNV-1a 64 of the key's JSON
    /// mod N (hash keys `...:{state}:s{i}`); default 1 (one hash, no suffix).
    keyed_state_shard_count: u32;
    /// Most keys each stateful operator keeps in memory per partition; 0 = unbounded.
    /// Default 100,000.
    ///
    /// Rolling `reduce`/`sum` tables and keyed process states are loaded per key: the
    /// first record of a key that is not in memory fetches its stored state (`HMGET`,
    /// one round trip for all keys a batch misses; the batch then runs again), so taking
    /// a partition costs the same whatever its state size. After a commit, an operator
    /// holding more keys evicts clean keys (in no particular order; keys with pending
    /// timers stay) down to 7/8 of the bound. Window panes, event-time and
    /// processing-time timers and watermarks are loaded whole when a partition is taken
    /// (they are bounded by the open windows and pending timers), in chunks of
    /// `HSCAN ... COUNT 500`, so no command blocks Redis for long.
    state_cache_max_entries: u64;
    /// Field count of a state hash from which it is hot; 0 (default) = off.
    hot_key_fields_warn_threshold: u64;
    /// Minimum interval between hot-key warnings for one hash. Default 1 min.
    hot_key_warn_interval: Duration;
    /// What writes to a hot hash do. Default [`HotKeyPolicy::LogOnly`].
    hot_key_policy: HotKeyPolicy;
    /// Longest sleep of [`HotKeyPolicy::Throttle`]. Default 200 ms.
    hot_key_throttle_max: Duration;
    /// Check each keyed state's stored schema fingerprint (kind, value and key types)
    /// before decoding it, and write it on first use (hash `...:{group}:schema`, see the
    /// state schema versions in the [module docs](super)). Default `true`.
    state_schema_evolution_enabled: bool;
    /// What a schema fingerprint mismatch does: [`SchemaMismatchPolicy::Fail`] stops the
    /// partition, [`SchemaMismatchPolicy::Clear`] deletes the state and starts it empty,
    /// [`SchemaMismatchPolicy::Ignore`] warns and decodes the stored entries as the new
    /// type. Default [`SchemaMismatchPolicy::Fail`].
    state_schema_mismatch_policy: SchemaMismatchPolicy;
    /// A consumer group found missing (e.g. deleted while the job runs, in
    /// [`AckMode::Xack`]) is re-created after its partition's commit frontier, whatever
    /// the subscription's [`StartPolicy`](crate::mq::StartPolicy), so nothing committed is
    /// read again; `false` re-creates it where the start policy says (`Earliest` replays
    /// the stream). Only when the partition has no frontier yet does the policy decide
    /// either way. Default `true`.
    restore_group_from_commit_frontier: bool;
    /// Input deduplication: a message whose idempotency key this pipeline already
    /// processed within [`sink_deduplication_ttl`](Self::sink_deduplication_ttl) is
    /// acknowledged without running the pipeline (counted in
    /// [`PartitionProgress::deduplicated`](crate::redis::PartitionProgress::deduplicated)).
    /// The key is the header `x-idempotency-key`
    /// ([`OutgoingMessage::idempotency_key`](crate::mq::OutgoingMessage::idempotency_key)),
    /// else `x-original-message-id` (a retry's or replayed dead letter's first id), else
    /// the entry id. The marks are written in the batch commit (a sorted set per partition
    /// and group, `{sink_dedup_key_prefix}{job}:{mq key prefix}:{T:n}:{group}`, key →
    /// expiry), so a producer's retried send and a replayed dead letter that was in fact
    /// processed are harmless. A message that failed (retry, dead letter) is not marked.
    /// Costs one `ZMSCORE` per batch and one `ZADD` per commit. Default `false`.
    ///
    /// Marks are kept per partition (so the check and the mark stay in the partition's
    /// hash slot): a retried send is recognised only when it reaches the partition its
    /// first send reached. Sends with a message key always do (the partitioner hashes the
    /// key); a retried send *without* a key may be dealt to another partition and is then
    /// processed again — give messages that may be retried a key. Replayed dead letters
    /// go back to their own partition and are always recognised.
    sink_deduplication_enabled: bool;
    /// How long a processed key is remembered. Default 7 days, at least 1 ms.
    sink_deduplication_ttl: Duration;
    /// Prefix of the dedup sets (the job name, the queue's key prefix, the partition's
    /// hash tag and the group follow). Default `streaming:runtime:sinkDedup:`; no braces or whitespace.
    sink_dedup_key_prefix: String;
    /// Consumer subtasks (threads) per pipeline in this process. Default 1. Partitions are
    /// dealt over the live subtasks of every process of the job, `partitions / live` each
    /// (rounded down or up), and stay with their owner while it lives (see "Ownership
    /// across processes" in the [`redis`](super) module docs), so a subtask's index does
    /// not say which partitions it owns.
    pipeline_parallelism: u32;
    /// Threads of a shared processing-time timer pool. Only 1 (the default) is accepted:
    /// any other value fails [`build`](RedisRuntimeConfigBuilder::build) with
    /// [`Error::InvalidConfig`] naming `timer_threads`. Processing-time timers fire on the
    /// subtask that owns the partition (see the [`redis`](super) module docs, "Event
    /// time"), so there is no pool to size; raise `pipeline_parallelism` for more threads.
    timer_threads: u32;
    /// Open a `tracing` span with job/topic/group/consumer/id/key/partition per message.
    /// Default `false`.
    mdc_enabled: bool;
    /// Fraction of messages that get the span, in `[0, 1]`, chosen deterministically by
    /// message id (FNV-1a 64; see the [`redis`](super) module docs). Default 1.0.
    mdc_sample_rate: f64;
    /// The message queue's options (workers, leases, retry). Default `MqOptions::default()`.
    mq_options: MqOptions;
    /// What a failed record does. Default [`ProcessingErrorResult::Retry`].
    processing_error_result: ProcessingErrorResult;
    /// How input is acknowledged. Default [`AckMode::Offset`] (see [`AckMode`] for why).
    ack_mode: AckMode;
    /// Bound of the engine's own watermark, which every Redis pipeline starts with: per
    /// partition, after a message with timestamp `t` (ms, the message's `ts` field) the
    /// watermark is `max(previous, t - out_of_orderness)`.
    /// A pipeline's `assign_timestamps_and_watermarks` replaces it from that point on.
    /// Default zero.
    watermark_out_of_orderness: Duration;
    /// Idle flush: after a partition has read nothing for this long — or its
    /// watermark generator called `mark_idle` — its watermark flushes to `i64::MAX`,
    /// firing every due window and event-time timer of the partition; the next message
    /// starts a new watermark epoch from its own event time. At least 1 ms when set (a
    /// shorter one fails [`build`](RedisRuntimeConfigBuilder::build)). `None` (default) or
    /// zero: off —
    /// then the last windows of a finite input never fire (nothing moves the watermark past
    /// them); set it for jobs over finite inputs and wait with
    /// [`JobClient::await_flushed`](crate::redis::JobClient::await_flushed).
    /// Choose it longer than any pause the producers make inside a window: a pause longer
    /// than the timeout fires the open windows early, and the records after it start new
    /// panes — a window spanning the pause is emitted in parts (Flink's idleness only
    /// stops a partition from holding the others back; this flush also fires its windows).
    watermark_idle_timeout: Option<Duration>;
    /// Most windows that fire per record; windows beyond
    /// it stay due and fire before the next record, and an idle flush fires all. Default
    /// 256, at least 1.
    window_max_fires_per_record: u32;
    /// Bound of each keyed process operator's event-time timer queue per partition: a record that would exceed it fails with
    /// [`Error::TimerQueueFull`] and goes to retry / dead letter. 0 = unbounded. Default
    /// 100,000.
    event_time_timer_max_size: u32;
    /// Make every batch commit (and every commit of processing-time timers and of the
    /// idle flush) wait for replicas before it counts as done: `WAIT replicas timeout`
    /// right after the commit's transaction, on the same connection to the same node. `None`
    /// (the default) does not wait.
    ///
    /// Redis replication is asynchronous: without the wait, a master that dies right
    /// after a commit can lose it when a replica is promoted. The partition's state,
    /// committed offset and [`RedisListSink`](crate::redis::RedisListSink) appends share
    /// a hash slot and are lost together (the replica never saw that commit), but this
    /// process does not know: its next commits build on in-memory state and read
    /// positions the new master lacks, so records can be lost (their outputs missing) or
    /// processed twice. With the wait, a
    /// batch whose commit `WAIT` confirms on fewer replicas than asked within the timeout
    /// is **not** counted as done: the partition is reset, as after any commit whose
    /// outcome is unknown, and read again from its last commit as Redis then holds it
    /// (the engine takes it again and reloads its state), so a commit the new master lacks
    /// is redone and one it has is not — state and Redis sinks stay exactly-once. The
    /// failure (naming `commit_replica_wait`) is in the job's errors and the partition's
    /// `last_error`, and the partition retries with the usual backoff.
    ///
    /// [`RedisEnv::blocking_start`](crate::redis::RedisEnv::blocking_start) refuses to start
    /// (with [`Error::InvalidConfig`] naming `commit_replica_wait`) when a master — the
    /// single server, or any master of a cluster — has fewer connected replicas than
    /// asked: every commit would fail to be confirmed. A replica that disconnects while
    /// the job runs makes commits fail and retry until it is back (or a failover gives
    /// the master replicas again). `WAIT` is not consensus: see the crate's README on
    /// what survives a failover with it.
    commit_replica_wait: Option<ReplicaWait>;
    /// An owned partition with work (lag above 0 sampled, or an error, since its last
    /// commit) and no commit for this long is reported stalled: in
    /// [`PartitionProgress::stalled`](crate::redis::PartitionProgress::stalled), the job
    /// registry and the gauge `streaming_partition_stalled`. Default 60 s, at least 1 ms.
    stalled_after: Duration;
}

impl Default for RedisRuntimeConfig {
    fn default() -> Self {
        RedisRuntimeConfig {
            job_name: "redis-streaming-job".into(),
            job_instance_id: process_instance_id(),
            state_key_prefix: "streaming:runtime".into(),
            state_ttl: None,
            state_size_report_every_n_writes: 0,
            keyed_state_shard_count: 1,
            state_cache_max_entries: 100_000,
            hot_key_fields_warn_threshold: 0,
            hot_key_warn_interval: Duration::from_secs(60),
            hot_key_policy: HotKeyPolicy::LogOnly,
            hot_key_throttle_max: Duration::from_millis(200),
            state_schema_evolution_enabled: true,
            state_schema_mismatch_policy: SchemaMismatchPolicy::Fail,
            restore_group_from_commit_frontier: true,
            sink_deduplication_enabled: false,
            sink_deduplication_ttl: Duration::from_secs(7 * 24 * 3600),
            sink_dedup_key_prefix: "streaming:runtime:sinkDedup:".into(),
            pipeline_parallelism: 1,
            timer_threads: 1,
            mdc_enabled: false,
            mdc_sample_rate: 1.0,
            mq_options: MqOptions::default(),
            processing_error_result: ProcessingErrorResult::Retry,
            ack_mode: AckMode::Offset,
            watermark_out_of_orderness: Duration::ZERO,
            watermark_idle_timeout: None,
            window_max_fires_per_record: 256,
            event_time_timer_max_size: 100_000,
            commit_replica_wait: None,
            stalled_after: Duration::from_secs(60),
            checkpoint: CheckpointOptions::default(),
        }
    }
}

/// `{host}-{pid}-{random}`: unique per process, so two processes of a job on one host
/// (or a restart that reuses a pid) never share consumer names.
fn process_instance_id() -> String {
    let host: String = host_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    )
}

fn host_name() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    if host.is_empty() {
        "local".into()
    } else {
        host
    }
}

impl RedisRuntimeConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> RedisRuntimeConfigBuilder {
        RedisRuntimeConfigBuilder {
            config: RedisRuntimeConfig::default(),
        }
    }
}

/// Builds a [`RedisRuntimeConfig`]; [`build`](Self::build) validates every field.
#[derive(Clone, Debug)]
pub struct RedisRuntimeConfigBuilder {
    config: RedisRuntimeConfig,
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        impl RedisRuntimeConfigBuilder {
            $($(#[$doc])* pub fn $name(mut self, value: $ty) -> Self { self.config.$name = value.into(); self })*
        }
    };
}

setters! {
    /// Sets [`RedisRuntimeConfig::job_name`].
    job_name: impl Into<String>;
    /// Sets [`RedisRuntimeConfig::job_instance_id`].
    job_instance_id: impl Into<String>;
    /// Sets [`RedisRuntimeConfig::state_key_prefix`].
    state_key_prefix: impl Into<String>;
    /// Sets [`RedisRuntimeConfig::state_ttl`]; `None` or zero keeps state forever.
    state_ttl: Option<Duration>;
    /// Sets [`RedisRuntimeConfig::state_size_report_every_n_writes`].
    state_size_report_every_n_writes: u64;
    /// Sets [`RedisRuntimeConfig::keyed_state_shard_count`] (≥ 1).
    keyed_state_shard_count: u32;
    /// Sets [`RedisRuntimeConfig::state_cache_max_entries`] (0 = unbounded).
    state_cache_max_entries: u64;
    /// Sets [`RedisRuntimeConfig::hot_key_fields_warn_threshold`].
    hot_key_fields_warn_threshold: u64;
    /// Sets [`RedisRuntimeConfig::hot_key_warn_interval`] (> 0).
    hot_key_warn_interval: Duration;
    /// Sets [`RedisRuntimeConfig::hot_key_policy`].
    hot_key_policy: HotKeyPolicy;
    /// Sets [`RedisRuntimeConfig::hot_key_throttle_max`].
    hot_key_throttle_max: Duration;
    /// Sets [`RedisRuntimeConfig::state_schema_evolution_enabled`].
    state_schema_evolution_enabled: bool;
    /// Sets [`RedisRuntimeConfig::state_schema_mismatch_policy`].
    state_schema_mismatch_policy: SchemaMismatchPolicy;
    /// Sets [`RedisRuntimeConfig::restore_group_from_commit_frontier`].
    restore_group_from_commit_frontier: bool;
    /// Sets [`RedisRuntimeConfig::sink_deduplication_enabled`].
    sink_deduplication_enabled: bool;
    /// Sets [`RedisRuntimeConfig::sink_deduplication_ttl`] (at least 1 ms).
    sink_deduplication_ttl: Duration;
    /// Sets [`RedisRuntimeConfig::sink_dedup_key_prefix`].
    sink_dedup_key_prefix: impl Into<String>;
    /// Sets [`RedisRuntimeConfig::pipeline_parallelism`] (≥ 1).
    pipeline_parallelism: u32;
    /// Sets [`RedisRuntimeConfig::timer_threads`] (only 1).
    timer_threads: u32;
    /// Sets [`RedisRuntimeConfig::mdc_enabled`].
    mdc_enabled: bool;
    /// Sets [`RedisRuntimeConfig::mdc_sample_rate`] (in `[0, 1]`).
    mdc_sample_rate: f64;
    /// Sets [`RedisRuntimeConfig::mq_options`].
    mq_options: MqOptions;
    /// Sets [`RedisRuntimeConfig::processing_error_result`].
    processing_error_result: ProcessingErrorResult;
    /// Sets [`RedisRuntimeConfig::ack_mode`].
    ack_mode: AckMode;
    /// Sets [`RedisRuntimeConfig::watermark_out_of_orderness`].
    watermark_out_of_orderness: Duration;
    /// Sets [`RedisRuntimeConfig::watermark_idle_timeout`] (at least 1 ms); `None` or zero
    /// turns it off.
    watermark_idle_timeout: Option<Duration>;
    /// Sets [`RedisRuntimeConfig::window_max_fires_per_record`] (≥ 1).
    window_max_fires_per_record: u32;
    /// Sets [`RedisRuntimeConfig::event_time_timer_max_size`] (0 = unbounded).
    event_time_timer_max_size: u32;
    /// Sets [`RedisRuntimeConfig::commit_replica_wait`] (at least 1 replica; a timeout of
    /// at least 1 ms and under the queue's response timeout).
    commit_replica_wait: Option<ReplicaWait>;
    /// Sets [`RedisRuntimeConfig::stalled_after`] (at least 1 ms).
    stalled_after: Duration;
}

impl RedisRuntimeConfigBuilder {
    /// Validates and returns the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first invalid field: `job_name`,
    /// `job_instance_id`, `state_key_prefix`, `sink_dedup_key_prefix` (empty, braces or
    /// whitespace), `keyed_state_shard_count`, `pipeline_parallelism` (0), `timer_threads`
    /// (anything but 1), `sink_deduplication_ttl` (under 1 ms),
    /// `window_max_fires_per_record` (0), `watermark_out_of_orderness` (beyond i64 ms),
    /// `watermark_idle_timeout` (above zero but under 1 ms), `hot_key_warn_interval`
    /// (zero), `mdc_sample_rate` (outside `[0, 1]` or NaN), `mq_options` (its own
    /// [`MqOptions::validate`] failed; the reason names the inner field),
    /// `commit_replica_wait` (0 replicas, a timeout under 1 ms, or one not shorter than
    /// the response timeout of `mq_options`), `stalled_after` (under 1 ms),
    /// `checkpoint_key_prefix` (empty, braces or whitespace), `checkpoint_drain_timeout`
    /// (under 1 ms), `checkpoint_threads` (anything but 1), `defer_ack_until_checkpoint`
    /// (`true`), `ack_deferred_messages_on_checkpoint` (`false`), `leader_lease_ttl`
    /// (under 1 ms), `leader_renew_interval` (zero, or not under `leader_lease_ttl`).
    pub fn build(self) -> Result<RedisRuntimeConfig, Error> {
        let mut c = self.config;
        key_part("job_name", &c.job_name)?;
        key_part("job_instance_id", &c.job_instance_id)?;
        key_part("state_key_prefix", &c.state_key_prefix)?;
        key_part("sink_dedup_key_prefix", &c.sink_dedup_key_prefix)?;
        for (field, value) in [
            ("keyed_state_shard_count", c.keyed_state_shard_count),
            ("pipeline_parallelism", c.pipeline_parallelism),
            ("timer_threads", c.timer_threads),
            ("window_max_fires_per_record", c.window_max_fires_per_record),
        ] {
            if value == 0 {
                return Err(invalid(field, "must be at least 1"));
            }
        }
        if c.hot_key_warn_interval.is_zero() {
            return Err(invalid("hot_key_warn_interval", "must be > 0"));
        }
        if c.timer_threads > 1 {
            return Err(invalid(
                "timer_threads",
                format!(
                    "must be 1, got {}: processing-time timers fire on the subtask that owns the partition; raise `pipeline_parallelism` for more threads",
                    c.timer_threads
                ),
            ));
        }
        if c.sink_deduplication_ttl < Duration::from_millis(1) {
            return Err(invalid("sink_deduplication_ttl", "must be at least 1 ms"));
        }
        if !(0.0..=1.0).contains(&c.mdc_sample_rate) {
            return Err(invalid(
                "mdc_sample_rate",
                format!("must be in [0, 1], got {}", c.mdc_sample_rate),
            ));
        }
        c.mq_options.validate().map_err(|e| match e {
            Error::InvalidConfig { field, reason } => {
                invalid("mq_options", format!("{field}: {reason}"))
            }
            other => other,
        })?;
        if let Some(w) = c.commit_replica_wait {
            check_replica_wait(&w, c.mq_options.response_timeout)?;
        }
        c.state_ttl = checked_state_ttl(c.state_ttl)?;
        c.checkpoint.validate()?;
        match c.watermark_idle_timeout {
            Some(d) if d.is_zero() => c.watermark_idle_timeout = None,
            // Event time and the engine's timers are whole milliseconds; a shorter timeout
            // would flush at the first quiet turn of the subtask loop (a unit mistake).
            Some(d) if d < Duration::from_millis(1) => {
                return Err(invalid(
                    "watermark_idle_timeout",
                    format!("{d:?} is under 1 ms: set at least 1 ms, or `None` to turn the idle flush off"),
                ));
            }
            _ => {}
        }
        if c.stalled_after < Duration::from_millis(1) {
            return Err(invalid("stalled_after", "must be at least 1 ms"));
        }
        if i64::try_from(c.watermark_out_of_orderness.as_millis()).is_err() {
            return Err(invalid(
                "watermark_out_of_orderness",
                "does not fit in i64 milliseconds",
            ));
        }
        Ok(c)
    }
}

/// The longest [`RedisRuntimeConfig::state_ttl`]: 100 years of 365.25 days, as a
/// configuration file's `"100years"` reads (Redis refuses a `PEXPIRE` whose expiry does
/// not fit in 64-bit epoch milliseconds).
const MAX_STATE_TTL: Duration = Duration::from_secs(100 * 31_557_600);

/// `state_ttl` as the engine uses it: zero is `None`; under 1 ms or over 100 years fails.
fn checked_state_ttl(ttl: Option<Duration>) -> Result<Option<Duration>, Error> {
    match ttl {
        Some(d) if d.is_zero() => Ok(None),
        Some(d) if d < Duration::from_millis(1) => Err(invalid(
            "state_ttl",
            format!("{d:?} is under 1 ms (Redis expires keys in whole milliseconds): set at least 1 ms, or `None` to keep state forever"),
        )),
        Some(d) if d > MAX_STATE_TTL => Err(invalid(
            "state_ttl",
            format!("{d:?} is over 100 years (Redis refuses an expiry that far out): set at most 100 years, or `None` to keep state forever"),
        )),
        other => Ok(other),
    }
}

/// A replica wait the engine can honour: at least one replica, and a `WAIT` that returns
/// before the connection's response timeout gives up on it.
fn check_replica_wait(w: &ReplicaWait, response_timeout: Duration) -> Result<(), Error> {
    let field = "commit_replica_wait";
    if w.replicas == 0 {
        return Err(invalid(
            field,
            "waits for 0 replicas: set at least 1, or `None` not to wait",
        ));
    }
    if w.timeout < Duration::from_millis(1) {
        return Err(invalid(
            field,
            format!(
                "timeout {:?} is under 1 ms (`WAIT` with 0 ms blocks forever): set at least 1 ms",
                w.timeout
            ),
        ));
    }
    if w.timeout >= response_timeout {
        return Err(invalid(
            field,
            format!(
                "timeout {:?} is not shorter than the response timeout {response_timeout:?} of `mq_options`: the call would time out before `WAIT` answers",
                w.timeout
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
