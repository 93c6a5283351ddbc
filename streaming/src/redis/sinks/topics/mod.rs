//! Job-to-job topics: a pipeline's output produced into another topic of the queue exactly
//! once, for another job (or any [`Mq`](crate::mq::Mq) consumer) to read.
//!
//! Two halves:
//! - [`RedisTopicSink`] buffers each output as an outbox record (payload, message key,
//!   timestamp) and the batch commit appends it to the source partition's outbox stream
//!   `{mq prefix}:outbox:topic.{target}:{S:p}` (see [`crate::redis::outbox`]): an output is
//!   in the outbox exactly when the batch that produced it committed.
//! - [`RedisTopicForwarder`] reads those outboxes (per source partition in order, from
//!   the position its marks say was forwarded) and appends each record to its target
//!   partition in a transaction in that partition's hash slot, whose scripts check and
//!   move the partition's *forwarding mark*. Each process of a job with a topic sink
//!   starts one for it (`started.rs`).
//!
//! Keys, message format and guarantees: [`RedisTopicForwarder`].

pub(crate) mod forwarder;
pub(crate) mod run;
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
