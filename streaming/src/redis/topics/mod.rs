//! Job-to-job topics: a pipeline's output produced into another topic of the queue exactly
//! once, for another job (or any [`Mq`](crate::mq::Mq) consumer) to read.
//!
//! Two halves:
//! - [`RedisTopicSink`] buffers each output as an outbox record (payload, message key,
//!   timestamp) and the batch commit appends it to the source partition's outbox stream
//!   `{mq prefix}:outbox:topic.{target}:{S:p}` (see [`crate::redis::outbox`]): an output is
//!   in the outbox exactly when the batch that produced it committed.
//! - [`RedisTopicForwarder`] reads those outboxes (an outbox dispatcher: per source
//!   partition in order, acknowledging a record only after it was forwarded) and appends
//!   each record to its target partition with one script in that partition's hash slot,
//!   which also checks and moves the partition's *forwarding mark*.
//!
//! # Key layout
//! With queue key prefix `P`, target topic `T` and target partition `q`:
//! - `P:{T:q}:s` — the target partition's stream (as a [`Producer`](crate::mq::Producer)
//!   writes it; `MAXLEN ~` the queue's `max_len` when set);
//! - `P:{T:q}:forwarded` — the forwarding marks: a hash of outbox stream → the id of the
//!   last outbox entry forwarded into this partition, field
//!   `{outbox name}/{source topic}/{source partition}` (one field per source partition
//!   and outbox, so its size does not grow with the records).
//!
//! # Messages
//! A forwarded message is a queue message like any other: payload `p` (the sink's
//! encoding of the output), timestamp `ts`, key `k` when the sink has a key function, and
//! header [`HEADER_IDEMPOTENCY_KEY`](crate::mq::HEADER_IDEMPOTENCY_KEY) = the output's
//! stable [`OutboxRecord::id`](crate::redis::outbox::OutboxRecord::id)
//! (`{job}/{source topic}/{p}/{offset}/{index}`). Its partition: with a key,
//! [`partition_for_key`](crate::mq::partition_for_key) (like the producer); without one,
//! the source partition modulo the target's partition count (never round robin: a record
//! forwarded again must go to the same partition, where its mark is).
//!
//! # Guarantees
//! - *Exactly once into the target topic.* Outbox entry ids grow within an outbox stream,
//!   and the forwarder hands a source partition's records over in that order, so a record
//!   whose id is not after its target partition's mark was appended already (a forwarder
//!   that crashed after the append and before the acknowledgement, or whose reply was
//!   lost, forwards it again): the script appends nothing and moves nothing. The check and
//!   the append are one script, so there is no window between them.
//! - *Order.* A source partition's outputs reach each target partition in output order.
//! - Run one forwarder per (target topic, source partition) at a time: two running side by
//!   side (same group) could forward a partition's records out of order, and a record
//!   arriving after a later one of its partition is then skipped as forwarded (lost).
//!   Restarting the forwarder after a crash (with the same consumer name) is the intended
//!   recovery; one with another name takes over after `claim_idle`.
//! - *Dead letters.* By default a forward is retried without limit (with backoff): a
//!   record that cannot be forwarded blocks its source partition's later records rather
//!   than leaving the topic. With
//!   [`max_attempts`](RedisTopicForwarderBuilder::max_attempts) set, a record that failed
//!   that many times moves to the outbox's dead-letter stream and is **not** forwarded
//!   (the ones after it are); forwarding it later is up to you.
//! - The target topic's partition count must not change while records are being
//!   forwarded (a re-forward could pick another partition, whose mark does not know it).

mod forwarder;
mod sink;
mod target;

pub use forwarder::{
    RedisTopicForwarder, RedisTopicForwarderBuilder, TopicForwardStats, TopicForwarding,
};
pub use sink::RedisTopicSink;

/// The outbox a topic sink for `target` appends to: `topic.{target}`.
pub(crate) fn outbox_name(target: &str) -> String {
    format!("topic.{target}")
}
