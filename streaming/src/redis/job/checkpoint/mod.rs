//! Checkpoints of a Redis job: points in time to go back to, taken per partition at a
//! batch boundary by the partition's owner, server-side, without stopping the job.
//!
//! - [`keys`]: where a checkpoint lives in Redis;
//! - a partition owner writing its part: `partition::checkpoint_part`;
//! - [`store`]: checkpoint records in Redis (reading, the leader fence, chunked steps);
//! - [`coordinator`]: triggering and completing checkpoints;
//! - [`retention`]: deleting old ones;
//! - [`leader`]: the job's leader election (who schedules them);
//! - [`restore`]: putting every partition back to a checkpoint.

mod coordinator;
pub(crate) mod keys;
mod leader;
mod restore;
mod retention;
mod shared;
pub(crate) mod store;

pub(crate) use coordinator::{start_scheduler, trigger};
pub(crate) use keys::CheckpointKeys;
pub(crate) use keys::INPUT_FIELD;
pub(crate) use restore::{restore_at_start, OtherInputs, RestoreRequest};
pub(crate) use shared::CheckpointShared;
pub(crate) use store::{latest, list};

use serde::{Deserialize, Serialize};

/// Whether a [`Checkpoint`] can be restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointStatus {
    /// Its partitions are writing their parts (until its deadline,
    /// `checkpoint_drain_timeout` after it started; one whose coordinator stopped before
    /// finishing it reads as [`Failed`](Self::Failed) once the deadline passed).
    Pending,
    /// Every partition wrote its part: it can be restored.
    Complete,
    /// A partition did not write its part within `checkpoint_drain_timeout`, the job
    /// was cancelled, or its coordinator stopped or lost its leader lease: it is never
    /// restored. Retention deletes it when a newer checkpoint ends (see
    /// [`checkpoints_to_keep`](crate::redis::RedisRuntimeConfig::checkpoints_to_keep)).
    Failed,
    /// Being deleted (retention).
    Deleting,
}

/// A checkpoint of a job, as stored in Redis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Checkpoint {
    /// Its id: drawn from a counter per job, so ids grow across processes and leaders.
    pub id: u64,
    /// Whether it can be restored.
    pub status: CheckpointStatus,
    /// The instance id of the process that triggered it.
    pub instance: String,
    /// The fencing token of the leader term it was triggered in (0 without
    /// `leader_election_enabled`).
    pub fencing_token: u64,
    /// Subtasks per pipeline of the triggering process then.
    pub parallelism: u32,
    /// When it was triggered, ms since the Unix epoch (the triggering process's clock).
    pub started_at_ms: u64,
    /// When it completed or failed, ms since the Unix epoch (an abandoned one: its
    /// deadline); `None` while pending.
    pub finished_at_ms: Option<u64>,
    /// Its pipelines: (topic, group, partition count). Each partition of each has a part.
    pub pipelines: Vec<CheckpointPipeline>,
    /// Why it failed, when it did.
    pub failure: Option<String>,
}

/// A pipeline of a [`Checkpoint`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CheckpointPipeline {
    /// The topic the pipeline reads.
    pub topic: String,
    /// Its consumer group.
    pub group: String,
    /// The topic's partition count when the checkpoint was taken.
    pub partitions: u32,
}

impl Checkpoint {
    /// The partitions every complete checkpoint holds a part of.
    pub(crate) fn parts(&self) -> u64 {
        self.pipelines.iter().map(|p| u64::from(p.partitions)).sum()
    }
}

/// The field of a partition's part in a checkpoint's parts hash.
pub(crate) fn part_field(topic: &str, group: &str, partition: u32) -> String {
    format!("{topic}/{group}/{partition}")
}

/// The error of a restore that cannot go ahead.
pub(crate) fn restore_error(reason: String) -> crate::Error {
    crate::Error::Engine {
        op: "restore_from_checkpoint",
        reason,
    }
}

pub(crate) use crate::redis::now_ms;
