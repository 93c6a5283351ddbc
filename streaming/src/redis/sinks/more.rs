//! More sinks that write in the batch commit, like [`RedisListSink`](crate::redis::RedisListSink):
//! [`RedisHashSink`] (upserts), [`RedisStreamSink`] (appends a service reads as a stream)
//! and [`RedisIdempotentListSink`] (appends at most once per idempotency key).
//!
//! Each buffers a batch's records and the engine writes them in the batch's one commit
//! transaction, with the state changes and the acknowledgement, on the partition's key
//! `{name}:{T:n}` (the partition's hash tag: one slot with the partition's other keys on
//! Redis Cluster). So a record's effect is in Redis exactly once per acknowledged input,
//! also across crashes and takeovers, and several such sinks in one pipeline (main and
//! side outputs) commit together. They write only on the Redis engine: on the memory
//! engine `close` fails instead of dropping what they hold.

use crate::api::{CommitWrite, CommitWrites, Sink, SinkScope};
use crate::redis::sinks::commit_writes::{partition_key, IDEMPOTENT_APPEND};
use crate::{BoxError, Error};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// A function naming a record's hash field or idempotency key.
type KeyFn<T> = Arc<dyn Fn(&T) -> String + Send + Sync>;

/// Checks a sink's key name (as [`RedisListSink`](crate::redis::RedisListSink) does).
fn validate(field: &'static str, name: &str) -> Result<Arc<str>, Error> {
    if name.is_empty() || name.contains(['{', '}']) {
        return Err(Error::InvalidConfig {
            field,
            reason: format!(
                "`{name}` must be non-empty and without braces: the engine appends the partition's hash tag itself"
            ),
        });
    }
    Ok(name.into())
}

/// The error of a sink closed with records no engine wrote.
fn unwritten(kind: &str, name: &str, n: usize) -> Result<(), BoxError> {
    if n == 0 {
        return Ok(());
    }
    Err(format!(
        "{kind} `{name}` holds {n} records no engine wrote: it only writes on the Redis engine"
    )
    .into())
}

/// Upserts each record as JSON into the hash `{name}:{T:n}` under the field `field(&record)`
/// (`HSET`; a later record with the same field replaces it), in the batch commit.
///
/// The key carries no job name or key prefix by default (like [`RedisListSink`](crate::redis::RedisListSink)'s):
/// two jobs, or two runs, that use the same name on the same topic write the same keys;
/// `job_scoped` puts the job name in front (`{job}:{name}:{T:n}`). Sinks of one pipeline must not share a name across kinds (a
/// hash sink and a stream sink both called `out`): such a commit is refused with
/// [`Error::InvalidConfig`] (field `sink`), nothing of the batch is written and the
/// partition stops ([`PartitionProgress::stopped`](crate::redis::PartitionProgress::stopped)).
pub struct RedisHashSink<T> {
    name: Arc<str>,
    scope: SinkScope,
    field: KeyFn<T>,
    pending: Vec<(String, String)>,
}

impl<T> Clone for RedisHashSink<T> {
    fn clone(&self) -> Self {
        RedisHashSink {
            name: Arc::clone(&self.name),
            scope: self.scope,
            field: Arc::clone(&self.field),
            pending: Vec::new(),
        }
    }
}

impl<T> std::fmt::Debug for RedisHashSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisHashSink")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

scoped_sink!(RedisHashSink<T>);

impl<T> RedisHashSink<T> {
    /// A sink upserting into the hashes `{name}:{T:n}`, field `field(&record)`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `name`) if `name` is empty or has braces.
    pub fn new(
        name: impl Into<String>,
        field: impl Fn(&T) -> String + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        Ok(RedisHashSink {
            name: validate("name", &name.into())?,
            scope: SinkScope::Shared,
            field: Arc::new(field),
            pending: Vec::new(),
        })
    }

    /// The hash partition `partition` of `topic` writes: `{name}:{topic:partition}`.
    pub fn key_for(name: &str, topic: &str, partition: u32) -> String {
        partition_key(name, topic, partition)
    }
}

impl<T: Serialize> Sink<T> for RedisHashSink<T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        let field = (self.field)(&value);
        self.pending.push((field, serde_json::to_string(&value)?));
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        unwritten("RedisHashSink", &self.name, self.pending.len())
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        Some(CommitWrites {
            list: Arc::clone(&self.name),
            scope: self.scope,
            write: CommitWrite::HashSet(std::mem::take(&mut self.pending)),
        })
    }
}

/// Appends each record to the stream `{name}:{T:n}` (`XADD`, one entry per record with
/// the field `v` = the record as JSON; `MAXLEN ~ max_len` when set), in the batch commit,
/// for a service that reads it with `XREAD` / a consumer group.
///
/// The key carries no job name or key prefix by default (like [`RedisListSink`](crate::redis::RedisListSink)'s):
/// two jobs, or two runs, that use the same name on the same topic write the same keys;
/// `job_scoped` puts the job name in front (`{job}:{name}:{T:n}`). Sinks of one pipeline must not share a name across kinds (a
/// hash sink and a stream sink both called `out`): such a commit is refused with
/// [`Error::InvalidConfig`] (field `sink`), nothing of the batch is written and the
/// partition stops ([`PartitionProgress::stopped`](crate::redis::PartitionProgress::stopped)).
#[derive(Debug)]
pub struct RedisStreamSink<T> {
    name: Arc<str>,
    scope: SinkScope,
    max_len: Option<usize>,
    pending: Vec<Vec<(String, String)>>,
    _t: std::marker::PhantomData<fn(T)>,
}

impl<T> Clone for RedisStreamSink<T> {
    fn clone(&self) -> Self {
        RedisStreamSink {
            name: Arc::clone(&self.name),
            scope: self.scope,
            max_len: self.max_len,
            pending: Vec::new(),
            _t: std::marker::PhantomData,
        }
    }
}

scoped_sink!(RedisStreamSink<T>);

impl<T> RedisStreamSink<T> {
    /// A sink appending to the streams `{name}:{T:n}`; `max_len` trims each about there
    /// (`MAXLEN ~`), `None` keeps every entry.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `name`) if `name` is empty or has braces; (field
    /// `max_len`) for `Some(0)`.
    pub fn new(name: impl Into<String>, max_len: Option<usize>) -> Result<Self, Error> {
        if max_len == Some(0) {
            return Err(Error::InvalidConfig {
                field: "max_len",
                reason: "must be at least 1 when set".into(),
            });
        }
        Ok(RedisStreamSink {
            name: validate("name", &name.into())?,
            scope: SinkScope::Shared,
            max_len,
            pending: Vec::new(),
            _t: std::marker::PhantomData,
        })
    }

    /// The stream partition `partition` of `topic` appends to: `{name}:{topic:partition}`.
    pub fn key_for(name: &str, topic: &str, partition: u32) -> String {
        partition_key(name, topic, partition)
    }
}

impl<T: Serialize> Sink<T> for RedisStreamSink<T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self.pending
            .push(vec![("v".to_string(), serde_json::to_string(&value)?)]);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        unwritten("RedisStreamSink", &self.name, self.pending.len())
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        Some(CommitWrites {
            list: Arc::clone(&self.name),
            scope: self.scope,
            write: CommitWrite::StreamAdd {
                entries: std::mem::take(&mut self.pending),
                max_len: self.max_len,
            },
        })
    }
}

/// Appends each record as JSON to the list `{name}:{T:n}` at most once per idempotency
/// key `key(&record)` within `ttl`: the keys seen are kept in the sorted set
/// `{name}:dedup:{T:n}` (key → expiry ms). In the engine the partition's owner reads
/// which of a batch's keys the set holds (one `ZMSCORE`; it is the set's only writer and
/// its commit is fenced) and the batch commit appends the new records, notes their keys
/// and drops expired ones, so it is exactly once per input like
/// [`RedisListSink`](crate::redis::RedisListSink)
/// and also drops records whose key a *different* input already produced (a producer's
/// retried send, a replayed dead letter). [`append`](Self::append) runs it on its own.
///
/// The keys carry no job or group unless the sink is `job_scoped` (`{job}:{name}:{T:n}`,
/// `{job}:{name}:dedup:{T:n}`): give each pipeline its own `name`. Two pipelines
/// (say two consumer groups of one topic) with the same name share the keys, and each
/// checks the set before its own commit, so both could append a record with the same
/// key; likewise do not [`append`](Self::append) to a running pipeline's keys.
pub struct RedisIdempotentListSink<T> {
    name: Arc<str>,
    scope: SinkScope,
    key: KeyFn<T>,
    ttl: Duration,
    pending: Vec<(String, String)>,
}

impl<T> Clone for RedisIdempotentListSink<T> {
    fn clone(&self) -> Self {
        RedisIdempotentListSink {
            name: Arc::clone(&self.name),
            scope: self.scope,
            key: Arc::clone(&self.key),
            ttl: self.ttl,
            pending: Vec::new(),
        }
    }
}

impl<T> std::fmt::Debug for RedisIdempotentListSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("RedisIdempotentListSink"))
            .field("name", &self.name)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

scoped_sink!(RedisIdempotentListSink<T>);

impl<T> RedisIdempotentListSink<T> {
    /// A sink appending to the lists `{name}:{T:n}` once per `key(&record)` within `ttl`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `name`) if `name` is empty or has braces; (field
    /// `ttl`) for a TTL under 1 ms.
    pub fn new(
        name: impl Into<String>,
        ttl: Duration,
        key: impl Fn(&T) -> String + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        if ttl < Duration::from_millis(1) {
            return Err(Error::InvalidConfig {
                field: "ttl",
                reason: "must be at least 1 ms".into(),
            });
        }
        Ok(RedisIdempotentListSink {
            name: validate("name", &name.into())?,
            scope: SinkScope::Shared,
            key: Arc::new(key),
            ttl,
            pending: Vec::new(),
        })
    }

    /// The list and dedup set partition `partition` of `topic` writes.
    pub fn keys_for(name: &str, topic: &str, partition: u32) -> (String, String) {
        (
            partition_key(name, topic, partition),
            crate::redis::sinks::commit_writes::dedup_key(name, topic, partition),
        )
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

impl<T: Serialize> RedisIdempotentListSink<T> {
    /// Appends `records` to `list` at most once per idempotency key, outside the engine
    /// (one script): `dedup` is the set of keys seen, which must share `list`'s hash slot
    /// on Redis Cluster (give both the same hash tag, e.g. `orders:{eu}` and
    /// `orders:dedup:{eu}`). Returns how many were appended.
    ///
    /// # Errors
    /// [`Error::Redis`]; [`Error::Engine`] when a record does not serialize.
    pub async fn append(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
        (list, dedup): (&str, &str),
        records: &[T],
    ) -> Result<u64, Error> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(IDEMPOTENT_APPEND.as_str())
            .arg(2)
            .arg(list)
            .arg(dedup)
            .arg(self.ttl_ms());
        for r in records {
            let json = serde_json::to_string(r).map_err(|e| Error::Engine {
                op: "RedisIdempotentListSink::append",
                reason: e.to_string(),
            })?;
            cmd.arg((self.key)(r)).arg(json);
        }
        Ok(cmd.query_async(conn).await?)
    }
}

impl<T: Serialize> Sink<T> for RedisIdempotentListSink<T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        let key = (self.key)(&value);
        self.pending.push((key, serde_json::to_string(&value)?));
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        unwritten("RedisIdempotentListSink", &self.name, self.pending.len())
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        Some(CommitWrites {
            list: Arc::clone(&self.name),
            scope: self.scope,
            write: CommitWrite::IdempotentAppend {
                ttl_ms: self.ttl_ms(),
                items: std::mem::take(&mut self.pending),
            },
        })
    }
}
