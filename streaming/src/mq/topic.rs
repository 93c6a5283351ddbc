//! Topic administration.

use super::Connection;
use redis::{AsyncCommands, Value};

use crate::mq::message::value_to_string;
use crate::Error;

/// Checks a topic, group or consumer name: 1..=200 chars of `[A-Za-z0-9_.-]` (the rule for
/// source ids; it keeps names free of hash-tag braces and glob characters).
///
/// # Errors
/// [`Error::InvalidConfig`] naming `field`.
pub(crate) fn validate_name(field: &'static str, name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidConfig {
            field,
            reason: format!("{name:?} must be 1..=200 characters of [A-Za-z0-9_.-]"),
        })
    }
}

/// Key names of one prefix: the queue's Redis key layout.
///
/// # Key layout
///
/// With prefix `P` (default `mq`, [`crate::mq::MqOptions::key_prefix`]), topic `T` and
/// partition `n`, every key of one partition carries the hash tag `{T:n}`, so they all hash
/// to one Redis Cluster slot and the Lua scripts that touch several of them are
/// cluster-safe:
///
/// | key | type | content |
/// |-----|------|---------|
/// | `P:{T:n}:s` | stream | the partition's entries (encoding: [`Message`](crate::mq::Message)) |
/// | `P:{T:n}:retry:due` | sorted set | retry token → due time (epoch ms, server clock) |
/// | `P:{T:n}:retry:data` | hash | retry token → msgpack array of the retry entry's fields (with `rg` = the group) |
///
/// | `P:{T:n}:dlq` | stream | dead letters of this partition ([`DeadLetter`](crate::mq::DeadLetter)) |
/// | `P:{T:n}:lease:G` | string | `"{token} {owner}"`: the partition's owner in group `G` and its fencing token, with TTL |
/// | `P:{T:n}:fence:G` | string | the last fencing token drawn for the partition in group `G` |
/// | `P:{T:n}:frontier:G` | string | commit frontier of group `G` ([`StartPolicy`](crate::mq::StartPolicy)) |
/// | `P:{T:n}:acked:G` | set | ids acknowledged above the frontier |
///
/// A retry token is `G\n<id>`: the group whose handler failed, a newline, the failed
/// entry's id ([`retry_token`](crate::mq::retry_token)); retries are per group
/// ([`RetryPolicy`](crate::mq::RetryPolicy)). Groups share the stream and the schedule keys.
///
/// Topic-level keys (no hash tag; never used together with partition keys in a script):
/// `P:topics` (set of topic names), `P:topic:T` (hash: `partitions`, `created_ms`),
/// `P:topic:T:groups` (set of group names), `P:topic:T:members:G` (sorted set: live
/// consumers of `G` → heartbeat expiry, epoch ms), `P:topic:T:assignment:G` (hash: the
/// Redis engine's subtasks reading `G`, their heartbeat expiries and partitions).
///
/// The topic's dead-letter "stream" is the union of its partitions' `dlq` streams: keeping
/// them per partition lets "acknowledge + dead-letter" be one script in one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpace {
    prefix: String,
}

impl KeySpace {
    /// Keys under `prefix` (already validated by [`crate::mq::MqOptions::validate`]).
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The hash tag of a partition, `{T:n}`: put it in any key that must commit
    /// atomically with the partition (engine state, timers, sink outputs).
    pub fn hash_tag(&self, topic: &str, partition: u32) -> String {
        format!("{{{topic}:{partition}}}")
    }

    fn part(&self, topic: &str, partition: u32, suffix: &str) -> String {
        format!("{}:{{{topic}:{partition}}}:{suffix}", self.prefix)
    }

    /// The partition's stream, `P:{T:n}:s`.
    pub fn stream(&self, topic: &str, partition: u32) -> String {
        self.part(topic, partition, "s")
    }
    /// The retry schedule, `P:{T:n}:retry:due`.
    pub fn retry_due(&self, topic: &str, partition: u32) -> String {
        self.part(topic, partition, "retry:due")
    }
    /// The retry payloads, `P:{T:n}:retry:data`.
    pub fn retry_data(&self, topic: &str, partition: u32) -> String {
        self.part(topic, partition, "retry:data")
    }
    /// The partition's dead-letter stream, `P:{T:n}:dlq`.
    pub fn dlq(&self, topic: &str, partition: u32) -> String {
        self.part(topic, partition, "dlq")
    }
    /// The lease of `group` on the partition, `P:{T:n}:lease:G`.
    pub fn lease(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("lease:{group}"))
    }
    /// The fencing-token counter of `group` on the partition, `P:{T:n}:fence:G`.
    pub fn fence(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("fence:{group}"))
    }
    /// The commit frontier of `group`, `P:{T:n}:frontier:G`.
    pub fn frontier(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("frontier:{group}"))
    }
    /// The position of another input (`input_topic` read as `input_group`) of a Redis
    /// engine pipeline whose first input is `topic` read as `group`: the last id of
    /// `input_topic`'s partition `partition` the job committed, kept in `topic`'s
    /// partition (one hash slot with the job partition's state),
    /// `P:{T:n}:input:G:B:GB` (string).
    pub fn input_position(
        &self,
        topic: &str,
        partition: u32,
        group: &str,
        input_topic: &str,
        input_group: &str,
    ) -> String {
        self.part(topic, partition, &format!("input:{group}:{input_topic}:{input_group}"))
    }
    /// Set while the partition's event-time work for `group` awaits an idle flush,
    /// `P:{T:n}:flushpending:G` (string `1`): written by the Redis engine's commits
    /// under the lease, so that every process of a job sees which partitions still hold
    /// unfired windows or timers.
    pub fn flush_pending(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("flushpending:{group}"))
    }
    /// Where a fenced read refused by its lease check notes the group's last-delivered id
    /// for its undo, `P:{T:n}:readundo:G` (lives 10 s at most).
    pub(crate) fn read_undo(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("readundo:{group}"))
    }
    /// Where a batch commit refused by its guard notes why for the undo at its end,
    /// `P:{T:n}:commitundo:G` (lives only inside the commit's transaction; 10 s at most).
    pub(crate) fn commit_undo(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("commitundo:{group}"))
    }
    /// The entries of the partition that `group`, reading with `NOACK` (its position
    /// being an offset its owner commits), sent to retry or to the dead-letter stream
    /// since that offset was last committed, `P:{T:n}:settled:G` (sorted set: entry id →
    /// epoch ms): an entry read again after a crash is not retried or dead-lettered twice.
    /// The Redis engine clears it with each commit; otherwise entries older than 24 h are
    /// dropped.
    pub fn settled(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("settled:{group}"))
    }
    /// Ids acknowledged above the frontier, `P:{T:n}:acked:G`.
    pub fn acked(&self, topic: &str, partition: u32, group: &str) -> String {
        self.part(topic, partition, &format!("acked:{group}"))
    }
    /// The set of topic names, `P:topics`.
    pub fn topics(&self) -> String {
        format!("{}:topics", self.prefix)
    }
    /// The topic's metadata hash, `P:topic:T`.
    pub fn meta(&self, topic: &str) -> String {
        format!("{}:topic:{topic}", self.prefix)
    }
    /// The topic's groups, `P:topic:T:groups`.
    pub fn groups(&self, topic: &str) -> String {
        format!("{}:topic:{topic}:groups", self.prefix)
    }
    /// Live consumers of `group`, `P:topic:T:members:G`.
    pub fn members(&self, topic: &str, group: &str) -> String {
        format!("{}:topic:{topic}:members:{group}", self.prefix)
    }
    /// The counter the Redis engine draws consumer-name sequence numbers from, for job
    /// `job` and instance `instance`: `P:job:J:I:seq`.
    pub fn consumer_seq(&self, job: &str, instance: &str) -> String {
        format!("{}:job:{job}:{instance}:seq", self.prefix)
    }
    /// The Redis engine's job registry: names of jobs with registered instances,
    /// `P:jobs` (set).
    pub fn jobs(&self) -> String {
        format!("{}:jobs", self.prefix)
    }
    /// Instance ids registered for job `job`, `P:jobs:J` (set; an id whose
    /// [`job_instance`](Self::job_instance) key expired is gone).
    pub fn job_instances(&self, job: &str) -> String {
        format!("{}:jobs:{job}", self.prefix)
    }
    /// A running job instance's heartbeat, `P:jobs:J:I` (JSON string with a TTL).
    pub fn job_instance(&self, job: &str, instance: &str) -> String {
        format!("{}:jobs:{job}:{instance}", self.prefix)
    }
    /// Live subtasks of the Redis engine's jobs reading `group` and the partitions each
    /// owns, `P:topic:T:assignment:G` (hash: `m:{consumer}` → heartbeat expiry, epoch ms;
    /// `p:{n}` → the consumer owning partition `n`).
    pub fn assignment(&self, topic: &str, group: &str) -> String {
        format!("{}:topic:{topic}:assignment:{group}", self.prefix)
    }
}

/// What [`describe_topic`](crate::mq::Mq::describe_topic) reports about one consumer
/// group on one partition (from `XINFO GROUPS` plus the frontier key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// Group name.
    pub name: String,
    /// Consumers known to the group on this partition.
    pub consumers: u64,
    /// Entries delivered and not acknowledged (the pending entries list).
    pub pending: u64,
    /// `last-delivered-id` of the group.
    pub last_delivered_id: String,
    /// Entries not yet delivered to the group (`lag`, Redis ≥ 7.0; `None` when Redis
    /// cannot tell, e.g. after deletions).
    pub lag: Option<u64>,
    /// The commit frontier, if stored.
    pub frontier: Option<String>,
}

/// One partition of a described topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition number.
    pub partition: u32,
    /// Entries in the stream (`XLEN`).
    pub length: u64,
    /// Retries waiting for their backoff (`ZCARD` of the retry schedule).
    pub retry_scheduled: u64,
    /// Entries in the partition's dead-letter stream.
    pub dead_letters: u64,
    /// The consumer groups, sorted by name.
    pub groups: Vec<GroupInfo>,
}

/// A described topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// Partition count.
    pub partitions: u32,
    /// Per-partition figures, by partition number.
    pub partition_info: Vec<PartitionInfo>,
}

pub(crate) async fn create_topic(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partitions: u32,
) -> Result<bool, Error> {
    validate_name("topic", topic)?;
    if partitions == 0 || partitions > 4096 {
        return Err(Error::InvalidConfig {
            field: "partitions",
            reason: format!("must be in 1..=4096, got {partitions}"),
        });
    }
    let created: bool = conn
        .hset_nx(keys.meta(topic), "partitions", partitions)
        .await?;
    if !created {
        let existing = topic_partitions(conn, keys, topic).await?;
        if existing != partitions {
            return Err(Error::Mq {
                op: "create_topic",
                reason: format!(
                    "topic {topic} exists with {existing} partitions, not {partitions}"
                ),
            });
        }
        return Ok(false);
    }
    let now = now_ms();
    let _: () = conn.hset(keys.meta(topic), "created_ms", now).await?;
    let _: () = conn.sadd(keys.topics(), topic).await?;
    Ok(true)
}

pub(crate) async fn topic_partitions(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
) -> Result<u32, Error> {
    let n: Option<u32> = conn.hget(keys.meta(topic), "partitions").await?;
    n.ok_or_else(|| Error::Mq {
        op: "topic",
        reason: format!("topic {topic} does not exist"),
    })
}

pub(crate) async fn list_topics(
    conn: &mut Connection,
    keys: &KeySpace,
) -> Result<Vec<String>, Error> {
    let mut names: Vec<String> = conn.smembers(keys.topics()).await?;
    names.sort();
    Ok(names)
}

pub(crate) async fn delete_topic(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
) -> Result<bool, Error> {
    validate_name("topic", topic)?;
    let Ok(partitions) = topic_partitions(conn, keys, topic).await else {
        return Ok(false);
    };
    let groups: Vec<String> = conn.smembers(keys.groups(topic)).await?;
    for p in 0..partitions {
        let mut del = vec![
            keys.stream(topic, p),
            keys.retry_due(topic, p),
            keys.retry_data(topic, p),
            keys.dlq(topic, p),
        ];
        for g in &groups {
            del.push(keys.lease(topic, p, g));
            del.push(keys.fence(topic, p, g));
            del.push(keys.frontier(topic, p, g));
            del.push(keys.acked(topic, p, g));
            del.push(keys.settled(topic, p, g));
            del.push(keys.flush_pending(topic, p, g));
        }
        // One slot per partition: a multi-key DEL stays cluster-safe.
        let _: () = conn.del(del).await?;
    }
    let mut del = vec![keys.meta(topic), keys.groups(topic)];
    for g in &groups {
        del.push(keys.members(topic, g));
        del.push(keys.assignment(topic, g));
    }
    for k in del {
        let _: () = conn.del(k).await?;
    }
    let _: () = conn.srem(keys.topics(), topic).await?;
    Ok(true)
}

pub(crate) async fn describe_topic(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
) -> Result<TopicInfo, Error> {
    validate_name("topic", topic)?;
    let partitions = topic_partitions(conn, keys, topic).await?;
    let mut partition_info = Vec::with_capacity(partitions as usize);
    for p in 0..partitions {
        let stream = keys.stream(topic, p);
        let length: u64 = conn.xlen(&stream).await?;
        let retry_scheduled: u64 = conn.zcard(keys.retry_due(topic, p)).await?;
        let dead_letters: u64 = conn.xlen(keys.dlq(topic, p)).await?;
        let mut groups = Vec::new();
        if length > 0 || conn.exists::<_, bool>(&stream).await? {
            let v: Value = redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(&stream)
                .query_async(conn)
                .await?;
            for g in parse_xinfo_groups(&v) {
                let frontier: Option<String> = conn.get(keys.frontier(topic, p, &g.name)).await?;
                groups.push(GroupInfo { frontier, ..g });
            }
        }
        groups.sort_by(|a, b| a.name.cmp(&b.name));
        partition_info.push(PartitionInfo {
            partition: p,
            length,
            retry_scheduled,
            dead_letters,
            groups,
        });
    }
    Ok(TopicInfo {
        name: topic.to_owned(),
        partitions,
        partition_info,
    })
}

pub(crate) fn parse_xinfo_groups(v: &Value) -> Vec<GroupInfo> {
    let Value::Array(groups) = v else {
        return Vec::new();
    };
    groups
        .iter()
        .filter_map(|g| {
            let pairs: Vec<(String, &Value)> = match g {
                Value::Array(kv) => kv
                    .chunks(2)
                    .filter_map(|c| Some((value_to_string(&c[0])?, c.get(1)?)))
                    .collect(),
                Value::Map(kv) => kv
                    .iter()
                    .filter_map(|(k, v)| Some((value_to_string(k)?, v)))
                    .collect(),
                _ => return None,
            };
            let get = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
            let num = |name: &str| match get(name) {
                Some(Value::Int(i)) => u64::try_from(*i).ok(),
                Some(other) => value_to_string(other).and_then(|s| s.parse().ok()),
                None => None,
            };
            Some(GroupInfo {
                name: get("name").and_then(value_to_string)?,
                consumers: num("consumers").unwrap_or(0),
                pending: num("pending").unwrap_or(0),
                last_delivered_id: get("last-delivered-id")
                    .and_then(value_to_string)
                    .unwrap_or_default(),
                lag: num("lag"),
                frontier: None,
            })
        })
        .collect()
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_partition_tag() {
        let k = KeySpace::new("mq");
        assert_eq!(k.stream("orders", 3), "mq:{orders:3}:s");
        assert_eq!(k.dlq("orders", 3), "mq:{orders:3}:dlq");
        assert_eq!(k.lease("orders", 3, "g"), "mq:{orders:3}:lease:g");
        assert_eq!(k.frontier("orders", 3, "g"), "mq:{orders:3}:frontier:g");
        assert_eq!(k.settled("orders", 3, "g"), "mq:{orders:3}:settled:g");
        assert_eq!(k.hash_tag("orders", 3), "{orders:3}");
        for key in [
            k.stream("o", 1),
            k.retry_due("o", 1),
            k.retry_data("o", 1),
            k.acked("o", 1, "g"),
            k.settled("o", 1, "g"),
        ] {
            assert!(key.contains("{o:1}"), "{key}");
        }
    }

    #[test]
    fn names() {
        validate_name("topic", "a.b-c_1").unwrap();
        assert!(validate_name("topic", "a{b}").is_err());
        assert!(validate_name("topic", "").is_err());
        assert!(validate_name("topic", "a*").is_err());
    }
}
