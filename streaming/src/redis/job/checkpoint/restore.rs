//! Restoring a checkpoint when the job starts, and deleting a checkpoint's parts.
//!
//! A restore is all-or-nothing up to its first write: it checks every partition (the
//! checkpoint's part, the stream not trimmed) and takes every partition's lease (under a
//! new fencing token: a stale owner that wakes up later writes nothing) before it changes
//! any. A lease it cannot take refuses the restore: it gives back the leases it took and
//! nothing is changed. Then, per partition, it deletes the current state in chunks,
//! copies the checkpoint's part back in chunks, puts back the index, schema and acked
//! set, sets the commit frontier to the part's offset and moves the consumer group there
//! (`XGROUP SETID`; its pending entries are acknowledged, they are read again); the
//! leases of the partitions still to restore are renewed on the way. Every step is a
//! script that checks the lease; the leases are released at the end.

use super::keys::{unsharded_name, INPUT_FIELD};
use super::store::{chunked, latest, read, COPY_CHUNK};
use super::{Checkpoint, CheckpointKeys};
use crate::mq::lease::{self, is_fenced_reply, ms, Lease};
use crate::mq::{Connection, KeySpace};
use crate::redis::job::id_at_least;
use crate::redis::state::keys::StateKeys;
use crate::redis::RedisRuntimeConfig;
use crate::Error;
use redis::{Script, ScriptInvocation, Value};
use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

static CLEAR: LazyLock<Script> =
    crate::mq::fenced_script!(include_str!("lua/checkpoint_clear_chunk.lua"));
static END: LazyLock<Script> =
    crate::mq::fenced_script!(include_str!("lua/checkpoint_restore_end.lua"));

/// Fields per restore or delete step.
const CHUNK_FIELDS: usize = 500;

/// Which checkpoint a starting job restores.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RestoreRequest {
    /// `restore_from_checkpoint(id)`: that one, or the start fails.
    Id(u64),
    /// `restore_from_latest_checkpoint`: the latest complete one, if any, unless another
    /// process of the job is running.
    Latest,
}

use super::restore_error as err;

/// Restores `request` for a job with `pipelines` (topic, group) before it starts, on a
/// thread of its own (the caller may be inside an async runtime). `Ok(None)` when
/// nothing was restored (no checkpoint yet, or another process runs the job).
///
/// # Errors
/// See [`RedisEnv::restore_from_checkpoint`](crate::redis::RedisEnv::restore_from_checkpoint).
pub(crate) fn restore_at_start(
    endpoint: &crate::mq::Endpoint,
    config: &RedisRuntimeConfig,
    pipelines: &[(String, String)],
    inputs: &OtherInputs,
    request: RestoreRequest,
) -> Result<Option<u64>, Error> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| err(format!("cannot start a tokio runtime: {e}")))?;
            rt.block_on(restore(endpoint, config, (pipelines, inputs), request))
        })
        .join()
        .unwrap_or_else(|_| Err(err("the restore panicked".into())))
    })
}

async fn restore(
    endpoint: &crate::mq::Endpoint,
    config: &RedisRuntimeConfig,
    pipelines: (&[(String, String)], &OtherInputs),
    request: RestoreRequest,
) -> Result<Option<u64>, Error> {
    let timeout = config.mq_options().response_timeout;
    let mut conn = crate::mq::connect(endpoint, timeout, Duration::ZERO).await?;
    let (job, instance) = (config.job_name(), config.job_instance_id());
    let keys = CheckpointKeys::new(config.checkpoint_key_prefix(), job);
    let ck = match request {
        RestoreRequest::Id(id) => Some(read(&mut conn, &keys, id).await?),
        RestoreRequest::Latest => latest(&mut conn, &keys).await?,
    };
    let Some(ck) = ck else {
        tracing::warn!(job = %job, "restore_from_latest_checkpoint: no complete checkpoint yet; starting from the committed state");
        return Ok(None);
    };
    let mq = crate::mq::Mq::from_endpoint(endpoint.clone(), config.mq_options().clone()).await?;
    // A record older than two heartbeats is a killed process's, not expired yet.
    let now = super::now_ms();
    let others: Vec<String> = (crate::redis::job::registered_instances(&mq, Some(job)).await?)
        .into_iter()
        .filter(|i| {
            let late = i.heartbeat_interval_ms > 0
                && now.saturating_sub(i.heartbeat_at_ms) > 2 * i.heartbeat_interval_ms;
            i.instance != instance && !late
        })
        .map(|i| i.instance)
        .collect();
    if !others.is_empty() {
        if let RestoreRequest::Latest = request {
            tracing::info!(job = %job, ?others, "restore_from_latest_checkpoint skipped: the job runs in other processes already, and a process joining it does not rewind it");
            return Ok(None);
        }
        return Err(err(format!(
            "job `{job}` is running in other processes ({}, by the job registry): stop them before restoring checkpoint {}",
            others.join(", "),
            ck.id
        )));
    }
    let parts = plan(&mut conn, config, &keys, &ck, pipelines).await?;
    let mut leases = take_leases(&mut conn, config, &parts).await?;
    let result = restore_all(&mut conn, config, &keys, ck.id, &mut leases).await;
    leases.release(&mut conn).await;
    result?;
    tracing::info!(job = %job, id = ck.id, partitions = parts.len(), "restored checkpoint");
    Ok(Some(ck.id))
}

/// One partition to restore.
struct PartToRestore {
    topic: String,
    group: String,
    partition: u32,
    state: StateKeys,
    /// The positions of the pipeline's other inputs the part recorded: (key, position);
    /// '' deletes the key (an input the checkpoint has no position of starts by its
    /// start policy).
    inputs: Vec<(String, String)>,
}

/// The other inputs (topic, group) of each pipeline that reads several, by its own.
pub(crate) type OtherInputs = HashMap<(String, String), Vec<(String, String)>>;

/// Every partition of the job's pipelines, each checked first: the checkpoint has the
/// pipeline with the same partition count, the partition's part is finished, and no
/// stream entry after its offset was trimmed.
async fn plan(
    conn: &mut Connection,
    config: &RedisRuntimeConfig,
    keys: &CheckpointKeys,
    ck: &Checkpoint,
    (pipelines, others): (&[(String, String)], &OtherInputs),
) -> Result<Vec<PartToRestore>, Error> {
    let mq_keys = KeySpace::new(config.mq_options().key_prefix.clone());
    let id = ck.id;
    let mut parts = Vec::new();
    for (topic, group) in pipelines {
        let Some(p) = ck
            .pipelines
            .iter()
            .find(|p| p.topic == *topic && p.group == *group)
        else {
            return Err(err(format!("checkpoint {id} has no part of pipeline `{topic}` / `{group}` (it was taken by a job without it)")));
        };
        let now = crate::mq::topic::topic_partitions(conn, &mq_keys, topic).await?;
        if now != p.partitions {
            return Err(err(format!("topic `{topic}` has {now} partitions, checkpoint {id} has {}: a checkpoint restores onto the partition count it was taken at", p.partitions)));
        }
        for partition in 0..p.partitions {
            let tag = mq_keys.hash_tag(topic, partition);
            let state = StateKeys::new(
                config.state_key_prefix(),
                config.job_name(),
                &tag,
                group,
                config.keyed_state_shard_count(),
            );
            let record: HashMap<String, String> = redis::cmd("HGETALL")
                .arg(keys.part_record(id, &state))
                .query_async(conn)
                .await?;
            if !record.contains_key("offset") {
                return Err(err(format!("checkpoint {id} has no finished part of partition {partition} of `{topic}` (group `{group}`)")));
            }
            check_not_trimmed(conn, &mq_keys.stream(topic, partition), &record)
                .await
                .map_err(|reason| err(format!("partition {partition} of `{topic}` cannot go back to checkpoint {id}: {reason}")))?;
            let inputs = (others
                .get(&(topic.clone(), group.clone()))
                .into_iter()
                .flatten())
            .map(|(input, input_group)| {
                let field = format!("{INPUT_FIELD}{input}:{input_group}");
                let key = mq_keys.input_position(topic, partition, group, input, input_group);
                (key, record.get(&field).cloned().unwrap_or_default())
            })
            .collect();
            parts.push(PartToRestore {
                topic: topic.clone(),
                group: group.clone(),
                partition,
                state,
                inputs,
            });
        }
    }
    Ok(parts)
}

/// `Err(reason)` when an entry of `stream` after the part's offset is gone (trimmed by
/// the queue's `max_len`, or `XDEL`): the restored run would skip it. The part recorded
/// the first entry after its offset (`next`) and the stream's entries-added counter
/// (`added`) when it was taken; trimming removes the oldest entries first, so the entries
/// after the offset are intact when the stream's first entry is at or before the offset,
/// or is `next`, or (no entry after the offset then) when every entry added since is
/// still there.
async fn check_not_trimmed(
    conn: &mut Connection,
    stream: &str,
    record: &HashMap<String, String>,
) -> Result<(), String> {
    let field = |f: &str| record.get(f).map(String::as_str).unwrap_or("");
    let offset = Some(field("offset"))
        .filter(|o| !o.is_empty())
        .unwrap_or("0-0");
    let info: Result<Value, _> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(stream)
        .query_async(conn)
        .await;
    let Ok(info) = info else {
        return Ok(()); // no stream: nothing after the offset
    };
    let info = StreamInfo::parse(info);
    let gone = if !info.max_deleted.is_empty()
        && info.max_deleted != "0-0"
        && !id_at_least(offset, &info.max_deleted)
    {
        true
    } else {
        match (info.first.as_deref(), field("next")) {
            (Some(first), _) if id_at_least(offset, first) => false,
            (Some(first), next) if !next.is_empty() => first != next,
            (None, next) if !next.is_empty() => true,
            _ => {
                let added: u64 = field("added").parse().unwrap_or(0);
                info.length < info.added.saturating_sub(added)
            }
        }
    };
    if gone {
        return Err(format!(
            "entries after its offset {offset} were trimmed or deleted from the stream (it holds {} entries from {}); keep the queue's max_len above what is produced after the oldest checkpoint you may restore",
            info.length,
            info.first.as_deref().unwrap_or("none")
        ));
    }
    Ok(())
}

/// What `XINFO STREAM` says of a stream's retained entries.
#[derive(Default)]
struct StreamInfo {
    length: u64,
    added: u64,
    first: Option<String>,
    max_deleted: String,
}

impl StreamInfo {
    fn parse(info: Value) -> Self {
        let pairs: Vec<(Value, Value)> = match info {
            Value::Map(m) => m,
            Value::Array(a) => (a.chunks(2))
                .filter_map(|kv| match kv {
                    [k, v] => Some((k.clone(), v.clone())),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let mut out = StreamInfo::default();
        for (k, v) in pairs {
            let key: String = redis::from_redis_value(&k).unwrap_or_default();
            match key.as_str() {
                "length" => out.length = redis::from_redis_value(&v).unwrap_or(0),
                "entries-added" => out.added = redis::from_redis_value(&v).unwrap_or(0),
                "max-deleted-entry-id" => {
                    out.max_deleted = redis::from_redis_value(&v).unwrap_or_default()
                }
                "first-entry" => {
                    if let Value::Array(entry) = v {
                        out.first = entry
                            .first()
                            .and_then(|id| redis::from_redis_value(id).ok());
                    }
                }
                _ => {}
            }
        }
        out
    }
}

/// The leases a restore holds: one per partition of `parts`, in order (the first
/// `held.len()` of them), kept alive while it waits for the others and restores one
/// partition after another.
struct Leases<'a> {
    parts: &'a [PartToRestore],
    held: Vec<Lease>,
    ttl: Duration,
    renewed: Instant,
}

impl Leases<'_> {
    /// Renews the leases held from the `from`-th on, at most every third of `lease_ttl`.
    ///
    /// # Errors
    /// [`Error::Engine`] naming the partition when another process took its lease (it
    /// expired while the restore waited or worked).
    async fn keep(&mut self, conn: &mut Connection, from: usize) -> Result<(), Error> {
        if self.renewed.elapsed() < self.ttl / 3 {
            return Ok(());
        }
        for (part, l) in self.parts.iter().zip(&self.held).skip(from) {
            if !lease::renew(conn, l, self.ttl).await? {
                let (t, p, g) = (&part.topic, part.partition, &part.group);
                return Err(err(format!("partition {p} of `{t}` (group `{g}`) was taken by another process during the restore: stop every process of the job before restoring")));
            }
        }
        self.renewed = Instant::now();
        Ok(())
    }

    /// Gives back every lease held (one that expired meanwhile is left alone).
    async fn release(&self, conn: &mut Connection) {
        for l in &self.held {
            let _ = lease::release(conn, l).await;
        }
    }
}

/// Takes the lease of every partition of `parts` before any is changed. A refusal gives
/// back the leases taken so far: nothing is changed.
///
/// # Errors
/// [`Error::Engine`] naming the first partition whose lease another process holds past
/// `lease_ttl` + 1 s; [`Error::Redis`] when Redis fails.
async fn take_leases<'a>(
    conn: &mut Connection,
    config: &RedisRuntimeConfig,
    parts: &'a [PartToRestore],
) -> Result<Leases<'a>, Error> {
    let mut leases = Leases {
        parts,
        held: Vec::with_capacity(parts.len()),
        ttl: config.mq_options().lease_ttl,
        renewed: Instant::now(),
    };
    for part in parts {
        match take_lease(conn, config, part, &mut leases).await {
            Ok(l) => leases.held.push(l),
            Err(e) => {
                leases.release(conn).await;
                return Err(e);
            }
        }
    }
    Ok(leases)
}

/// Takes the partition's lease for the restore, waiting at most `lease_ttl` + 1 s for a
/// dead owner's lease to expire, and keeping the leases already taken alive meanwhile.
async fn take_lease(
    conn: &mut Connection,
    config: &RedisRuntimeConfig,
    part: &PartToRestore,
    leases: &mut Leases<'_>,
) -> Result<Lease, Error> {
    let mq_keys = KeySpace::new(config.mq_options().key_prefix.clone());
    let (t, p, g) = (part.topic.as_str(), part.partition, part.group.as_str());
    let ttl = config.mq_options().lease_ttl;
    let owner = format!("{}-{}-restore", config.job_name(), config.job_instance_id());
    let deadline = tokio::time::Instant::now() + ttl + Duration::from_secs(1);
    loop {
        if let Some(l) = lease::acquire(
            conn,
            &mq_keys.lease(t, p, g),
            &mq_keys.fence(t, p, g),
            &owner,
            ttl,
        )
        .await?
        {
            return Ok(l);
        }
        if tokio::time::Instant::now() >= deadline {
            let holder: Option<String> = redis::cmd("GET")
                .arg(mq_keys.lease(t, p, g))
                .query_async(conn)
                .await?;
            return Err(err(format!(
                "partition {p} of `{t}` (group `{g}`) is leased by `{}`: stop every process of the job before restoring (nothing was restored)",
                holder.unwrap_or_default()
            )));
        }
        leases.keep(conn, 0).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Restores every partition of `leases`, under its lease. A step refused midway (a
/// lease taken by a process started during the restore) leaves the partitions before it
/// restored: the error is logged with their count, and the same restore can run again.
async fn restore_all(
    conn: &mut Connection,
    config: &RedisRuntimeConfig,
    keys: &CheckpointKeys,
    id: u64,
    leases: &mut Leases<'_>,
) -> Result<(), Error> {
    let parts = leases.parts;
    for (i, part) in parts.iter().enumerate() {
        let step = match leases.keep(conn, i).await {
            Ok(()) => put_back(conn, config, keys, id, part, &leases.held[i]).await,
            Err(e) => Err(e),
        };
        if let Err(e) = step {
            if i > 0 {
                tracing::error!(id, restored = i, of = parts.len(), failed_topic = %part.topic, failed_partition = part.partition, "restore failed midway: the partitions before this one are restored, the others not; run the same restore again");
            }
            return Err(e);
        }
    }
    Ok(())
}

/// The lease a restore's steps run under, and the error of a step it refused.
struct Held<'a> {
    lease: &'a Lease,
    ttl: u64,
    part: &'a PartToRestore,
}

impl Held<'_> {
    /// An invocation of `script` starting with the lease guard: the lease and counter keys
    /// as `KEYS[1]`, `KEYS[2]` and the held value and ttl (ms) as `ARGV[1]`, `ARGV[2]`.
    fn invoke(&self, script: &'static Script) -> ScriptInvocation<'static> {
        let mut inv = script.key(&self.lease.key);
        inv.key(&self.lease.fence)
            .arg(&self.lease.value)
            .arg(self.ttl);
        inv
    }

    fn fenced(&self) -> Error {
        Error::Fenced {
            topic: self.part.topic.clone(),
            group: self.part.group.clone(),
            partition: self.part.partition,
            token: self.lease.token,
        }
    }
}

async fn put_back(
    conn: &mut Connection,
    config: &RedisRuntimeConfig,
    keys: &CheckpointKeys,
    id: u64,
    part: &PartToRestore,
    lease: &Lease,
) -> Result<(), Error> {
    let held = Held {
        lease,
        ttl: ms(config.mq_options().lease_ttl),
        part,
    };
    clear_current(conn, &held).await?;
    let state_ttl = (config.state_ttl())
        .map(|d| ms(d).to_string())
        .unwrap_or_default();
    copy_back(conn, &held, keys, id, &state_ttl).await?;
    let mq_keys = KeySpace::new(config.mq_options().key_prefix.clone());
    finish(conn, &held, &mq_keys, &keys.copy_prefix(id)).await
}

/// Deletes the partition's current state hashes and, for each of their fields, the
/// key's collection if it has one.
async fn clear_current(conn: &mut Connection, held: &Held<'_>) -> Result<(), Error> {
    let state = &held.part.state;
    let current: Vec<String> = redis::cmd("SMEMBERS")
        .arg(state.index())
        .query_async(conn)
        .await?;
    for hash in &current {
        let base = unsharded_name(hash, state.shards()).to_string();
        let step = |cursor: &str| {
            let mut inv = held.invoke(&CLEAR);
            inv.key(hash).arg(cursor).arg(CHUNK_FIELDS).arg(&base);
            inv
        };
        chunked(conn, step, || held.fenced()).await?;
    }
    Ok(())
}

/// Copies every state hash of the part back, with the collections its record lists.
async fn copy_back(
    conn: &mut Connection,
    held: &Held<'_>,
    keys: &CheckpointKeys,
    id: u64,
    state_ttl: &str,
) -> Result<(), Error> {
    let (state, copy) = (&held.part.state, keys.copy_prefix(id));
    let record: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(keys.part_record(id, state))
        .query_async(conn)
        .await?;
    let copied: Vec<String> = redis::cmd("SMEMBERS")
        .arg(format!("{copy}{}", state.index()))
        .query_async(conn)
        .await?;
    for hash in &copied {
        let base = record
            .get(&format!("c:{hash}"))
            .cloned()
            .unwrap_or_default();
        let from = format!("{copy}{hash}");
        let step = |cursor: &str| {
            let mut inv = held.invoke(&COPY_CHUNK);
            inv.key(&from)
                .key(hash)
                .arg(cursor)
                .arg(CHUNK_FIELDS)
                .arg(&base)
                .arg(&copy)
                .arg("")
                .arg(state_ttl);
            inv
        };
        chunked(conn, step, || held.fenced()).await?;
    }
    Ok(())
}

/// Index, schema and acked set back, the frontier at the part's offset, the settled set
/// emptied, the consumer group moved there, the other inputs' positions back (see
/// `checkpoint_restore_end.lua`).
async fn finish(
    conn: &mut Connection,
    held: &Held<'_>,
    mq_keys: &KeySpace,
    copy: &str,
) -> Result<(), Error> {
    let part = held.part;
    let (t, p, g) = (part.topic.as_str(), part.partition, part.group.as_str());
    let own = [
        part.state.index(),
        part.state.schema(),
        mq_keys.frontier(t, p, g),
        mq_keys.acked(t, p, g),
    ];
    let mut inv = held.invoke(&END);
    for k in &own {
        inv.key(k);
    }
    inv.key(mq_keys.settled(t, p, g)).key(mq_keys.stream(t, p));
    for k in &own {
        inv.key(format!("{copy}{k}"));
    }
    inv.arg(g);
    for (key, position) in &part.inputs {
        inv.key(key).arg(position);
    }
    let reply: Value = inv.invoke_async(conn).await?;
    if is_fenced_reply(&reply) {
        return Err(held.fenced());
    }
    Ok(())
}
