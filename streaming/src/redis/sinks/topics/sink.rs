//! [`RedisTopicSink`]: a pipeline's outputs into the outbox its topic forwarder reads.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::api::{CommitWrite, CommitWrites, Sink, TopicOutput};
use crate::mq::topic::validate_name;
use crate::redis::sinks::topics::outbox_name;
use crate::redis::{JsonList, RecordEncoding, TextList};
use crate::{BoxError, Error};

type KeyFn<T> = Arc<dyn Fn(&T) -> String + Send + Sync>;
type TimestampFn<T> = Arc<dyn Fn(&T) -> i64 + Send + Sync>;

/// Produces a pipeline's outputs into the queue topic `target`, exactly once (Kafka
/// Streams' `to(topic)`): each output is appended, in the batch commit, to the outbox
/// `topic.{target}` of its source partition (`{mq prefix}:outbox:topic.{target}:{S:p}`),
/// and a [`RedisTopicForwarder`](crate::redis::sinks::topics::RedisTopicForwarder) for `target` moves it into the
/// topic, where a job (or any subscriber) reads it as a [`Message`](crate::mq::Message)
/// like one a [`Producer`](crate::mq::Producer) sent (see the forwarder for keys and
/// guarantees).
///
/// The job runs that forwarder itself: each process of a job whose pipeline ends in this
/// sink starts one over every partition of the pipeline's source topic when the job
/// starts. When the job is cancelled, it waits for the job's subtasks to stop, forwards
/// what the outboxes hold until one
/// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout) after the
/// cancel, and stops; [`JobClient::shutdown`](crate::redis::JobClient::shutdown) and
/// `await_termination` wait for that. What is left then (a large backlog, the target
/// unwritable, Redis frozen) stays in the outboxes, not lost: the job's next run (or a
/// forwarder of yours) forwards it.
/// Its failures are in the job's errors
/// ([`JobDiagnostics::errors`](crate::redis::JobDiagnostics::errors)) as well as the
/// log. Each process's forwarder forwards the source partitions that process holds (for
/// any of the job's groups on that source), so a record is forwarded once however many
/// processes run, and an ownership change moves the forwarding with the partition; an
/// idle forwarder reads each of its partitions' outboxes every 100 ms. The drain at
/// shutdown covers every partition. With
/// [`forwarded_by_job(false)`](Self::forwarded_by_job) the job starts none and you run
/// the forwarder yourself (one process for it, say). Only a pipeline's main sink is
/// forwarded by the job: a topic sink used as a side output needs a forwarder of yours.
///
/// - Payload: the output as JSON ([`new`](Self::new), outputs need `Serialize`) or its
///   `Display` text ([`text`](Self::text)).
/// - Key ([`key`](Self::key)): the message key, which also picks the target partition like
///   the producer does; without one, an output goes to its source partition modulo the
///   target's partition count.
/// - Timestamp ([`timestamp`](Self::timestamp)): the message's event time; without one, the
///   time of the batch commit.
/// - Header `x-idempotency-key`: the output's stable id, `{job}/{group}/{source topic}/{p}/{offset}/{index}`.
///
/// ```no_run
/// # fn demo(env: &streaming::redis::RedisEnv) -> Result<(), streaming::Error> {
/// use streaming::mq::Message;
/// use streaming::redis::RedisTopicSink;
///
/// #[derive(serde::Serialize, serde::Deserialize, Clone)]
/// struct Enriched { customer: String, total: u64 }
///
/// env.from_mq_topic("orders", "enrich")
///     .map(|m: Message| Enriched { customer: m.key.as_deref().unwrap_or_default().to_owned(), total: 1 })
///     .sink(RedisTopicSink::new("enriched")?.key(|e: &Enriched| e.customer.clone()))?;
/// # Ok(()) }
/// ```
///
/// Redis engine only: on the memory engine `close` fails rather than dropping outputs.
pub struct RedisTopicSink<T, E = JsonList> {
    target: Arc<str>,
    outbox: Arc<str>,
    key: Option<KeyFn<T>>,
    timestamp: Option<TimestampFn<T>>,
    forwarded_by_job: bool,
    pending: Vec<TopicOutput>,
    _e: PhantomData<fn(E)>,
}

impl<T, E> Clone for RedisTopicSink<T, E> {
    fn clone(&self) -> Self {
        RedisTopicSink {
            target: Arc::clone(&self.target),
            outbox: Arc::clone(&self.outbox),
            key: self.key.clone(),
            timestamp: self.timestamp.clone(),
            forwarded_by_job: self.forwarded_by_job,
            pending: Vec::new(),
            _e: PhantomData,
        }
    }
}

impl<T, E> std::fmt::Debug for RedisTopicSink<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("RedisTopicSink"))
            .field("target", &self.target)
            .field("keyed", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl<T> RedisTopicSink<T> {
    /// A sink producing outputs as JSON (serde_json) into topic `target`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `topic`) if `target` is empty, over 200 bytes or has
    /// characters outside `[A-Za-z0-9_.-]`.
    pub fn new(target: impl Into<String>) -> Result<Self, Error> {
        Self::with_encoding(target.into())
    }

    /// A sink producing outputs as their `Display` text into topic `target`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn text(target: impl Into<String>) -> Result<RedisTopicSink<T, TextList>, Error> {
        RedisTopicSink::with_encoding(target.into())
    }
}

impl<T, E> RedisTopicSink<T, E> {
    fn with_encoding(target: String) -> Result<Self, Error> {
        validate_name("topic", &target)?;
        Ok(RedisTopicSink {
            outbox: outbox_name(&target).into(),
            target: target.into(),
            key: None,
            timestamp: None,
            forwarded_by_job: true,
            pending: Vec::new(),
            _e: PhantomData,
        })
    }

    /// Gives each message the key `key(&output)`: the target partition is
    /// [`partition_for_key`](crate::mq::partition_for_key) of it, as with the producer.
    #[must_use]
    pub fn key(mut self, key: impl Fn(&T) -> String + Send + Sync + 'static) -> Self {
        self.key = Some(Arc::new(key));
        self
    }

    /// Gives each message the timestamp `timestamp(&output)` (epoch ms) instead of the
    /// batch commit's time.
    #[must_use]
    pub fn timestamp(mut self, timestamp: impl Fn(&T) -> i64 + Send + Sync + 'static) -> Self {
        self.timestamp = Some(Arc::new(timestamp));
        self
    }

    /// Whether the job starts the forwarder of these outputs itself (default `true`; see
    /// above). With `false` nothing reaches the topic until you start a
    /// [`RedisTopicForwarder`](crate::redis::sinks::topics::RedisTopicForwarder) for (source topic, target).
    #[must_use]
    pub fn forwarded_by_job(mut self, yes: bool) -> Self {
        self.forwarded_by_job = yes;
        self
    }

    /// The target topic.
    pub fn target(&self) -> &str {
        &self.target
    }

    fn push(&mut self, value: &T, payload: String) {
        self.pending.push(TopicOutput {
            key: self.key.as_ref().map(|k| k(value)),
            timestamp_ms: self.timestamp.as_ref().map(|t| t(value)),
            payload,
        });
    }

    fn unwritten(&self) -> Result<(), BoxError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        Err(format!(
            "RedisTopicSink `{}` holds {} records no engine wrote: it only writes on the Redis engine",
            self.target,
            self.pending.len()
        )
        .into())
    }

    fn forwarded(&self) -> Option<Arc<str>> {
        self.forwarded_by_job.then(|| Arc::clone(&self.target))
    }

    fn commit_writes(&mut self) -> Option<CommitWrites> {
        Some(CommitWrites {
            list: Arc::clone(&self.outbox),
            // A topic is read by name by other jobs: never scoped to this one.
            scope: crate::api::SinkScope::Shared,
            write: CommitWrite::TopicAppend(std::mem::take(&mut self.pending)),
        })
    }
}

impl<T, E: RecordEncoding<T>> Sink<T> for RedisTopicSink<T, E> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        let payload = E::encode(&value)?;
        self.push(&value, payload);
        Ok(())
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.unwritten()
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        self.commit_writes()
    }

    fn forwarded_topic(&self) -> Option<Arc<str>> {
        self.forwarded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_key_timestamp_and_payload_for_the_topic_outbox() {
        let mut sink = RedisTopicSink::<(String, i64)>::new("enriched")
            .unwrap()
            .key(|v| v.0.clone())
            .timestamp(|v| v.1);
        sink.invoke(("k1".to_string(), 7)).unwrap();
        let w = sink.take_commit_writes().unwrap();
        assert_eq!(&*w.list, "topic.enriched");
        let CommitWrite::TopicAppend(out) = w.write else {
            panic!("a topic append");
        };
        assert_eq!(
            out,
            [TopicOutput {
                key: Some("k1".into()),
                timestamp_ms: Some(7),
                payload: r#"["k1",7]"#.into(),
            }]
        );
        assert!(sink.close().is_ok(), "nothing left unwritten");
        assert_eq!(sink.forwarded_topic().as_deref(), Some("enriched"));
        let manual = sink.clone().forwarded_by_job(false);
        assert_eq!(manual.forwarded_topic(), None);
    }

    #[test]
    fn text_outputs_without_key_and_bad_names() {
        let mut sink = RedisTopicSink::<u32>::text("t").unwrap();
        sink.invoke(5).unwrap();
        assert!(
            sink.close().is_err(),
            "the memory engine drops nothing silently"
        );
        let CommitWrite::TopicAppend(out) = sink.take_commit_writes().unwrap().write else {
            panic!("a topic append");
        };
        assert_eq!(
            (out[0].key.as_deref(), out[0].payload.as_str()),
            (None, "5")
        );
        assert!(RedisTopicSink::<u32>::new("a{b}").is_err());
        assert!(RedisTopicSink::<u32>::new("").is_err());
    }
}
