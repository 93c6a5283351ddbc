//! The exclusive-owner fast path: read with `NOACK`, the caller commits its offset.
//!
//! For an engine that owns a partition exclusively and commits its read offset atomically
//! with its state: the pending-entries list is skipped (`XREADGROUP ..
//! NOACK`), so there is nothing to acknowledge or reclaim. On taking the partition the
//! reader points the group's last-delivered id at the caller's committed offset
//! (`XGROUP SETID`, creating the group there if needed), so whatever was read but not
//! committed before a crash is read again. Lag stays visible in `XINFO GROUPS`.
//!
//! The reader holds the partition's lease (the same lease as subscriptions use); the caller
//! renews it ([`ExclusiveReader::renew`]) more often than `lease_ttl` and releases it
//! ([`ExclusiveReader::release`]). Malformed entries are appended to the partition's
//! dead-letter stream (nothing to acknowledge) and skipped; their ids still count for the
//! batch's [`ExclusiveBatch::last_id`], so committing it moves past them. Retry entries
//! addressed to another consumer group (field `rg`, see [`crate::mq::retry`]) are skipped
//! the same way, without being returned ([`ExclusiveBatch::skipped`]). Failed messages
//! go through [`ExclusiveReader::retry_or_dead_letter`] (same backoff, headers and
//! dead-letter fields as subscriptions; due retries re-enter the stream, addressed to this
//! reader's group, on a later [`ExclusiveReader::read`]).

use std::time::Duration;

use tokio::time::Instant;

use super::Connection;
use redis::Value;
use tracing::{debug, warn};

use crate::mq::dlq::{dead_letter_without_ack, DeadLetterCause};
use crate::mq::group::{ensure_group, OwnerScripts};
use crate::mq::handler::Failure;
use crate::mq::lease::{Fence, Lease, LeaseScripts};
use crate::mq::message::{parse_read_reply, Message};
use crate::mq::options::{RetryPolicy, StartPolicy};
use crate::mq::retry::{self, backoff, RetryOutcome};
use crate::mq::topic::KeySpace;
use crate::Error;

/// The `BLOCK` time an [`ExclusiveReader`]'s connection allows on top of the response
/// timeout: a longer block in [`ExclusiveReader::read`] may time out.
pub(crate) const EXCLUSIVE_BLOCK: Duration = Duration::from_secs(1);

/// One read of an [`ExclusiveReader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExclusiveBatch {
    /// The decoded messages, in stream order.
    pub messages: Vec<Message>,
    /// How many malformed entries were dead-lettered instead.
    pub malformed: usize,
    /// How many retry entries addressed to another consumer group were skipped (not in
    /// `messages`; nothing to do for this group).
    pub skipped: usize,
    /// The id of the last entry read (message, malformed or skipped); commit it once the
    /// batch's effects are durable. `None` when nothing was read.
    pub last_id: Option<String>,
}

/// A `NOACK` reader of one partition for an exclusive owner; see the module docs.
pub struct ExclusiveReader {
    pub(crate) conn: Connection,
    pub(crate) keys: KeySpace,
    pub(crate) topic: String,
    pub(crate) group: String,
    pub(crate) partition: u32,
    pub(crate) consumer: String,
    pub(crate) lease_ttl: Duration,
    pub(crate) leases: LeaseScripts,
    /// The lease held (set by `open`).
    pub(crate) lease: Option<Lease>,
    pub(crate) retry: RetryPolicy,
    pub(crate) retry_poll_interval: Duration,
    pub(crate) max_len: Option<usize>,
    pub(crate) promote: redis::Script,
    pub(crate) schedule: redis::Script,
    pub(crate) dead_letter: redis::Script,
    pub(crate) owner: OwnerScripts,
    pub(crate) next_promote: Instant,
}

impl std::fmt::Debug for ExclusiveReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExclusiveReader")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("partition", &self.partition)
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

impl ExclusiveReader {
    /// Takes the lease (or keeps `held`, a lease of this partition still ours) and
    /// positions the group; see [`crate::mq::Mq::exclusive_reader`].
    pub(crate) async fn open(
        mut self,
        committed: Option<&str>,
        start: StartPolicy,
        held: Option<Lease>,
    ) -> Result<Self, Error> {
        let key = self.keys.lease(&self.topic, self.partition, &self.group);
        let fence = self.keys.fence(&self.topic, self.partition, &self.group);
        let kept = match held {
            Some(l)
                if l.key == key
                    && self
                        .leases
                        .renew(&mut self.conn, &l, self.lease_ttl)
                        .await? =>
            {
                Some(l)
            }
            _ => None,
        };
        let lease = match kept {
            Some(l) => Some(l),
            None => {
                self.leases
                    .acquire(&mut self.conn, &key, &fence, &self.consumer, self.lease_ttl)
                    .await?
            }
        };
        let Some(lease) = lease else {
            return Err(Error::Mq {
                op: "exclusive_reader",
                reason: format!(
                    "partition {} of {} is leased by another consumer of group {}",
                    self.partition, self.topic, self.group
                ),
            });
        };
        self.lease = Some(lease);
        match committed {
            Some(id) => {
                let fence = self.fence()?;
                let stream = self.keys.stream(&self.topic, self.partition);
                let groups = self.keys.groups(&self.topic);
                self.owner
                    .set_group_id(
                        &mut self.conn.clone(),
                        fence,
                        (&stream, &groups),
                        &self.group,
                        id,
                    )
                    .await?;
            }
            None => {
                ensure_group(
                    &mut self.conn,
                    &self.keys,
                    &self.topic,
                    self.partition,
                    &self.group,
                    start,
                    false,
                )
                .await?;
            }
        }
        Ok(self)
    }

    /// The partition read.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The fencing token of the lease held: it grows with every acquisition of the
    /// partition's lease, so a larger token is a later owner.
    pub fn fencing_token(&self) -> u64 {
        self.lease.as_ref().map_or(0, |l| l.token)
    }

    /// The lease held (what fenced writes compare).
    pub(crate) fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The fence of every write this reader makes: its lease, or [`Error::Fenced`] when it
    /// holds none (released).
    fn fence(&self) -> Result<Fence<'_>, Error> {
        let at = (self.topic.as_str(), self.partition, self.group.as_str());
        match &self.lease {
            Some(lease) => Ok(Fence::held(&self.keys, at, lease, self.lease_ttl)),
            None => Err(Error::Fenced {
                topic: self.topic.clone(),
                group: self.group.clone(),
                partition: self.partition,
                token: 0,
            }),
        }
    }

    /// Reads up to `count` new entries with `XREADGROUP .. COUNT count NOACK STREAMS s >`,
    /// in a script that first checks the lease (a reader whose lease was taken moves
    /// nothing). When none are there it waits up to `block` (at most 1 s: the connection
    /// allows 1 s of blocking on top of the response timeout; below 2 ms it does not wait)
    /// for the stream to grow and reads once more.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing read);
    /// [`Error::Redis`] on a failed command (the caller may retry; nothing was lost, since
    /// the group position only matters up to the caller's committed offset).
    pub async fn read(&mut self, count: usize, block: Duration) -> Result<ExclusiveBatch, Error> {
        let mut conn = self.conn.clone();
        let promote = Instant::now() >= self.next_promote;
        if promote {
            self.next_promote = Instant::now() + self.retry_poll_interval;
        }
        let fence = self.fence()?;
        if promote {
            retry::promote_due(
                &mut conn,
                &self.promote,
                &self.keys,
                fence,
                (&self.topic, self.partition),
                count.max(1),
                self.max_len,
            )
            .await?;
        }
        let stream = self.keys.stream(&self.topic, self.partition);
        let who = (self.group.as_str(), self.consumer.as_str());
        let mut v = (self.owner)
            .read(&mut conn, fence, &stream, who, count, ">", true)
            .await?;
        let block = block.min(EXCLUSIVE_BLOCK);
        if matches!(v, Value::Nil) && block >= Duration::from_millis(2) {
            // Wait without reading for the group (a plain XREAD moves nothing), then read
            // under the lease check again.
            let _: Value = redis::cmd("XREAD")
                .arg("COUNT")
                .arg(1)
                .arg("BLOCK")
                .arg(block.as_millis() as u64)
                .arg("STREAMS")
                .arg(&stream)
                .arg("$")
                .query_async(&mut conn)
                .await?;
            v = (self.owner)
                .read(&mut conn, fence, &stream, who, count, ">", true)
                .await?;
        }
        let entries = parse_read_reply(&v)?;
        let last_id = entries.last().map(|e| e.id.clone());
        let mut messages = Vec::with_capacity(entries.len());
        let (mut malformed, mut skipped) = (0, 0);
        for e in entries {
            match e.decode(&self.topic, self.partition) {
                Ok(m) if m.is_for_group(&self.group) => messages.push(m),
                Ok(m) => {
                    skipped += 1;
                    debug!(topic = %self.topic, partition = self.partition, id = %m.id,
                           retry_group = ?m.retry_group, "skipping another group's retry");
                }
                Err(reason) => {
                    malformed += 1;
                    warn!(topic = %self.topic, partition = self.partition, id = %e.id, %reason,
                          "malformed entry → dead letter");
                    let fields = e.fields.clone();
                    self.append_dead_letter(fields, &e.id, &e.id, 1, "malformed", &reason)
                        .await?;
                }
            }
        }
        Ok(ExclusiveBatch {
            messages,
            malformed,
            skipped,
            last_id,
        })
    }

    async fn append_dead_letter(
        &mut self,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        id: &str,
        original_id: &str,
        attempts: u32,
        error_type: &str,
        error: &str,
    ) -> Result<(), Error> {
        let cause = DeadLetterCause {
            topic: &self.topic,
            partition: self.partition,
            group: &self.group,
            id,
            original_id,
            attempts,
            error_type,
            error,
        };
        let fence = self.fence()?;
        let mut conn = self.conn.clone();
        dead_letter_without_ack(
            &mut conn,
            &self.dead_letter,
            &self.keys,
            fence,
            &cause,
            fields,
        )
        .await
    }

    /// Appends `msg` to the partition's dead-letter stream (fields as in
    /// [`DeadLetter`](crate::mq::DeadLetter)), if the lease still holds. Nothing is acknowledged (NOACK);
    /// commit the offset past `msg` as usual.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing written);
    /// [`Error::Redis`] on a failed command.
    pub async fn dead_letter(&mut self, msg: &Message, failure: &Failure) -> Result<(), Error> {
        let fields = msg.entry_fields();
        self.append_dead_letter(
            fields,
            &msg.id,
            msg.original_id(),
            msg.retry_count.saturating_add(1),
            &failure.error_type,
            &failure.message,
        )
        .await
    }

    /// Schedules a retry of `msg` after the [`crate::mq::MqOptions::retry`] backoff (the
    /// retry entry is appended to this partition when due, by a later [`Self::read`]), or
    /// dead-letters it when its retries are used up (error type
    /// `retries_exhausted:<type>`). The retry is addressed to this reader's group (other
    /// groups skip it). This group's retry of the same entry is scheduled at most once
    /// while it waits. Unlike the subscription path this is not atomic with the caller's
    /// offset commit: a crash between the two can schedule the retry again after the
    /// first one was delivered (at-least-once).
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing written);
    /// [`Error::Redis`] on a failed command.
    pub async fn retry_or_dead_letter(
        &mut self,
        msg: &Message,
        failure: &Failure,
    ) -> Result<RetryOutcome, Error> {
        let max = msg.max_retries.unwrap_or(self.retry.max_retries);
        if msg.retry_count >= max {
            let exhausted = Failure::new(
                format!("retries_exhausted:{}", failure.error_type),
                failure.message.clone(),
            );
            self.dead_letter(msg, &exhausted).await?;
            return Ok(RetryOutcome::DeadLettered);
        }
        let delay = backoff(&self.retry, msg.retry_count);
        let fence = self.fence()?;
        let scheduled = retry::schedule_without_ack(
            &mut self.conn.clone(),
            &self.schedule,
            &self.keys,
            fence,
            &self.group,
            msg,
            delay,
            (&failure.error_type, &failure.message),
        )
        .await?;
        Ok(if scheduled {
            RetryOutcome::Scheduled { delay }
        } else {
            RetryOutcome::AlreadyScheduled
        })
    }

    /// Extends the lease by `lease_ttl`; `false` when the lease was lost (stop reading:
    /// another owner may have the partition).
    ///
    /// # Errors
    /// [`Error::Redis`] on a failed command.
    pub async fn renew(&mut self) -> Result<bool, Error> {
        let Some(lease) = self.lease.as_ref() else {
            return Ok(false);
        };
        self.leases
            .renew(&mut self.conn, lease, self.lease_ttl)
            .await
    }

    /// Releases the lease (if still ours).
    ///
    /// # Errors
    /// [`Error::Redis`] on a failed command (the lease then expires by TTL).
    pub async fn release(mut self) -> Result<(), Error> {
        if let Some(lease) = self.lease.take() {
            self.leases.release(&mut self.conn, &lease).await?;
        }
        Ok(())
    }
}
