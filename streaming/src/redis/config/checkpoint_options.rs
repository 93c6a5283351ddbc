//! The checkpoint and leader-election options: their defaults and validation (their
//! getters and setters on the config are in `checkpoint`).

use super::checks::{invalid, key_part};
use crate::Error;
use std::time::Duration;

/// The shortest period of periodic checkpoints: a shorter `checkpoint_interval` runs
/// every 50 ms.
pub(crate) const MIN_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(50);

/// The checkpoint and leader options (see their getters on
/// [`RedisRuntimeConfig`](super::RedisRuntimeConfig)).
#[derive(Clone, Debug)]
pub(crate) struct CheckpointOptions {
    pub(crate) interval: Duration,
    pub(crate) restore_from_latest: bool,
    pub(crate) key_prefix: String,
    pub(crate) to_keep: u32,
    pub(crate) drain_timeout: Duration,
    pub(crate) threads: u32,
    pub(crate) defer_ack_until_checkpoint: bool,
    pub(crate) ack_deferred_messages_on_checkpoint: bool,
    pub(crate) leader_election_enabled: bool,
    pub(crate) leader_lease_ttl: Duration,
    pub(crate) leader_renew_interval: Duration,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions {
            interval: Duration::ZERO,
            restore_from_latest: false,
            key_prefix: "streaming:runtime:checkpoint:".into(),
            to_keep: 5,
            drain_timeout: Duration::from_secs(30),
            threads: 1,
            defer_ack_until_checkpoint: false,
            ack_deferred_messages_on_checkpoint: true,
            leader_election_enabled: false,
            leader_lease_ttl: Duration::from_secs(30),
            leader_renew_interval: Duration::from_secs(10),
        }
    }
}

impl CheckpointOptions {
    /// Validates the options (see [`RedisRuntimeConfigBuilder::build`](super::RedisRuntimeConfigBuilder::build)).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        key_part("checkpoint_key_prefix", &self.key_prefix)?;
        if self.drain_timeout < Duration::from_millis(1) {
            return Err(invalid("checkpoint_drain_timeout", "must be at least 1 ms"));
        }
        if self.threads != 1 {
            return Err(invalid(
                "checkpoint_threads",
                format!(
                    "must be 1, got {}: each partition's subtask writes its own part of a checkpoint, and one coordinator task schedules them",
                    self.threads
                ),
            ));
        }
        if self.defer_ack_until_checkpoint {
            return Err(invalid(
                "defer_ack_until_checkpoint",
                "not accepted: every batch commits its state, Redis sink writes and acknowledgement in one transaction, so acknowledging at checkpoints would only make a crash replay more; leave it `false`",
            ));
        }
        if !self.ack_deferred_messages_on_checkpoint {
            return Err(invalid(
                "ack_deferred_messages_on_checkpoint",
                "only `true` is accepted: no message waits for a checkpoint to be acknowledged (every batch commit acknowledges its messages)",
            ));
        }
        // Redis expires keys in whole milliseconds: compare what the lease really gets.
        let (ttl, renew) = (
            self.leader_lease_ttl.as_millis(),
            self.leader_renew_interval.as_millis(),
        );
        if ttl < 2 {
            return Err(invalid("leader_lease_ttl", "must be at least 2 ms"));
        }
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
        (!self.interval.is_zero()).then(|| self.interval.max(MIN_CHECKPOINT_INTERVAL))
    }
}
