//! [`JobClient`]: a running Redis job.

use super::progress::{HotStats, JobDiagnostics};
use super::shared::JobShared;
use crate::Error;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A running Redis job, from [`RedisEnv::blocking_start`](crate::redis::RedisEnv::blocking_start).
///
/// Its waits are `async` ([`await_caught_up`](Self::await_caught_up),
/// [`await_flushed`](Self::await_flushed), [`await_termination`](Self::await_termination),
/// [`shutdown`](Self::shutdown)) and run on any tokio runtime with its I/O and time
/// drivers (`enable_all`), a current-thread one included: they sleep until the job
/// commits (or stops), and hold no thread meanwhile; their futures are `Send`. Each has a
/// `blocking_` variant for code outside a runtime. The other methods return at once,
/// except [`scale_parallelism`](Self::scale_parallelism), which asks Redis for each new
/// subtask's name.
///
/// The job runs on threads of its own (one per subtask), whoever holds the client.
/// Dropping the client cancels the job and returns at once: its subtasks stop in the
/// background (within about
/// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout)). Call
/// [`shutdown`](Self::shutdown) first to know that they did.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn serve(env: streaming::redis::RedisEnv) -> Result<(), streaming::Error> {
/// // In a tokio service (any runtime flavour), with pipelines registered on `env`:
/// let job = env.blocking_start()?;
/// if !job.await_caught_up(Duration::from_secs(30)).await? {
///     eprintln!("not caught up yet: {:?}", job.diagnostics().errors);
/// }
/// // On SIGTERM: hand the partitions over at once, waiting at most 10 s.
/// let stopped = job.shutdown(Duration::from_secs(10)).await;
/// # let _ = stopped;
/// # Ok(())
/// # }
/// ```
pub struct JobClient {
    pub(super) shared: Arc<JobShared>,
}

impl std::fmt::Debug for JobClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobClient")
            .field("job_name", &self.shared.config.job_name())
            .finish_non_exhaustive()
    }
}

impl JobClient {
    pub(crate) fn new(shared: Arc<JobShared>) -> Self {
        JobClient { shared }
    }

    /// Asks the job to stop and returns at once; idempotent. Each subtask finishes its
    /// current batch (it commits or is read again later), closes its chains and sinks,
    /// releases its partitions and ends. [`await_termination`](Self::await_termination)
    /// waits for that, [`shutdown`](Self::shutdown) does both.
    ///
    /// Every subtask ends within about
    /// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout) of the
    /// cancel whatever Redis does: one still waiting on Redis that long (a frozen or
    /// silent server) is dropped where it stands — its batch was not committed and is
    /// read again by the next run, and its partition leases expire after `lease_ttl`.
    /// The job's background tasks (job registry, checkpoints and leader election, topic
    /// forwarders) end by the same deadline: what they do after the cancel (leave the
    /// registry, release the leader lease, forward what the outboxes hold) is best
    /// effort within it; a key not removed expires, what is left in an outbox is
    /// forwarded by the next run.
    pub fn cancel(&self) {
        self.shared.cancel();
    }

    /// Cancels the job ([`cancel`](Self::cancel)) and waits until every subtask and
    /// background task has stopped (see [`await_termination`](Self::await_termination)),
    /// at most `timeout` (`Duration::MAX`: no deadline); `true` when they all
    /// stopped. With a `timeout` of
    /// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout) plus a
    /// margin for the tasks to end (1 s is ample) it is `true` whatever Redis does: the
    /// tasks still waiting on Redis one response timeout after the cancel are dropped. `false` leaves the job cancelled: the subtasks still
    /// running stop in the background, and calling it again waits for them.
    pub async fn shutdown(&self, timeout: std::time::Duration) -> bool {
        self.cancel();
        self.await_termination(timeout).await
    }

    /// [`shutdown`](Self::shutdown), blocking the calling thread.
    ///
    /// # Panics
    /// When called from within an async runtime (it would block the runtime's thread):
    /// `.await` [`shutdown`](Self::shutdown) there (a `spawn_blocking` thread may call it).
    pub fn blocking_shutdown(&self, timeout: std::time::Duration) -> bool {
        self.cancel();
        self.blocking_await_termination(timeout)
    }

    /// Changes the number of subtasks of every pipeline of the running job to `n` (≥ 1)
    /// without stopping the others. New subtasks get new consumer names and join the
    /// partition assignment; removed ones finish their batch, release their leases and
    /// stop, and the remaining subtasks (of this or another process) take those
    /// partitions at their next heartbeat, from the last commit. State and Redis sinks
    /// stay exactly-once across the handover (state keys carry no subtask); other side
    /// effects are at-least-once. See [`JobDiagnostics::live_parallelism`].
    ///
    /// It draws each new subtask's consumer name from a counter in Redis: one blocking
    /// round trip per new subtask, each at most
    /// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout) (an
    /// unreachable Redis gives a local name instead).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `parallelism`) for `n == 0`; [`Error::Engine`]
    /// once the job was cancelled.
    pub fn scale_parallelism(&self, n: u32) -> Result<(), Error> {
        if n == 0 {
            return Err(Error::InvalidConfig {
                field: "parallelism",
                reason: "must be at least 1".into(),
            });
        }
        if self.shared.signals.is_cancelled() {
            return Err(Error::Engine {
                op: "scale_parallelism",
                reason: "the job was cancelled".into(),
            });
        }
        self.shared.scale(n);
        Ok(())
    }

    /// Stops reading new batches (the batch in progress completes).
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
    }

    /// Reads again after [`pause`](Self::pause).
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
    }

    /// Records read and not yet committed, over all subtasks.
    pub fn in_flight(&self) -> u64 {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// Job name, instance id, parallelism and per-partition progress.
    pub fn diagnostics(&self) -> JobDiagnostics {
        let partitions = self.shared.progress_now();
        let hot = self
            .shared
            .hot
            .lock()
            .map(|h| HotStats {
                sizes: h.sizes.clone(),
                ..*h
            })
            .unwrap_or_default();
        JobDiagnostics {
            job_name: self.shared.config.job_name().to_owned(),
            job_instance_id: self.shared.config.job_instance_id().to_owned(),
            parallelism: self.shared.config.pipeline_parallelism(),
            live_parallelism: self.shared.subtasks.live_parallelism(),
            owned_partitions: partitions.iter().filter(|p| p.owned).count(),
            paused: self.shared.paused.load(Ordering::SeqCst),
            in_flight: self.in_flight(),
            running_subtasks: self.shared.signals.running(),
            partitions,
            errors: self
                .shared
                .errors
                .lock()
                .map(|e| e.clone())
                .unwrap_or_default(),
            hot_key_warnings: hot.warnings,
            hot_key_throttled: hot.throttled,
            hot_key_rejected: hot.rejected,
            state_sizes: hot.sizes,
            is_leader: self.shared.checkpoints.is_leader(),
            leader_instance_id: self.shared.checkpoints.leader_instance(),
            fencing_token: self.shared.checkpoints.lease().map_or(0, |l| l.token),
            checkpointing: self.shared.checkpoints.running.load(Ordering::SeqCst),
            latest_checkpoint_id: self.shared.checkpoints.latest_id(),
        }
    }
}

/// Cancels the job ([`JobClient::cancel`]) without waiting: the subtasks stop in the
/// background.
impl Drop for JobClient {
    fn drop(&mut self) {
        self.cancel();
    }
}
