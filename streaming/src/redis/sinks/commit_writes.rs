//! The Redis sinks' writes in a batch commit: each sink's buffered [`CommitWrite`] on its
//! partition key `{name}:{T:n}` (`{job}:{name}:{T:n}` when job-scoped), as the commands of
//! the commit's transaction.

use crate::api::{CommitWrite, CommitWrites, SinkScope, TopicOutput};
use crate::redis::outbox::{entry_fields, outbox_key, record_id};
use crate::redis::state::keys::{KeyType, Written};
use redis::Pipeline;
use std::sync::LazyLock;

/// Appends each (idempotency key, value) whose key is not in the dedup set, in one
/// script (`lua/idempotent_append.lua`).
pub(crate) static IDEMPOTENT_APPEND: LazyLock<String> =
    LazyLock::new(|| include_str!("lua/idempotent_append.lua").to_string());

/// One sink's writes for one partition.
pub(in crate::redis) struct SinkWrite {
    /// `{name}:{T:n}`.
    pub(in crate::redis) key: String,
    /// `{name}:dedup:{T:n}` for an idempotent append.
    pub(in crate::redis) dedup: Option<String>,
    pub(in crate::redis) write: CommitWrite,
    /// An idempotent append checked against its dedup set ([`SinkWrite::check_seen`]):
    /// the keys to mark, their expiry and now (ms); `write` is then the plain append of
    /// the new values.
    marks: Option<(Vec<String>, u64, u64)>,
}

/// The partition key of sink key base `name`: `{name}:{topic:partition}`.
pub(crate) fn partition_key(name: &str, topic: &str, partition: u32) -> String {
    format!("{name}:{{{topic}:{partition}}}")
}

/// The dedup set of an idempotent list `name` on a partition: `{name}:dedup:{topic:partition}`.
pub(crate) fn dedup_key(name: &str, topic: &str, partition: u32) -> String {
    format!("{name}:dedup:{{{topic}:{partition}}}")
}

/// Where a commit's sink writes go: the source partition, the queue's keys and key
/// prefix, the job and the offset the commit acknowledges (outbox record ids).
pub(in crate::redis) struct SinkPlace<'a> {
    pub(in crate::redis) topic: &'a str,
    pub(in crate::redis) partition: u32,
    pub(in crate::redis) keys: &'a crate::mq::KeySpace,
    pub(in crate::redis) mq_prefix: &'a str,
    pub(in crate::redis) job: &'a str,
    pub(in crate::redis) group: &'a str,
    pub(in crate::redis) offset: String,
}

/// The outbox entry of a commit's outputs (one `XADD`: see the outbox module docs).
fn outbox_entries(outputs: Vec<TopicOutput>, at: &SinkPlace<'_>) -> Vec<Vec<(String, String)>> {
    let now = i64::try_from(crate::redis::now_ms()).unwrap_or(i64::MAX);
    let prefix = record_id((at.job, at.group), (at.topic, at.partition), &at.offset, "");
    vec![entry_fields(prefix, now, outputs)]
}

impl SinkWrite {
    pub(in crate::redis) fn new(w: CommitWrites, at: &SinkPlace<'_>) -> Self {
        let (topic, partition) = (at.topic, at.partition);
        let base = match w.scope {
            SinkScope::Shared => std::borrow::Cow::Borrowed(&*w.list),
            scope => std::borrow::Cow::Owned(scope.base_name(at.job, &w.list)),
        };
        let dedup = matches!(w.write, CommitWrite::IdempotentAppend { .. })
            .then(|| dedup_key(&base, topic, partition));
        let outputs = match w.write {
            CommitWrite::OutboxAppend(payloads) => payloads
                .into_iter()
                .map(|payload| TopicOutput {
                    key: None,
                    timestamp_ms: None,
                    payload,
                })
                .collect(),
            CommitWrite::TopicAppend(outputs) => outputs,
            write => {
                return SinkWrite {
                    key: partition_key(&base, topic, partition),
                    dedup,
                    write,
                    marks: None,
                }
            }
        };
        SinkWrite {
            key: outbox_key(at.keys, at.mq_prefix, &w.list, topic, partition),
            dedup: None,
            marks: None,
            write: CommitWrite::StreamAdd {
                entries: outbox_entries(outputs, at),
                max_len: None,
            },
        }
    }

    /// For an idempotent append: reads which keys its dedup set holds unexpired (one
    /// `ZMSCORE`) and keeps the values whose key is new (the first of a key repeated in
    /// the batch), so the commit appends and marks them with plain commands. The
    /// partition's owner is the only writer of the set, and its commit is fenced, so what
    /// it reads stays true until its commit applies (a stale owner's commit applies
    /// nothing).
    pub(in crate::redis) async fn check_seen(
        &mut self,
        conn: &mut crate::mq::Connection,
    ) -> Result<(), crate::Error> {
        let (Some(dedup), CommitWrite::IdempotentAppend { ttl_ms, items }) =
            (&self.dedup, &mut self.write)
        else {
            return Ok(());
        };
        let mut cmd = redis::cmd("ZMSCORE");
        cmd.arg(dedup);
        for (k, _) in items.iter() {
            cmd.arg(k);
        }
        let scores: Vec<Option<f64>> = cmd.query_async(conn).await?;
        let now = crate::redis::now_ms();
        let mut seen = std::collections::HashSet::new();
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        for ((k, v), score) in std::mem::take(items).into_iter().zip(scores) {
            let marked = score.is_some_and(|s| s > now as f64);
            if !marked && seen.insert(k.clone()) {
                keys.push(k);
                values.push(v);
            }
        }
        self.marks = Some((keys, now.saturating_add(*ttl_ms), now));
        self.write = CommitWrite::ListAppend(values);
        Ok(())
    }

    /// The keys it writes with the Redis type each must have.
    pub(in crate::redis) fn keys(&self) -> impl Iterator<Item = Written<'_>> {
        let ty = match self.write {
            CommitWrite::ListAppend(_) | CommitWrite::IdempotentAppend { .. } => KeyType::List,
            CommitWrite::HashSet(_) => KeyType::Hash,
            CommitWrite::StreamAdd { .. }
            | CommitWrite::OutboxAppend(_)
            | CommitWrite::TopicAppend(_) => KeyType::Stream,
        };
        let dedup = self.dedup.as_deref().map(|d| (d, KeyType::SortedSet));
        std::iter::once((self.key.as_str(), ty)).chain(dedup)
    }

    /// Its commands, appended to the commit's transaction.
    pub(in crate::redis) fn push(&self, pipe: &mut Pipeline) {
        match &self.write {
            CommitWrite::ListAppend(values) => {
                if !values.is_empty() {
                    pipe.cmd("RPUSH").arg(&self.key).arg(values);
                }
                if let (Some(dedup), Some((keys, expiry, now))) = (&self.dedup, &self.marks) {
                    pipe.cmd("ZREMRANGEBYSCORE")
                        .arg(dedup)
                        .arg("-inf")
                        .arg(*now);
                    if !keys.is_empty() {
                        let zadd = pipe.cmd("ZADD").arg(dedup);
                        for k in keys {
                            zadd.arg(*expiry).arg(k);
                        }
                    }
                }
            }
            // Made a `StreamAdd` by `new`.
            CommitWrite::OutboxAppend(_) | CommitWrite::TopicAppend(_) => {}
            CommitWrite::HashSet(fields) => {
                let cmd = pipe.cmd("HSET").arg(&self.key);
                for (f, v) in fields {
                    cmd.arg(f).arg(v);
                }
            }
            CommitWrite::StreamAdd { entries, max_len } => {
                for fields in entries {
                    let cmd = pipe.cmd("XADD").arg(&self.key);
                    if let Some(n) = max_len {
                        cmd.arg("MAXLEN").arg("~").arg(*n);
                    }
                    cmd.arg("*");
                    for (f, v) in fields {
                        cmd.arg(f).arg(v);
                    }
                }
            }
            CommitWrite::IdempotentAppend { ttl_ms, items } => {
                let cmd = pipe.cmd("EVAL").arg(IDEMPOTENT_APPEND.as_str()).arg(2);
                cmd.arg(&self.key)
                    .arg(self.dedup.as_deref().unwrap_or_default());
                cmd.arg(*ttl_ms);
                for (k, v) in items {
                    cmd.arg(k).arg(v);
                }
            }
        }
    }
}

/// Checks that no two of a commit's sinks write one key as different Redis types (a
/// `RedisHashSink` and a `RedisListSink` of the same name, say): such a commit would fail
/// one command inside the transaction and apply the rest, so it is refused before it
/// runs.
///
/// # Errors
/// [`Error::InvalidConfig`](crate::Error::InvalidConfig) (field `sink`) naming the key and
/// both types.
pub(in crate::redis) fn check_key_types(writes: &[SinkWrite]) -> Result<(), crate::Error> {
    let mut types = std::collections::HashMap::new();
    for (key, ty) in writes.iter().flat_map(SinkWrite::keys) {
        match types.insert(key, ty) {
            Some(other) if other != ty => {
                return Err(crate::Error::InvalidConfig {
                    field: "sink",
                    reason: format!(
                        "two sinks of the pipeline write `{key}`, one as a {} and one as a {}; give each sink its own name",
                        other.name(),
                        ty.name()
                    ),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(key: &str, write: CommitWrite) -> SinkWrite {
        SinkWrite {
            key: key.into(),
            dedup: None,
            write,
            marks: None,
        }
    }

    #[test]
    fn one_key_written_as_two_types_is_refused() {
        let hash = write(
            "out:{t:0}",
            CommitWrite::HashSet(vec![("f".into(), "1".into())]),
        );
        let list = write("out:{t:0}", CommitWrite::ListAppend(vec!["1".into()]));
        let other = write("more:{t:0}", CommitWrite::ListAppend(vec!["2".into()]));
        let err = check_key_types(&[hash, list]).unwrap_err().to_string();
        assert!(
            err.contains("`out:{t:0}`, one as a hash and one as a list"),
            "{err}"
        );
        let twice = write("more:{t:0}", CommitWrite::ListAppend(vec!["3".into()]));
        assert!(
            check_key_types(&[other, twice]).is_ok(),
            "two lists of one name append"
        );
    }

    #[test]
    fn topic_outputs_become_outbox_entries_with_key_and_timestamp() {
        let keys = crate::mq::KeySpace::new("mq");
        let at = SinkPlace {
            topic: "in",
            partition: 2,
            keys: &keys,
            mq_prefix: "mq",
            job: "job",
            group: "g",
            offset: "17-0".to_string(),
        };
        let output = |key: Option<&str>, ts: Option<i64>, payload: &str| TopicOutput {
            key: key.map(str::to_string),
            timestamp_ms: ts,
            payload: payload.to_string(),
        };
        let w = SinkWrite::new(
            CommitWrites {
                list: "topic.mid".into(),
                scope: crate::api::SinkScope::Shared,
                write: CommitWrite::TopicAppend(vec![
                    output(Some("k"), Some(42), "a"),
                    output(None, None, "b"),
                ]),
            },
            &at,
        );
        assert_eq!(w.key, "mq:outbox:topic.mid:{in:2}");
        let CommitWrite::StreamAdd { entries, max_len } = w.write else {
            panic!("an outbox append is a stream append");
        };
        assert_eq!(max_len, None);
        // One entry for the commit: count, id prefix, commit time, then per record its
        // payload and, when it has them, key and own timestamp.
        assert_eq!(entries.len(), 1);
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        let ts: i64 = entries[0][2].1.parse().unwrap();
        assert_eq!(
            entries[0],
            [
                s("n", "2"),
                s("id", "job/g/in/2/17-0/"),
                s("ts", &ts.to_string()),
                s("p0", "a"),
                s("k0", "k"),
                s("t0", "42"),
                s("p1", "b"),
            ]
        );
        assert!(ts > 1_600_000_000_000, "the commit's time");
    }
}
