//! Triggering a checkpoint and completing it, listing checkpoints, and retention.
//!
//! A checkpoint is opened in Redis (record + open set, in one script that checks the
//! leader lease when leader election is on); every partition owner of every process
//! sees it within about 100 ms (at once in this process) and writes its part at its next
//! batch boundary; the coordinator waits until every part is in (`HLEN` of the parts
//! hash, polled every 10 ms) or `checkpoint_drain_timeout` passes, then completes or
//! fails it in one script, again under the leader lease. With leader election, the wait
//! also ends as soon as the leader term that opened the checkpoint is over (the lease in
//! Redis is another's or was re-fenced, or this process's leader loop found it lost):
//! such a checkpoint can never complete, and the process, if it leads again under a new
//! token, checkpoints in its new term at once. Only the term that opened a checkpoint
//! clears its own lease when the checkpoint is refused, never a newer term's.

use super::store::leader_fence;
use super::{now_ms, Checkpoint, CheckpointKeys, CheckpointPipeline, CheckpointStatus};
use crate::mq::lease::{is_fenced_reply, ms};
use crate::mq::Connection;
use crate::redis::job::JobShared;
use crate::Error;
use redis::{Script, Value};
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

static OPEN: LazyLock<Script> = crate::mq::fenced_script!(include_str!("lua/checkpoint_open.lua"));
static FINISH: LazyLock<Script> =
    crate::mq::fenced_script!(include_str!("lua/checkpoint_finish.lua"));

/// Resets the single-flight flag when the checkpoint ends, however it ends.
struct Flight<'a>(&'a JobShared);

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.0.checkpoints.running.store(false, Ordering::SeqCst);
        self.0.signals.signal_change();
    }
}

/// Takes a checkpoint: `Ok(None)` when one is running in this process already or the job
/// was cancelled; else the checkpoint as it ended (complete or failed).
///
/// # Errors
/// Not the leader (with leader election); Redis errors.
pub(crate) async fn trigger(job: &JobShared) -> Result<Option<Checkpoint>, Error> {
    if job.signals.is_cancelled() || job.checkpoints.running.swap(true, Ordering::SeqCst) {
        return Ok(None);
    }
    let _flight = Flight(job);
    leader_fence(job)?;
    let labels = [("job", job.config.job_name().to_owned())];
    metrics::counter!("streaming_checkpoints_triggered_total", &labels).increment(1);
    let started = std::time::Instant::now();
    let result = async {
        let mut conn = job.connect().await?;
        run(job, &mut conn).await
    }
    .await;
    let outcome = match &result {
        Ok(ck) if ck.status == CheckpointStatus::Complete => "completed",
        _ => "failed",
    };
    metrics::counter!(format!("streaming_checkpoints_{outcome}_total"), &labels).increment(1);
    if outcome == "completed" {
        metrics::histogram!("streaming_checkpoint_duration_seconds", &labels)
            .record(started.elapsed());
    }
    match &result {
        Ok(ck) if ck.status != CheckpointStatus::Complete => tracing::warn!(
            job = %job.config.job_name(), id = ck.id, "checkpoint failed: {}", ck.failure.as_deref().unwrap_or("")
        ),
        Err(e) => tracing::warn!(job = %job.config.job_name(), "checkpoint failed: {e}"),
        Ok(_) => {}
    }
    result.map(Some)
}

async fn run(job: &JobShared, conn: &mut Connection) -> Result<Checkpoint, Error> {
    let fence = leader_fence(job)?;
    let mut ck = open(job, conn, &fence).await?;
    let started = std::time::Instant::now();
    let failure = match wait_for_parts(job, conn, &ck, &fence).await? {
        Waited::Ended(failure) => failure,
        Waited::TermOver => return Err(lost_lease(job, ck.id, fence.2)),
    };
    phase(job, "drain", started);
    let started = std::time::Instant::now();
    finish(job, conn, &fence, &mut ck, failure).await?;
    phase(job, "store", started);
    Ok(ck)
}

fn phase(job: &JobShared, phase: &'static str, started: std::time::Instant) {
    let labels = [
        ("job", job.config.job_name().to_owned()),
        ("phase", phase.to_string()),
    ];
    metrics::histogram!("streaming_checkpoint_phase_seconds", &labels).record(started.elapsed());
}

/// Draws the next id and opens the checkpoint (record, id sets, open set) under the
/// leader fence; this process's subtasks look for it at once.
async fn open(
    job: &JobShared,
    conn: &mut Connection,
    (lease, ttl, token): &(String, u64, u64),
) -> Result<Checkpoint, Error> {
    let keys = &job.checkpoints.keys;
    let id: u64 = redis::cmd("INCR").arg(keys.seq()).query_async(conn).await?;
    let mut pipelines = Vec::new();
    for (topic, group) in &job.pipelines {
        let partitions = crate::mq::topic::topic_partitions(conn, &job.keys, topic).await?;
        pipelines.push(CheckpointPipeline {
            topic: topic.clone(),
            group: group.clone(),
            partitions,
        });
    }
    let ck = Checkpoint {
        id,
        status: CheckpointStatus::Pending,
        instance: job.config.job_instance_id().to_owned(),
        fencing_token: *token,
        parallelism: job.subtasks.live_parallelism(),
        started_at_ms: now_ms(),
        finished_at_ms: None,
        pipelines,
        failure: None,
    };
    let deadline = ck.started_at_ms + ms(job.config.checkpoint().checkpoint_drain_timeout);
    let opened: Value = OPEN
        .key(keys.leader())
        .key(keys.leader_token())
        .key(keys.meta(id))
        .key(keys.ids())
        .key(keys.open())
        .arg(lease)
        .arg(ttl)
        .arg(id)
        .arg(ck.started_at_ms)
        .arg(deadline)
        .arg(meta_fields(&ck, deadline))
        .invoke_async(conn)
        .await?;
    if is_fenced_reply(&opened) {
        return Err(lost_lease(job, id, *token));
    }
    job.checkpoints.opened.send_replace(id);
    Ok(ck)
}

/// How waiting for the parts of a checkpoint ended.
enum Waited {
    /// Every part is in (`""`), or why not: the job was cancelled, or
    /// `checkpoint_drain_timeout` passed (naming the missing partitions).
    Ended(String),
    /// The leader term that opened the checkpoint is over: it can never complete.
    TermOver,
}

/// Waits until every partition wrote its part of `ck`, the job is cancelled,
/// `checkpoint_drain_timeout` passes, or the leader term that opened it (`fence`) is over.
async fn wait_for_parts(
    job: &JobShared,
    conn: &mut Connection,
    ck: &Checkpoint,
    fence: &(String, u64, u64),
) -> Result<Waited, Error> {
    let keys = &job.checkpoints.keys;
    let drain = job.config.checkpoint().checkpoint_drain_timeout;
    let deadline = ck.started_at_ms + ms(drain);
    let expected = ck.parts();
    loop {
        let written: u64 = redis::cmd("HLEN")
            .arg(keys.parts(ck.id))
            .query_async(conn)
            .await?;
        if written >= expected {
            return Ok(Waited::Ended(String::new()));
        }
        if job.signals.is_cancelled() {
            return Ok(Waited::Ended("the job was cancelled".into()));
        }
        if now_ms() > deadline {
            return Ok(Waited::Ended(format!(
                "{written} of {expected} partitions wrote their part within checkpoint_drain_timeout ({drain:?}); missing: {}",
                missing_parts(conn, keys, ck).await?
            )));
        }
        if term_over(job, conn, fence).await? {
            return Ok(Waited::TermOver);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether the leader term `fence` (lease value, ttl, token) is over: this process leads
/// under another token or not at all, or the lease in Redis is another's (or expired
/// with the token counter moved on, so that it cannot be taken back). Never without
/// leader election.
async fn term_over(
    job: &JobShared,
    conn: &mut Connection,
    (lease, _, token): &(String, u64, u64),
) -> Result<bool, Error> {
    if lease.is_empty() {
        return Ok(false);
    }
    if job.checkpoints.lease().map(|l| l.token) != Some(*token) {
        return Ok(true);
    }
    let keys = &job.checkpoints.keys;
    let (held, counter): (Option<String>, Option<u64>) = redis::pipe()
        .get(keys.leader())
        .get(keys.leader_token())
        .query_async(conn)
        .await?;
    Ok(match held {
        Some(held) => held != *lease,
        None => counter != Some(*token),
    })
}

/// Completes `ck` (every part written, `failure` empty) or marks it failed, under the
/// leader fence; after a completion, deletes what retention says.
async fn finish(
    job: &JobShared,
    conn: &mut Connection,
    (lease, ttl, token): &(String, u64, u64),
    ck: &mut Checkpoint,
    failure: String,
) -> Result<(), Error> {
    let keys = &job.checkpoints.keys;
    let finished = now_ms();
    let reply: Value = FINISH
        .key(keys.leader())
        .key(keys.leader_token())
        .key(keys.meta(ck.id))
        .key(keys.parts(ck.id))
        .key(keys.open())
        .key(keys.complete())
        .arg(lease)
        .arg(ttl)
        .arg(ck.id)
        .arg(ck.parts())
        .arg(finished)
        .arg(&failure)
        .invoke_async(conn)
        .await?;
    if is_fenced_reply(&reply) {
        return Err(lost_lease(job, ck.id, *token));
    }
    ck.finished_at_ms = Some(finished);
    let outcome: String = redis::from_redis_value(&reply)?;
    if outcome == "complete" {
        ck.status = CheckpointStatus::Complete;
        job.checkpoints.saw_complete(ck.id);
    } else {
        ck.status = CheckpointStatus::Failed;
        ck.failure = Some(if failure.is_empty() { outcome } else { failure });
    }
    super::retention::sweep(job, conn).await
}

/// The partitions without a part in `ck` (at most 10 named), as
/// `topic/group/partition, ...`.
async fn missing_parts(
    conn: &mut Connection,
    keys: &CheckpointKeys,
    ck: &Checkpoint,
) -> Result<String, Error> {
    let written: Vec<String> = redis::cmd("HKEYS")
        .arg(keys.parts(ck.id))
        .query_async(conn)
        .await?;
    let missing: Vec<String> = (ck.pipelines.iter())
        .flat_map(|p| (0..p.partitions).map(move |n| super::part_field(&p.topic, &p.group, n)))
        .filter(|f| !written.contains(f))
        .collect();
    let mut named = missing
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if missing.len() > 10 {
        named.push_str(&format!(" and {} more", missing.len() - 10));
    }
    Ok(named)
}

/// The error of a checkpoint whose leader term (fencing token `token`) ended before it
/// did: the lease refused a write or passed on. The process stops leading at once if it
/// still leads under that token; a newer term of its own (it took the lease again) keeps
/// its lease.
fn lost_lease(job: &JobShared, id: u64, token: u64) -> Error {
    if let Ok(mut l) = job.checkpoints.lease.lock() {
        if l.as_ref().is_some_and(|l| l.token == token) {
            *l = None;
        }
    }
    Error::Engine {
        op: "checkpoint",
        reason: format!(
            "checkpoint {id} abandoned: this process ({}) lost the leader lease of the term that opened it (fencing token {token}); it can never complete",
            job.config.job_instance_id()
        ),
    }
}

/// The record fields of `ck` (after `status`), as `HSET` arguments.
fn meta_fields(ck: &Checkpoint, deadline: u64) -> Vec<String> {
    let pipelines = serde_json::to_string(&ck.pipelines).unwrap_or_default();
    [
        ("instance", ck.instance.clone()),
        ("token", ck.fencing_token.to_string()),
        ("parallelism", ck.parallelism.to_string()),
        ("started_at_ms", ck.started_at_ms.to_string()),
        ("deadline_ms", deadline.to_string()),
        ("pipelines", pipelines),
    ]
    .into_iter()
    .flat_map(|(f, v)| [f.to_string(), v])
    .collect()
}

/// Starts the job's checkpoint thread when it has work: the leader election (with
/// `leader_election_enabled`) and the periodic checkpoints (with `checkpoint_interval`),
/// until the job is cancelled or its subtasks all stopped. A checkpoint running at the
/// cancel fails; one whose coordinator is still waiting on Redis at the job's stop
/// deadline is dropped (it reads as failed once its own deadline passed), and the
/// process does not lead any more once the thread ended.
pub(crate) fn start_scheduler(job: &Arc<JobShared>) {
    let options = job.config.checkpoint();
    if options.period().is_none() && !options.leader_election_enabled {
        return;
    }
    let what = ("streaming-checkpoints", "checkpoints");
    // A lease not released (Redis did not answer in time) expires; this process does not
    // act on it any more.
    let ended: fn(&JobShared) = |job| {
        if let Ok(mut l) = job.checkpoints.lease.lock() {
            *l = None;
        }
    };
    crate::redis::job::spawn_task(job, what, ended, |job| async move {
        tokio::join!(super::leader::run(&job), schedule(&job));
    });
}

/// Periodic checkpoints, every `checkpoint_interval` (from the end of the previous one)
/// while this process may take them (always without leader election; while it leads
/// with it).
async fn schedule(job: &JobShared) {
    let Some(period) = job.config.checkpoint().period() else {
        return;
    };
    let election = job.config.checkpoint().leader_election_enabled;
    while !job.signals.stopping() {
        tokio::select! {
            () = job.signals.stopping_signal() => break,
            () = tokio::time::sleep(period) => {}
        }
        if election && !job.checkpoints.is_leader() {
            continue;
        }
        if let Err(e) = trigger(job).await {
            job.error(
                crate::redis::JobErrorKind::Checkpoint,
                format!("periodic checkpoint: {e}"),
            );
        }
    }
}
