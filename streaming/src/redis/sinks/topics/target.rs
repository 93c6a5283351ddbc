//! The forwarder's writes: outbox records into their target partitions unless a
//! partition's mark for the records' outbox has them (`lua/topic_forward.lua`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::mq::message::encode_fields;
use crate::mq::{partition_for_key, Connection, KeySpace, HEADER_IDEMPOTENCY_KEY};
use crate::redis::outbox::OutboxRecord;
use crate::Error;

/// Appends messages to a target partition unless its mark has them
/// (`lua/topic_forward.lua`); sent as `EVAL` (a few calls per read, and nothing to load
/// again after a Redis restart).
const FORWARD: &str = include_str!("lua/topic_forward.lua");

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

/// Records per script call (a target partition's share of a read may be split).
const PER_CALL: usize = 1_000;

impl TopicTarget {
    /// Forwards `records` (of one source partition, in outbox order): script calls per
    /// target partition (records in order, at most [`PER_CALL`] a call), pipelined, each
    /// appending what its partition's mark does not have yet (counted as appended or
    /// skipped). A call after a partition's first names the position its predecessor
    /// ends at and appends nothing unless the mark reached it (Redis runs the rest of a
    /// pipeline after an error: a later call must not move the mark past records an
    /// earlier one failed to append). On an error some partitions may have taken their
    /// records and others not: a later call with the same records appends only what is
    /// missing, in order.
    pub(super) async fn forward(&mut self, records: &[OutboxRecord]) -> Result<(), Error> {
        let mut by_partition: BTreeMap<u32, Vec<&OutboxRecord>> = BTreeMap::new();
        for r in records {
            let q = target_partition(r.key.as_deref(), r.partition, self.partitions);
            by_partition.entry(q).or_default().push(r);
        }
        let mut pipe = redis::pipe();
        for (q, rs) in &by_partition {
            let mut after: Option<String> = None;
            for chunk in rs.chunks(PER_CALL) {
                self.push_call(&mut pipe, *q, after.as_deref(), chunk);
                let last = chunk[chunk.len() - 1];
                after = Some(format!("{}/{}", last.entry_id, last.index));
            }
        }
        let appended: Vec<u64> = pipe.query_async(&mut self.conn).await?;
        let appended: u64 = appended.iter().sum();
        let skipped = records.len() as u64 - appended;
        self.counts.appended.fetch_add(appended, Ordering::Relaxed);
        self.counts.skipped.fetch_add(skipped, Ordering::Relaxed);
        Ok(())
    }

    /// One script call forwarding `records` (all of source partition `records[0]`'s) to
    /// target partition `q`.
    fn push_call(
        &self,
        pipe: &mut redis::Pipeline,
        q: u32,
        after: Option<&str>,
        records: &[&OutboxRecord],
    ) {
        let call = pipe
            .cmd("EVAL")
            .arg(FORWARD)
            .arg(2)
            .arg(self.keys.stream(&self.target, q))
            .arg(marks_key(&self.keys, &self.prefix, &self.target, q))
            .arg(format!("{}{}", self.mark_field, records[0].partition))
            .arg(self.max_len.map(|n| n.to_string()).unwrap_or_default())
            .arg(after.unwrap_or_default());
        for r in records {
            let headers = BTreeMap::from([(HEADER_IDEMPOTENCY_KEY.to_string(), r.id.clone())]);
            let fields = encode_fields(
                r.key.as_deref(),
                &r.payload,
                &headers,
                r.timestamp_ms,
                0,
                None,
            );
            call.arg(format!("{}/{}", r.entry_id, r.index))
                .arg(2 * fields.len());
            for (f, v) in fields {
                call.arg(f).arg(v);
            }
        }
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
