//! The forwarder's writes: outbox records into their target partitions unless a
//! partition's mark for the records' outbox has them (`lua/topic_forward.lua`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::mq::message::encode_fields;
use crate::mq::{partition_for_key, Connection, KeySpace, HEADER_IDEMPOTENCY_KEY};
use crate::redis::outbox::OutboxRecord;
use crate::Error;
use redis::Value;

/// Appends messages to a target partition unless its mark has them
/// (`lua/topic_forward.lua`), for the records a fast transaction did not take; sent as
/// `EVAL` (a few calls per read, and nothing to load again after a Redis restart).
const FORWARD: &str = concat!(
    include_str!("lua/positions.lua"),
    include_str!("lua/topic_forward.lua")
);

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

/// Records per script call or transaction (a target partition's share of a read may be
/// split).
const PER_CALL: usize = 1_000;

/// The guard that opens a fast forward's transaction (`lua/forward_guard.lua`).
const GUARD: &str = concat!(
    include_str!("lua/positions.lua"),
    include_str!("lua/forward_guard.lua")
);

/// The tail that closes it (`lua/forward_tail.lua`).
const TAIL: &str = include_str!("lua/forward_tail.lua");

/// A record's position in its outbox, `{entry id}/{index}` (what the marks hold).
fn position(r: &OutboxRecord) -> String {
    format!("{}/{}", r.entry_id, r.index)
}

/// A record's message fields, as a producer writes them.
fn message_fields(r: &OutboxRecord) -> Vec<(&'static str, Vec<u8>)> {
    let headers = BTreeMap::from([(HEADER_IDEMPOTENCY_KEY.to_string(), r.id.clone())]);
    encode_fields(
        r.key.as_deref(),
        &r.payload,
        &headers,
        r.timestamp_ms,
        0,
        None,
    )
}

impl TopicTarget {
    /// Forwards `records` (of one source partition, in outbox order), per target
    /// partition (records in order) in one round trip: a transaction per at most
    /// [`PER_CALL`] records whose guard script checks the partition's mark, whose plain
    /// `XADD`s append the records, and whose tail script moves the mark — when the records
    /// are all new to the partition (the usual case). A transaction whose records are not
    /// all new (another forwarder, or a lost reply, got some of them there), or whose
    /// predecessor did not apply, changes nothing; its records and the partition's later
    /// ones then go through the script calls of [`forward_scripted`](Self::forward_scripted),
    /// which append what the mark does not have yet. Counted as appended or skipped. On an
    /// error some partitions may have taken their records and others not: a later call
    /// with the same records appends only what is missing, in order.
    pub(super) async fn forward(&mut self, records: &[OutboxRecord]) -> Result<(), Error> {
        let mut by_partition: BTreeMap<u32, Vec<&OutboxRecord>> = BTreeMap::new();
        for r in records {
            let q = target_partition(r.key.as_deref(), r.partition, self.partitions);
            by_partition.entry(q).or_default().push(r);
        }
        let mut appended = 0;
        for (q, rs) in &by_partition {
            let chunks: Vec<&[&OutboxRecord]> = rs.chunks(PER_CALL).collect();
            let (fast, refused) = self.forward_fast(*q, &chunks).await?;
            appended += fast;
            if let Some(i) = refused {
                let after = i
                    .checked_sub(1)
                    .map(|p| position(chunks[p][chunks[p].len() - 1]));
                appended += self.forward_scripted(*q, after, &chunks[i..]).await?;
            }
        }
        let skipped = records.len() as u64 - appended;
        self.counts.appended.fetch_add(appended, Ordering::Relaxed);
        self.counts.skipped.fetch_add(skipped, Ordering::Relaxed);
        Ok(())
    }

    /// The fast transactions of `chunks` (target partition `q`'s records in order), one
    /// request: the records appended, and the first chunk whose transaction the guard
    /// refused (it and the later ones are left to the scripts).
    async fn forward_fast(
        &mut self,
        q: u32,
        chunks: &[&[&OutboxRecord]],
    ) -> Result<(u64, Option<usize>), Error> {
        let mut pipe = redis::pipe();
        let mut after: Option<String> = None;
        for chunk in chunks {
            self.push_transaction(&mut pipe, q, after.as_deref(), chunk);
            after = Some(position(chunk[chunk.len() - 1]));
        }
        let replies: Vec<Value> = pipe.query_async(&mut self.conn).await?;
        // `MULTI` and the queued commands answer `OK` / `QUEUED`; each `EXEC` an array.
        let mut execs = replies.into_iter().filter_map(|v| match v {
            Value::Array(results) => Some(results),
            _ => None,
        });
        let mut appended = 0;
        for i in 0..chunks.len() {
            let results = execs.next().unwrap_or_default();
            match results.last() {
                Some(Value::Int(n)) if !results.iter().any(|v| matches!(v, Value::ServerError(_))) => {
                    appended += u64::try_from(*n).unwrap_or(0);
                }
                Some(Value::BulkString(_) | Value::SimpleString(_)) => return Ok((appended, Some(i))),
                other => {
                    return Err(Error::Engine {
                        op: "topic forward",
                        reason: format!("a forward's transaction into partition {q} failed: {other:?} (of {results:?})"),
                    })
                }
            }
        }
        Ok((appended, None))
    }

    /// One fast transaction forwarding `records` (all of source partition
    /// `records[0]`'s) to target partition `q`; `after`: its predecessor's end.
    fn push_transaction(
        &self,
        pipe: &mut redis::Pipeline,
        q: u32,
        after: Option<&str>,
        records: &[&OutboxRecord],
    ) {
        let stream = self.keys.stream(&self.target, q);
        let marks = marks_key(&self.keys, &self.prefix, &self.target, q);
        let marker = format!("{marks}\0forward");
        let field = format!("{}{}", self.mark_field, records[0].partition);
        pipe.cmd("MULTI");
        pipe.cmd("EVAL")
            .arg(GUARD)
            .arg(3)
            .arg(&stream)
            .arg(&marks)
            .arg(&marker)
            .arg(&field)
            .arg(after.unwrap_or_default())
            .arg(position(records[0]));
        for r in records {
            let xadd = pipe.cmd("XADD").arg(&stream);
            if let Some(n) = self.max_len {
                xadd.arg("MAXLEN").arg("~").arg(n);
            }
            xadd.arg("*");
            for (f, v) in message_fields(r) {
                xadd.arg(f).arg(v);
            }
        }
        pipe.cmd("EVAL")
            .arg(TAIL)
            .arg(3)
            .arg(&stream)
            .arg(&marks)
            .arg(&marker)
            .arg(&field)
            .arg(position(records[records.len() - 1]))
            .arg(records.len());
        pipe.cmd("EXEC");
    }

    /// Forwards `chunks` (target partition `q`'s records in order; `after`: the end of
    /// the records before them, forwarded already) by script calls, pipelined, each
    /// appending what the partition's mark does not have yet: the records appended. A
    /// call names the position its predecessor ends at and appends nothing unless the
    /// mark reached it (Redis runs the rest of a pipeline after an error: a later call
    /// must not move the mark past records an earlier one failed to append).
    async fn forward_scripted(
        &mut self,
        q: u32,
        mut after: Option<String>,
        chunks: &[&[&OutboxRecord]],
    ) -> Result<u64, Error> {
        let mut pipe = redis::pipe();
        for chunk in chunks {
            self.push_call(&mut pipe, q, after.as_deref(), chunk);
            after = Some(position(chunk[chunk.len() - 1]));
        }
        let appended: Vec<u64> = pipe.query_async(&mut self.conn).await?;
        Ok(appended.iter().sum())
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
            let fields = message_fields(r);
            call.arg(position(r)).arg(2 * fields.len());
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
