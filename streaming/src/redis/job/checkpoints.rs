//! The job client's checkpoints: trigger one, read the latest, list them.

use super::client::JobClient;
use super::waits::block_on;
use crate::redis::job::checkpoint::{self, Checkpoint};
use crate::Error;

impl JobClient {
    /// Takes a checkpoint now and waits until it completes or fails (at most
    /// `checkpoint_drain_timeout` for the parts, plus a few Redis round trips). `Ok(None)`
    /// when this process is running one already (periodic or triggered: one at a time)
    /// or the job was cancelled.
    ///
    /// Every owner of a partition, in this process or another of the job, writes its
    /// part at its next batch boundary: its committed state (keyed state, window panes,
    /// timers, watermark) and offset, copied inside Redis. Partitions are independent, so
    /// nothing stops meanwhile: each partition pauses only while it copies its own part.
    /// A checkpoint that does not get every part within `checkpoint_drain_timeout` comes
    /// back with [`CheckpointStatus::Failed`](crate::redis::CheckpointStatus::Failed) and
    /// is never restored.
    ///
    /// # Errors
    /// With `leader_election_enabled`, [`Error::Engine`] when this process is not the
    /// leader (see [`JobDiagnostics::leader_instance_id`](crate::redis::JobDiagnostics::leader_instance_id)) or lost the
    /// lease meanwhile; [`Error::Connect`] / [`Error::Redis`] when Redis fails.
    pub async fn trigger_checkpoint_now(&self) -> Result<Option<Checkpoint>, Error> {
        checkpoint::trigger(&self.shared).await
    }

    /// [`trigger_checkpoint_now`](Self::trigger_checkpoint_now), blocking the calling
    /// thread.
    ///
    /// # Errors
    /// As [`trigger_checkpoint_now`](Self::trigger_checkpoint_now).
    ///
    /// # Panics
    /// When called from within an async runtime: `.await`
    /// [`trigger_checkpoint_now`](Self::trigger_checkpoint_now) there.
    pub fn blocking_trigger_checkpoint_now(&self) -> Result<Option<Checkpoint>, Error> {
        block_on(
            "blocking_trigger_checkpoint_now",
            self.trigger_checkpoint_now(),
        )?
    }

    /// The job's latest complete checkpoint (by id, whoever took it), read from Redis;
    /// `None` before any.
    ///
    /// # Errors
    /// [`Error::Connect`] / [`Error::Redis`] when Redis fails.
    pub async fn latest_checkpoint(&self) -> Result<Option<Checkpoint>, Error> {
        let mut conn = self.connection().await?;
        let latest = checkpoint::latest(&mut conn, &self.shared.checkpoints.keys).await?;
        if let Some(ck) = &latest {
            self.shared.checkpoints.saw_complete(ck.id);
        }
        Ok(latest)
    }

    /// [`latest_checkpoint`](Self::latest_checkpoint), blocking the calling thread.
    ///
    /// # Errors
    /// As [`latest_checkpoint`](Self::latest_checkpoint).
    ///
    /// # Panics
    /// When called from within an async runtime.
    pub fn blocking_latest_checkpoint(&self) -> Result<Option<Checkpoint>, Error> {
        block_on("blocking_latest_checkpoint", self.latest_checkpoint())?
    }

    /// Every checkpoint of the job still stored (complete, pending, failed), by id.
    ///
    /// # Errors
    /// [`Error::Connect`] / [`Error::Redis`] when Redis fails.
    pub async fn checkpoints(&self) -> Result<Vec<Checkpoint>, Error> {
        let mut conn = self.connection().await?;
        checkpoint::list(&mut conn, &self.shared.checkpoints.keys).await
    }

    /// [`checkpoints`](Self::checkpoints), blocking the calling thread.
    ///
    /// # Errors
    /// As [`checkpoints`](Self::checkpoints).
    ///
    /// # Panics
    /// When called from within an async runtime.
    pub fn blocking_checkpoints(&self) -> Result<Vec<Checkpoint>, Error> {
        block_on("blocking_checkpoints", self.checkpoints())?
    }

    async fn connection(&self) -> Result<crate::mq::Connection, Error> {
        self.shared.connect().await
    }
}
