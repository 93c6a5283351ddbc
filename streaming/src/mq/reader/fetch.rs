//! Reading a batch: due retries promoted, pending entries claimed, entries read (under the
//! lease check for an owner), then sorted into messages and the rest.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use redis::streams::{StreamAutoClaimReply, StreamPendingCountReply};
use redis::{Script, Value};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::reply::{decode_all, Entries};
use super::{PartitionReader, ReadBatch};
use crate::mq::lease::is_fenced_reply;
use crate::mq::message::{parse_read_reply, Message};
use crate::mq::retry::promote_due;
use crate::mq::Connection;
use crate::Error;

/// One `XAUTOCLAIM .. JUSTID` step under the lease check.
static CLAIM: LazyLock<Script> = fenced_script!(include_str!("../lua/claim.lua"));

/// `XGROUP SETID` (or `CREATE`) under the lease check.
static SET_GROUP_ID: LazyLock<Script> = fenced_script!(include_str!("../lua/set_group_id.lua"));

/// A take's clean-up of earlier owners' consumers (nothing pending) under the lease check.
static PRUNE_CONSUMERS: LazyLock<Script> =
    fenced_script!(include_str!("../lua/prune_consumers.lua"));

/// A take's claim moves at most this many entries per script call.
const CLAIM_STEP: usize = 1000;

/// Below this a read does not wait for the stream to grow.
const MIN_BLOCK: Duration = Duration::from_millis(2);

pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whether `e` is Redis's `NOGROUP` (the group or the stream was deleted).
fn is_nogroup(e: &Error) -> bool {
    matches!(e, Error::Redis { source, .. } if source.code() == Some("NOGROUP"))
}

impl PartitionReader {
    /// Reads up to `count` entries (at least 1): promotes due retries every
    /// `retry_poll_interval` first, then (XACK) replays this consumer's pending entries
    /// before new ones. When there are none it waits up to `block` for the stream to grow
    /// (not at all below 2 ms; at most `retry_poll_interval` while retries are scheduled)
    /// and reads once more. Malformed entries go to the dead-letter queue and retries
    /// addressed to another group are skipped; both are among the batch's ids.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing read);
    /// [`Error::Redis`] on a failed command (nothing is lost: what was read and not
    /// committed is read again after the next take, or claimed again once idle).
    pub(crate) async fn read(
        &mut self,
        conn: &mut Connection,
        count: usize,
        block: Duration,
    ) -> Result<ReadBatch, Error> {
        let count = count.max(1);
        let block = if self.retries_waiting {
            block.min(self.retry_poll_interval)
        } else {
            block
        };
        let (entries, before) = match self.claim_and_fetch(conn, count, block).await {
            Err(e) if self.member.is_some() && is_nogroup(&e) => {
                self.regroup(conn).await?;
                return Ok(ReadBatch::default());
            }
            r => r?,
        };
        let deliveries = self.deliveries(conn, &entries).await?;
        let mut batch = self.sort(conn, entries, &deliveries).await?;
        batch.read_after = before.filter(|_| !batch.ids.is_empty());
        Ok(batch)
    }

    async fn claim_and_fetch(
        &mut self,
        conn: &mut Connection,
        count: usize,
        block: Duration,
    ) -> Result<(Entries, Option<String>), Error> {
        self.promote_if_due(conn, count).await?;
        self.claim_idle_if_due(conn, count).await?;
        let read = self.fetch(conn, count, block).await?;
        if self.replaying && read.0.is_empty() {
            self.replaying = false;
            return self.fetch(conn, count, block).await;
        }
        Ok(read)
    }

    /// Moves due retries back into the stream when it is time.
    async fn promote_if_due(&mut self, conn: &mut Connection, count: usize) -> Result<(), Error> {
        let now = Instant::now();
        if now < self.next_promote {
            return Ok(());
        }
        self.next_promote = now + self.retry_poll_interval;
        let at = (self.topic.as_str(), self.partition);
        let fence = self.fence()?;
        let (moved, waiting) =
            promote_due(conn, &self.keys, fence, at, count, self.max_len).await?;
        self.retries_waiting = waiting > 0;
        if moved > 0 {
            debug!(topic = %self.topic, partition = self.partition, moved, "promoted due retries");
        }
        Ok(())
    }

    /// One claim step: entries of the group pending for at least `min_idle` move to this
    /// consumer (ids only; the replay counts the delivery). Returns the next cursor
    /// (`0-0`: done) and whether it claimed any.
    async fn claim(
        &self,
        conn: &mut Connection,
        min_idle: Duration,
        cursor: &str,
        count: usize,
    ) -> Result<(String, bool), Error> {
        let fence = self.fence()?;
        let mut inv = CLAIM.key(self.stream());
        fence.push(&mut inv);
        inv.arg(&self.group)
            .arg(&self.consumer)
            .arg(ms(min_idle))
            .arg(cursor)
            .arg(count);
        let v: Value = inv.invoke_async(conn).await?;
        if is_fenced_reply(&v) {
            return Err(fence.error());
        }
        let reply: StreamAutoClaimReply = redis::from_redis_value(&v)?;
        Ok((reply.next_stream_id, !reply.claimed.is_empty()))
    }

    /// A take's claim: every pending entry of the group moves to this consumer.
    pub(super) async fn claim_all(&self, conn: &mut Connection) -> Result<(), Error> {
        let mut cursor = "0-0".to_owned();
        for _ in 0..100_000 {
            let (next, _) = self
                .claim(conn, Duration::ZERO, &cursor, CLAIM_STEP)
                .await?;
            if next == "0-0" {
                break;
            }
            cursor = next;
        }
        Ok(())
    }

    /// A take's clean-up: deletes the group's other consumers of this partition that have
    /// nothing pending (earlier owners; after [`Self::claim_all`] in XACK mode), so the
    /// consumer list does not grow with every run. Returns how many went.
    pub(super) async fn prune_consumers(&self, conn: &mut Connection) -> Result<i64, Error> {
        let fence = self.fence()?;
        let mut inv = PRUNE_CONSUMERS.key(self.stream());
        fence.push(&mut inv);
        inv.arg(&self.group).arg(&self.consumer);
        let v: Value = inv.invoke_async(conn).await?;
        fence.int_reply(&v)
    }

    /// A subscription member's claim, every `claim_idle / 2` (at once again while more
    /// are left): entries pending longer than `claim_idle` are claimed and replayed.
    async fn claim_idle_if_due(
        &mut self,
        conn: &mut Connection,
        count: usize,
    ) -> Result<(), Error> {
        let Some(member) = &self.member else {
            return Ok(());
        };
        let now = Instant::now();
        if now < member.next_claim {
            return Ok(());
        }
        let idle = member.claim_idle;
        let (next, claimed) = self.claim(conn, idle, "0-0", count).await?;
        if claimed {
            debug!(topic = %self.topic, partition = self.partition, "claimed idle pending entries");
            self.replaying = true;
        }
        let interval = (idle / 2).clamp(Duration::from_millis(10), Duration::from_secs(5));
        if let Some(m) = self.member.as_mut() {
            m.next_claim = if next == "0-0" { now + interval } else { now };
        }
        Ok(())
    }

    /// Reads up to `count` entries: this consumer's pending ones while replaying, else new
    /// ones, waiting up to `block` when there are none. With the entries, for an owner's
    /// read of new entries, the group's last-delivered id before the read: the entries
    /// are then every entry after it (see [`ReadBatch::read_after`]).
    async fn fetch(
        &self,
        conn: &mut Connection,
        count: usize,
        block: Duration,
    ) -> Result<(Entries, Option<String>), Error> {
        let from = if self.replaying { "0" } else { ">" };
        if self.member.is_some() && !self.replaying {
            // Unfenced: Redis waits for new entries itself.
            return Ok((self.read_blocking(conn, count, block).await?, None));
        }
        let mut read = self.read_fenced(conn, count, from).await?;
        if read.nil && !self.replaying && block >= MIN_BLOCK {
            // Wait without reading for the group (a plain XREAD moves nothing), then read
            // under the lease check again.
            let _: Value = redis::cmd("XREAD")
                .arg("COUNT")
                .arg(1)
                .arg("BLOCK")
                .arg(ms(block))
                .arg("STREAMS")
                .arg(self.stream())
                .arg("$")
                .query_async(conn)
                .await?;
            read = self.read_fenced(conn, count, from).await?;
        }
        Ok((read.entries, read.before.filter(|_| !self.replaying)))
    }

    /// `XREADGROUP .. BLOCK` of new entries (a subscription member: no lease to check).
    async fn read_blocking(
        &self,
        conn: &mut Connection,
        count: usize,
        block: Duration,
    ) -> Result<Entries, Error> {
        let v: Value = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&self.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(ms(block).max(1))
            .arg("STREAMS")
            .arg(self.stream())
            .arg(">")
            .query_async(conn)
            .await?;
        // Binary-safe and in field order (redis-rs's `StreamReadReply` keys fields by
        // `String`: one foreign entry with a non-UTF-8 field name would fail the whole
        // read, again on every retry, instead of being dead-lettered).
        let at = (&self.topic, self.partition);
        Ok(decode_all(parse_read_reply(v)?, at, true))
    }

    /// A subscription member's delivery counts of replayed `entries` (`XPENDING`), to
    /// dead-letter those delivered too often; empty otherwise.
    async fn deliveries(
        &self,
        conn: &mut Connection,
        entries: &Entries,
    ) -> Result<HashMap<String, u64>, Error> {
        let ids = &entries.ids;
        let (Some(_), Some(first), Some(last)) = (&self.member, ids.first(), ids.last())
        else {
            return Ok(HashMap::new());
        };
        if !self.replaying {
            return Ok(HashMap::new());
        }
        let reply: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(self.stream())
            .arg(&self.group)
            .arg(first)
            .arg(last)
            .arg(ids.len())
            .arg(&self.consumer)
            .query_async(conn)
            .await?;
        Ok(reply
            .ids
            .into_iter()
            .map(|p| (p.id, p.times_delivered as u64))
            .collect())
    }

    /// Re-creates the group from the member's start policy (it was deleted under us).
    async fn regroup(&self, conn: &mut Connection) -> Result<(), Error> {
        let Some(member) = &self.member else {
            return Ok(());
        };
        warn!(topic = %self.topic, partition = self.partition, group = %self.group,
              "consumer group missing; re-creating it");
        self.ensure_group(conn, member.start, false).await
    }

    /// Points the group at `id` under the lease check (creating it there if missing):
    /// restoring moves the group's last id and never destroys the group (which would wipe
    /// its pending entries).
    pub(super) async fn set_group_id(&self, conn: &mut Connection, id: &str) -> Result<(), Error> {
        let fence = self.fence()?;
        let _: () =
            redis::AsyncCommands::sadd(conn, self.keys.groups(&self.topic), &self.group).await?;
        let mut inv = SET_GROUP_ID.key(self.stream());
        fence.push(&mut inv);
        inv.arg(&self.group).arg(id);
        let v: Value = inv.invoke_async(conn).await?;
        fence.int_reply(&v)?;
        Ok(())
    }

    /// Sorts what was read, in stream order: messages for the caller; malformed entries
    /// and (a member's) entries delivered too often go to the dead-letter queue; other
    /// groups' retries are skipped.
    async fn sort(
        &self,
        conn: &mut Connection,
        entries: Entries,
        deliveries: &HashMap<String, u64>,
    ) -> Result<ReadBatch, Error> {
        let Entries {
            mut messages,
            malformed,
            ids,
        } = entries;
        let mut batch = ReadBatch {
            ids,
            ..ReadBatch::default()
        };
        let mut malformed = malformed.into_iter().peekable();
        // The messages kept move to the front, in order.
        let mut kept = 0;
        for i in 0..=messages.len() {
            while let Some(e) = malformed.next_if(|e| e.after == i) {
                batch.dead_lettered += 1;
                self.dead_letter_malformed(conn, e.entry, &e.reason).await?;
            }
            let Some(m) = messages.get(i) else {
                break;
            };
            if self.keeps(conn, m, deliveries, &mut batch).await? {
                messages.swap(kept, i);
                kept += 1;
            }
        }
        messages.truncate(kept);
        batch.messages = messages;
        Ok(batch)
    }

    /// Whether message `m` goes to the caller: not when it is another group's retry
    /// (skipped) or, for a member, was delivered too often (dead-lettered); counted in
    /// `batch`.
    async fn keeps(
        &self,
        conn: &mut Connection,
        m: &Message,
        deliveries: &HashMap<String, u64>,
        batch: &mut ReadBatch,
    ) -> Result<bool, Error> {
        if !m.is_for_group(&self.group) {
            batch.skipped += 1;
            debug!(topic = %self.topic, partition = self.partition, id = %m.id,
                   retry_group = ?m.retry_group, "skipping another group's retry");
            return Ok(false);
        }
        let max = u64::from(m.max_retries.unwrap_or(self.retry.max_retries));
        match deliveries.get(m.id.as_str()) {
            Some(&d) if d > max + 1 => {
                batch.dead_lettered += 1;
                self.dead_letter_redelivered(conn, m, d).await?;
                Ok(false)
            }
            _ => Ok(true),
        }
    }

    pub(super) fn stream(&self) -> String {
        self.keys.stream(&self.topic, self.partition)
    }
}
