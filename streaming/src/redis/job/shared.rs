//! What the subtasks of a running job share with its client: cancel and pause flags,
//! progress and errors, the consumer names, how to start more subtasks, and the signal
//! that wakes the client's waits when any of it changes.

use super::errors::{JobError, JobErrorKind};
use super::partitions::{PartitionAddr, PartitionBoard, PartitionHandle};
use super::progress::{HotStats, PartitionProgress};
use crate::mq::topic::parse_xinfo_groups;
use crate::mq::Connection;
use crate::mq::KeySpace;
use crate::redis::{AckMode, RedisRuntimeConfig};
use crate::Error;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::time::Instant;

/// Starts one more subtask of a pipeline: (job, subtask index, the consumer names started
/// together, of which the subtask's is at its index). The subtask runs on a thread of its
/// own, which nobody joins: its end is counted in [`JobShared::subtask_ended`].
pub(crate) type Spawner = Box<dyn Fn(&Arc<JobShared>, u32, Vec<String>) + Send>;

/// A pipeline's running subtasks and how to start more.
struct PipelineSubtasks {
    /// Consumer names of its live subtasks, in subtask order.
    live: Vec<String>,
    spawn: Spawner,
}

pub(crate) struct JobShared {
    pub(crate) cancelled: AtomicBool,
    pub(crate) paused: AtomicBool,
    pub(crate) in_flight: AtomicU64,
    pub(super) running: AtomicUsize,
    /// Bumped after every change a wait of the client checks (a commit, a take, a let-go,
    /// a stop, an error, a subtask's end, the cancel): the waits sleep on it instead of
    /// polling. Its value is a change counter and means nothing else.
    changes: watch::Sender<u64>,
    /// Set with `cancelled` (which the subtask loops read): what
    /// [`cancelled_signal`](Self::cancelled_signal) waits on, apart from `changes` so that
    /// commits do not wake every subtask.
    cancel_signal: watch::Sender<bool>,
    /// One response timeout after the cancel (set by it): by then every subtask and
    /// background task of the job has ended, whatever Redis does.
    stop_deadline: OnceLock<Instant>,
    /// Bumped by the cancel and by each subtask's end: what
    /// [`stopping_signal`](Self::stopping_signal) waits on (commits do not wake it).
    stopping_changes: watch::Sender<u64>,
    /// Every partition this process has opened: its progress, holder and take position.
    pub(super) partitions: PartitionBoard,
    pub(super) errors: Mutex<Vec<JobError>>,
    /// Misuses already reported (operator/state), so each is reported once.
    pub(super) misuses: Mutex<HashSet<String>>,
    pub(crate) hot: Mutex<HotStats>,
    pub(crate) job_name: String,
    pub(crate) job_instance_id: String,
    pub(super) parallelism: u32,
    /// The next subtask's sequence number in its consumer name (never reused).
    next_seq: AtomicU64,
    /// Per pipeline, its live subtasks (what [`JobClient::scale_parallelism`](super::JobClient::scale_parallelism) changes).
    subtasks: Mutex<Vec<PipelineSubtasks>>,
    /// Stop flags of the running subtasks, by consumer name (set when scaled away).
    stops: Mutex<HashMap<String, Arc<AtomicBool>>>,
    pub(crate) live_parallelism: AtomicU64,
    /// What [`JobClient::await_caught_up`](super::JobClient::await_caught_up) checks.
    pub(crate) endpoint: crate::mq::Endpoint,
    /// Bound of every wait on Redis (`mq_options.response_timeout`).
    pub(crate) response_timeout: Duration,
    pub(crate) keys: KeySpace,
    pub(super) ack_mode: AckMode,
    /// (topic, group) of each pipeline.
    pub(crate) pipelines: Vec<(String, String)>,
    /// `watermark_idle_timeout` (what [`JobClient::await_flushed`](super::JobClient::await_flushed) waits for).
    pub(super) idle_timeout: Option<Duration>,
    /// `stalled_after`: how long an owned partition with work may go without a commit.
    pub(super) stalled_after: Duration,
    /// How often the registry task writes the instance's heartbeat
    /// (`mq_options.lease_renew_interval`).
    pub(super) registry_interval: Duration,
    /// Background tasks started and not ended (the registry, checkpoints and leader
    /// election, topic forwarders: see `task::spawn_task`).
    tasks: AtomicUsize,
    /// The job's configuration.
    pub(crate) config: RedisRuntimeConfig,
    /// Its checkpoint and leader options.
    pub(crate) checkpoint_options: crate::redis::config::CheckpointOptions,
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
            cancelled: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
            idle_timeout: config.watermark_idle_timeout(),
            running: AtomicUsize::new(0),
            changes: watch::Sender::new(0),
            cancel_signal: watch::Sender::new(false),
            stop_deadline: OnceLock::new(),
            stopping_changes: watch::Sender::new(0),
            partitions: PartitionBoard::default(),
            errors: Mutex::default(),
            misuses: Mutex::default(),
            hot: Mutex::default(),
            job_name: config.job_name(),
            job_instance_id: config.job_instance_id(),
            parallelism: config.pipeline_parallelism(),
            next_seq: AtomicU64::new(0),
            subtasks: Mutex::default(),
            stops: Mutex::default(),
            live_parallelism: AtomicU64::new(u64::from(config.pipeline_parallelism())),
            endpoint,
            response_timeout: config.mq_options().response_timeout,
            keys: KeySpace::new(config.mq_options().key_prefix.clone()),
            ack_mode: config.ack_mode(),
            pipelines,
            stalled_after: config.stalled_after(),
            registry_interval: config.mq_options().lease_renew_interval,
            tasks: AtomicUsize::new(0),
            config: config.clone(),
            checkpoint_options: config.checkpoint().clone(),
            checkpoints: crate::redis::job::checkpoint::CheckpointShared::new(
                crate::redis::job::checkpoint::CheckpointKeys::new(
                    &config.checkpoint_key_prefix(),
                    &config.job_name(),
                ),
            ),
        }
    }

    /// A consumer name for a new subtask, `{job}-{instance}-{seq}`: `seq` is drawn from a
    /// counter in Redis per (job, instance), so a name is never used twice — not across
    /// restarts, rescales, nor by two processes given the same `job_instance_id`. When
    /// Redis cannot be reached, `seq` is this process's own counter with a random suffix.
    pub(crate) fn consumer_name(&self) -> String {
        let local = self.next_seq.fetch_add(1, Ordering::SeqCst);
        let key = self
            .keys
            .consumer_seq(&self.job_name, &self.job_instance_id);
        let drawn = crate::mq::blocking_connection(&self.endpoint, self.response_timeout)
            .ok()
            .and_then(|mut conn| redis::cmd("INCR").arg(&key).query::<u64>(&mut conn).ok());
        let seq = match drawn {
            Some(n) => n.saturating_sub(1).to_string(),
            None => format!("{local}-{:08x}", rand::random::<u32>()),
        };
        format!("{}-{}-{seq}", self.job_name, self.job_instance_id)
    }

    /// Registers a started pipeline: its subtasks' consumer names and its spawner.
    pub(crate) fn add_pipeline(&self, live: Vec<String>, spawn: Spawner) {
        if let Ok(mut p) = self.subtasks.lock() {
            p.push(PipelineSubtasks { live, spawn });
        }
    }

    /// Registers a starting subtask's stop flag.
    pub(crate) fn register_subtask(&self, consumer: &str) {
        if let Ok(mut s) = self.stops.lock() {
            s.insert(consumer.to_string(), Arc::new(AtomicBool::new(false)));
        }
    }

    /// Whether lease value `lease` (`"{fencing token} {owner}"`) names one of this
    /// process's running subtasks as the owner.
    pub(super) fn holds(&self, lease: &str) -> bool {
        let owner = lease.split_once(' ').map_or(lease, |(_, owner)| owner);
        self.stops.lock().is_ok_and(|s| s.contains_key(owner))
    }

    /// The stop flag of the subtask named `consumer`.
    pub(crate) fn subtask_stop(&self, consumer: &str) -> Option<Arc<AtomicBool>> {
        self.stops.lock().ok()?.get(consumer).cloned()
    }

    /// Forgets an ended subtask's stop flag.
    pub(crate) fn subtask_left(&self, consumer: &str) {
        if let Ok(mut s) = self.stops.lock() {
            s.remove(consumer);
        }
    }

    /// Brings every pipeline to `n` subtasks: starts new ones (new consumer names), or
    /// tells the last ones to hand their partitions over and stop.
    pub(super) fn scale(self: &Arc<Self>, n: u32) {
        let Ok(mut pipelines) = self.subtasks.lock() else {
            return;
        };
        for pipeline in pipelines.iter_mut() {
            while pipeline.live.len() > n as usize {
                if let Some(name) = pipeline.live.pop() {
                    if let Some(stop) = self.subtask_stop(&name) {
                        stop.store(true, Ordering::SeqCst);
                    }
                }
            }
            let first = pipeline.live.len();
            let names: Vec<String> = (first..n as usize).map(|_| self.consumer_name()).collect();
            for (i, name) in names.iter().enumerate() {
                (pipeline.spawn)(self, i as u32, names.clone());
                pipeline.live.push(name.clone());
            }
        }
        self.live_parallelism.store(u64::from(n), Ordering::SeqCst);
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
        if self.ack_mode == AckMode::Offset {
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
        self.signal_change();
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
        self.signal_change();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Asks every subtask to stop (they finish their batch, hand their partitions over
    /// and end) and wakes whatever waits for that. Returns at once. The first call sets
    /// the [`stop_deadline`](Self::stop_deadline).
    pub(crate) fn cancel(&self) {
        if !self.cancelled.swap(true, Ordering::SeqCst) {
            crate::redis::metrics::job::cancelled(&self.job_name);
        }
        // Set before the signal, so that whoever it wakes finds the deadline.
        let _ = (self.stop_deadline).get_or_init(|| Instant::now() + self.response_timeout);
        self.cancel_signal.send_replace(true);
        self.stopping_changes
            .send_modify(|n| *n = n.wrapping_add(1));
        self.signal_change();
    }

    /// One response timeout after the cancel (`None` before it): the instant by which
    /// every subtask and background task of the job ends, whatever Redis does. What a
    /// task does after the cancel (a last commit, leaving the registry, releasing the
    /// leader lease, forwarding what the outboxes hold) is best effort within it.
    pub(crate) fn stop_deadline(&self) -> Option<Instant> {
        self.stop_deadline.get().copied()
    }

    /// Returns at the [`stop_deadline`](Self::stop_deadline): a task still running then
    /// is dropped where it stands.
    pub(crate) async fn stop_deadline_passed(&self) {
        self.cancelled_signal().await;
        if let Some(at) = self.stop_deadline() {
            tokio::time::sleep_until(at).await;
        }
    }

    /// Returns once the job is cancelled or none of its subtasks runs any more (they all
    /// stopped on errors): when its background tasks stop.
    pub(crate) async fn stopping_signal(&self) {
        let mut changes = self.stopping_changes.subscribe();
        if changes.wait_for(|_| self.stopping()).await.is_err() {
            // The sender lives as long as `self`: not reached.
            std::future::pending::<()>().await;
        }
    }

    /// Whether the job is cancelled or none of its subtasks runs any more.
    pub(crate) fn stopping(&self) -> bool {
        self.is_cancelled() || self.running() == 0
    }

    /// Returns once the job is cancelled ([`cancel`](Self::cancel)).
    pub(crate) async fn cancelled_signal(&self) {
        let mut cancelled = self.cancel_signal.subscribe();
        if cancelled.wait_for(|c| *c).await.is_err() {
            // The sender lives as long as `self`: not reached.
            std::future::pending::<()>().await;
        }
    }

    /// Wakes the client's waits: something they check may have changed. Called after the
    /// change is visible (progress recorded, records out of `in_flight`, a subtask gone).
    pub(crate) fn signal_change(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver of the change signal ([`signal_change`](Self::signal_change)); changes
    /// before this call count as seen.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Subtasks started and not ended.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Background tasks started and not ended.
    pub(super) fn tasks_running(&self) -> usize {
        self.tasks.load(Ordering::SeqCst)
    }

    pub(super) fn task_started(&self) {
        self.tasks.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn task_ended(&self) {
        self.tasks.fetch_sub(1, Ordering::SeqCst);
        self.signal_change();
    }

    pub(crate) fn subtask_started(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn subtask_ended(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.stopping_changes
            .send_modify(|n| *n = n.wrapping_add(1));
        self.signal_change();
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
            Some(at) => tracing::error!(job = %self.job_name, topic = %at.topic, group = %at.group,
                                        partition = at.partition, kind = %error.kind, "{error}"),
            None => tracing::error!(job = %self.job_name, kind = %error.kind, "{error}"),
        }
        if let Ok(mut errors) = self.errors.lock() {
            if errors.len() >= 100 {
                errors.remove(0);
            }
            errors.push(error);
        }
        self.signal_change();
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
            p.stalled = p.is_stalled(self.stalled_after, now);
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
        self.signal_change();
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
