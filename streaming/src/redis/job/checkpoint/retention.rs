//! Retention: after a checkpoint completes, the coordinator deletes the checkpoints
//! beyond `checkpoints_to_keep` and the incomplete ones before the newest complete one,
//! in small steps on its own connection.
//!
//! Deleting a partition's part first marks the checkpoint deleted in the partition's
//! checkpoint registry (a tombstone: the ms it was deleted at), which every step of a
//! part checks, so an owner that still sees the checkpoint open writes nothing more of
//! it. Each pass then looks through every partition's registry for orphans — parts of
//! checkpoints no longer in the id set, begun before the checkpoint was deleted or after
//! its tombstone was pruned — and deletes them; a tombstone is pruned once
//! `checkpoint_drain_timeout` + 1 min passed (no owner begins a part past the
//! checkpoint's deadline).

use super::store::{all_ids, chunked, leader_fence, list};
use super::{now_ms, Checkpoint, CheckpointKeys, CheckpointStatus};
use crate::mq::lease::is_fenced_reply;
use crate::mq::Connection;
use crate::redis::job::JobShared;
use crate::redis::state::keys::StateKeys;
use crate::Error;
use redis::{Script, Value};
use std::collections::HashMap;
use std::sync::LazyLock;

static FORGET: LazyLock<Script> =
    crate::mq::fenced_script!(include_str!("lua/checkpoint_forget.lua"));
static DROP: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/checkpoint_drop_chunk.lua")));

fn retention_error(reason: String) -> Error {
    Error::Engine {
        op: "checkpoint retention",
        reason,
    }
}

/// Fields per delete step.
const CHUNK_FIELDS: usize = 500;

/// How long a tombstone outlives `checkpoint_drain_timeout` (clock skew between
/// processes, a step in flight).
const TOMBSTONE_GRACE_MS: u64 = 60_000;

/// Retention after a checkpoint ended (completed or failed): with `checkpoints_to_keep`
/// N > 0, deletes every incomplete checkpoint (failed, abandoned, half deleted) but the
/// newest checkpoint, first, then the complete ones beyond the newest N. Checkpoints
/// still open (before their deadline) are left alone unless an earlier leader opened them
/// (a lower fencing token than this leader's): their coordinator is gone, so they can
/// never complete.
pub(super) async fn sweep(job: &JobShared, conn: &mut Connection) -> Result<(), Error> {
    let keep = job.config.checkpoint().checkpoints_to_keep as usize;
    if keep == 0 {
        return Ok(());
    }
    let keys = &job.checkpoints.keys;
    let open: Vec<(u64, f64)> = redis::cmd("ZRANGE")
        .arg(keys.open())
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(conn)
        .await?;
    let now = now_ms();
    let (_, _, token) = leader_fence(job)?;
    let still_open = |c: &Checkpoint| {
        c.fencing_token >= token
            && (open.iter()).any(|&(o, deadline)| o == c.id && deadline as u64 >= now)
    };
    let all: Vec<Checkpoint> = (list(conn, keys).await?)
        .into_iter()
        .filter(|c| !still_open(c))
        .collect();
    let Some(newest) = all.iter().map(|c| c.id).max() else {
        return Ok(());
    };
    let complete: Vec<u64> = (all.iter())
        .filter(|c| c.status == CheckpointStatus::Complete)
        .map(|c| c.id)
        .collect();
    let incomplete =
        (all.iter()).filter(|c| c.status != CheckpointStatus::Complete && c.id < newest);
    let old = (all.iter()).filter(|c| {
        c.status == CheckpointStatus::Complete
            && complete.len() > keep
            && c.id < complete[complete.len() - keep]
    });
    let doomed: Vec<Checkpoint> = incomplete.chain(old).cloned().collect();
    for ck in doomed {
        drop_checkpoint(job, conn, &ck).await?;
    }
    sweep_orphans(job, conn).await
}

/// Deletes the parts of checkpoints no longer in the id set that a partition's registry
/// still lists `live`, and prunes the tombstones older than `checkpoint_drain_timeout`
/// + 1 min, in every partition of the job's pipelines.
async fn sweep_orphans(job: &JobShared, conn: &mut Connection) -> Result<(), Error> {
    let keys = &job.checkpoints.keys;
    let mut registries = Vec::new();
    for (topic, group) in &job.pipelines {
        let partitions = crate::mq::topic::topic_partitions(conn, &job.keys, topic).await?;
        for partition in 0..partitions {
            let (state, own) = partition_keys(job, topic, group, partition);
            let registry: HashMap<u64, String> = redis::cmd("HGETALL")
                .arg(keys.part_registry(&state))
                .query_async(conn)
                .await?;
            registries.push((state, own, registry));
        }
    }
    // Read after the registries: a checkpoint is in the id set from its opening, before
    // any owner could register it, so one registered but not in the set now is deleted.
    let ids = all_ids(conn, keys).await?;
    let drain = crate::mq::lease::ms(job.config.checkpoint().checkpoint_drain_timeout);
    let horizon = now_ms().saturating_sub(drain + TOMBSTONE_GRACE_MS);
    for (state, own, registry) in registries {
        for (id, entry) in registry {
            if entry == "live" && !ids.contains(&id) {
                drop_part(conn, keys, id, &state, &own).await?;
            } else if entry.parse::<u64>().is_ok_and(|at| at < horizon) {
                let _: i64 = redis::cmd("HDEL")
                    .arg(keys.part_registry(&state))
                    .arg(id)
                    .query_async(conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// A partition's state keys, and its index, schema, frontier and acked keys (whose
/// copies a part holds).
fn partition_keys(
    job: &JobShared,
    topic: &str,
    group: &str,
    partition: u32,
) -> (StateKeys, [String; 4]) {
    let tag = job.keys.hash_tag(topic, partition);
    let config = &job.config;
    let state = StateKeys::new(
        config.state_key_prefix(),
        job.config.job_name(),
        &tag,
        group,
        config.keyed_state_shard_count(),
    );
    let own = [
        state.index(),
        state.schema(),
        job.keys.frontier(topic, partition, group),
        job.keys.acked(topic, partition, group),
    ];
    (state, own)
}

/// Deletes checkpoint `ck` (retention): marks it `deleting` (never restored from then
/// on), deletes every partition's part in chunks, then its record.
pub(super) async fn drop_checkpoint(
    job: &JobShared,
    conn: &mut Connection,
    ck: &Checkpoint,
) -> Result<(), Error> {
    let keys = &job.checkpoints.keys;
    let (lease, ttl, _) = leader_fence(job)?;
    for step in ["mark", "drop"] {
        if step == "drop" {
            for p in &ck.pipelines {
                for partition in 0..p.partitions {
                    let (state, own) = partition_keys(job, &p.topic, &p.group, partition);
                    drop_part(conn, keys, ck.id, &state, &own).await?;
                }
            }
        }
        let reply: Value = FORGET
            .key(keys.leader())
            .key(keys.leader_token())
            .key(keys.meta(ck.id))
            .key(keys.parts(ck.id))
            .key(keys.ids())
            .key(keys.complete())
            .key(keys.open())
            .arg(&lease)
            .arg(ttl)
            .arg(ck.id)
            .arg(step)
            .invoke_async(conn)
            .await?;
        if is_fenced_reply(&reply) {
            return Err(retention_error(format!(
                "deleting checkpoint {}: the leader lease passed to another process",
                ck.id
            )));
        }
    }
    Ok(())
}

/// Deletes one partition's part of checkpoint `id` (`own`: the partition's index,
/// schema, frontier and acked keys, whose copies go too), after a tombstone in the
/// partition's registry that refuses every later step of a part of it.
async fn drop_part(
    conn: &mut Connection,
    keys: &CheckpointKeys,
    id: u64,
    state: &StateKeys,
    own: &[String; 4],
) -> Result<(), Error> {
    let _: i64 = redis::cmd("HSET")
        .arg(keys.part_registry(state))
        .arg(id)
        .arg(now_ms())
        .query_async(conn)
        .await?;
    let copy = keys.copy_prefix(id);
    let record_key = keys.part_record(id, state);
    let record: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(&record_key)
        .query_async(conn)
        .await?;
    let copied: Vec<String> = redis::cmd("SMEMBERS")
        .arg(format!("{copy}{}", own[0]))
        .query_async(conn)
        .await?;
    for hash in &copied {
        let key = format!("{copy}{hash}");
        match record.get(&format!("c:{hash}")) {
            Some(base) => {
                let base = format!("{copy}{base}");
                chunked(
                    conn,
                    |cursor| {
                        let mut inv = DROP.key(&key);
                        inv.arg(cursor).arg(CHUNK_FIELDS).arg(&base);
                        inv
                    },
                    || retention_error("a delete step was refused".into()),
                )
                .await?;
            }
            None => {
                let _: i64 = redis::cmd("UNLINK").arg(&key).query_async(conn).await?;
            }
        }
    }
    let mut unlink = redis::cmd("UNLINK");
    for k in own {
        unlink.arg(format!("{copy}{k}"));
    }
    let _: i64 = unlink.arg(&record_key).query_async(conn).await?;
    Ok(())
}
