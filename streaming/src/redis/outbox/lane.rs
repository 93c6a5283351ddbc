//! One partition's outbox as the dispatcher sees it: the entries read and not yet settled,
//! in stream order, and the Redis calls that read and settle them.

use std::collections::VecDeque;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redis::streams::StreamPendingReply;
use redis::{AsyncCommands, Script, Value};

use super::options::RedisOutboxDispatcher;
use super::{attempts_key, dlq_key, entry_records, EntryRecord, OutboxRecord};
use crate::mq::message::{parse_entry, RawEntry};
use crate::mq::topic::now_ms;
use crate::mq::{Backoff, Connection};
use crate::Error;

/// Acknowledges and deletes a delivered entry (`lua/outbox_ack.lua`).
static ACK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/outbox_ack.lua")));
/// Keeps an entry this dispatcher delivers its own, noting its progress
/// (`lua/outbox_touch.lua`).
static TOUCH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/outbox_touch.lua")));
/// Counts a failed delivery and dead-letters on the last attempt (`lua/outbox_fail.lua`).
static FAIL: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/outbox_fail.lua")));

/// An entry read from the outbox and not yet settled: its records, delivered in order.
struct Unsettled {
    id: String,
    records: Vec<EntryRecord>,
    /// The record being delivered, and its failed deliveries so far; `None` when unknown
    /// (the entry was pending when read: an earlier dispatcher may have delivered some
    /// of its records and counted failures in Redis).
    progress: Option<(usize, u32)>,
    /// The current record was delivered; only settling it is missing (that failed on a
    /// Redis error).
    delivered: bool,
    /// Its idle time was reset since it became the head (see `lua/outbox_touch.lua`).
    touched: bool,
}

/// What a failed delivery did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Failed {
    /// Counted; deliver again after the backoff.
    Retry,
    /// Moved to the dead-letter stream.
    DeadLettered,
    /// The entry was no longer pending for the group (settled elsewhere): dropped.
    Gone,
}

pub(super) struct Lane {
    pub(super) partition: u32,
    key: String,
    group: String,
    consumer: String,
    /// How long an entry may be idle before another dispatcher claims it.
    claim_idle: Duration,
    /// When the queued entries' idle time was last reset.
    touched_at: Instant,
    dlq: String,
    attempts: String,
    queue: VecDeque<Unsettled>,
    /// The wait before the head entry's next delivery.
    pub(super) backoff: Backoff,
    /// No delivery from this lane before this instant (a failed head waits its backoff).
    pub(super) not_before: Instant,
}

impl Lane {
    pub(super) fn new(d: &RedisOutboxDispatcher, partition: u32) -> Self {
        let key = d.outbox_key(partition);
        Self {
            partition,
            dlq: dlq_key(&key),
            attempts: attempts_key(&key),
            key,
            group: d.group.clone(),
            consumer: d.consumer.clone(),
            claim_idle: d.claim_idle,
            touched_at: Instant::now(),
            queue: VecDeque::new(),
            backoff: Backoff::new(d.backoff_initial, d.backoff_max),
            not_before: Instant::now(),
        }
    }

    /// `XGROUP CREATE {outbox} {group} 0 MKSTREAM` unless the group exists.
    pub(super) async fn ensure_group(
        &self,
        conn: &mut Connection,
        group: &str,
    ) -> Result<(), Error> {
        let created: redis::RedisResult<()> =
            conn.xgroup_create_mkstream(&self.key, group, "0").await;
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => Err(e.into()),
            _ => Ok(()),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Reads more entries when none is unsettled, oldest first so that order holds: the
    /// group's pending entries before new ones. This consumer's pending entries (left by
    /// an earlier run under the same name) are read again at once; entries pending with
    /// other consumers are claimed once idle for `claim_idle`, and until then the lane
    /// reads nothing new.
    pub(super) async fn fill(
        &mut self,
        conn: &mut Connection,
        d: &RedisOutboxDispatcher,
    ) -> Result<(), Error> {
        if !self.queue.is_empty() {
            return Ok(());
        }
        let pending: StreamPendingReply = conn.xpending(&self.key, &d.group).await?;
        let StreamPendingReply::Data(pending) = pending else {
            return self.read(conn, d, ">").await;
        };
        if pending.count == 0 {
            return self.read(conn, d, ">").await;
        }
        let ours = pending
            .consumers
            .iter()
            .any(|c| c.name == d.consumer && c.pending > 0);
        if ours || self.claim(conn, d).await? {
            self.read(conn, d, "0").await?;
        }
        Ok(())
    }

    /// `XREADGROUP GROUP g c COUNT n STREAMS outbox from` (never blocking): entries into
    /// the queue; entries deleted while pending (nil fields) are acknowledged and skipped.
    async fn read(
        &mut self,
        conn: &mut Connection,
        d: &RedisOutboxDispatcher,
        from: &str,
    ) -> Result<(), Error> {
        let reply: Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&d.group)
            .arg(&d.consumer)
            .arg("COUNT")
            .arg(d.batch_size)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(from)
            .query_async(conn)
            .await?;
        let pending = from == "0";
        for item in stream_entries(reply)? {
            let id = entry_id(&item);
            let records = parse_entry(item)?.map(|e: RawEntry| entry_records(&e));
            match records.filter(|r| !r.is_empty()) {
                Some(records) => self.queue.push_back(Unsettled {
                    id: id.unwrap_or_default(),
                    records,
                    progress: (!pending).then_some((0, 0)),
                    delivered: false,
                    touched: false,
                }),
                // Deleted while pending, or holding no record.
                None => {
                    if let Some(id) = id {
                        self.ack_id(conn, &d.group, &id).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// `XAUTOCLAIM .. JUSTID` of entries idle with any consumer for `claim_idle`, into
    /// this consumer's pending list (the oldest first, up to the batch size); whether any
    /// was claimed.
    async fn claim(
        &mut self,
        conn: &mut Connection,
        d: &RedisOutboxDispatcher,
    ) -> Result<bool, Error> {
        let idle = u64::try_from(d.claim_idle.as_millis()).unwrap_or(u64::MAX);
        let reply: Value = redis::cmd("XAUTOCLAIM")
            .arg(&self.key)
            .arg(&d.group)
            .arg(&d.consumer)
            .arg(idle)
            .arg("0-0")
            .arg("COUNT")
            .arg(d.batch_size)
            .arg("JUSTID")
            .query_async(conn)
            .await?;
        let claimed = match reply {
            Value::Array(parts) => {
                matches!(parts.get(1), Some(Value::Array(ids)) if !ids.is_empty())
            }
            _ => false,
        };
        Ok(claimed)
    }

    /// The head entry's current record, with its attempt number; `None` when the queue is
    /// empty. Reads the entry's progress from Redis when it is unknown. The `bool` is
    /// true when the record was delivered already and only settling it is missing.
    pub(super) async fn head(
        &mut self,
        conn: &mut Connection,
    ) -> Result<Option<(OutboxRecord, bool)>, Error> {
        let Some(head) = self.queue.front() else {
            return Ok(None);
        };
        // A new head, or a third of `claim_idle` since the last reset (a record retried
        // with backoff, a long entry, entries waiting behind the head): reset the idle
        // time of the head and of the queued entries, so no other dispatcher claims them.
        if !head.touched || self.touched_at.elapsed() >= self.claim_idle / 3 {
            let id = head.id.clone();
            if !self.touch(conn, &id, None).await? {
                self.queue.clear();
                return Ok(None);
            }
            self.touched_at = Instant::now();
        }
        let Some(head) = self.queue.front_mut() else {
            return Ok(None);
        };
        head.touched = true;
        let (next, failed) = match head.progress {
            Some(p) => p,
            None => {
                let (failed, next): (Option<u32>, Option<usize>) = redis::cmd("HMGET")
                    .arg(&self.attempts)
                    .arg(&head.id)
                    .arg(next_field(&head.id))
                    .query_async(conn)
                    .await?;
                let last = head.records.len() - 1;
                let next = next.unwrap_or(0);
                // Past the last record: all delivered, only the acknowledgement missing.
                head.delivered |= next > last;
                let p = (next.min(last), failed.unwrap_or(0));
                head.progress = Some(p);
                p
            }
        };
        let r = &head.records[next];
        let record = OutboxRecord {
            id: r.id.clone(),
            partition: self.partition,
            payload: r.payload.clone().into(),
            timestamp_ms: r.timestamp_ms,
            key: r.key.clone(),
            entry_id: head.id.clone(),
            index: u32::try_from(next).unwrap_or(u32::MAX),
            attempt: failed.saturating_add(1),
        };
        Ok(Some((record, head.delivered)))
    }

    /// Notes that the head's current record was delivered (so a failed settlement is
    /// retried without delivering it again), then moves to its next record (noted in
    /// Redis), or acknowledges and deletes the entry after its last.
    pub(super) async fn settle_delivered(
        &mut self,
        conn: &mut Connection,
        group: &str,
    ) -> Result<(), Error> {
        let Some(head) = self.queue.front_mut() else {
            return Ok(());
        };
        head.delivered = true;
        let (next, _) = head.progress.unwrap_or((0, 0));
        if next + 1 < head.records.len() {
            let id = head.id.clone();
            if !self.touch(conn, &id, Some(next + 1)).await? {
                // Claimed by another dispatcher (or settled): it goes on with it.
                self.queue.clear();
                return Ok(());
            }
            let head = self.queue.front_mut().expect("the head");
            head.progress = Some((next + 1, 0));
            head.delivered = false;
        } else {
            let id = head.id.clone();
            self.ack_id(conn, group, &id).await?;
            self.queue.pop_front();
        }
        self.backoff.reset();
        Ok(())
    }

    /// Keeps head entry `id` this consumer's (resets its idle time), and the queued
    /// entries behind it that still are, and with `next` notes that its delivery goes on
    /// at record `next`; `false` when the head is not pending for this consumer any more.
    async fn touch(
        &self,
        conn: &mut Connection,
        id: &str,
        next: Option<usize>,
    ) -> Result<bool, Error> {
        let mut call = TOUCH.prepare_invoke();
        call.key(&self.key)
            .key(&self.attempts)
            .arg(&self.group)
            .arg(&self.consumer)
            .arg(id)
            .arg(next.map(|n| n.to_string()).unwrap_or_default());
        // After a record (`next`) only the head: the queue's turn comes with `head`.
        if next.is_none() {
            for queued in self.queue.iter().skip(1) {
                call.arg(&queued.id);
            }
        }
        let kept: i64 = call.invoke_async(conn).await?;
        Ok(kept == 1)
    }

    async fn ack_id(&self, conn: &mut Connection, group: &str, id: &str) -> Result<(), Error> {
        let _: i64 = ACK
            .key(&self.key)
            .key(&self.attempts)
            .arg(group)
            .arg(id)
            .arg(next_field(id))
            .invoke_async(conn)
            .await?;
        Ok(())
    }

    /// Counts a failed delivery of the head; dead-letters it (atomically with its
    /// acknowledgement) when it was the last allowed attempt or `permanent`.
    pub(super) async fn settle_failed(
        &mut self,
        conn: &mut Connection,
        d: &RedisOutboxDispatcher,
        reason: &str,
        permanent: bool,
    ) -> Result<Failed, Error> {
        let Some(head) = self.queue.front_mut() else {
            return Ok(Failed::Gone);
        };
        let (next, _) = head.progress.unwrap_or((0, 0));
        let last = next + 1 >= head.records.len();
        let r = &head.records[next];
        let mut call = FAIL.prepare_invoke();
        call.key(&self.key)
            .key(&self.dlq)
            .key(&self.attempts)
            .arg(&d.group)
            .arg(&head.id)
            .arg(d.max_attempts)
            .arg(reason)
            .arg(now_ms())
            .arg(if permanent { "1" } else { "0" })
            .arg(next + 1)
            .arg(if last { "1" } else { "0" })
            .arg(&self.consumer);
        call.arg("id").arg(&r.id).arg("payload").arg(&r.payload);
        call.arg("ts").arg(r.timestamp_ms);
        if let Some(k) = &r.key {
            call.arg("key").arg(k);
        }
        let (state, attempts): (i64, u32) = call.invoke_async(conn).await?;
        if state == -2 {
            // Dead-lettered (or moved on) by a call whose reply was lost: read where the
            // entry's delivery is, then go on from there.
            head.progress = None;
            head.delivered = false;
            return Ok(Failed::Retry);
        }
        head.progress = Some((next, attempts));
        let outcome = match state {
            0 => Failed::Retry,
            1 => Failed::DeadLettered,
            _ => Failed::Gone,
        };
        match outcome {
            Failed::Retry => self.not_before = Instant::now() + self.backoff.next_delay(),
            Failed::DeadLettered if !last => {
                head.progress = Some((next + 1, 0));
                self.backoff.reset();
            }
            _ => {
                self.queue.pop_front();
                self.backoff.reset();
            }
        }
        Ok(outcome)
    }
}

/// The attempts-hash field of an entry's next record to deliver, `{entry id}:next`.
fn next_field(id: &str) -> String {
    format!("{id}:next")
}

/// The entries of a one-stream `XREADGROUP` reply (nil, `[[key, entries]]` or a RESP3 map).
fn stream_entries(reply: Value) -> Result<Vec<Value>, Error> {
    let entries = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(streams) => streams.into_iter().next().and_then(|s| match s {
            Value::Array(pair) => pair.into_iter().nth(1),
            _ => None,
        }),
        Value::Map(streams) => streams.into_iter().next().map(|(_, v)| v),
        _ => None,
    };
    match entries {
        Some(Value::Array(items)) => Ok(items),
        Some(Value::Nil) | None => Ok(Vec::new()),
        Some(_) => Err(Error::Mq {
            op: "outbox_read",
            reason: "XREADGROUP reply is not a list of entries".to_owned(),
        }),
    }
}

/// The id of a raw entry `[id, fields]`, if it has one.
fn entry_id(item: &Value) -> Option<String> {
    match item {
        Value::Array(parts) => match parts.first() {
            Some(Value::BulkString(b)) => String::from_utf8(b.clone()).ok(),
            Some(Value::SimpleString(s)) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}
