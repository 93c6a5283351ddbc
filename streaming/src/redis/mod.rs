//! The Redis engine: Redis Streams consumer groups as the source,
//! keyed state in Redis hashes.
//!
//! Build a pipeline from a [`RedisEnv`] with the same builder API as the memory engine,
//! end it with a sink (which registers it), then [`RedisEnv::blocking_start`] starts the
//! job and returns a [`JobClient`].
//!
//! Processing model: each pipeline runs `pipeline_parallelism`
//! subtasks (threads) per process and builds one operator chain per owned partition
//! from a clone of the pipeline (so state caches are per partition). Each batch runs
//! against the partition's in-memory state cache (see *State loading* below), and its
//! changed entries, the
//! [`RedisListSink`] appends and the acknowledgement are written in one transaction
//! (`MULTI` … `EXEC`) that a lease check at its start voids when another owner took the
//! partition (see the batch commit's docs for [`AckMode::Xack`] and [`AckMode::Offset`]).
//!
//! Ownership across processes (a job may run as several processes against one Redis):
//! - *Membership.* Every subtask heartbeats its consumer name into the hash
//!   `{mq prefix}:topic:{T}:assignment:{group}` every `lease_renew_interval` (expiry:
//!   now + `lease_ttl`); the heartbeat (one script) drops expired names and keeps one
//!   assignment of partitions to live subtasks for the whole job, sticky and balanced:
//!   each live subtask holds `partitions / live` partitions, rounded down or up; a
//!   partition stays with its live owner, a dead subtask's partitions go to the subtasks
//!   below their share, and a joining subtask gets its share from those above theirs
//!   (their highest-numbered partitions). A change of the live set moves only those
//!   partitions, and every process reads the same assignment. A subtask whose last
//!   heartbeat is more than two renew intervals old (killed, frozen, cut off) keeps its
//!   partitions until it expires but is dealt no new one, so a partition is not dealt to
//!   a subtask that died meanwhile.
//! - *Leases and fencing tokens.* A subtask takes a partition of its share only when the
//!   partition's lease is free; each acquisition draws a new, larger fencing token, and the
//!   lease holds `"{token} {consumer}"` (see [`crate::mq`]'s key layout). Taking a
//!   partition again after a failure moves a lease still held to a new token too, so a
//!   write of the failed attempt that reaches Redis late (a commit whose reply never came)
//!   is refused instead of applying over what was committed since. Every write an
//!   owner makes for the partition — the batch commit (with processing-time timers and the
//!   idle flush), the retry schedule and dead letter of a failed or malformed record, the
//!   promotion of due retries, the state schema write, and on the read side the take's
//!   `XAUTOCLAIM` / `XGROUP SETID` — runs in a script that first checks that the lease
//!   still holds this exact value (or expired with nobody taking it since: the fencing
//!   counter still holds our token, and the lease is taken back); otherwise it writes
//!   nothing. Every `XREADGROUP` (which moves the group's position and, in
//!   [`AckMode::Xack`], fills the pending list) is one transaction of that check, the read
//!   itself, and an undo that puts a refused read back (position and pending entries), so
//!   a stale owner's read moves nothing either (the read stays outside Lua: a script
//!   returning a batch of entries costs Redis several times the read). Either way the
//!   owner gets
//!   [`Error::Fenced`](crate::Error::Fenced), drops the partition's chain and state cache,
//!   and takes it again (from the last commit) once it wins the lease. A lease never
//!   passes because a consumer name matches, so views of the membership may disagree for a
//!   moment without two owners ever committing for one partition.
//! - *Handover.* A partition leaving a subtask's share (a member joined, a subtask was
//!   scaled away, the job is cancelled) is released at a batch boundary, so the next owner
//!   takes it at its next attempt (within one renew interval). A process that dies or
//!   stalls loses its leases and its membership after `lease_ttl`; the others take its
//!   partitions within `lease_ttl` plus one renew interval. Handover re-reads from the
//!   last commit: state and Redis sinks stay exactly-once, other side effects are
//!   at-least-once.
//! - *Identity.* The default `job_instance_id` is `{host}-{pid}-{random}`, and consumer
//!   names are `{job}-{instance}-{seq}` with `seq` counting the subtasks the process
//!   started (never reused, also across [`JobClient::scale_parallelism`]).
//! - *Rescaling.* [`JobClient::scale_parallelism`] adds or removes subtasks of a running
//!   job; removed subtasks release their leases and leave the membership, and every
//!   subtask recomputes its share at its next heartbeat. State keys carry no subtask, so a
//!   job restarted or rescaled with another parallelism finds its state.
//! - Membership expiry uses each process's clock: keep the hosts' clocks within a fraction
//!   of `lease_ttl`. The per-partition diagnostics describe this process only
//!   (partitions owned elsewhere are never "taken" here); [`JobClient::await_caught_up`]
//!   answers for the whole job, judging partitions held by other processes by their
//!   committed position in Redis.
//!
//! State layout (readable with any Redis client): one hash per (job, topic, group,
//! partition, operator, state): `{state_key_prefix}:{job}:{T:n}:{group}:{operator}:{state}`
//! where `{T:n}` is the partition's hash tag (shared with its stream), `operator` the
//! operator id (`{source_id}/{position}:{kind}`), `state` the state name (rolling
//! reduce/sum: `rolling`); fields are the keys as JSON, values the values as JSON
//! (serde_json). A list, map or set state keeps each key's elements in the key's own Redis
//! key `…:{state}:k:{key as JSON}` (a list of elements, a hash of map key → value, a set
//! of members, each as JSON) and the key's size in the state's hash; a batch writes only
//! the elements it changed (see the engine guide, `docs/redis-engine.md`). With
//! `keyed_state_shard_count` N > 1
//! each such hash is split into N hashes `...:{state}:s{i}` (same hash tag), a field going
//! to `i = FNV-1a-64(field's UTF-8 bytes) % N`.
//! Changing N for existing state is not supported (no migration: keep it fixed per job).
//! The set `{state_key_prefix}:{job}:{T:n}:{group}:index` lists the partition's state
//! hashes (not the keys' collections: the state's hash lists those). `state_ttl` sets a
//! `PEXPIRE` on each hash and collection written.
//!
//! State loading: taking a partition reads the index and, whole (`HSCAN` in chunks of 500
//! fields, so no command blocks Redis for long), only window panes, keyed process timers
//! (`__timers`) and watermarks — state bounded by open windows and pending timers. Rolling
//! `reduce`/`sum` tables and keyed process states are fetched per key: a batch whose
//! records touch keys not in memory runs once on a guess, is rolled back, fetches the
//! missed keys' fields and collections (`HMGET`s, and `HGETALL` / `SMEMBERS` / `LRANGE` of
//! each collection's key, pipelined in one round trip) and runs again; keys with
//! pending timers are fetched when the partition is taken and stay in memory. Taking a
//! partition therefore costs the same whatever its number of keys, and each rolling
//! table and keyed process operator keeps at most `state_cache_max_entries` keys per
//! partition in memory (clean keys are evicted after a commit), plus the keys with
//! pending timers, which are never evicted; window panes are not evicted (a window's
//! panes leave memory when the window is cleaned up). Timers and the idle flush fetch
//! the keys they miss the same way (e.g. a keyed `reduce` after a window). A batch that
//! runs again is run by a fresh copy of the pipeline's functions (as after a failed
//! record); the sink is not copied again: the same instance is invoked with the batch's
//! outputs again (see [`Sink::flush`](crate::api::Sink::flush)). State a closure captures, or a side effect of a user function (a log line, a
//! call to another system), is not rolled back and may happen once per run.
//!
//! A stored value that does not decode (written by hand, or an older encoding the schema
//! check did not catch) fails only its key: the key's records fail with
//! [`Error::StateDecode`](crate::Error::StateDecode) (naming operator, state and key) and
//! go to the dead-letter queue (error type `state_decode`, not retried), the other keys of
//! the batch load and commit as usual, and the engine never writes or deletes the value,
//! so it can be inspected and fixed. The key is fetched again by the next batch that
//! touches it after a commit (and when the partition is taken again): once the value is
//! fixed or deleted, the key's next records use it. A window pane that does not decode
//! does the same for its key (none of the key's panes are used, none is written); a field
//! that is no key's (not the key's JSON) is skipped with a warning and left in Redis.
//!
//! State schema versions: with `state_schema_evolution_enabled` (default), each
//! state's fingerprint (kind, value and key types, e.g. `ValueState<u64> by String`) is
//! kept in the hash `{state_key_prefix}:{job}:{T:n}:{group}:schema` (field
//! `{operator}/{state}`) and checked before the stored entries are decoded (a rolling table
//! or a state declared with `pipeline!`'s `.state(..)` when the partition is taken, another
//! process state when first opened); on a mismatch
//! `state_schema_mismatch_policy` [`SchemaMismatchPolicy::Fail`] stops that partition
//! (reported in [`JobDiagnostics::errors`] and [`PartitionProgress::stopped`]),
//! [`SchemaMismatchPolicy::Clear`] deletes that state's hashes of the partition and starts
//! it empty, [`SchemaMismatchPolicy::Ignore`] warns and decodes the stored entries as the
//! new type.
//!
//! State size and hot keys: every `state_size_report_every_n_writes` state
//! field writes (counted per partition), the batch's commit also returns the
//! `HLEN` of the hash whose writes crossed the mark (no extra round trip); the last
//! sampled size per hash key is in [`JobDiagnostics::state_sizes`]. With
//! `hot_key_fields_warn_threshold > 0` (and no report interval, each written hash is
//! sampled at every commit), a sampled size at or above the threshold logs a `tracing`
//! warning and counts [`JobDiagnostics::hot_key_warnings`] at most once per
//! `hot_key_warn_interval` per hash, and arms the policy for that hash for the interval:
//! [`HotKeyPolicy::LogOnly`] nothing more; [`HotKeyPolicy::Throttle`] sleeps
//! `hot_key_throttle_max` before each batch commit that writes to it
//! ([`JobDiagnostics::hot_key_throttled`]); [`HotKeyPolicy::FailFast`] fails each record
//! that writes to it with [`Error::HotKey`](crate::Error::HotKey) (error type `hot_key`),
//! which follows `processing_error_result` ([`JobDiagnostics::hot_key_rejected`]).
//!
//! Tracing: with `mdc_enabled`, each message runs through the
//! chain inside a `tracing` span `message` with fields `job`, `topic`, `group`,
//! `consumer`, `id`, `key` (empty without a key) and `partition`, so user functions' logs
//! carry them. `mdc_sample_rate` picks messages deterministically by id: a message gets
//! the span when the top 53 bits of `fmix64(FNV-1a 64)` of its id, as a fraction of 2^53, are below
//! the rate (1.0: every message; 0.0: none).
//!
//! Errors: a record whose user function fails or panics follows
//! `processing_error_result` (retry with the queue's backoff, then dead letter; or dead
//! letter at once; a retry is addressed to the failing pipeline's group, and pipelines of
//! other groups on the topic skip it without counting it as a record) with headers [`HEADER_RUNTIME_JOB`], [`HEADER_RUNTIME_GROUP`],
//! [`HEADER_RUNTIME_ERROR_TYPE`], [`HEADER_RUNTIME_ERROR_MESSAGE`] (≤ 512 chars); the
//! batch is rolled back (the keys it changed are fetched again) and run again without it,
//! so state counts exactly
//! the acknowledged successful records. Malformed entries go to the dead-letter queue. A
//! failed commit (connection lost, Redis restarting) resets the partition to its last
//! commit and retries with backoff.
//!
//! Redis outages: every call waits at most
//! [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout) for its reply
//! (the job client's waits too), and a lost connection is opened again by the next call
//! (one attempt each). [`RedisEnv::blocking_start`] proves the server before starting
//! and fails with [`Error::Connect`](crate::Error::Connect) naming the address; once
//! started, a job never gives up on Redis: subtasks that cannot connect and partitions
//! that cannot be taken or committed retry with a bounded, jittered backoff (at most 1 s
//! apart), so every partition commits again within about 2 s of Redis answering, from its
//! last commit (exactly-once state and list-sink output hold), whatever the outage's
//! length: a process keeps the leases it holds through an outage and recognises them when
//! Redis comes back with them (from its AOF), instead of waiting for them to expire. Each partition's
//! [`PartitionProgress::last_commit_at`] and [`PartitionProgress::last_error`] show a
//! stall; after a cancel, every subtask and background task (job registry, checkpoints
//! and leader election, topic forwarders) stops within about one response timeout
//! whatever Redis does ([`JobClient::shutdown`] waits for that), and dropping the
//! [`JobClient`] never blocks.
//!
//! # Event time
//!
//! Each partition's chain has its own watermark. Every Redis pipeline starts with the
//! engine's watermark operator (`{source_id}/0:watermark`): event time = the message's
//! timestamp (`ts` field, ms), watermark = `max(previous, t - watermark_out_of_orderness)`.
//! An `assign_timestamps_and_watermarks(..)` stage takes over from that point (its
//! generator owns the watermark; upstream watermarks are dropped, as in Flink), so a
//! partition's operators see the watermark of the LAST watermark stage before them. One
//! partition's watermark never makes another partition's elements late; within a subtask
//! the partitions do not combine watermarks at all (they share no operator).
//! [`JobDiagnostics`] reports each partition's watermark, window firings and late elements.
//!
//! Metrics (the [`metrics`](https://docs.rs/metrics) facade; install a recorder, e.g. a
//! Prometheus exporter, before `blocking_start`: each partition registers its handles when
//! the job starts): `streaming_*` series labelled `job`, `topic`, `group`, `partition`
//! (and `operator`, `state` where they apply), updated per batch, never per record; their
//! counters match [`JobDiagnostics`]. The table of every series, and the watermark gauge's
//! rule (no series before the first event-time watermark; an idle flush sets
//! `streaming_watermark_flushed` instead of reporting `i64::MAX`), is in the
//! [guide](crate::guide#redis-engine-metrics).
//!
//! State kept in Redis per partition, written with each batch's atomic commit:
//! - each watermark operator's watermark (state `watermark`, field `"watermark"`): a
//!   restarted or rolled-back partition continues from the committed watermark, so late
//!   elements are judged as in an uninterrupted run;
//! - window panes (state `panes`), one field per (key, window) pane: field =
//!   `[key, window start, window end]` as JSON, value = `[accumulator, trigger state,
//!   flags, event-time timers, last arrival]` as JSON (flags: bit 0 the pane has
//!   content, bit 1 its content was not emitted yet; last arrival: for merging (session)
//!   windows the arrival number of the pane's latest element, else 0), e.g. field
//!   `["k1",1700000000000,1700000060000]`, value `[3,null,3,[1700000059999],0]`. A batch
//!   writes only the panes whose value changed and deletes the fields of panes that are
//!   gone; the timer queue is rebuilt from the panes on load. Window keys, accumulators
//!   and custom triggers must therefore be serde `Serialize + DeserializeOwned` on this
//!   engine. (Stored window state of the earlier layout, one field per key, fails the
//!   schema check: its fingerprint is `panes<..>`, this layout's `panes/2<..>`.);
//! - keyed process timers (state `__timers`, field = key as JSON, value = the key's
//!   timers `[[time ms, domain], ..]`, e.g. `[[1700000059999,"EventTime"],[1700000000500,"ProcessingTime"]]`).
//!
//! Idle flush ([`RedisRuntimeConfig::watermark_idle_timeout`]): a partition
//! that has read nothing for the timeout, or whose generator called `mark_idle`, flushes
//! its watermark to `i64::MAX`, which fires every window and event-time timer; the results
//! and the flushed state commit together, and the next message starts a new watermark
//! epoch from its own event time. This is how a job over a finite input emits its last
//! windows. `window_max_fires_per_record` caps timer firings per record (the rest fire
//! before the next record); `event_time_timer_max_size` bounds a process operator's
//! event-time timers (a record exceeding it fails with [`Error::TimerQueueFull`](crate::Error)).
//!
//! Processing time is the wall clock (epoch ms) on this engine, unlike the memory engine
//! (which uses the highest record timestamp): a keyed process function's
//! processing-time timers fire on the record path and, while the partition has no input,
//! from the subtask's loop (about every 10 ms), committing what they change and emit. They
//! are kept in Redis like event-time timers and fire after a restart. They run on the
//! subtask that owns the partition — the only thread that may touch its state — so there
//! is no timer pool (`timer_threads` accepts only its default, 1). Window triggers' processing-time timers are not served
//! on either engine (such windows emit when cleaned up).
//!
//! Not in this release: keyed state declared without a codec (process state must be
//! declared `persistent`, e.g.
//! [`ValueStateDescriptor::persistent`](crate::api::ValueStateDescriptor::persistent); a
//! plain `new` descriptor is a misuse: each record using it goes to the dead-letter queue at
//! once, not retried, with error type `state` ([`Error::StateNotPersistent`](crate::Error)),
//! and [`JobDiagnostics::errors`] reports it once, naming the fix — likewise a state name
//! used with two types).
//!
//! Sinks: [`RedisListSink`], [`RedisHashSink`], [`RedisStreamSink`] and
//! [`RedisIdempotentListSink`] write in the batch commit (exactly once per acknowledged
//! input, several of them atomically), as does [`outbox::RedisOutboxSink`] (delivered
//! onwards by a dispatcher); a [`two_phase::TwoPhaseSink`] (e.g. around a
//! `two_phase::PostgresSink`) prepares a transaction of its target before the commit,
//! records it in the commit and commits it after (exactly once in the target); any
//! other sink is called before the commit, so a crash or a failed commit can repeat its
//! output (at-least-once). Input
//! deduplication by idempotency key:
//! [`RedisRuntimeConfig::sink_deduplication_enabled`]. [`RedisTopicSink`] produces into
//! another topic of the queue exactly once, through its outbox and a
//! [`RedisTopicForwarder`] the job starts itself.
//!
//! # Checkpoints
//!
//! Every batch commits its state and offset atomically, so a crash loses nothing without
//! checkpoints. A checkpoint is a *point in time to go back to* (a bad deploy corrupted
//! state: restore yesterday's checkpoint and process again from there), kept with a
//! retention ([`RedisRuntimeConfig::checkpoints_to_keep`]).
//!
//! - *Taking one.* [`JobClient::trigger_checkpoint_now`], or every
//!   [`RedisRuntimeConfig::checkpoint_interval`]. The coordinator opens the checkpoint in
//!   Redis; the owner of every partition of every pipeline — in any process of the job —
//!   sees it within about 100 ms (at once in the coordinator's process) and, at its next
//!   batch boundary, copies its committed state inside Redis: the state index, every state
//!   hash it lists (keyed state, rolling tables, window panes, timers, watermark), each
//!   key's collection, the schema fingerprints, the commit frontier (the offset) and the
//!   acked set. Partitions share nothing, so each partition's copy at its own batch
//!   boundary is consistent with every other's: nothing stops, and a partition pauses only
//!   while it copies (in steps of 500 fields, each a script checking the partition's lease
//!   and fencing token). The checkpoint completes when every partition has written its
//!   part; one that misses `checkpoint_drain_timeout` fails and is never restored.
//!   Measured (`redis_engine_bench -- --checkpoint`, one partition, local Redis): 10,000
//!   keys 35 ms, 100,000 keys 138 ms, 1,000,000 keys 1.7 s, with no Redis command over
//!   6 ms; periodic checkpoints every 1 s cost no measurable throughput.
//! - *Keys.* With checkpoint key prefix `C` and job `J`: the job's keys share the hash tag
//!   `{J}` — `C{J}:seq` (id counter), `C{J}:ids` / `C{J}:complete` / `C{J}:open` (sorted
//!   sets of ids), `C{J}:meta:{id}` (hash: status, instance, fencing token, parallelism,
//!   times, pipelines as JSON, failure), `C{J}:parts:{id}` (the parts written) and the
//!   leader's `C{J}:leader` / `C{J}:leader:token`. A partition's copy of key `k` is
//!   `CJ:{id}:k` (the partition's hash tag and slot are kept), and its part record
//!   `CJ:{id}:{state base}:part` is written last. A partition's registry
//!   `CJ:parts:{state base}` (hash: checkpoint id → `live`, or the ms retention deleted
//!   it at) is checked by every step of a part in the same script: an owner that still
//!   sees a deleted checkpoint open writes nothing of it, and its report to the parts hash
//!   needs the checkpoint's record. Retention deletes, besides old checkpoints, every
//!   part a registry lists for an id no longer in `C{J}:ids` (an orphan), and prunes a
//!   deleted entry `checkpoint_drain_timeout` + 1 min after it was written.
//! - *Restoring.* [`RedisEnv::restore_from_checkpoint`] (or
//!   [`RedisRuntimeConfig::restore_from_latest_checkpoint`]) before `blocking_start`: every
//!   partition's state and offset go back to the checkpoint, the consumer group is moved
//!   there (`XGROUP SETID`, never destroyed), and the job reads everything after it
//!   again, at any parallelism. It needs the job stopped in every other process, the same
//!   partition counts, and every stream entry after the checkpoint's offsets still in the
//!   stream: a queue `max_len` that trimmed past the checkpoint makes the restore fail
//!   naming the partition (keep `max_len` above what is produced after the oldest
//!   checkpoint you may restore). Every partition is checked and its lease taken before
//!   any is changed: a restore refused on one partition (trimmed, or leased by another
//!   process) changes none and gives back the leases it took. Outputs after the
//!   checkpoint are produced again; dead letters and retries are not rolled back.
//! - *Leader.* With [`RedisRuntimeConfig::leader_election_enabled`], the job's processes
//!   elect a leader (lease `SET NX PX`, renewed by compare-and-expire, released by
//!   compare-and-delete; a fencing token from `INCR` per term). Only the leader schedules
//!   periodic checkpoints and deletes old ones; each of its checkpoint writes checks its
//!   lease and token in the same script, so a leader that lost its lease (paused past
//!   `leader_lease_ttl`, cut off) completes nothing; its coordinator stops waiting for
//!   the parts as soon as it sees the lease lost, so a process that leads again under a
//!   new token checkpoints at once in its new term (the abandoned checkpoint is deleted
//!   by the new term's retention). A follower takes over within
//!   `leader_lease_ttl` + `leader_renew_interval` (measured: 1.02–1.09 s with 1 s +
//!   250 ms) and the ids go on. Without leader election every process schedules its own
//!   periodic checkpoints: enable it when a job runs as several processes.
//! - Sinks commit with every batch, so `defer_ack_until_checkpoint` and
//!   `ack_deferred_messages_on_checkpoint` are not accepted (see their docs).
//!
//! [`pipeline!`](crate::pipeline) targets a `RedisEnv` when it starts with
//! `from_mq_topic`, `from_mq_topic_with_id` or `from_mq_topic_with_options`; its value is
//! the registration's `Result<(), Error>`, and its `state(..)` declarations are
//! `persistent`. Operators the Redis engine does not run (`collect_vec`, the bounded
//! memory sources) are compile errors at the operator (see the DSL reference).

// The engine's modules (which may use which is checked by `tests/architecture.rs`):
// `config` (options), `metrics` (metric handles), `state` (keyed state kept in Redis),
// `outbox` and `sinks` (sinks that commit with a batch; job-to-job topics),
// `two_phase` (sinks outside Redis), `job` (the client, what a job's subtasks share,
// its checkpoints and background tasks), `partition` (a partition a subtask holds and
// its steps), `subtask` (threads and the loop over partitions), `env` (`RedisEnv`,
// registration).
mod config;
pub(crate) mod env;
mod job;
mod metrics;
pub mod outbox;
mod partition;
mod sinks;
pub(crate) mod state;
mod subtask;
pub mod two_phase;

pub use crate::api::{CollectSink, SinkScope};
pub use config::{
    AckMode, HotKeyPolicy, ProcessingErrorResult, RedisRuntimeConfig, RedisRuntimeConfigBuilder,
    ReplicaWait, SchemaMismatchPolicy,
};
pub use env::RedisEnv;
pub use job::checkpoint::{Checkpoint, CheckpointPipeline, CheckpointStatus};
pub use job::{
    registered_instances, JobClient, JobDiagnostics, JobError, JobErrorKind, PartitionAddr,
    PartitionProgress, RegisteredInput, RegisteredInstance, RegisteredPartition,
    RegisteredPipeline, RegisteredState,
};
pub use partition::failure::{
    HEADER_RUNTIME_ERROR_MESSAGE, HEADER_RUNTIME_ERROR_TYPE, HEADER_RUNTIME_GROUP,
    HEADER_RUNTIME_JOB,
};
pub use sinks::topics::{
    RedisTopicForwarder, RedisTopicForwarderBuilder, RedisTopicSink, TopicForwardStats,
    TopicForwarding,
};

pub use sinks::{
    JsonList, RecordEncoding, RedisHashSink, RedisIdempotentListSink, RedisListSink,
    RedisStreamSink, TextList,
};

pub(crate) use state::runtime::RedisRuntime;

/// Milliseconds since the Unix epoch, by this process's clock.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
