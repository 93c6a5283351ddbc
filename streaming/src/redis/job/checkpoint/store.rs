//! Checkpoint records in Redis: reading them, the leader fence of the coordinator's
//! scripts, and the chunked steps over a hash that copies, restores and deletes use.

use super::{Checkpoint, CheckpointKeys, CheckpointStatus};
use crate::mq::lease::{is_fenced_reply, ms};
use crate::mq::Connection;
use crate::redis::job::JobShared;
use crate::Error;
use redis::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

/// Copies one chunk of a state hash (and its keys' collections) between the partition's
/// state and a checkpoint, either way (`lua/checkpoint_copy_chunk.lua`).
pub(crate) static COPY_CHUNK: LazyLock<redis::Script> =
    crate::mq::fenced_script!(include_str!("lua/checkpoint_copy_chunk.lua"));

/// The leader lease a coordinator's scripts check: its value and ttl in ms ("" without
/// leader election).
pub(super) fn leader_fence(job: &JobShared) -> Result<(String, u64, u64), Error> {
    let options = job.config.checkpoint();
    if !options.leader_election_enabled {
        return Ok((String::new(), 1, 0));
    }
    match job.checkpoints.lease() {
        Some(l) => Ok((l.value.clone(), ms(options.leader_lease_ttl), l.token)),
        None => Err(Error::Engine {
            op: "checkpoint",
            reason: format!(
                "this process ({}) is not the job's leader (leader: {}); with leader_election_enabled only the leader takes checkpoints",
                job.config.job_instance_id(),
                job.checkpoints.leader_instance().unwrap_or_else(|| "none yet".into())
            ),
        }),
    }
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
    let mut failure = fields.get("failure").cloned();
    // Pending past its deadline: its coordinator stopped before finishing it.
    let abandoned = status == CheckpointStatus::Pending
        && num("deadline_ms").is_some_and(|d| super::now_ms() > d);
    if abandoned {
        failure = Some("abandoned: not finished by its deadline (its coordinator stopped)".into());
    }
    Some(Checkpoint {
        id,
        status: if abandoned {
            CheckpointStatus::Failed
        } else {
            status
        },
        instance: fields.get("instance").cloned().unwrap_or_default(),
        fencing_token: num("token").unwrap_or(0),
        parallelism: num("parallelism").unwrap_or(0) as u32,
        started_at_ms: num("started_at_ms").unwrap_or(0),
        // An abandoned checkpoint ended at its deadline.
        finished_at_ms: num("finished_at_ms").or(if abandoned { num("deadline_ms") } else { None }),
        pipelines: (fields.get("pipelines"))
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default(),
        failure,
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
    let ids = all_ids(conn, keys).await?;
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

/// Checkpoint `id`, which must be complete.
pub(crate) async fn read(
    conn: &mut Connection,
    keys: &CheckpointKeys,
    id: u64,
) -> Result<Checkpoint, Error> {
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(keys.meta(id))
        .query_async(conn)
        .await?;
    match parse_meta(id, &fields) {
        Some(ck) if ck.status == CheckpointStatus::Complete => Ok(ck),
        Some(ck) => Err(super::restore_error(format!(
            "checkpoint {id} is {:?}, not complete: it cannot be restored",
            ck.status
        ))),
        None => Err(super::restore_error(format!(
            "no checkpoint {id} (never taken, or deleted by retention)"
        ))),
    }
}

/// Every checkpoint id in the id set (opened, complete or failed), oldest first.
///
/// # Errors
/// Redis errors.
pub(crate) async fn all_ids(
    conn: &mut Connection,
    keys: &CheckpointKeys,
) -> Result<Vec<u64>, Error> {
    Ok(redis::cmd("ZRANGE")
        .arg(keys.ids())
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await?)
}

/// The latest complete checkpoint, if any.
pub(crate) async fn latest(
    conn: &mut Connection,
    keys: &CheckpointKeys,
) -> Result<Option<Checkpoint>, Error> {
    let newest: Vec<u64> = redis::cmd("ZRANGE")
        .arg(keys.complete())
        .arg(-1)
        .arg(-1)
        .query_async(conn)
        .await?;
    match newest.first() {
        Some(&id) => read(conn, keys, id).await.map(Some),
        None => Ok(None),
    }
}

/// One chunked step over a hash: runs `step(cursor)` until it returns cursor `0`.
pub(super) async fn chunked(
    conn: &mut Connection,
    mut step: impl FnMut(&str) -> redis::ScriptInvocation<'static>,
    fenced: impl Fn() -> Error,
) -> Result<(), Error> {
    let mut cursor = "0".to_string();
    loop {
        let reply: Value = step(&cursor).invoke_async(conn).await?;
        if is_fenced_reply(&reply) {
            return Err(fenced());
        }
        cursor = redis::from_redis_value(&reply)?;
        if cursor == "0" {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_pending_checkpoint_past_its_deadline_reads_as_abandoned() {
        let future = (super::super::now_ms() + 60_000).to_string();
        let running = parse_meta(3, &meta(&[("status", "pending"), ("deadline_ms", &future)]));
        assert_eq!(running.unwrap().status, CheckpointStatus::Pending);
        let gone = parse_meta(3, &meta(&[("status", "pending"), ("deadline_ms", "1")])).unwrap();
        assert_eq!(gone.status, CheckpointStatus::Failed);
        assert!(gone.failure.unwrap().starts_with("abandoned"));
        assert_eq!(gone.finished_at_ms, Some(1), "ended at its deadline");
        let done = parse_meta(4, &meta(&[("status", "complete"), ("deadline_ms", "1")]));
        assert_eq!(done.unwrap().status, CheckpointStatus::Complete);
        assert_eq!(parse_meta(5, &meta(&[])), None, "no record");
    }
}
