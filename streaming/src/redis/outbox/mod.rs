//! The transactional outbox: records a pipeline's batch commit appends to a Redis stream in
//! the source partition's hash slot ([`RedisOutboxSink`]: a record is in the outbox iff
//! the batch that produced it committed), and the [`RedisOutboxDispatcher`] that delivers them
//! to a system outside Redis (an HTTP service, a broker, a database) through a user's
//! [`OutboxTarget`].
//!
//! # Key layout
//! One outbox stream per source partition, in the partition's hash slot (its hash tag
//! `{T:n}`, see [`KeySpace::hash_tag`](crate::mq::KeySpace::hash_tag)), so appending to it
//! joins the partition's batch commit on a single server and on a Redis Cluster:
//! - `{mq prefix}:outbox:{name}:{T:n}` — the outbox stream: one entry per batch commit
//!   that produced records for it (one `XADD` per commit, however many records), with the
//!   fields `n` (its record count), `id` (the records' stable id prefix
//!   `{job}/{group}/{topic}/{partition}/{offset}/`, see [`OutboxRecord::id`]), `ts` (epoch
//!   milliseconds, decimal: when the batch commit ran, by the committing process's clock —
//!   not the records' event time) and per record `j` (from 0) `p{j}` (the bytes the sink
//!   serialised) and, from a [`RedisTopicSink`](crate::redis::RedisTopicSink) with a key or
//!   timestamp function, `k{j}` (the message key) and `t{j}` (the record's own timestamp).
//!   An entry without `n` is read as one record with the fields `id` (its whole id),
//!   `payload`, `ts` and `key` — what a service appending to an outbox by hand may write;
//! - `{outbox key}:dlq` — the dead-letter stream, one entry per dead-lettered record: `id`,
//!   `payload`, `ts`, `key` (when it has one), `reason` (the target's error, at most 512
//!   characters), `attempts` (failed deliveries), `outbox_entry_id` (the outbox entry that
//!   held it) and `dlq_ms`;
//! - `{outbox key}:attempts` — a hash of entry id → failed deliveries of its record being
//!   delivered, and `{entry id}:next` → the index of that record (absent: 0), so a
//!   restarted dispatcher goes on where the last one stopped.
//!
//! The dispatcher reads each outbox stream in a consumer group (created at id `0` when
//! missing, so it also delivers what was appended before it first ran).
//!
//! # Guarantees
//! - *Order per partition.* A partition's records reach the target in outbox order; a
//!   record that fails blocks the ones after it in its partition (not the other
//!   partitions) until it is delivered or dead-lettered.
//! - *At-least-once with stable ids.* A record is acknowledged and deleted (`XACK` + `XDEL`,
//!   one script) only after [`OutboxTarget::deliver`] returned `Ok`. A dispatcher that
//!   stops without settling a record (a crash, a dropped [`OutboxDispatch`], a lost reply)
//!   leaves it pending in the group; the next dispatcher with the same consumer name reads
//!   its pending entries first, in order, and delivers them again; one with another name
//!   claims them once idle for `claim_idle`, and reads nothing newer from that partition
//!   until then (so order holds). The target may thus see a record more than once,
//!   always with the same [`OutboxRecord::id`]: a target that must not apply a record twice
//!   keeps the ids it applied (a unique key, an upsert). End-to-end exactly-once is the
//!   outbox append (in the batch commit) plus such an idempotent target.
//! - *Dead letters.* A record whose delivery failed `max_attempts` times, or at once when
//!   the target returns [`Error::Permanent`], moves to the
//!   dead-letter stream with its reason and attempt count, atomically with its
//!   acknowledgement (one script in the partition's slot).
//! - Run one dispatcher per (outbox, consumer group) at a time: two dispatchers of one group
//!   share nothing but Redis and would deliver concurrently (still at-least-once, but not
//!   in order). Separate groups each get every record.

mod dispatcher;
mod entry;
mod lane;
mod options;
mod run;
mod sink;

use std::future::Future;

use bytes::Bytes;

use crate::mq::KeySpace;
use crate::{BoxError, Error};

pub use dispatcher::{OutboxDispatch, OutboxStats};
pub use options::{RedisOutboxDispatcher, RedisOutboxDispatcherBuilder};
pub use sink::RedisOutboxSink;

pub(crate) use entry::{entry_fields, entry_records, EntryRecord};

/// One record of an outbox, as the dispatcher hands it to an [`OutboxTarget`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxRecord {
    /// The stable record id, `{job}/{group}/{topic}/{partition}/{offset}/{index}`: the
    /// job and consumer group that produced it, the source topic and partition, the offset
    /// its batch commit acknowledged (the batch's last entry id; for the outputs of timers
    /// and idle flushes, which read no input, `t{token}.{n}`: the partition lease's
    /// fencing token of the owner and the count of such commits in its ownership), and its
    /// index among that commit's records of the outbox (from 0). Unique per record, and
    /// the same on every delivery of it, so a target can deduplicate by it. Not the same
    /// across a replay: outputs produced again after a checkpoint restore (or by another
    /// run over the same input) get ids of their own batches.
    pub id: String,
    /// The source partition whose outbox holds the record.
    pub partition: u32,
    /// What the sink serialised.
    pub payload: Bytes,
    /// Epoch milliseconds (0 when the entry has none): when the batch commit that appended
    /// the record ran, by the committing process's clock — not the record's event time (a
    /// sink sees only the value; put the event time in the payload if needed) — except for
    /// a [`RedisTopicSink`](crate::redis::RedisTopicSink) with a timestamp function, which
    /// writes the record's own.
    pub timestamp_ms: i64,
    /// The record's message key: set by a [`RedisTopicSink`](crate::redis::RedisTopicSink)
    /// with a key function, `None` otherwise.
    pub key: Option<String>,
    /// The id in the outbox stream (`{ms}-{seq}`) of the entry holding the record (one
    /// entry per batch commit).
    pub entry_id: String,
    /// The record's index within that entry (from 0): with `entry_id`, its position in
    /// the outbox.
    pub index: u32,
    /// Which delivery attempt this is: 1 for the first, 2 after one failure, and so on
    /// (failures are counted in Redis, so they survive a dispatcher restart).
    pub attempt: u32,
}

impl OutboxRecord {
    /// The payload as UTF-8 text.
    ///
    /// # Errors
    /// [`Error::MqDecode`] when the payload is not UTF-8.
    pub fn text(&self) -> Result<&str, Error> {
        std::str::from_utf8(&self.payload).map_err(|e| Error::MqDecode {
            what: "payload",
            reason: e.to_string(),
        })
    }
}

/// Where an outbox's records go: a user's client of another system.
///
/// `deliver` is called for one record at a time (the dispatcher awaits it before the next
/// call, also across partitions) and should bound its own wait (a timeout). Return `Ok`
/// once the record is durably accepted; an `Err` is retried with backoff up to the
/// dispatcher's `max_attempts`, then dead-lettered; an
/// [`Error::permanent`] error is dead-lettered at once. A record
/// may be delivered again after a crash: deduplicate by [`OutboxRecord::id`].
///
/// ```
/// use streaming::redis::outbox::{OutboxRecord, OutboxTarget};
/// use streaming::BoxError;
///
/// struct Print;
/// impl OutboxTarget for Print {
///     async fn deliver(&mut self, record: &OutboxRecord) -> Result<(), BoxError> {
///         println!("{} {}", record.id, record.text()?);
///         Ok(())
///     }
/// }
/// ```
pub trait OutboxTarget: Send + 'static {
    /// Delivers `record`; `Ok` lets the dispatcher acknowledge and delete it.
    fn deliver(
        &mut self,
        record: &OutboxRecord,
    ) -> impl Future<Output = Result<(), BoxError>> + Send;
}

/// The outbox stream of `name` for source partition `partition` of `topic`:
/// `{prefix}:outbox:{name}:{T:n}`, in the partition's hash slot.
pub(crate) fn outbox_key(keys: &KeySpace, prefix: &str, name: &str, topic: &str, p: u32) -> String {
    format!("{prefix}:outbox:{name}:{}", keys.hash_tag(topic, p))
}

/// The dead-letter stream of an outbox stream, `{outbox key}:dlq`.
pub(crate) fn dlq_key(outbox: &str) -> String {
    format!("{outbox}:dlq")
}

/// The failed-attempt counts of an outbox stream, `{outbox key}:attempts`.
pub(crate) fn attempts_key(outbox: &str) -> String {
    format!("{outbox}:attempts")
}

/// The stable id of a record: `{job}/{group}/{topic}/{partition}/{offset}/{index}`.
pub(crate) fn record_id(
    (job, group): (&str, &str),
    (topic, partition): (&str, u32),
    offset: &str,
    index: impl std::fmt::Display,
) -> String {
    format!("{job}/{group}/{topic}/{partition}/{offset}/{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_partition_hash_tag() {
        let keys = KeySpace::new("mq");
        let k = outbox_key(&keys, "mq", "mails", "orders", 3);
        assert_eq!(k, "mq:outbox:mails:{orders:3}");
        assert_eq!(dlq_key(&k), "mq:outbox:mails:{orders:3}:dlq");
        assert_eq!(attempts_key(&k), "mq:outbox:mails:{orders:3}:attempts");
        let slot = |k: &str| crate::mq::slot::key_slot(k.as_bytes());
        assert_eq!(slot(&k), slot(&keys.stream("orders", 3)));
        assert_eq!(slot(&dlq_key(&k)), slot(&keys.stream("orders", 3)));
    }

    #[test]
    fn record_ids_name_job_source_and_index() {
        assert_eq!(
            record_id(("job", "g"), ("orders", 2), "17-0", 1),
            "job/g/orders/2/17-0/1"
        );
    }
}
