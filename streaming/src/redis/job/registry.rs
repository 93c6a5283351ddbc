//! The job registry: every running job instance keeps a heartbeat key in Redis saying
//! what it runs and how its partitions do, so that a shell (`streaming-admin jobs`) sees
//! jobs from outside their processes.
//!
//! Keys (queue key prefix `P`, no hash tag: never written together with a partition's
//! keys): `P:jobs` (set of job names), `P:jobs:{job}` (set of instance ids) and
//! `P:jobs:{job}:{instance}` (a [`RegisteredInstance`] as JSON, expiring after three
//! heartbeat intervals). One task per instance writes them every `lease_renew_interval`
//! (three commands, whatever the number of partitions) and removes its key when the job
//! stops.

use super::progress::PartitionProgress;
use super::shared::JobShared;
use crate::mq::{Connection, Mq};
use crate::Error;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

/// What a running job instance last reported to the registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RegisteredInstance {
    /// The job's name (`RedisRuntimeConfig::job_name`).
    pub job: String,
    /// The instance id (`RedisRuntimeConfig::job_instance_id`).
    pub instance: String,
    /// Subtasks per pipeline now.
    pub parallelism: u32,
    /// Whether the job is paused.
    pub paused: bool,
    /// When the instance wrote this record, in ms since the Unix epoch (its clock).
    pub heartbeat_at_ms: u64,
    /// How often the instance writes this record (`lease_renew_interval`), in ms; the
    /// record expires after three intervals. A record older than two intervals belongs to
    /// an instance that missed a heartbeat (killed, stalled or cut off from Redis). 0 in a
    /// record written before this field existed.
    #[serde(default)]
    pub heartbeat_interval_ms: u64,
    /// Its pipelines.
    pub pipelines: Vec<RegisteredPipeline>,
    /// The partitions it owns, sorted by (topic, group, partition).
    pub partitions: Vec<RegisteredPartition>,
    /// Where its keyed state lives: `RedisRuntimeConfig::state_key_prefix` and
    /// `keyed_state_shard_count` (`None` in a record written before these fields existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_keys: Option<RegisteredStateKeys>,
    /// Its `RedisRuntimeConfig::checkpoint_key_prefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_key_prefix: Option<String>,
}

/// How a [`RegisteredInstance`] names its keyed state's keys: what `streaming-admin state
/// get` and the console need to read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RegisteredStateKeys {
    /// `RedisRuntimeConfig::state_key_prefix`.
    pub prefix: String,
    /// `RedisRuntimeConfig::keyed_state_shard_count`.
    pub shards: u32,
}

/// A pipeline of a [`RegisteredInstance`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RegisteredPipeline {
    /// The topic it reads.
    pub topic: String,
    /// The consumer group it reads with.
    pub group: String,
    /// Its other inputs (a `union` or `connect` of topics): each a topic and the group it
    /// is read with, partition by partition with `topic`. Empty for one topic.
    #[serde(default)]
    pub inputs: Vec<RegisteredInput>,
    /// The keyed states its partitions opened in this instance, sorted by (operator,
    /// state). A state appears once a partition holding it was taken (a process state
    /// that `pipeline!` does not declare: once a record opened it). Empty when
    /// `state_schema_evolution_enabled` is off (the states' types are then not checked,
    /// nor known).
    #[serde(default)]
    pub states: Vec<RegisteredState>,
}

/// Another input of a [`RegisteredPipeline`]: a topic and the consumer group it is read
/// with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RegisteredInput {
    /// The topic.
    pub topic: String,
    /// The consumer group its partitions are leased and read with.
    pub group: String,
}

/// A keyed state of a [`RegisteredPipeline`]: where `streaming-admin state get` finds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RegisteredState {
    /// The operator id, e.g. `orders.billing/3:process`.
    pub operator: String,
    /// The state's name: a descriptor's name, `panes` (a window's panes) or `rolling` (a
    /// rolling reduce or sum). The engine's own per-partition watermark is not listed.
    pub state: String,
    /// Its kind, value type and key type as short Rust type names, e.g.
    /// `ValueState<u64> by String` (the state's schema fingerprint).
    pub schema: String,
}

/// An owned partition of a [`RegisteredInstance`] (see [`PartitionProgress`] for the
/// meaning of each field).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RegisteredPartition {
    /// The topic.
    pub topic: String,
    /// The consumer group.
    pub group: String,
    /// The partition.
    pub partition: u32,
    /// The id of the last entry whose batch committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<String>,
    /// The consumer lag last sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
    /// The watermark (ms) as of the last commit; absent until the partition committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watermark: Option<i64>,
    /// When the partition last committed, in ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_commit_at_ms: Option<u64>,
    /// The last error the partition met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When [`last_error`](Self::last_error) happened, in ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_at_ms: Option<u64>,
    /// Whether the partition is stalled ([`PartitionProgress::stalled`]).
    pub stalled: bool,
}

/// The instances in the registry of the queue behind `mq` (its key prefix), of job `job`
/// or of every job, sorted by (job, instance). An instance whose key expired (its process
/// died without removing it) is not listed. One `SMEMBERS` per job and one `GET` per
/// instance.
///
/// # Errors
/// [`Error::Redis`]; [`Error::Engine`] for a record that is not a registry record.
pub async fn registered_instances(
    mq: &Mq,
    job: Option<&str>,
) -> Result<Vec<RegisteredInstance>, Error> {
    let keys = mq.keys();
    let mut conn = mq.connection();
    let jobs: Vec<String> = match job {
        Some(j) => vec![j.to_string()],
        None => {
            redis::cmd("SMEMBERS")
                .arg(keys.jobs())
                .query_async(&mut conn)
                .await?
        }
    };
    let mut found = Vec::new();
    for job in jobs {
        let instances: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys.job_instances(&job))
            .query_async(&mut conn)
            .await?;
        for instance in instances {
            let key = keys.job_instance(&job, &instance);
            let text: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
            let Some(text) = text else { continue };
            found.push(serde_json::from_str(&text).map_err(|e| Error::Engine {
                op: "registered_instances",
                reason: format!("`{key}` is not a job registry record: {e}"),
            })?);
        }
    }
    found.sort_by(|a: &RegisteredInstance, b| (&a.job, &a.instance).cmp(&(&b.job, &b.instance)));
    Ok(found)
}

/// Starts the registry task of `job` on a thread of its own: it writes the heartbeat
/// until the job is cancelled or its subtasks all ended, then removes the instance. A
/// cancel interrupts a heartbeat waiting on Redis at once, and the removal is best-effort
/// within one response timeout of the cancel (the subtasks' own bound), so the task never
/// keeps a shutdown waiting longer than they do.
pub(crate) fn start(job: &Arc<JobShared>) {
    super::spawn_task(
        job,
        ("streaming-registry", "job registry"),
        |_| {},
        |job| async move {
            run(&job).await;
        },
    );
}

async fn run(job: &JobShared) {
    let interval = job.config.mq_options().lease_renew_interval;
    let mut conn: Option<Connection> = None;
    let mut gauges = HashMap::new();
    let mut pruned = false;
    while !job.signals.is_cancelled() && job.signals.running() > 0 {
        let progress = job.progress_now();
        set_stalled_gauges(job, &progress, &mut gauges);
        if conn.is_none() {
            tokio::select! {
                () = job.signals.cancelled_signal() => break,
                c = job.connect() => conn = c.ok(),
            }
        }
        if let Some(c) = conn.as_mut() {
            let beat = async {
                heartbeat(job, c, progress).await?;
                if !pruned {
                    pruned = prune_expired(job, c).await.is_ok();
                }
                Ok::<_, Error>(())
            };
            tokio::select! {
                () = job.signals.cancelled_signal() => break,
                r = beat => if let Err(e) = r {
                    tracing::debug!(job = %job.config.job_name(), "job registry heartbeat failed: {e}");
                },
            }
        }
        tokio::select! {
            () = job.signals.cancelled_signal() => {}
            () = tokio::time::sleep(interval) => {}
        }
    }
    if let Some(mut c) = conn {
        // After a cancel, by the job's stop deadline; after the subtasks ended, within one
        // response timeout.
        let left = tokio::time::timeout_at(job.stop_by(), leave(job, &mut c)).await;
        if !matches!(left, Ok(Ok(()))) {
            tracing::debug!(job = %job.config.job_name(), "job registry: the instance key was not removed; it expires");
        }
    }
}

/// Sets `streaming_partition_stalled` (0/1) of every partition the job has met.
fn set_stalled_gauges(
    job: &JobShared,
    progress: &[PartitionProgress],
    gauges: &mut HashMap<(String, String, u32), metrics::Gauge>,
) {
    for p in progress {
        let key = (p.topic.clone(), p.group.clone(), p.partition);
        let gauge = gauges.entry(key).or_insert_with(|| {
            let labels = [
                ("job", job.config.job_name().to_owned()),
                ("topic", p.topic.clone()),
                ("group", p.group.clone()),
                ("partition", p.partition.to_string()),
            ];
            metrics::gauge!("streaming_partition_stalled", &labels)
        });
        gauge.set(if p.stalled { 1.0 } else { 0.0 });
    }
}

/// Writes the instance's record (expiring after three intervals) and its index entries.
async fn heartbeat(
    job: &JobShared,
    conn: &mut Connection,
    progress: Vec<PartitionProgress>,
) -> Result<(), Error> {
    let record = record(job, progress);
    let text = serde_json::to_string(&record).map_err(|e| Error::Engine {
        op: "job registry",
        reason: e.to_string(),
    })?;
    let keys = &job.keys;
    let ttl = u64::try_from(
        job.config
            .mq_options()
            .lease_renew_interval
            .saturating_mul(3)
            .as_millis(),
    )
    .unwrap_or(u64::MAX)
    .max(1);
    let key = keys.job_instance(job.config.job_name(), job.config.job_instance_id());
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(text)
        .arg("PX")
        .arg(ttl)
        .query_async(conn)
        .await?;
    let _: u64 = redis::cmd("SADD")
        .arg(keys.job_instances(job.config.job_name()))
        .arg(job.config.job_instance_id())
        .query_async(conn)
        .await?;
    let _: u64 = redis::cmd("SADD")
        .arg(keys.jobs())
        .arg(job.config.job_name())
        .query_async(conn)
        .await?;
    Ok(())
}

/// Removes from the job's set of instances the ids whose key expired (processes that died
/// without leaving); run once per instance start, so the set does not grow with crashes.
async fn prune_expired(job: &JobShared, conn: &mut Connection) -> Result<(), Error> {
    let keys = &job.keys;
    let set = keys.job_instances(job.config.job_name());
    let ids: Vec<String> = redis::cmd("SMEMBERS").arg(&set).query_async(conn).await?;
    for id in ids.iter().filter(|id| **id != job.config.job_instance_id()) {
        let alive: bool = redis::cmd("EXISTS")
            .arg(keys.job_instance(job.config.job_name(), id))
            .query_async(conn)
            .await?;
        if !alive {
            let _: u64 = redis::cmd("SREM")
                .arg(&set)
                .arg(id)
                .query_async(conn)
                .await?;
        }
    }
    Ok(())
}

/// Removes the instance: its key, its id from the job's set, and the job from the set of
/// jobs when it was the last instance (a heartbeat of another instance adds it back).
async fn leave(job: &JobShared, conn: &mut Connection) -> Result<(), Error> {
    let keys = &job.keys;
    let instances = keys.job_instances(job.config.job_name());
    let _: u64 = redis::cmd("DEL")
        .arg(keys.job_instance(job.config.job_name(), job.config.job_instance_id()))
        .query_async(conn)
        .await?;
    let _: u64 = redis::cmd("SREM")
        .arg(&instances)
        .arg(job.config.job_instance_id())
        .query_async(conn)
        .await?;
    let left: u64 = redis::cmd("SCARD")
        .arg(&instances)
        .query_async(conn)
        .await?;
    if left == 0 {
        let _: u64 = redis::cmd("SREM")
            .arg(keys.jobs())
            .arg(job.config.job_name())
            .query_async(conn)
            .await?;
    }
    Ok(())
}

/// The registry record of `job` now, from its partitions' `progress`.
fn record(job: &JobShared, progress: Vec<PartitionProgress>) -> RegisteredInstance {
    let partitions = progress
        .into_iter()
        .filter(|p| p.owned)
        .map(|p| RegisteredPartition {
            offset: p.last_committed_id,
            lag: p.lag,
            watermark: p.watermark,
            last_commit_at_ms: p.last_commit_at.map(unix_ms),
            last_error: p.last_error,
            last_error_at_ms: p.last_error_at.map(unix_ms),
            stalled: p.stalled,
            topic: p.topic,
            group: p.group,
            partition: p.partition,
        })
        .collect();
    RegisteredInstance {
        job: job.config.job_name().to_owned(),
        instance: job.config.job_instance_id().to_owned(),
        parallelism: job.subtasks.live_parallelism(),
        paused: job.paused.load(Ordering::SeqCst),
        heartbeat_at_ms: unix_ms(SystemTime::now()),
        heartbeat_interval_ms: u64::try_from(
            job.config.mq_options().lease_renew_interval.as_millis(),
        )
        .unwrap_or(u64::MAX),
        pipelines: (job.pipelines.iter())
            .map(|(topic, group)| RegisteredPipeline {
                topic: topic.clone(),
                group: group.clone(),
                inputs: (job
                    .other_inputs
                    .get(&(topic.clone(), group.clone()))
                    .into_iter()
                    .flatten())
                .map(|(topic, group)| RegisteredInput {
                    topic: topic.clone(),
                    group: group.clone(),
                })
                .collect(),
                states: (job.state_catalog(topic, group).map(|c| c.entries()))
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(operator, state, schema)| RegisteredState {
                        operator,
                        state,
                        schema,
                    })
                    .collect(),
            })
            .collect(),
        partitions,
        state_keys: Some(RegisteredStateKeys {
            prefix: job.config.state_key_prefix().to_owned(),
            shards: job.config.keyed_state_shard_count(),
        }),
        checkpoint_key_prefix: Some(job.config.checkpoint_key_prefix().to_owned()),
    }
}

/// `t` in ms since the Unix epoch (0 before it).
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
