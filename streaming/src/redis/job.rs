//! [`JobClient`]: a running Redis job.

use super::{AckMode, RedisRuntimeConfig};
use crate::mq::topic::parse_xinfo_groups;
use crate::mq::KeySpace;
use crate::Error;
use redis::aio::ConnectionManager;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Progress of one partition of a running job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionProgress {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// The partition.
    pub partition: u32,
    /// The subtask owning it.
    pub subtask: u32,
    /// The id of the last entry whose batch committed.
    pub last_committed_id: Option<String>,
    /// Records processed in committed batches (failed records excluded).
    pub records: u64,
    /// Batches committed.
    pub batches: u64,
    /// Records that failed and went to retry or the dead-letter queue (each attempt
    /// counts).
    pub failed: u64,
    /// Entries in committed batches that were skipped, not processed: retries addressed to
    /// another consumer group (their field `rg` names that group). Also the metric
    /// `streaming_records_skipped_total`.
    pub skipped: u64,
    /// Why the partition stopped, when it did (e.g. a state schema mismatch under
    /// [`SchemaMismatchPolicy::Fail`](super::SchemaMismatchPolicy::Fail)): it reads nothing
    /// more until the job is started again.
    pub stopped: Option<String>,
    /// Whether its subtask has taken it (lease, read position and state) at least once.
    pub taken: bool,
    /// Whether this process holds the partition's lease now (with several processes of
    /// one job each holds its share; see the [`redis`](super) module docs).
    pub owned: bool,
    /// Times this process found the partition's lease passed to another owner: a write
    /// (batch, timers, idle flush, retry, dead letter) refused with [`Error::Fenced`], or a
    /// lease renewal that found another owner (a stall — GC pause, `SIGSTOP`, a slow
    /// network, or one user function call longer than `lease_ttl`). Each time nothing was
    /// written, and the partition was dropped from memory until its lease is won again.
    pub fenced: u64,
    /// Times this process took the partition (first take and every take-over after a
    /// loss or a rebalance).
    pub takes: u64,
    /// The partition's watermark (ms) as of its last commit: the one its last watermark
    /// operator emitted (`i64::MIN` before the first; `i64::MAX` after an idle flush, until
    /// a record starts the next watermark epoch; `None` until the partition has committed).
    pub watermark: Option<i64>,
    /// Window firings committed (each emission of a window's result).
    pub window_fired: u64,
    /// Elements that arrived after all their windows were past the allowed lateness
    /// (sent to the late side output, if any, and otherwise dropped).
    pub window_late_dropped: u64,
    /// Elements that fell between windows (sliding windows with `slide > size`) and were
    /// not late: they belong to no window and are dropped.
    pub window_gap_dropped: u64,
    /// Idle flushes: times the partition's watermark was flushed to `i64::MAX` after
    /// `watermark_idle_timeout` without input or a generator's `mark_idle`.
    pub idle_flushes: u64,
    /// When the partition last committed (a batch, timers or an idle flush); `None`
    /// before its first commit of this run. A partition that stalls shows an old time
    /// here and a recent [`last_error_at`](Self::last_error_at).
    pub last_commit_at: Option<SystemTime>,
    /// The last error the partition met and is recovering from (e.g. Redis unreachable:
    /// the message names the address). It is kept after the partition recovered: the
    /// partition is stalled now only if [`last_error_at`](Self::last_error_at) is later
    /// than [`last_commit_at`](Self::last_commit_at).
    pub last_error: Option<String>,
    /// When [`last_error`](Self::last_error) happened.
    pub last_error_at: Option<SystemTime>,
    /// Whether the partition's next idle flush has work: records went through a pipeline
    /// with a watermark since its last idle flush, or it was taken holding windows or
    /// event-time timers a previous run left unfired. Such a partition is flushed after
    /// the idle timeout whatever its watermark (even one that never left `i64::MIN`).
    pub awaiting_flush: bool,
}

/// What [`JobClient::diagnostics`] reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobDiagnostics {
    /// The configured job name.
    pub job_name: String,
    /// The configured instance id.
    pub job_instance_id: String,
    /// Subtasks per pipeline as configured when the job started.
    pub parallelism: u32,
    /// Subtasks per pipeline now (after [`JobClient::scale_parallelism`]).
    pub live_parallelism: u32,
    /// Partitions this process holds now, over all pipelines (see
    /// [`PartitionProgress::owned`]).
    pub owned_partitions: usize,
    /// Whether the job is paused.
    pub paused: bool,
    /// Records read and not yet committed.
    pub in_flight: u64,
    /// Subtasks still running.
    pub running_subtasks: usize,
    /// Per partition, sorted by (topic, group, partition).
    pub partitions: Vec<PartitionProgress>,
    /// Errors that ended a subtask or that it recovered from (newest last, at most 100).
    pub errors: Vec<String>,
    /// Hot-key warnings logged (at most one per hash per `hot_key_warn_interval`).
    pub hot_key_warnings: u64,
    /// Batch commits delayed by [`HotKeyPolicy::Throttle`](super::HotKeyPolicy::Throttle).
    pub hot_key_throttled: u64,
    /// Records rejected by [`HotKeyPolicy::FailFast`](super::HotKeyPolicy::FailFast).
    pub hot_key_rejected: u64,
    /// The last sampled field count (`HLEN`) per state hash key (sampled every
    /// `state_size_report_every_n_writes` state writes).
    pub state_sizes: BTreeMap<String, u64>,
}

/// Hot-key and state-size counters shared by the subtasks.
#[derive(Default)]
pub(crate) struct HotStats {
    pub(crate) warnings: u64,
    pub(crate) throttled: u64,
    pub(crate) rejected: u64,
    pub(crate) sizes: BTreeMap<String, u64>,
}

/// Starts one more subtask of a pipeline: (job, subtask index, the consumer names started
/// together, of which the subtask's is at its index).
pub(crate) type Spawner =
    Box<dyn Fn(&Arc<JobShared>, u32, Vec<String>) -> Option<JoinHandle<()>> + Send>;

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
    running: AtomicUsize,
    done: (Mutex<()>, Condvar),
    progress: Mutex<Vec<PartitionProgress>>,
    errors: Mutex<Vec<String>>,
    /// Misuses already reported (operator/state), so each is reported once.
    misuses: Mutex<HashSet<String>>,
    pub(crate) hot: Mutex<HotStats>,
    job_name: String,
    job_instance_id: String,
    parallelism: u32,
    /// The next subtask's sequence number in its consumer name (never reused).
    next_seq: AtomicU64,
    /// Per pipeline, its live subtasks (what [`JobClient::scale_parallelism`] changes).
    subtasks: Mutex<Vec<PipelineSubtasks>>,
    /// Stop flags of the running subtasks, by consumer name (set when scaled away).
    stops: Mutex<HashMap<String, Arc<AtomicBool>>>,
    live_parallelism: AtomicU64,
    /// What [`JobClient::await_caught_up`] checks.
    client: redis::Client,
    /// Bound of every wait on Redis (`mq_options.response_timeout`).
    pub(crate) response_timeout: Duration,
    keys: KeySpace,
    ack_mode: AckMode,
    /// (topic, group) of each pipeline.
    pipelines: Vec<(String, String)>,
    /// `watermark_idle_timeout` (what [`JobClient::await_flushed`] waits for).
    idle_timeout: Option<Duration>,
    /// Offset mode: the group's read position when the partition was taken, by (topic,
    /// group, partition) — what is committed before the first commit of this run.
    taken_at: Mutex<HashMap<(String, String, u32), String>>,
}

impl JobShared {
    pub(crate) fn new(
        config: &RedisRuntimeConfig,
        client: redis::Client,
        pipelines: Vec<(String, String)>,
    ) -> Self {
        JobShared {
            cancelled: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
            idle_timeout: config.watermark_idle_timeout(),
            running: AtomicUsize::new(0),
            done: (Mutex::new(()), Condvar::new()),
            progress: Mutex::default(),
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
            client,
            response_timeout: config.mq_options().response_timeout,
            keys: KeySpace::new(config.mq_options().key_prefix.clone()),
            ack_mode: config.ack_mode(),
            pipelines,
            taken_at: Mutex::default(),
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
        let drawn = crate::mq::blocking_connection(&self.client, self.response_timeout)
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
    /// tells the last ones to hand their partitions over and stop. Returns the threads
    /// started.
    fn scale(self: &Arc<Self>, n: u32) -> Vec<JoinHandle<()>> {
        let mut threads = Vec::new();
        let Ok(mut pipelines) = self.subtasks.lock() else {
            return threads;
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
                threads.extend((pipeline.spawn)(self, i as u32, names.clone()));
                pipeline.live.push(name.clone());
            }
        }
        self.live_parallelism.store(u64::from(n), Ordering::SeqCst);
        threads
    }

    /// Records that partition `partition` of (topic, group) was taken; in
    /// [`AckMode::Offset`] also the group's read position then (one `XINFO GROUPS`).
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub(crate) async fn taken(
        &self,
        conn: &mut ConnectionManager,
        topic: &str,
        group: &str,
        partition: u32,
    ) -> Result<(), Error> {
        if self.ack_mode == AckMode::Offset {
            let v: redis::Value = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(self.keys.stream(topic, partition))
                .query_async(conn)
                .await?;
            if let Some(g) = parse_xinfo_groups(&v).into_iter().find(|g| g.name == group) {
                if let Ok(mut t) = self.taken_at.lock() {
                    t.insert(
                        (topic.to_string(), group.to_string(), partition),
                        g.last_delivered_id,
                    );
                }
            }
        }
        self.progress(topic, group, partition, |p| {
            p.taken = true;
            p.owned = true;
            p.takes += 1;
        });
        Ok(())
    }

    /// Whether every partition of every pipeline is taken, running, and committed up to
    /// its stream's last entry, with no retry scheduled (one `MULTI` per partition). Every
    /// wait on Redis (connect and each reply) is bounded by `budget` and ends by `end`.
    fn caught_up(&self, budget: Duration, end: Instant) -> Result<bool, Error> {
        let progress = self.progress.lock().map(|p| p.clone()).unwrap_or_default();
        let mut conn = crate::mq::blocking_connection(&self.client, budget)?;
        // Each query gets what is left until `end` (at least `MIN_CHECK`, so a zero timeout
        // still checks once), at most the budget.
        let bound = |conn: &mut redis::Connection| -> Result<(), Error> {
            let left = end.saturating_duration_since(Instant::now());
            let t = Some(left.max(MIN_CHECK).min(budget));
            conn.set_read_timeout(t)?;
            conn.set_write_timeout(t)?;
            Ok(())
        };
        for (topic, group) in &self.pipelines {
            bound(&mut conn)?;
            let partitions: Option<u32> = redis::cmd("HGET")
                .arg(self.keys.meta(topic))
                .arg("partitions")
                .query(&mut conn)?;
            let Some(partitions) = partitions else {
                return Ok(false);
            };
            for p in 0..partitions {
                // A partition this process does not hold (another process's share, or not
                // taken yet) is judged by what Redis shows committed, like the others.
                let mine = progress
                    .iter()
                    .find(|x| x.partition == p && &x.topic == topic && &x.group == group);
                if mine.is_some_and(|x| x.stopped.is_some()) {
                    return Ok(false);
                }
                let here = mine.filter(|x| x.owned);
                let stream = self.keys.stream(topic, p);
                bound(&mut conn)?;
                let (last, retries, groups, frontier, lease): (
                    redis::Value,
                    Vec<String>,
                    redis::Value,
                    Option<String>,
                    Option<String>,
                ) = redis::pipe()
                    .atomic()
                    .cmd("XREVRANGE")
                    .arg(&stream)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1)
                    .cmd("ZRANGE")
                    .arg(self.keys.retry_due(topic, p))
                    .arg(0)
                    .arg(-1)
                    .cmd("XINFO")
                    .arg("GROUPS")
                    .arg(&stream)
                    .cmd("GET")
                    .arg(self.keys.frontier(topic, p, group))
                    .cmd("GET")
                    .arg(self.keys.lease(topic, p, group))
                    .query(&mut conn)?;
                if here.is_none() && lease.is_none() {
                    // Neither this process nor another holds it: not taken (yet, or any more).
                    return Ok(false);
                }
                // Retry tokens are `{group}\n{id}` (a bare id: an older retry for every group).
                let mine = format!("{group}\n");
                if retries
                    .iter()
                    .any(|t| t.starts_with(&mine) || !t.contains('\n'))
                {
                    return Ok(false);
                }
                let Some(last) = last_entry_id(&last) else {
                    continue; // empty stream
                };
                let Some(g) = parse_xinfo_groups(&groups)
                    .into_iter()
                    .find(|g| &g.name == group)
                else {
                    return Ok(false);
                };
                let done = match self.ack_mode {
                    AckMode::Xack => g.pending == 0 && id_at_least(&g.last_delivered_id, &last),
                    AckMode::Offset => {
                        let at_take = here.and_then(|_| {
                            let t = self.taken_at.lock().ok()?;
                            t.get(&(topic.clone(), group.clone(), p)).cloned()
                        });
                        let committed_here = here.and_then(|x| x.last_committed_id.clone());
                        [frontier, at_take, committed_here]
                            .into_iter()
                            .flatten()
                            .any(|c| id_at_least(&c, &last))
                    }
                };
                if !done {
                    return Ok(false);
                }
            }
        }
        // A batch leaves `in_flight` after its progress is recorded: nothing in flight now
        // means every commit seen above is in the diagnostics too.
        Ok(self.in_flight.load(Ordering::SeqCst) == 0)
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    pub(crate) fn subtask_started(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn subtask_ended(&self) {
        let _g = self.done.0.lock();
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.done.1.notify_all();
    }

    /// Reports an error of one partition: in the job's errors and as the partition's
    /// [`PartitionProgress::last_error`].
    pub(crate) fn partition_error(&self, topic: &str, group: &str, partition: u32, e: String) {
        self.progress(topic, group, partition, |p| {
            p.last_error = Some(e.clone());
            p.last_error_at = Some(SystemTime::now());
        });
        self.error(e);
    }

    pub(crate) fn error(&self, e: String) {
        tracing::error!(job = %self.job_name, "{e}");
        if let Ok(mut errors) = self.errors.lock() {
            if errors.len() >= 100 {
                errors.remove(0);
            }
            errors.push(e);
        }
    }

    /// Reports a misuse ([`is_misuse`]) in the job's errors, once per (operator, state).
    pub(crate) fn report_misuse(&self, e: &Error) {
        let (operator, state, message) = match e {
            Error::StateNotPersistent {
                operator,
                state,
                declared,
            } => (
                operator,
                *state,
                format!(
                    "operator `{operator}`: state `{state}` ({declared}) is not persistent, so the Redis engine cannot keep it: every record using it goes to the dead-letter queue (error type `state`, not retried). Declare it with `ValueStateDescriptor::persistent(..)` (likewise `ListStateDescriptor`, `MapStateDescriptor`, `SetStateDescriptor::persistent`), or in `pipeline!` with the `.state(name: ValueState<T> = ..)` syntax, whose declarations are persistent"
                ),
            ),
            Error::StateType {
                operator, state, ..
            } => (
                operator,
                *state,
                format!("{e}: every record using it goes to the dead-letter queue (error type `state`, not retried); give each state name of an operator one type"),
            ),
            Error::StateDecode {
                operator, state, ..
            } => (
                operator,
                state.as_str(),
                format!("{e}: the stored state does not decode as the pipeline's type (e.g. its type changed under `state_schema_mismatch_policy` Ignore); records using it go to the dead-letter queue (not retried). Clear the state (policy Clear) or keep the old type"),
            ),
            _ => return,
        };
        let first = self
            .misuses
            .lock()
            .map(|mut m| m.insert(format!("{operator}/{state}")))
            .unwrap_or(true);
        if first {
            self.error(message);
        }
    }

    /// Updates (or adds) the progress of (topic, group, partition).
    pub(crate) fn progress(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        f: impl FnOnce(&mut PartitionProgress),
    ) {
        let Ok(mut all) = self.progress.lock() else {
            return;
        };
        let i = match all
            .iter()
            .position(|p| p.partition == partition && p.topic == topic && p.group == group)
        {
            Some(i) => i,
            None => {
                all.push(PartitionProgress {
                    topic: topic.to_string(),
                    group: group.to_string(),
                    partition,
                    ..PartitionProgress::default()
                });
                all.len() - 1
            }
        };
        f(&mut all[i]);
    }
}

/// The id of the entry in an `XREVRANGE .. COUNT 1` reply.
fn last_entry_id(v: &redis::Value) -> Option<String> {
    let redis::Value::Array(entries) = v else {
        return None;
    };
    match entries.first()? {
        redis::Value::Array(entry) => redis::from_redis_value(entry.first()?).ok(),
        _ => None,
    }
}

/// `ms-seq` as a pair (a missing sequence counts as 0).
fn id_parts(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Whether stream id `a` ≥ `b` (false when either does not parse).
pub(crate) fn id_at_least(a: &str, b: &str) -> bool {
    matches!((id_parts(a), id_parts(b)), (Some(a), Some(b)) if a >= b)
}

/// Whether `e` is a misuse of the API that no retry can fix: a keyed state without a JSON
/// codec ([`Error::StateNotPersistent`]) or a state name used with two types
/// ([`Error::StateType`]). Such a record goes to the dead-letter queue at once (error type
/// `state`) and the job reports the misuse once ([`JobShared::report_misuse`]).
pub(crate) fn is_misuse(e: &Error) -> bool {
    matches!(
        e,
        Error::StateNotPersistent { .. } | Error::StateType { .. } | Error::StateDecode { .. }
    )
}

/// A running Redis job, from [`RedisEnv::execute_async`](super::RedisEnv::execute_async).
/// Dropping it cancels the job.
pub struct JobClient {
    shared: Arc<JobShared>,
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

    /// Waits until every subtask stopped (after [`cancel`](Self::cancel) or a fatal
    /// error), at most `timeout`; `true` when they all stopped.
    pub fn await_termination(&self, timeout: Duration) -> bool {
        let end = deadline(timeout);
        let (lock, cv) = &self.shared.done;
        let Ok(mut guard) = lock.lock() else {
            return false;
        };
        while self.shared.running.load(Ordering::SeqCst) > 0 {
            let now = Instant::now();
            if now >= end {
                return false;
            }
            guard = match cv.wait_timeout(guard, end - now) {
                Ok((g, _)) => g,
                Err(_) => return false,
            };
        }
        true
    }

    /// Waits until the job has caught up with its streams, at most `timeout`: `true` once,
    /// for every partition of every pipeline, the partition is held by this process or by
    /// another process of the job (its lease is held: so never before the job's partitions
    /// were all taken), did not stop here, has no retry of its group scheduled, and its
    /// committed position in Redis has reached the stream's last entry as it was when
    /// checked — in [`AckMode::Xack`] the group has delivered up to it and nothing is
    /// pending; in [`AckMode::Offset`] the committed offset (or, for a partition held
    /// here, before its first commit, the position it was taken at) is at or past it.
    /// With several processes, any of them answers for the whole job. `false` on timeout,
    /// or at once when every subtask of this process has stopped and the job is not
    /// caught up. Checks every 20 ms over a blocking connection of its own; when it
    /// returns `true`, nothing is in flight in this process and
    /// [`diagnostics`](Self::diagnostics) already counts every record this process
    /// committed (other processes' counts are in their own diagnostics).
    ///
    /// Producers still writing move the end: it is the end as of each check.
    ///
    /// It returns within `timeout` — or 250 ms, the time one check may always take (so
    /// `Duration::ZERO` checks once) — whatever Redis does: each wait on
    /// Redis is bounded by the time left and by
    /// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout). While
    /// Redis is unreachable (restarting, loading its data, frozen) it keeps checking, as
    /// the job keeps retrying; `Duration::MAX` waits without a deadline.
    ///
    /// # Errors
    /// [`Error::Connect`] (naming the address) when the time ran out while the last check
    /// could not reach Redis or got no reply in time; [`Error::Redis`] for an unexpected
    /// reply.
    pub fn await_caught_up(&self, timeout: Duration) -> Result<bool, Error> {
        let end = deadline(timeout);
        loop {
            let unreachable = match self.check_caught_up(end) {
                Ok(true) => return Ok(true),
                Ok(false) => None,
                // Redis restarting, loading or frozen: the job keeps retrying, so does the
                // wait, until its time is up.
                Err(e @ Error::Connect { .. }) => Some(e),
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if now >= end || self.cannot_progress() {
                return unreachable.map_or(Ok(false), Err);
            }
            std::thread::sleep((end - now).min(Duration::from_millis(20)));
        }
    }

    /// One [`JobShared::caught_up`] check, every wait bounded by the response timeout and
    /// the time left until `end`. Errors reaching Redis (refused, timed out, reset, still
    /// loading its data set) are [`Error::Connect`].
    fn check_caught_up(&self, end: Instant) -> Result<bool, Error> {
        let left = end.saturating_duration_since(Instant::now());
        let budget = self.shared.response_timeout.min(left).max(MIN_CHECK);
        // The check runs on a thread of its own so that the wait ends by `end` whatever
        // Redis does: a connection handshake can take its timeout once per round trip.
        // A check still running then ends by its own timeouts and is ignored.
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::clone(&self.shared);
        std::thread::spawn(move || {
            let _ = tx.send(shared.caught_up(budget, end));
        });
        let waited = rx.recv_timeout(left.max(MIN_CHECK)).unwrap_or_else(|_| {
            Err(Error::from(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no reply before the wait's deadline",
            ))))
        });
        waited.map_err(|e| match e {
            Error::Redis { source: e, .. }
                if e.is_timeout()
                    || e.is_io_error()
                    || e.is_connection_refusal()
                    || e.is_connection_dropped()
                    || e.kind() == redis::ErrorKind::BusyLoadingError =>
            {
                crate::mq::connect_error(&self.shared.client, e, budget)
            }
            other => other,
        })
    }

    /// Every subtask has stopped, or every partition has (e.g. a schema mismatch under
    /// [`SchemaMismatchPolicy::Fail`](crate::redis::SchemaMismatchPolicy::Fail)).
    fn cannot_progress(&self) -> bool {
        if self.shared.running.load(Ordering::SeqCst) == 0 {
            return true;
        }
        self.shared
            .progress
            .lock()
            .is_ok_and(|p| !p.is_empty() && p.iter().all(|pr| pr.stopped.is_some()))
    }

    /// Waits until the job is done with a finite input, at most `timeout`: caught up as
    /// in [`await_caught_up`](Self::await_caught_up), and every partition with event-time
    /// work has been idle-flushed (every window and event-time timer has fired and
    /// committed), checked again after the flush so that input arriving meanwhile is not
    /// missed. A partition has such work when records went through it since its last idle
    /// flush (whatever its watermark, even `i64::MIN`), or when it was taken holding
    /// windows or event-time timers a previous run left unfired (a restart with no new
    /// input waits for that flush); see [`PartitionProgress::awaiting_flush`]. Partitions
    /// that never received a message have nothing to flush — so produce the input before
    /// calling it (or check the record counts in [`diagnostics`](Self::diagnostics)): on a
    /// topic nothing was written to yet it returns `true` at once. `false` on timeout or
    /// when the job cannot progress.
    ///
    /// Needs [`RedisRuntimeConfig::watermark_idle_timeout`]: the flush comes that long
    /// after a partition's last message.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `watermark_idle_timeout`) when the job has no idle
    /// timeout (nothing would ever flush); [`Error::Connect`] when a check cannot reach
    /// Redis in time (it returns within `timeout` or 250 ms, as
    /// [`await_caught_up`](Self::await_caught_up)).
    pub fn await_flushed(&self, timeout: Duration) -> Result<bool, Error> {
        if self.shared.idle_timeout.is_none() {
            return Err(Error::InvalidConfig {
                field: "watermark_idle_timeout",
                reason: "await_flushed waits for idle flushes: set \
                         RedisRuntimeConfig::watermark_idle_timeout (e.g. 500 ms)"
                    .into(),
            });
        }
        let end = deadline(timeout);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if !self.await_caught_up(left)? {
                return Ok(false);
            }
            let flushed = self
                .shared
                .progress
                .lock()
                .is_ok_and(|p| p.iter().all(|pr| !pr.awaiting_flush));
            // A failed re-check counts as not yet: the next round's wait reports it.
            if flushed && self.check_caught_up(end).unwrap_or(false) {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= end || self.cannot_progress() {
                return Ok(false);
            }
            std::thread::sleep((end - now).min(Duration::from_millis(20)));
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

/// `now + timeout`, or a deadline a century away when that does not fit in an `Instant`
/// (`Duration::MAX` means "no deadline").
fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// How long one caught-up check may always take, however short the wait's timeout: a
/// zero timeout still checks once against a healthy but busy server.
const MIN_CHECK: Duration = Duration::from_millis(250);
