//! The checkpoint and leader-election options' getters on [`RedisRuntimeConfig`] and
//! setters on its builder (the options themselves: `checkpoint_options`).

use super::{CheckpointOptions, RedisRuntimeConfig, RedisRuntimeConfigBuilder};
use std::time::Duration;

macro_rules! options {
    ($($(#[$doc:meta])* $name:ident / $field:ident: $ty:ty, set $set:ty, $(#[$sdoc:meta])*;)*) => {
        impl RedisRuntimeConfig {
            $($(#[$doc])* pub fn $name(&self) -> $ty { self.checkpoint.$field.clone() })*
        }
        impl RedisRuntimeConfigBuilder {
            $($(#[$sdoc])* pub fn $name(mut self, value: $set) -> Self {
                self.config.checkpoint.$field = value.into();
                self
            })*
        }
    };
}

options! {
    /// Period of the job's periodic checkpoints; zero (the default) turns them off. Under
    /// 50 ms runs every 50 ms. With [`leader_election_enabled`](Self::leader_election_enabled)
    /// only the leader schedules them; without it every process of the job does.
    ///
    /// A checkpoint is a point in time to go back to
    /// ([`RedisEnv::restore_from_checkpoint`](crate::redis::RedisEnv::restore_from_checkpoint)),
    /// not crash recovery: every batch already commits its state and offset atomically,
    /// so a crash loses nothing without checkpoints. See "Checkpoints" in the
    /// [`redis`](super::super) module docs.
    checkpoint_interval / interval: Duration, set Duration,
    /// Sets [`RedisRuntimeConfig::checkpoint_interval`] (zero: off; floor 50 ms).
    ;
    /// Restore the latest complete checkpoint when the job starts
    /// ([`RedisEnv::blocking_start`](crate::redis::RedisEnv::blocking_start)), if no other
    /// process of the job is running then (a process joining a running job does not
    /// rewind it; it logs that it skipped the restore). Default `false`. Starting with no
    /// complete checkpoint stored starts from the committed state, with a warning.
    restore_from_latest_checkpoint / restore_from_latest: bool, set bool,
    /// Sets [`RedisRuntimeConfig::restore_from_latest_checkpoint`].
    ;
    /// Prefix of the checkpoint keys (the job name follows). Default
    /// `streaming:runtime:checkpoint:`; no braces or whitespace.
    checkpoint_key_prefix / key_prefix: String, set impl Into<String>,
    /// Sets [`RedisRuntimeConfig::checkpoint_key_prefix`].
    ;
    /// Complete checkpoints kept: after a checkpoint ends (completes or fails), every
    /// incomplete (failed or abandoned) checkpoint but the newest checkpoint is deleted
    /// first, then the complete ones beyond the newest N. 0 keeps everything (nothing is
    /// ever deleted). Default 5. Deleting runs on the coordinator's own connection after
    /// the checkpoint ended, in small steps, never on a partition's thread.
    checkpoints_to_keep / to_keep: u32, set u32,
    /// Sets [`RedisRuntimeConfig::checkpoints_to_keep`] (0 = keep all).
    ;
    /// How long a checkpoint waits for every partition to write its part (each owner does
    /// at its next batch boundary); past it the checkpoint fails (counted in
    /// `streaming_checkpoints_failed_total`) and never completes. Default 30 s, at least
    /// 1 ms.
    checkpoint_drain_timeout / drain_timeout: Duration, set Duration,
    /// Sets [`RedisRuntimeConfig::checkpoint_drain_timeout`] (at least 1 ms).
    ;
    /// Threads that schedule checkpoints. Only 1 (the default) is accepted: a checkpoint's
    /// parts are written by the partitions' own subtasks and the coordinator is one task,
    /// so there is nothing to spread; [`build`](RedisRuntimeConfigBuilder::build) refuses
    /// any other value naming `checkpoint_threads`.
    checkpoint_threads / threads: u32, set u32,
    /// Sets [`RedisRuntimeConfig::checkpoint_threads`] (only 1).
    ;
    /// Keep messages pending until a checkpoint completes. Not accepted: `true` fails
    /// [`build`](RedisRuntimeConfigBuilder::build) naming `defer_ack_until_checkpoint`.
    /// Every batch commits its state, its Redis sink writes and its acknowledgement in one
    /// transaction, so a message is acknowledged exactly when its effects are durable;
    /// holding acknowledgements until a checkpoint would only make a crash replay more.
    defer_ack_until_checkpoint / defer_ack_until_checkpoint: bool, set bool,
    /// Sets [`RedisRuntimeConfig::defer_ack_until_checkpoint`] (only `false`).
    ;
    /// Acknowledge deferred messages when a checkpoint completes. Only `true` (the
    /// default) is accepted: there are no deferred messages (see
    /// [`defer_ack_until_checkpoint`](Self::defer_ack_until_checkpoint)), and `false`
    /// fails [`build`](RedisRuntimeConfigBuilder::build) naming
    /// `ack_deferred_messages_on_checkpoint`.
    ack_deferred_messages_on_checkpoint / ack_deferred_messages_on_checkpoint: bool, set bool,
    /// Sets [`RedisRuntimeConfig::ack_deferred_messages_on_checkpoint`] (only `true`).
    ;
    /// Elect one leader among the job's processes (a lease in Redis, fenced by a token
    /// drawn at every term): only the leader schedules periodic checkpoints and deletes
    /// old ones, and every checkpoint write of the leader checks its lease and token in
    /// the same script, so a leader that lost its lease (paused, cut off) cannot complete
    /// a checkpoint. A follower takes over within `leader_lease_ttl` +
    /// `leader_renew_interval` of the leader's death. Default `false`.
    leader_election_enabled / leader_election_enabled: bool, set bool,
    /// Sets [`RedisRuntimeConfig::leader_election_enabled`].
    ;
    /// Lifetime of the leader's lease (whole milliseconds); the leader renews it every
    /// `leader_renew_interval`. Default 30 s; at least 2 ms.
    leader_lease_ttl / leader_lease_ttl: Duration, set Duration,
    /// Sets [`RedisRuntimeConfig::leader_lease_ttl`] (at least 2 ms).
    ;
    /// How often the leader renews its lease and a follower tries to take it. Default
    /// 10 s; at least 1 ms and less than `leader_lease_ttl`.
    leader_renew_interval / leader_renew_interval: Duration, set Duration,
    /// Sets [`RedisRuntimeConfig::leader_renew_interval`] (≥ 1 ms, < `leader_lease_ttl`).
    ;
}

impl RedisRuntimeConfig {
    /// The checkpoint and leader options together.
    pub(crate) fn checkpoint(&self) -> &CheckpointOptions {
        &self.checkpoint
    }
}
