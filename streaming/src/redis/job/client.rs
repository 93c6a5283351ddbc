//! [`JobClient`]: a running Redis job.

use super::progress::{HotStats, JobDiagnostics};
use super::shared::JobShared;
use crate::Error;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A running Redis job, from [`RedisEnv::execute_async`](crate::redis::RedisEnv::execute_async).
/// Dropping it cancels the job.
pub struct JobClient {
    pub(super) shared: Arc<JobShared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for JobClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobClient")
            .field("job_name", &self.shared.job_name)
            .finish_non_exhaustive()
    }
}

impl JobClient {
    pub(crate) fn new(shared: Arc<JobShared>, threads: Vec<JoinHandle<()>>) -> Self {
        JobClient {
            shared,
            threads: Mutex::new(threads),
        }
    }

    /// Stops the job and waits for its subtasks: each finishes its current batch (it
    /// commits or is read again later), closes its chains and sinks and releases its
    /// partitions. Idempotent.
    ///
    /// It returns within about [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout)
    /// whatever Redis does: a subtask still waiting on Redis that long after the cancel
    /// (a frozen or silent server) is dropped where it stands — its batch was not
    /// committed and is read again by the next run, and its partition leases expire after
    /// `lease_ttl`.
    pub fn cancel(&self) {
        self.shared.cancelled.store(true, Ordering::SeqCst);
        let threads = self
            .threads
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        for t in threads {
            let _ = t.join();
        }
    }

    /// Changes the number of subtasks of every pipeline of the running job to `n` (≥ 1)
    /// without stopping the others. New subtasks get new consumer names and join the
    /// partition assignment; removed ones finish their batch, release their leases and
    /// stop, and the remaining subtasks (of this or another process) take those
    /// partitions at their next heartbeat, from the last commit. State and Redis sinks
    /// stay exactly-once across the handover (state keys carry no subtask); other side
    /// effects are at-least-once. See [`JobDiagnostics::live_parallelism`].
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
        let mut threads = self.threads.lock().map_err(|_| Error::Engine {
            op: "scale_parallelism",
            reason: "poisoned".into(),
        })?;
        if self.shared.is_cancelled() {
            return Err(Error::Engine {
                op: "scale_parallelism",
                reason: "the job was cancelled".into(),
            });
        }
        threads.extend(self.shared.scale(n));
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
        let mut partitions = self
            .shared
            .progress
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        partitions.sort_by(|a, b| {
            (&a.topic, &a.group, a.partition).cmp(&(&b.topic, &b.group, b.partition))
        });
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
            job_name: self.shared.job_name.clone(),
            job_instance_id: self.shared.job_instance_id.clone(),
            parallelism: self.shared.parallelism,
            live_parallelism: u32::try_from(self.shared.live_parallelism.load(Ordering::SeqCst))
                .unwrap_or(u32::MAX),
            owned_partitions: partitions.iter().filter(|p| p.owned).count(),
            paused: self.shared.paused.load(Ordering::SeqCst),
            in_flight: self.in_flight(),
            running_subtasks: self.shared.running.load(Ordering::SeqCst),
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
        }
    }
}

impl Drop for JobClient {
    fn drop(&mut self) {
        self.cancel();
    }
}
