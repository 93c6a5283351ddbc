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
//!
//! It is the `NOACK` mode of the partition reader that subscriptions (in `XACK` mode) and
//! the Redis engine (in either mode) read with, on a connection of its own.

use std::time::Duration;

use super::reader::PartitionReader;
use super::Connection;
use crate::mq::handler::Failure;
use crate::mq::message::Message;
use crate::mq::retry::RetryOutcome;
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

/// A `NOACK` reader of one partition for an exclusive owner, on a connection of its own;
/// see the module docs.
pub struct ExclusiveReader {
    pub(crate) conn: Connection,
    pub(crate) reader: PartitionReader,
}

impl std::fmt::Debug for ExclusiveReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExclusiveReader")
            .field("reader", &self.reader)
            .finish_non_exhaustive()
    }
}

impl ExclusiveReader {
    /// The partition read.
    pub fn partition(&self) -> u32 {
        self.reader.partition()
    }

    /// The fencing token of the lease held: it grows with every acquisition of the
    /// partition's lease, so a larger token is a later owner.
    pub fn fencing_token(&self) -> u64 {
        self.reader.fencing_token()
    }

    /// Reads up to `count` new entries with `XREADGROUP .. COUNT count NOACK STREAMS s >`,
    /// in a transaction with a lease check before it and an undo after it (a reader whose
    /// lease was taken moves nothing: the group's last-delivered id is put back). When none are there it waits up to `block` (at most 1 s: the connection
    /// allows 1 s of blocking on top of the response timeout; below 2 ms it does not wait)
    /// for the stream to grow and reads once more.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing read);
    /// [`Error::Redis`] on a failed command (the caller may retry; nothing was lost, since
    /// the group position only matters up to the caller's committed offset).
    pub async fn read(&mut self, count: usize, block: Duration) -> Result<ExclusiveBatch, Error> {
        let block = block.min(EXCLUSIVE_BLOCK);
        let b = self.reader.read(&mut self.conn, count, block).await?;
        Ok(ExclusiveBatch {
            last_id: b.last_id().cloned(),
            messages: b.messages,
            malformed: b.dead_lettered,
            skipped: b.skipped,
        })
    }

    /// Appends `msg` to the partition's dead-letter stream (fields as in
    /// [`DeadLetter`](crate::mq::DeadLetter)), if the lease still holds. Nothing is
    /// acknowledged (NOACK); commit the offset past `msg` as usual. An entry already
    /// dead-lettered or retried within 24 h (read again after a crash before the offset
    /// commit; see [`KeySpace::settled`](crate::mq::KeySpace::settled)) is not written
    /// again.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing written);
    /// [`Error::Redis`] on a failed command.
    pub async fn dead_letter(&mut self, msg: &Message, failure: &Failure) -> Result<(), Error> {
        self.reader.dead_letter(&mut self.conn, msg, failure).await
    }

    /// Schedules a retry of `msg` after the [`crate::mq::MqOptions::retry`] backoff (the
    /// retry entry is appended to this partition when due, by a later [`Self::read`]), or
    /// dead-letters it when its retries are used up (error type
    /// `retries_exhausted:<type>`). The retry is addressed to this reader's group (other
    /// groups skip it). This group's retry of the same entry is scheduled at most once
    /// while it waits. It is not atomic with the caller's offset commit, but the entry's
    /// id is kept in [`KeySpace::settled`](crate::mq::KeySpace::settled) for 24 h (the
    /// Redis engine clears it with each commit): when a crash between the two makes the
    /// caller read the entry again, its retry or dead letter is not written twice.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing written);
    /// [`Error::Redis`] on a failed command.
    pub async fn retry_or_dead_letter(
        &mut self,
        msg: &Message,
        failure: &Failure,
    ) -> Result<RetryOutcome, Error> {
        self.reader
            .retry_or_dead_letter(&mut self.conn, msg, failure)
            .await
    }

    /// Extends the lease by `lease_ttl`; `false` when the lease was lost (stop reading:
    /// another owner may have the partition).
    ///
    /// # Errors
    /// [`Error::Redis`] on a failed command.
    pub async fn renew(&mut self) -> Result<bool, Error> {
        self.reader.renew(&mut self.conn).await
    }

    /// Releases the lease (if still ours).
    ///
    /// # Errors
    /// [`Error::Redis`] on a failed command (the lease then expires by TTL).
    pub async fn release(mut self) -> Result<(), Error> {
        self.reader.release(&mut self.conn).await
    }
}
