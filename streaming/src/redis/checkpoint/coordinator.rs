//! Triggering a checkpoint and completing it, listing checkpoints, and retention.
//!
//! A checkpoint is opened in Redis (record + open set, in one script that checks the
//! leader lease when leader election is on); every partition owner of every process
//! sees it within about 100 ms (at once in this process) and writes its part at its next
//! batch boundary; the coordinator waits until every part is in (`HLEN` of the parts
//! hash, polled every 10 ms) or `checkpoint_drain_timeout` passes, then completes or
//! fails it in one script, again under the leader lease.

use super::{
    fenced_script, now_ms, Checkpoint, CheckpointKeys, CheckpointPipeline, CheckpointStatus,
};
use crate::mq::lease::{is_fenced_reply, ms};
use crate::mq::Connection;
use crate::redis::job::JobShared;
use crate::Error;
use redis::{Script, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

static OPEN: LazyLock<Script> = fenced_script!("checkpoint_open.lua");
static FINISH: LazyLock<Script> = fenced_script!("checkpoint_finish.lua");
pub(super) static FORGET: LazyLock<Script> = fenced_script!("checkpoint_forget.lua");

/// The leader lease a coordinator's scripts check: its value and ttl in ms ("" without
/// leader election).
pub(super) fn leader_fence(job: &JobShared) -> Result<(String, u64, u64), Error> {
    let options = &job.checkpoint_options;
    if !options.leader_election_enabled {
        return Ok((String::new(), 1, 0));
    }
    match job.checkpoints.lease() {
        Some(l) => Ok((l.value.clone(), ms(options.leader_lease_ttl), l.token)),
        None => Err(Error::Engine {
            op: "checkpoint",
            reason: format!(
                "this process ({}) is not the job's leader (leader: {}); with leader_election_enabled only the leader takes checkpoints",
                job.job_instance_id,
                job.checkpoints.leader_instance().unwrap_or_else(|| "none yet".into())
            ),
        }),
    }
}

/// Resets the single-flight flag when the checkpoint ends, however it ends.
struct Flight<'a>(&'a JobShared);

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.0.checkpoints.running.store(false, Ordering::SeqCst);
        self.0.signal_change();
    }
}

/// Takes a checkpoint: `Ok(None)` when one is running in this process already or the job
/// was cancelled; else the checkpoint as it ended (complete or failed).
///
/// # Errors
/// Not the leader (with leader election); Redis errors.
pub(crate) async fn trigger(job: &JobShared) -> Result<Option<Checkpoint>, Error> {
    if job.is_cancelled() || job.checkpoints.running.swap(true, Ordering::SeqCst) {
        return Ok(None);
    }
    let _flight = Flight(job);
    let labels = [("job", job.job_name.clone())];
    metrics::counter!("streaming_checkpoints_triggered_total", &labels).increment(1);
    let started = std::time::Instant::now();
    let result = async {
        let mut conn =
            crate::mq::connect(&job.endpoint, job.response_timeout, Duration::ZERO).await?;
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
            job = %job.job_name, id = ck.id, "checkpoint failed: {}", ck.failure.as_deref().unwrap_or("")
        ),
        Err(e) => tracing::warn!(job = %job.job_name, "checkpoint failed: {e}"),
        Ok(_) => {}
    }
    result.map(Some)
}

async fn run(job: &JobShared, conn: &mut Connection) -> Result<Checkpoint, Error> {
    let keys = &job.checkpoints.keys;
    let (lease, ttl, token) = leader_fence(job)?;
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
    let mut ck = Checkpoint {
        id,
        status: CheckpointStatus::Pending,
        instance: job.job_instance_id.clone(),
        fencing_token: token,
        parallelism: job.live_parallelism.load(Ordering::SeqCst) as u32,
        started_at_ms: now_ms(),
        finished_at_ms: None,
        pipelines,
        failure: None,
    };
    let drain = job.checkpoint_options.drain_timeout;
    let deadline = ck.started_at_ms + ms(drain);
    let opened: Value = OPEN
        .key(keys.leader())
        .key(keys.leader_token())
        .key(keys.meta(id))
        .key(keys.ids())
        .key(keys.open())
        .arg(&lease)
        .arg(ttl)
        .arg(id)
        .arg(ck.started_at_ms)
        .arg(deadline)
        .arg(meta_fields(&ck))
        .invoke_async(conn)
        .await?;
    if is_fenced_reply(&opened) {
        return Err(lost_lease(job, id));
    }
    job.checkpoints.opened.send_replace(id);
    let labels = [
        ("job", job.job_name.clone()),
        ("phase", "drain".to_string()),
    ];
    let drain_started = std::time::Instant::now();
    let expected = ck.parts();
    let mut failure = String::new();
    loop {
        let written: u64 = redis::cmd("HLEN")
            .arg(keys.parts(id))
            .query_async(conn)
            .await?;
        if written >= expected {
            break;
        }
        if job.is_cancelled() {
            failure = "the job was cancelled".into();
            break;
        }
        if now_ms() > deadline {
            failure = format!(
                "{written} of {expected} partitions wrote their part within checkpoint_drain_timeout ({drain:?})"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    metrics::histogram!("streaming_checkpoint_phase_seconds", &labels)
        .record(drain_started.elapsed());
    let store_started = std::time::Instant::now();
    let finished = now_ms();
    let reply: Value = FINISH
        .key(keys.leader())
        .key(keys.leader_token())
        .key(keys.meta(id))
        .key(keys.parts(id))
        .key(keys.open())
        .key(keys.complete())
        .arg(&lease)
        .arg(ttl)
        .arg(id)
        .arg(expected)
        .arg(finished)
        .arg(&failure)
        .invoke_async(conn)
        .await?;
    if is_fenced_reply(&reply) {
        return Err(lost_lease(job, id));
    }
    ck.finished_at_ms = Some(finished);
    let outcome: String = redis::from_redis_value(&reply)?;
    if outcome == "complete" {
        ck.status = CheckpointStatus::Complete;
        job.checkpoints.saw_complete(id);
        sweep(job, conn).await?;
    } else {
        ck.status = CheckpointStatus::Failed;
        ck.failure = Some(if failure.is_empty() { outcome } else { failure });
    }
    let labels = [
        ("job", job.job_name.clone()),
        ("phase", "store".to_string()),
    ];
    metrics::histogram!("streaming_checkpoint_phase_seconds", &labels)
        .record(store_started.elapsed());
    Ok(ck)
}

/// The error of a leader's checkpoint write that its lease refused; the process stops
/// leading at once.
fn lost_lease(job: &JobShared, id: u64) -> Error {
    if let Ok(mut l) = job.checkpoints.lease.lock() {
        *l = None;
    }
    Error::Engine {
        op: "checkpoint",
        reason: format!(
            "checkpoint {id} refused: this process ({}) lost the leader lease to another process; it does not lead any more",
            job.job_instance_id
        ),
    }
}

/// The record fields of `ck` (after `status`), as `HSET` arguments.
fn meta_fields(ck: &Checkpoint) -> Vec<String> {
    let pipelines = serde_json::to_string(&ck.pipelines).unwrap_or_default();
    [
        ("instance", ck.instance.clone()),
        ("token", ck.fencing_token.to_string()),
        ("parallelism", ck.parallelism.to_string()),
        ("started_at_ms", ck.started_at_ms.to_string()),
        ("pipelines", pipelines),
    ]
    .into_iter()
    .flat_map(|(f, v)| [f.to_string(), v])
    .collect()
}

/// A checkpoint from its record; `None` when the record is gone.
pub(super) fn parse_meta(id: u64, fields: &HashMap<String, String>) -> Option<Checkpoint> {
    let status = match fields.get("status")?.as_str() {
        "complete" => CheckpointStatus::Complete,
        "failed" => CheckpointStatus::Failed,
        "deleting" => CheckpointStatus::Deleting,
        _ => CheckpointStatus::Pending,
    };
    let num = |f: &str| fields.get(f).and_then(|v| v.parse::<u64>().ok());
    Some(Checkpoint {
        id,
        status,
        instance: fields.get("instance").cloned().unwrap_or_default(),
        fencing_token: num("token").unwrap_or(0),
        parallelism: num("parallelism").unwrap_or(0) as u32,
        started_at_ms: num("started_at_ms").unwrap_or(0),
        finished_at_ms: num("finished_at_ms"),
        pipelines: (fields.get("pipelines"))
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default(),
        failure: fields.get("failure").cloned(),
    })
}

/// Every checkpoint of the job whose record exists, by id.
///
/// # Errors
/// Redis errors.
pub(crate) async fn list(
    conn: &mut Connection,
    keys: &CheckpointKeys,
) -> Result<Vec<Checkpoint>, Error> {
    let ids: Vec<u64> = redis::cmd("ZRANGE")
        .arg(keys.ids())
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let fields: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(keys.meta(id))
            .query_async(conn)
            .await?;
        out.extend(parse_meta(id, &fields));
    }
    Ok(out)
}

/// Retention after a checkpoint completed: with `checkpoints_to_keep` N > 0, deletes
/// every incomplete checkpoint older than the newest complete one (first), then the
/// complete ones beyond the newest N.
async fn sweep(job: &JobShared, conn: &mut Connection) -> Result<(), Error> {
    let keep = job.checkpoint_options.to_keep as usize;
    if keep == 0 {
        return Ok(());
    }
    let all = list(conn, &job.checkpoints.keys).await?;
    let complete: Vec<u64> = (all.iter())
        .filter(|c| c.status == CheckpointStatus::Complete)
        .map(|c| c.id)
        .collect();
    let Some(&newest) = complete.last() else {
        return Ok(());
    };
    let incomplete =
        (all.iter()).filter(|c| c.status != CheckpointStatus::Complete && c.id < newest);
    let old = (all.iter()).filter(|c| {
        c.status == CheckpointStatus::Complete
            && complete.len() > keep
            && c.id < complete[complete.len() - keep]
    });
    let doomed: Vec<Checkpoint> = incomplete.chain(old).cloned().collect();
    for ck in doomed {
        super::restore::drop_checkpoint(job, conn, &ck).await?;
    }
    Ok(())
}

/// Starts the job's checkpoint thread when it has work: the leader election (with
/// `leader_election_enabled`) and the periodic checkpoints (with `checkpoint_interval`).
pub(crate) fn start_scheduler(job: &Arc<JobShared>) {
    let options = &job.checkpoint_options;
    if options.period().is_none() && !options.leader_election_enabled {
        return;
    }
    let job = Arc::clone(job);
    let spawned = std::thread::Builder::new()
        .name("streaming-checkpoints".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match rt {
                Ok(rt) => rt.block_on(async {
                    tokio::join!(super::leader::run(&job), schedule(&job));
                }),
                Err(e) => job.error(format!("checkpoints: cannot start a tokio runtime: {e}")),
            }
        });
    if let Err(e) = spawned {
        tracing::error!("checkpoints: cannot spawn their thread: {e}");
    }
}

/// Periodic checkpoints, every `checkpoint_interval` (from the end of the previous one)
/// while this process may take them (always without leader election; while it leads
/// with it).
async fn schedule(job: &JobShared) {
    let Some(period) = job.checkpoint_options.period() else {
        return;
    };
    let election = job.checkpoint_options.leader_election_enabled;
    while !job.is_cancelled() {
        tokio::select! {
            () = job.cancelled_signal() => break,
            () = tokio::time::sleep(period) => {}
        }
        if election && !job.checkpoints.is_leader() {
            continue;
        }
        if let Err(e) = trigger(job).await {
            job.error(format!("periodic checkpoint: {e}"));
        }
    }
}
