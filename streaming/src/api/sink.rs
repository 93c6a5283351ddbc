//! The [`Sink`] trait: where a pipeline's records end.

use crate::BoxError;
use std::sync::{Arc, Mutex};

/// Receives a pipeline's output records.
///
/// Lifecycle: `open` once before the first record, `invoke` per record, `close`
/// once at the end — also when the pipeline fails. Closures `FnMut(T)` are sinks.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a sink of `{T}`, the element type arriving here",
    label = "the stream's elements are `{T}`; this sink does not take them",
    note = "map the stream to the type the sink takes first, or give the sink the stream's element type (e.g. `RedisListSink::<{T}>::new(..)`); a sink that stores JSON takes serde `Serialize` elements only (`Message` is not one: map it to your own type)"
)]
pub trait Sink<T> {
    /// Prepares the sink. The default does nothing.
    ///
    /// # Errors
    /// Any error aborts the pipeline before it reads input.
    fn open(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Writes one record.
    ///
    /// # Errors
    /// Any error aborts the pipeline; the terminal operation returns it, naming the sink.
    fn invoke(&mut self, value: T) -> Result<(), BoxError>;

    /// Ends a batch: every record of it has been passed to [`invoke`](Self::invoke). A sink
    /// that buffers in `invoke` writes the buffer here (one multi-row statement, one
    /// request), so an at-least-once sink to a database or service writes per batch
    /// instead of per record. The default does nothing.
    ///
    /// When it is called:
    /// - Redis engine: once per committed batch of a partition (also the commits of timers
    ///   and idle flushes), after the batch's outputs were invoked and *before* the batch
    ///   commits in Redis; a batch with no output calls it too. When it fails the batch
    ///   does not commit: it is read again from the last commit and its outputs are
    ///   invoked again *on the same sink instance* — so a `flush` that fails must drop
    ///   what it buffered (keep nothing of the failed batch), or the next `flush` writes
    ///   it twice. Delivery is at-least-once: the target must tolerate a batch written
    ///   twice, as after a crash between `flush` and the commit.
    /// - Memory engine: once, at the end of input (after the final watermark fired every
    ///   window), before [`close`](Self::close).
    ///
    /// The same holds for side outputs (late data, rejected elements) at the same points.
    ///
    /// # Errors
    /// Redis engine: the batch is not committed and is read again after a backoff (the
    /// error is in the job's errors and the partition's `last_error`). Memory engine: the
    /// pipeline fails; the terminal operation returns the error, naming the sink.
    fn flush(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Releases the sink. Called after the last record and after a failure.
    ///
    /// # Errors
    /// Reported by the terminal operation when the pipeline itself succeeded.
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Output the sink buffered to be written atomically with the input batch that
    /// produced it (the Redis engine's commit). Sinks writing elsewhere return `None` (the
    /// default).
    #[doc(hidden)]
    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        None
    }

    /// The two-phase-commit hooks of a sink whose target joins the batch commit that way
    /// (`streaming::redis::two_phase`); `None` (the default) for any other sink.
    #[doc(hidden)]
    fn two_phase(&mut self) -> Option<&mut dyn super::two_phase::TwoPhaseHooks> {
        None
    }

    /// The queue topic a Redis job forwards this sink's outputs into (a topic sink's
    /// target); `None` (the default) for every other sink.
    #[doc(hidden)]
    fn forwarded_topic(&self) -> Option<std::sync::Arc<str>> {
        None
    }
}

/// Whose keys a Redis sink that writes in the batch commit writes (`RedisListSink`,
/// `RedisHashSink`, `RedisStreamSink`, `RedisIdempotentListSink`; their `job_scoped`
/// method chooses [`SinkScope::Job`]).
///
/// The default is [`Shared`](SinkScope::Shared): a sink's keys are named by the sink alone,
/// because they are the job's output — what other services read by a name they know —
/// as a Kafka Streams output topic is named without its application id. Choose
/// [`Job`](SinkScope::Job) when the output belongs to the job: two jobs (or a job and its
/// test run) that use the same sink name then write different keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SinkScope {
    /// Keys `{name}:{T:n}`: every job that uses the name writes the same keys.
    #[default]
    Shared,
    /// Keys `{job}:{name}:{T:n}`, `job` being the job name
    /// (`RedisRuntimeConfig::job_name`).
    Job,
}

impl SinkScope {
    /// The base name of the keys sink `name` of job `job` writes: `name` when shared,
    /// `{job}:{name}` for the job. Partition `n` of topic `T` then writes
    /// `{base}:{T:n}` (pass the base to the sink's `key_for`).
    pub fn base_name(self, job: &str, name: &str) -> String {
        match self {
            SinkScope::Shared => name.to_string(),
            SinkScope::Job => format!("{job}:{name}"),
        }
    }
}

/// What a Redis sink buffered for the batch commit (see
/// [`RedisListSink`](crate::redis::RedisListSink)): writes to one key per partition,
/// `{name}:{T:n}` (the engine appends the partition's hash tag), or
/// `{job}:{name}:{T:n}` for a job-scoped sink.
#[doc(hidden)]
#[derive(Debug)]
pub struct CommitWrites {
    /// The key's base name.
    pub list: std::sync::Arc<str>,
    /// Whether the job name prefixes the keys.
    pub scope: SinkScope,
    /// The writes, in output order.
    pub write: CommitWrite,
}

/// The writes of one [`CommitWrites`].
#[doc(hidden)]
#[derive(Debug)]
pub enum CommitWrite {
    /// `RPUSH` of the values.
    ListAppend(Vec<String>),
    /// `HSET` of (field, value) pairs (a later pair for the same field wins).
    HashSet(Vec<(String, String)>),
    /// One `XADD` per entry (its field/value pairs), `MAXLEN ~ n` when set.
    StreamAdd {
        entries: Vec<Vec<(String, String)>>,
        max_len: Option<usize>,
    },
    /// One outbox entry holding the payloads (see the `outbox` module docs for its fields)
    /// on the outbox stream `{mq prefix}:outbox:{name}:{T:n}`; the engine names each
    /// record `{job}/{group}/{topic}/{partition}/{offset}/{index}`.
    OutboxAppend(Vec<String>),
    /// Like `OutboxAppend`, with each output's own timestamp and message key when set:
    /// what a topic sink forwards.
    TopicAppend(Vec<TopicOutput>),
    /// `RPUSH` of each (idempotency key, value) whose key is not in the dedup set
    /// `{name}:dedup:{T:n}` (kept `ttl_ms` per key), in one script.
    IdempotentAppend {
        ttl_ms: u64,
        items: Vec<(String, String)>,
    },
}

/// One output of a topic sink ([`CommitWrite::TopicAppend`]).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicOutput {
    /// The message key the target topic partitions by.
    pub key: Option<String>,
    /// The message timestamp, epoch ms (`None`: the commit's time).
    pub timestamp_ms: Option<i64>,
    /// The message payload.
    pub payload: String,
}

impl CommitWrite {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        match self {
            CommitWrite::ListAppend(v) | CommitWrite::OutboxAppend(v) => v.is_empty(),
            CommitWrite::TopicAppend(v) => v.is_empty(),
            CommitWrite::HashSet(v) => v.is_empty(),
            CommitWrite::StreamAdd { entries, .. } => entries.is_empty(),
            CommitWrite::IdempotentAppend { items, .. } => items.is_empty(),
        }
    }
}

impl<T, F: FnMut(T)> Sink<T> for F {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self(value);
        Ok(())
    }
}

/// An element a window operator rejected because the bounds of a window it belongs to do
/// not fit in `i64` milliseconds (e.g. a timestamp near `i64::MAX`): what the window's
/// rejected-element side output receives. The element took no part in any window; the
/// pipeline went on with the next element. It does not move the watermark: the watermark
/// generators before the window go back to their state before it, so the elements after it
/// are judged against the watermark before it (a timestamp near `i64::MAX` makes nothing
/// late).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RejectedElement<T> {
    /// The element as it reached the window.
    pub element: T,
    /// Its event time (ms).
    pub timestamp: i64,
    /// The id of the window operator that rejected it, e.g. `orders/3:window-count`.
    pub operator: String,
}

/// Collects records into a shared `Vec` (for tests and small jobs), on every engine. Clones
/// share the vector, so every partition's copy appends to it, and a side output given to a
/// [fragment](crate::fragment) under test can be read after the run. On the Redis engine
/// records arrive after their batch was processed and before it commits: after a crash or
/// a failed commit a batch's output can appear twice (at-least-once), unlike
/// `RedisListSink`.
#[derive(Debug)]
pub struct CollectSink<T> {
    items: Arc<Mutex<Vec<T>>>,
}

impl<T> Clone for CollectSink<T> {
    fn clone(&self) -> Self {
        CollectSink {
            items: Arc::clone(&self.items),
        }
    }
}

impl<T> Default for CollectSink<T> {
    fn default() -> Self {
        CollectSink {
            items: Arc::default(),
        }
    }
}

impl<T> CollectSink<T> {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared vector.
    pub fn items(&self) -> Arc<Mutex<Vec<T>>> {
        Arc::clone(&self.items)
    }

    /// A copy of what was collected so far.
    pub fn snapshot(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.items.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// How many records were collected so far.
    pub fn len(&self) -> usize {
        self.items.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// Whether nothing was collected yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Sink<T> for CollectSink<T> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        self.items
            .lock()
            .map_err(|_| "collect sink poisoned")?
            .push(value);
        Ok(())
    }
}
