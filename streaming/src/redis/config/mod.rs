//! [`RedisRuntimeConfig`]: the Redis engine's options, declared once (defaults, builder,
//! getters, checks and the configuration-file form come from the table below).

use crate::mq::MqOptions;
use crate::options::{at_least_1ms, at_least_one, invalid, key_part, nested, options, positive};
use crate::Error;
use std::time::Duration;

mod checks;
mod file;
mod policies;

pub use policies::{AckMode, HotKeyPolicy, ProcessingErrorResult, SchemaMismatchPolicy};

/// How a batch commit waits for replicas: `WAIT replicas timeout`, sent right after the
/// commit's transaction on the same connection to the node that ran it (on a Redis Cluster, the
/// master of the partition's hash slot), before the batch counts as done.
///
/// Set it with [`RedisRuntimeConfigBuilder::commit_replica_wait`]; see
/// [`RedisRuntimeConfig::commit_replica_wait`] for what it guarantees and what happens
/// when fewer replicas acknowledge in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

options! {
    /// The Redis engine's options, built with [`RedisRuntimeConfig::builder`] or read from
    /// a configuration file (`Deserialize`); each option's default is on its getter.
    #[derive(Clone, Debug)]
    pub struct RedisRuntimeConfig;
    /// Builds a [`RedisRuntimeConfig`]; [`build`](Self::build) validates every option.
    pub struct RedisRuntimeConfigBuilder;
    /// Validates and returns the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first invalid option, in this order: `job_name`,
    /// `job_instance_id`, `state_key_prefix` (empty, braces or whitespace),
    /// `keyed_state_shard_count` (0), `hot_key_warn_interval` (zero),
    /// `sink_deduplication_ttl` (under 1 ms), `sink_dedup_key_prefix` (as `job_name`),
    /// `pipeline_parallelism` (0), `timer_threads` (anything but 1), `mdc_sample_rate`
    /// (outside `[0, 1]` or NaN), `mq_options` (its own [`MqOptions::validate`] failed; the
    /// reason names the inner field), `watermark_out_of_orderness` (beyond i64 ms),
    /// `window_max_fires_per_record` (0), `stalled_after` (under 1 ms),
    /// `checkpoint_key_prefix` (as `job_name`), `checkpoint_drain_timeout` (under 1 ms),
    /// `checkpoint_threads` (anything but 1), `defer_ack_until_checkpoint` (`true`),
    /// `ack_deferred_messages_on_checkpoint` (`false`), `leader_lease_ttl` (under 2 ms),
    /// `leader_renew_interval` (under 1 ms, or not under `leader_lease_ttl`),
    /// `commit_replica_wait` (0 replicas, a timeout under 1 ms, or one not shorter than
    /// the response timeout of `mq_options`), `state_ttl` (above zero but under 1 ms, or
    /// over 100 years), `watermark_idle_timeout` (above zero but under 1 ms).
    fn build = finish;
    /// Reads the configuration from a file or the environment: the fields of
    /// [`RedisRuntimeConfig`] by their getters' names, each optional (its default otherwise),
    /// an unknown field is an error. Durations are `humantime` strings (`"1500ms"`, `"2s"`,
    /// `"1m 30s"`; `"0s"` turns `state_ttl` and `watermark_idle_timeout` off like `None`);
    /// the policies are snake-case names (`hot_key_policy = "fail_fast"`, `ack_mode =
    /// "xack"`); `mq_options` is a table read like [`MqOptions`];
    /// `commit_replica_wait` a table `{ replicas = 1, timeout = "500ms" }`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use streaming::redis::{AckMode, RedisRuntimeConfig};
    /// let config: RedisRuntimeConfig = serde_json::from_str(
    ///     r#"{
    ///         "job_name": "billing",
    ///         "ack_mode": "xack",
    ///         "watermark_idle_timeout": "1500ms",
    ///         "mq_options": { "lease_ttl": "20s" }
    ///     }"#,
    /// )?;
    /// assert_eq!(config.job_name(), "billing");
    /// assert_eq!(config.ack_mode(), AckMode::Xack);
    /// assert_eq!(config.watermark_idle_timeout(), Some(Duration::from_millis(1500)));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    ///
    /// # Errors
    /// The deserializer's error for an unknown field or a value of the wrong shape, or the
    /// message of [`RedisRuntimeConfigBuilder::build`](RedisRuntimeConfigBuilder::build)'s
    /// [`Error::InvalidConfig`], which names the field
    /// (`mq_options` with the inner field in the reason).
    impl Deserialize via RedisRuntimeConfigFile;
    {
        /// Isolates state, checkpoint and dedup key spaces. Default `redis-streaming-job`.
        ///
        /// The default is the same for every job: two different jobs that keep the default
        /// (and the same `state_key_prefix`) share their state keys
        /// `{prefix}:{job}:{T:n}:{group}:{operator}:{state}` wherever topic, group and operator
        /// id coincide, and their schema fingerprints — give every job its own name. Instances
        /// of one job (restarts, takeover) must keep the same name to find their state.
        job_name: String = "redis-streaming-job".into(), get(str), set(into), check(key_part);
        /// Part of the consumer names `{job}-{instance}-{seq}` (`seq` counts the subtasks this
        /// process started, so a name is never used twice by one process). Default:
        /// `{host}-{pid}-{random hex}`, unique per process (the host name is `local` when it
        /// cannot be read). Partition ownership never depends on it: leases are held under
        /// fencing tokens, so two processes given the same id still never own a partition at
        /// the same time.
        job_instance_id: String = process_instance_id(), get(str), set(into), check(key_part);
        /// Prefix of keyed-state keys. Default `streaming:runtime`.
        state_key_prefix: String = "streaming:runtime".into(),
            get(str), set(into), check(key_part);
        /// Expiry of each state hash (and of each key's collection), renewed by every commit
        /// that writes it; `None` (the default) keeps state forever, and so does
        /// `Some(Duration::ZERO)` (read as `None`). Otherwise from 1 ms to 100 years
        /// ([`build`](RedisRuntimeConfigBuilder::build) fails outside).
        state_ttl: Option<Duration> = None, get(value), note("`None` or zero keeps state forever");
        /// Sample the size of a state hash (HLEN) every N writes; 0 (default) = off.
        state_size_report_every_n_writes: u64 = 0, get(value);
        /// Keyed state hashes per (operator, state), split by FNV-1a 64 of the key's JSON
        /// mod N (hash keys `...:{state}:s{i}`); default 1 (one hash, no suffix).
        keyed_state_shard_count: u32 = 1, get(value), check(at_least_one), note("≥ 1");
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
        state_cache_max_entries: u64 = 100_000, get(value), note("0 = unbounded");
        /// Field count of a state hash from which it is hot; 0 (default) = off.
        hot_key_fields_warn_threshold: u64 = 0, get(value);
        /// Minimum interval between hot-key warnings for one hash. Default 1 min.
        hot_key_warn_interval: Duration = Duration::from_secs(60),
            get(value), check(positive), note("> 0");
        /// What writes to a hot hash do. Default [`HotKeyPolicy::LogOnly`].
        hot_key_policy: HotKeyPolicy = HotKeyPolicy::LogOnly, get(value);
        /// Longest sleep of [`HotKeyPolicy::Throttle`]. Default 200 ms.
        hot_key_throttle_max: Duration = Duration::from_millis(200), get(value);
        /// Check each keyed state's stored schema fingerprint (kind, value and key types)
        /// before decoding it, and write it on first use (hash `...:{group}:schema`, see the
        /// state schema versions in the [module docs](super)). Default `true`.
        state_schema_evolution_enabled: bool = true, get(value);
        /// What a schema fingerprint mismatch does: [`SchemaMismatchPolicy::Fail`] stops the
        /// partition, [`SchemaMismatchPolicy::Clear`] deletes the state and starts it empty,
        /// [`SchemaMismatchPolicy::Ignore`] warns and decodes the stored entries as the new
        /// type. Default [`SchemaMismatchPolicy::Fail`].
        state_schema_mismatch_policy: SchemaMismatchPolicy = SchemaMismatchPolicy::Fail,
            get(value);
        /// A consumer group found missing (e.g. deleted while the job runs, in
        /// [`AckMode::Xack`]) is re-created after its partition's commit frontier, whatever
        /// the subscription's [`StartPolicy`](crate::mq::StartPolicy), so nothing committed is
        /// read again; `false` re-creates it where the start policy says (`Earliest` replays
        /// the stream). Only when the partition has no frontier yet does the policy decide
        /// either way. Default `true`.
        restore_group_from_commit_frontier: bool = true, get(value);
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
        sink_deduplication_enabled: bool = false, get(value);
        /// How long a processed key is remembered. Default 7 days, at least 1 ms.
        sink_deduplication_ttl: Duration = Duration::from_secs(7 * 24 * 3600),
            get(value), check(at_least_1ms), note("at least 1 ms");
        /// Prefix of the dedup sets (the job name, the queue's key prefix, the partition's
        /// hash tag and the group follow). Default `streaming:runtime:sinkDedup:`; no braces or whitespace.
        sink_dedup_key_prefix: String = "streaming:runtime:sinkDedup:".into(),
            get(str), set(into), check(key_part);
        /// Consumer subtasks (threads) per pipeline in this process. Default 1. Partitions are
        /// dealt over the live subtasks of every process of the job, `partitions / live` each
        /// (rounded down or up), and stay with their owner while it lives (see "Ownership
        /// across processes" in the [`redis`](super) module docs), so a subtask's index does
        /// not say which partitions it owns.
        pipeline_parallelism: u32 = 1, get(value), check(at_least_one), note("≥ 1");
        /// Threads of a shared processing-time timer pool. Only 1 (the default) is accepted:
        /// any other value fails [`build`](RedisRuntimeConfigBuilder::build) with
        /// [`Error::InvalidConfig`] naming `timer_threads`. Processing-time timers fire on the
        /// subtask that owns the partition (see the [`redis`](super) module docs, "Event
        /// time"), so there is no pool to size; raise `pipeline_parallelism` for more threads.
        timer_threads: u32 = 1, get(value), check(checks::one_timer_thread), note("only 1");
        /// Open a `tracing` span with job/topic/group/consumer/id/key/partition per message.
        /// Default `false`.
        mdc_enabled: bool = false, get(value);
        /// Fraction of messages that get the span, in `[0, 1]`, chosen deterministically by
        /// message id (FNV-1a 64; see the [`redis`](super) module docs). Default 1.0.
        mdc_sample_rate: f64 = 1.0, get(value), check(checks::fraction), note("in `[0, 1]`");
        /// The message queue's options (workers, leases, retry). Default `MqOptions::default()`.
        mq_options: MqOptions = MqOptions::default(), get(ref), check(nested(MqOptions::validate));
        /// What a failed record does. Default [`ProcessingErrorResult::Retry`].
        processing_error_result: ProcessingErrorResult = ProcessingErrorResult::Retry, get(value);
        /// How input is acknowledged. Default [`AckMode::Offset`] (see [`AckMode`] for why).
        ack_mode: AckMode = AckMode::Offset, get(value);
        /// Bound of the engine's own watermark, which every Redis pipeline starts with: per
        /// partition, after a message with timestamp `t` (ms, the message's `ts` field) the
        /// watermark is `max(previous, t - out_of_orderness)`.
        /// A pipeline's `assign_timestamps_and_watermarks` replaces it from that point on.
        /// Default zero.
        watermark_out_of_orderness: Duration = Duration::ZERO,
            get(value), check(checks::fits_i64_ms);
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
        /// In a pipeline of several topics it also marks one *input* of a partition idle
        /// when that input had no record this long while another input had records: its
        /// watermark no longer holds the merged watermark back until its next record
        /// (Flink's `withIdleness`).
        watermark_idle_timeout: Option<Duration> = None,
            get(value), note("at least 1 ms; `None` or zero turns it off");
        /// Most windows that fire per record; windows beyond
        /// it stay due and fire before the next record, and an idle flush fires all. Default
        /// 256, at least 1.
        window_max_fires_per_record: u32 = 256, get(value), check(at_least_one), note("≥ 1");
        /// Bound of each keyed process operator's event-time timer queue per partition: a record that would exceed it fails with
        /// [`Error::TimerQueueFull`] and goes to retry / dead letter. 0 = unbounded. Default
        /// 100,000.
        event_time_timer_max_size: u32 = 100_000, get(value), note("0 = unbounded");
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
        commit_replica_wait: Option<ReplicaWait> = None,
            get(value), note("at least 1 replica; a timeout of at least 1 ms and under the queue's response timeout");
        /// An owned partition with work (lag above 0 sampled, or an error, since its last
        /// commit) and no commit for this long is reported stalled: in
        /// [`PartitionProgress::stalled`](crate::redis::PartitionProgress::stalled), the job
        /// registry and the gauge `streaming_partition_stalled`. Default 60 s, at least 1 ms.
        stalled_after: Duration = Duration::from_secs(60),
            get(value), check(at_least_1ms), note("at least 1 ms");
    }
    group checkpoint:
    /// The checkpoint and leader options, kept together for the job's checkpoint tasks
    /// (read, set and written in a file like every other option).
    #[derive(Clone, Debug)]
    pub(crate) struct CheckpointOptions {
        /// Period of the job's periodic checkpoints; zero (the default) turns them off. Under
        /// 50 ms runs every 50 ms. With [`leader_election_enabled`](Self::leader_election_enabled)
        /// only the leader schedules them; without it every process of the job does.
        ///
        /// A checkpoint is a point in time to go back to
        /// ([`RedisEnv::restore_from_checkpoint`](crate::redis::RedisEnv::restore_from_checkpoint)),
        /// not crash recovery: every batch already commits its state and offset atomically,
        /// so a crash loses nothing without checkpoints. See "Checkpoints" in the
        /// [`redis`](super) module docs.
        pub(crate) checkpoint_interval: Duration = Duration::ZERO,
            get(value), note("zero: off; floor 50 ms");
        /// Restore the latest complete checkpoint when the job starts
        /// ([`RedisEnv::blocking_start`](crate::redis::RedisEnv::blocking_start)), if no other
        /// process of the job is running then (a process joining a running job does not
        /// rewind it; it logs that it skipped the restore). Default `false`. Starting with no
        /// complete checkpoint stored starts from the committed state, with a warning.
        pub(crate) restore_from_latest_checkpoint: bool = false, get(value);
        /// Prefix of the checkpoint keys (the job name follows). Default
        /// `streaming:runtime:checkpoint:`; no braces or whitespace.
        pub(crate) checkpoint_key_prefix: String = "streaming:runtime:checkpoint:".into(),
            get(str), set(into), check(key_part);
        /// Complete checkpoints kept: after a checkpoint ends (completes or fails), every
        /// incomplete (failed or abandoned) checkpoint but the newest checkpoint is deleted
        /// first, then the complete ones beyond the newest N. 0 keeps everything (nothing is
        /// ever deleted). Default 5. Deleting runs on the coordinator's own connection after
        /// the checkpoint ended, in small steps, never on a partition's thread.
        pub(crate) checkpoints_to_keep: u32 = 5, get(value), note("0 = keep all");
        /// How long a checkpoint waits for every partition to write its part (each owner does
        /// at its next batch boundary); past it the checkpoint fails (counted in
        /// `streaming_checkpoints_failed_total`) and never completes. Default 30 s, at least
        /// 1 ms.
        pub(crate) checkpoint_drain_timeout: Duration = Duration::from_secs(30),
            get(value), check(at_least_1ms), note("at least 1 ms");
        /// Threads that schedule checkpoints. Only 1 (the default) is accepted: a checkpoint's
        /// parts are written by the partitions' own subtasks and the coordinator is one task,
        /// so there is nothing to spread; [`build`](RedisRuntimeConfigBuilder::build) refuses
        /// any other value naming `checkpoint_threads`.
        pub(crate) checkpoint_threads: u32 = 1,
            get(value), check(checks::one_checkpoint_thread), note("only 1");
        /// Keep messages pending until a checkpoint completes. Not accepted: `true` fails
        /// [`build`](RedisRuntimeConfigBuilder::build) naming `defer_ack_until_checkpoint`.
        /// Every batch commits its state, its Redis sink writes and its acknowledgement in one
        /// transaction, so a message is acknowledged exactly when its effects are durable;
        /// holding acknowledgements until a checkpoint would only make a crash replay more.
        pub(crate) defer_ack_until_checkpoint: bool = false,
            get(value), check(checks::no_deferred_ack), note("only `false`");
        /// Acknowledge deferred messages when a checkpoint completes. Only `true` (the
        /// default) is accepted: there are no deferred messages (see
        /// [`defer_ack_until_checkpoint`](Self::defer_ack_until_checkpoint)), and `false`
        /// fails [`build`](RedisRuntimeConfigBuilder::build) naming
        /// `ack_deferred_messages_on_checkpoint`.
        pub(crate) ack_deferred_messages_on_checkpoint: bool = true,
            get(value), check(checks::ack_on_checkpoint), note("only `true`");
        /// Elect one leader among the job's processes (a lease in Redis, fenced by a token
        /// drawn at every term): only the leader schedules periodic checkpoints and deletes
        /// old ones, and every checkpoint write of the leader checks its lease and token in
        /// the same script, so a leader that lost its lease (paused, cut off) cannot complete
        /// a checkpoint. A follower takes over within `leader_lease_ttl` +
        /// `leader_renew_interval` of the leader's death. Default `false`.
        pub(crate) leader_election_enabled: bool = false, get(value);
        /// Lifetime of the leader's lease (whole milliseconds); the leader renews it every
        /// `leader_renew_interval`. Default 30 s; at least 2 ms.
        pub(crate) leader_lease_ttl: Duration = Duration::from_secs(30),
            get(value), check(checks::leader_lease_ttl), note("at least 2 ms");
        /// How often the leader renews its lease and a follower tries to take it. Default
        /// 10 s; at least 1 ms and less than `leader_lease_ttl`.
        pub(crate) leader_renew_interval: Duration = Duration::from_secs(10),
            get(value), note("≥ 1 ms, < `leader_lease_ttl`");
    }
}

/// What [`RedisRuntimeConfigBuilder::build`] and the configuration file return: every option checked, `state_ttl` and
/// `watermark_idle_timeout` of zero read as `None`.
fn finish(mut c: RedisRuntimeConfig) -> Result<RedisRuntimeConfig, Error> {
    c.check_fields()?;
    c.checkpoint.check_fields()?;
    c.checkpoint.check_leader_renew_interval()?;
    if let Some(w) = c.commit_replica_wait {
        check_replica_wait(&w, c.mq_options.response_timeout)?;
    }
    c.state_ttl = checked_state_ttl(c.state_ttl)?;
    c.watermark_idle_timeout = checked_idle_timeout(c.watermark_idle_timeout)?;
    Ok(c)
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

/// `watermark_idle_timeout` as the engine uses it: zero is `None`; under 1 ms fails.
fn checked_idle_timeout(timeout: Option<Duration>) -> Result<Option<Duration>, Error> {
    match timeout {
        Some(d) if d.is_zero() => Ok(None),
        // Event time and the engine's timers are whole milliseconds; a shorter timeout
        // would flush at the first quiet turn of the subtask loop (a unit mistake).
        Some(d) if d < Duration::from_millis(1) => Err(invalid(
            "watermark_idle_timeout",
            format!("{d:?} is under 1 ms: set at least 1 ms, or `None` to turn the idle flush off"),
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

/// The shortest period of periodic checkpoints: a shorter `checkpoint_interval` runs
/// every 50 ms.
pub(crate) const MIN_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(50);

impl CheckpointOptions {
    /// `leader_renew_interval`: at least 1 ms and under `leader_lease_ttl`, compared in
    /// whole milliseconds (what the lease really gets).
    fn check_leader_renew_interval(&self) -> Result<(), Error> {
        let (ttl, renew) = (
            self.leader_lease_ttl.as_millis(),
            self.leader_renew_interval.as_millis(),
        );
        if renew < 1 || renew >= ttl {
            return Err(invalid(
                "leader_renew_interval",
                format!(
                    "must be at least 1 ms and less than leader_lease_ttl ({:?}) in whole milliseconds, got {:?}",
                    self.leader_lease_ttl, self.leader_renew_interval
                ),
            ));
        }
        Ok(())
    }

    /// The period of periodic checkpoints, `None` when off.
    pub(crate) fn period(&self) -> Option<Duration> {
        (!self.checkpoint_interval.is_zero())
            .then(|| self.checkpoint_interval.max(MIN_CHECKPOINT_INTERVAL))
    }
}

impl RedisRuntimeConfig {
    /// The checkpoint and leader options together.
    pub(crate) fn checkpoint(&self) -> &CheckpointOptions {
        &self.checkpoint
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

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;
