//! What the subtasks of a running job share with its client: cancel and pause flags,
//! progress and errors, the consumer names, how to start more subtasks, and the signal
//! that wakes the client's waits when any of it changes.

use super::errors::{JobError, JobErrorKind};
use super::partitions::{PartitionAddr, PartitionBoard, PartitionHandle};
use super::progress::{HotStats, PartitionProgress};
use super::signals::JobSignals;
use super::subtasks::SubtaskRegistry;
use crate::mq::topic::parse_xinfo_groups;
use crate::mq::Connection;
use crate::mq::KeySpace;
use crate::redis::state::schema::StateCatalog;
use crate::redis::{AckMode, RedisRuntimeConfig};
use crate::Error;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

pub(crate) struct JobShared {
    /// The cancel, the running subtasks and tasks, and the signals that wake whoever
    /// waits on them.
    pub(crate) signals: JobSignals,
    pub(crate) paused: AtomicBool,
    pub(crate) in_flight: AtomicU64,
    /// Every partition this process has opened: its progress, holder and take position.
    pub(super) partitions: PartitionBoard,
    pub(super) errors: Mutex<Vec<JobError>>,
    /// Misuses already reported (operator/state), so each is reported once.
    pub(super) misuses: Mutex<HashSet<String>>,
    pub(crate) hot: Mutex<HotStats>,
    /// The pipelines' running subtasks: their names, stop flags and how to start more.
    pub(crate) subtasks: SubtaskRegistry,
    /// What [`JobClient::await_caught_up`](super::JobClient::await_caught_up) checks.
    pub(crate) endpoint: crate::mq::Endpoint,
    pub(crate) keys: KeySpace,
    /// (topic, group) of each pipeline.
    pub(crate) pipelines: Vec<(String, String)>,
    /// The other inputs (topic, group) of each pipeline with several, by its (topic, group).
    pub(crate) other_inputs: HashMap<(String, String), Vec<(String, String)>>,
    /// The other inputs (topic, group) broadcast to every partition (read from their one
    /// partition, 0).
    pub(crate) broadcast_inputs: std::collections::HashSet<(String, String)>,
    /// The keyed states each pipeline's partitions opened here, by (topic, group).
    catalogs: HashMap<(String, String), Arc<StateCatalog>>,
    /// The job's configuration (its options are read from here, not copied).
    pub(crate) config: RedisRuntimeConfig,
    /// Checkpoints and leadership as this process sees them.
    pub(crate) checkpoints: crate::redis::job::checkpoint::CheckpointShared,
}

impl JobShared {
    pub(crate) fn new(
        config: &RedisRuntimeConfig,
        endpoint: crate::mq::Endpoint,
        pipelines: Vec<(String, String)>,
    ) -> Self {
        JobShared {
            signals: JobSignals::default(),
            paused: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
            partitions: PartitionBoard::default(),
            errors: Mutex::default(),
            misuses: Mutex::default(),
            hot: Mutex::default(),
            subtasks: SubtaskRegistry::new(config.pipeline_parallelism()),
            endpoint,
            keys: KeySpace::new(config.mq_options().key_prefix.clone()),
            catalogs: (pipelines.iter())
                .map(|p| (p.clone(), Arc::new(StateCatalog::default())))
                .collect(),
            pipelines,
            other_inputs: HashMap::new(),
            broadcast_inputs: std::collections::HashSet::new(),
            config: config.clone(),
            checkpoints: crate::redis::job::checkpoint::CheckpointShared::new(
                crate::redis::job::checkpoint::CheckpointKeys::new(
                    config.checkpoint_key_prefix(),
                    config.job_name(),
                ),
            ),
        }
    }

    /// The catalog of the keyed states pipeline (`topic`, `group`) opened here.
    pub(crate) fn state_catalog(&self, topic: &str, group: &str) -> Option<Arc<StateCatalog>> {
        (self.catalogs.iter())
            .find(|((t, g), _)| t == topic && g == group)
            .map(|(_, c)| Arc::clone(c))
    }

    /// A connection to the job's Redis, the connect bounded by the response timeout.
    ///
    /// # Errors
    /// [`Error::Connect`] when Redis cannot be reached in time.
    pub(crate) async fn connect(&self) -> Result<Connection, Error> {
        let timeout = self.config.mq_options().response_timeout;
        crate::mq::connect(&self.endpoint, timeout, std::time::Duration::ZERO).await
    }

    /// The time by which a task's last writes (a release, a removal) must be done: the
    /// job's stop deadline after a cancel, else one response timeout from now.
    pub(crate) fn stop_by(&self) -> tokio::time::Instant {
        let timeout = self.config.mq_options().response_timeout;
        (self.signals.stop_deadline()).unwrap_or_else(|| tokio::time::Instant::now() + timeout)
    }

    /// A consumer name for a new subtask, `{job}-{instance}-{seq}`: `seq` is drawn from a
    /// counter in Redis per (job, instance), so a name is never used twice — not across
    /// restarts, rescales, nor by two processes given the same `job_instance_id`. When
    /// Redis cannot be reached, `seq` is this process's own counter with a random suffix.
    pub(crate) fn consumer_name(&self) -> String {
        let local = self.subtasks.next_local_seq();
        let key = self
            .keys
            .consumer_seq(self.config.job_name(), self.config.job_instance_id());
        let drawn = crate::mq::blocking_connection(
            &self.endpoint,
            self.config.mq_options().response_timeout,
        )
        .ok()
        .and_then(|mut conn| redis::cmd("INCR").arg(&key).query::<u64>(&mut conn).ok());
        let seq = match drawn {
            Some(n) => n.saturating_sub(1).to_string(),
            None => format!("{local}-{:08x}", rand::random::<u32>()),
        };
        format!(
            "{}-{}-{seq}",
            self.config.job_name(),
            self.config.job_instance_id()
        )
    }

    /// Brings every pipeline to `n` subtasks (see [`SubtaskRegistry::scale`]).
    pub(super) fn scale(self: &Arc<Self>, n: u32) {
        self.subtasks.scale(n, || self.consumer_name());
    }

    /// The handle of `addr`'s progress, registered now when new (once per partition a
    /// subtask opens; the batches update it through the handle).
    pub(crate) fn register_partition(&self, addr: &PartitionAddr) -> PartitionHandle {
        self.partitions.register(addr)
    }

    /// Records that the subtask named `consumer` took the partition of `handle`; in
    /// [`AckMode::Offset`] also the group's read position then (one `XINFO GROUPS`).
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub(crate) async fn taken(
        &self,
        conn: &mut Connection,
        handle: &PartitionHandle,
        consumer: &str,
    ) -> Result<(), Error> {
        let addr = handle.addr();
        let mut taken_at = None;
        if self.config.ack_mode() == AckMode::Offset {
            let v: redis::Value = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(self.keys.stream(&addr.topic, addr.partition))
                .query_async(conn)
                .await?;
            taken_at = (parse_xinfo_groups(&v).into_iter())
                .find(|g| *g.name == *addr.group)
                .map(|g| g.last_delivered_id);
        }
        let mut e = handle.lock();
        if taken_at.is_some() {
            e.taken_at = taken_at;
        }
        hold(&mut e, consumer);
        drop(e);
        self.signals.signal_change();
        Ok(())
    }

    /// The subtask named `consumer` let the partition of `handle` go (handed it over, or
    /// found its lease lost): it is not owned any more — unless another subtask of this
    /// process took it since, whose hold a late let-go must not clear.
    pub(crate) fn let_go(&self, handle: &PartitionHandle, consumer: &str) {
        let mut e = handle.lock();
        if e.holder.as_deref().is_none_or(|h| h == consumer) {
            e.holder = None;
            // Its flush is the next owner's now (Redis's flush mark says so).
            e.progress.owned = false;
            e.progress.awaiting_flush = false;
        }
        drop(e);
        // Whoever holds it now: the records the caller let go of have left `in_flight`.
        self.signals.signal_change();
    }

    /// Asks every subtask to stop (see [`JobSignals::cancel`]) and counts the cancel in the
    /// job's metrics (once).
    pub(crate) fn cancel(&self) {
        if self
            .signals
            .cancel(self.config.mq_options().response_timeout)
        {
            crate::redis::metrics::job::cancelled(self.config.job_name());
        }
    }

    /// Reports an error of one partition: in the job's errors and as the partition's
    /// [`PartitionProgress::last_error`].
    pub(crate) fn partition_error(&self, handle: &PartitionHandle, kind: JobErrorKind, e: String) {
        let error = JobError::new(kind, Some(handle.addr().clone()), e);
        handle.failed(&error.message, error.at);
        self.report(error);
    }

    /// Reports an error met at partition `addr` that does not count as the partition's
    /// own failure (its [`PartitionProgress::last_error`] stays).
    pub(crate) fn error_at(&self, addr: &PartitionAddr, kind: JobErrorKind, e: String) {
        self.report(JobError::new(kind, Some(addr.clone()), e));
    }

    /// Reports an error of the job (no partition in particular).
    pub(crate) fn error(&self, kind: JobErrorKind, e: String) {
        self.report(JobError::new(kind, None, e));
    }

    /// Logs `error` and keeps it in the job's errors (the last 100).
    fn report(&self, error: JobError) {
        match &error.partition {
            Some(at) => {
                tracing::error!(job = %self.config.job_name(), topic = %at.topic, group = %at.group,
                                        partition = at.partition, kind = %error.kind, "{error}")
            }
            None => tracing::error!(job = %self.config.job_name(), kind = %error.kind, "{error}"),
        }
        if let Ok(mut errors) = self.errors.lock() {
            if errors.len() >= 100 {
                errors.remove(0);
            }
            errors.push(error);
        }
        self.signals.signal_change();
    }

    /// Every partition's progress, sorted by (topic, group, partition), with
    /// [`PartitionProgress::stalled`] computed now.
    pub(super) fn progress_now(&self) -> Vec<PartitionProgress> {
        let mut partitions = self.partitions.progress();
        partitions.sort_by(|a, b| {
            (&a.topic, &a.group, a.partition).cmp(&(&b.topic, &b.group, b.partition))
        });
        let now = SystemTime::now();
        for p in &mut partitions {
            p.stalled = p.is_stalled(self.config.stalled_after(), now);
        }
        partitions
    }

    /// Whether this process holds partition `partition` of `topic` (for any group).
    pub(crate) fn holds_partition(&self, topic: &str, partition: u32) -> bool {
        (self.partitions.handles().iter()).any(|h| {
            let addr = h.addr();
            addr.partition == partition && &*addr.topic == topic && h.lock().progress.owned
        })
    }

    /// Updates the progress of the partition of `handle` and wakes the client's waits.
    pub(crate) fn update(&self, handle: &PartitionHandle, f: impl FnOnce(&mut PartitionProgress)) {
        f(&mut handle.lock().progress);
        self.signals.signal_change();
    }
}

/// The subtask named `consumer` holds the partition of `e` now: it is owned, and counted
/// as taken once more.
fn hold(e: &mut super::partitions::PartitionEntry, consumer: &str) {
    e.holder = Some(consumer.to_string());
    let p = &mut e.progress;
    p.taken = true;
    p.owned = true;
    p.first_taken_at.get_or_insert_with(SystemTime::now);
    p.takes += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobShared {
        let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
        JobShared::new(
            &RedisRuntimeConfig::default(),
            crate::mq::Endpoint::single(client),
            Vec::new(),
        )
    }

    fn owned(job: &JobShared, partition: u32) -> bool {
        job.partitions
            .find("t", "g", partition)
            .unwrap()
            .lock()
            .progress
            .owned
    }

    #[test]
    fn a_subtask_letting_a_partition_go_does_not_clear_another_subtasks_hold() {
        let job = job();
        let p0 = job.register_partition(&PartitionAddr::new("t", "g", 0));
        let p1 = job.register_partition(&PartitionAddr::new("t", "g", 1));
        hold(&mut p0.lock(), "job-a-0");
        hold(&mut p1.lock(), "job-a-0");
        // Subtask 1 took partition 0 over (after a rebalance, or subtask 0's lease expired);
        // subtask 0 hands it over, or finds its lease lost, only afterwards.
        hold(&mut p0.lock(), "job-a-1");
        job.let_go(&p0, "job-a-0");
        assert!(owned(&job, 0), "subtask 1 still holds partition 0");
        job.let_go(&p1, "job-a-0");
        assert!(!owned(&job, 1), "subtask 0 let its own partition go");
        job.let_go(&p0, "job-a-1");
        assert!(!owned(&job, 0));
        let takes: u64 = job.partitions.progress().iter().map(|p| p.takes).sum();
        assert_eq!(takes, 3);
    }

    #[test]
    fn a_partition_error_is_typed_and_kept_as_the_partitions_last_error() {
        let job = job();
        let p = job.register_partition(&PartitionAddr::new("t", "g", 2));
        job.partition_error(&p, JobErrorKind::Batch, "batch not committed".into());
        job.error(JobErrorKind::Task, "cannot spawn".into());
        let errors = job.errors.lock().unwrap().clone();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].kind, JobErrorKind::Batch);
        assert_eq!(errors[0].partition, Some(PartitionAddr::new("t", "g", 2)));
        assert_eq!(errors[0].to_string(), "batch not committed");
        assert_eq!(errors[1].partition, None);
        let progress = p.lock().progress.clone();
        assert_eq!(progress.last_error.as_deref(), Some("batch not committed"));
        assert_eq!(progress.last_error_at, Some(errors[0].at));
    }
}
