//! The forwarder's writes: one outbox record into its target partition unless that
//! partition's mark for the record's outbox has it (`lua/topic_forward.lua`), and the
//! position a source partition's forwarding reached, from the marks.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use redis::Script;

use crate::mq::message::encode_fields;
use crate::mq::{partition_for_key, Connection, KeySpace, HEADER_IDEMPOTENCY_KEY};
use crate::redis::outbox::OutboxRecord;
use crate::Error;

/// Appends a message unless its partition's mark has it (`lua/topic_forward.lua`).
static FORWARD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/topic_forward.lua")));

/// What the forwarder's target has done (this process only).
#[derive(Debug, Default)]
pub(super) struct Forwarded {
    pub(super) appended: AtomicU64,
    pub(super) skipped: AtomicU64,
    pub(super) failed: AtomicU64,
}

/// Where a topic forwarder appends: the target topic's streams and marks.
pub(super) struct TopicTarget {
    pub(super) conn: Connection,
    pub(super) keys: KeySpace,
    pub(super) prefix: String,
    pub(super) target: String,
    /// The target topic's partition count (read when the forwarder starts).
    pub(super) partitions: u32,
    pub(super) max_len: Option<usize>,
    /// `{outbox name}/{source topic}/`: the marks' field is this and the source partition.
    pub(super) mark_field: String,
    pub(super) counts: Arc<Forwarded>,
}

/// The target partition of a record: by its key like the producer, else its source
/// partition modulo the target's partition count (the same on every forward of it).
pub(super) fn target_partition(key: Option<&str>, source_partition: u32, partitions: u32) -> u32 {
    match key {
        Some(k) => partition_for_key(k, partitions),
        None => source_partition % partitions,
    }
}

/// A stream id `{ms}-{seq}` as numbers.
pub(super) fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// The forwarding marks of target partition `q`, `{prefix}:{T:q}:forwarded`.
pub(super) fn marks_key(keys: &KeySpace, prefix: &str, target: &str, q: u32) -> String {
    format!("{prefix}:{}:forwarded", keys.hash_tag(target, q))
}

impl TopicTarget {
    /// Appends `r` to its target partition unless that partition's mark has it (counted
    /// as appended or skipped).
    pub(super) async fn forward(&mut self, r: &OutboxRecord) -> Result<(), Error> {
        let q = target_partition(r.key.as_deref(), r.partition, self.partitions);
        let headers = BTreeMap::from([(HEADER_IDEMPOTENCY_KEY.to_string(), r.id.clone())]);
        let fields = encode_fields(
            r.key.as_deref(),
            &r.payload,
            &headers,
            r.timestamp_ms,
            0,
            None,
        );
        let mut call = FORWARD.prepare_invoke();
        call.key(self.keys.stream(&self.target, q))
            .key(marks_key(&self.keys, &self.prefix, &self.target, q))
            .arg(format!("{}{}", self.mark_field, r.partition))
            .arg(format!("{}/{}", r.entry_id, r.index))
            .arg(self.max_len.map(|n| n.to_string()).unwrap_or_default());
        for (f, v) in fields {
            call.arg(f).arg(v);
        }
        let appended: i64 = call.invoke_async(&mut self.conn).await?;
        let counter = if appended == 1 {
            &self.counts.appended
        } else {
            &self.counts.skipped
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The outbox entry (as `(ms, seq)`) of the last record of source partition `p`
    /// forwarded: the largest of its marks over the target partitions (`None` when
    /// none). Records go in order, so every record before it has been handled, and the
    /// entry's own records are skipped by the marks up to that one.
    pub(super) async fn forwarded_position(&mut self, p: u32) -> Result<Option<(u64, u64)>, Error> {
        let mut position = None;
        for q in 0..self.partitions {
            let key = marks_key(&self.keys, &self.prefix, &self.target, q);
            let mark: Option<String> = redis::cmd("HGET")
                .arg(key)
                .arg(format!("{}{p}", self.mark_field))
                .query_async(&mut self.conn)
                .await?;
            let entry = mark.as_deref().and_then(|m| parse_id(m.split('/').next()?));
            position = position.max(entry);
        }
        Ok(position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_goes_to_the_same_partition_every_time() {
        assert_eq!(
            target_partition(Some("customer-7"), 3, 4),
            partition_for_key("customer-7", 4)
        );
        assert_eq!(target_partition(None, 5, 4), 1);
        assert_eq!(target_partition(None, 2, 4), 2);
    }

    #[test]
    fn marks_share_the_target_partition_slot() {
        let keys = KeySpace::new("mq");
        let marks = marks_key(&keys, "mq", "enriched", 3);
        assert_eq!(marks, "mq:{enriched:3}:forwarded");
        let slot = |k: &str| crate::mq::slot::key_slot(k.as_bytes());
        assert_eq!(slot(&marks), slot(&keys.stream("enriched", 3)));
    }
}
