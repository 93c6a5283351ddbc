//! The failure path: a failed message goes to retry (after the backoff) or the
//! dead-letter queue, acknowledging it in the same script in XACK mode.

use tracing::{debug, warn};

use super::{PartitionReader, ReadMode};
use crate::mq::dlq::{write_dead_letter, DeadLetterCause};
use crate::mq::handler::{Failure, HandleResult};
use crate::mq::message::{Message, RawEntry};
use crate::mq::retry::{ack_and_schedule, backoff, schedule_without_ack, RetryOutcome};
use crate::mq::Connection;
use crate::Error;

impl PartitionReader {
    /// Carries out a verdict on failed `msg`: [`HandleResult::Retry`] as
    /// [`Self::retry_or_dead_letter`], [`HandleResult::DeadLetter`] as
    /// [`Self::dead_letter`], [`HandleResult::Fail`] as a dead letter of error type
    /// `fail:<type>`; [`HandleResult::Success`] does nothing (the batch's commit
    /// acknowledges it). Returns what became of a failed `msg` (`None` on success).
    ///
    /// # Errors
    /// As [`Self::retry_or_dead_letter`].
    pub(crate) async fn settle(
        &self,
        conn: &mut Connection,
        msg: &Message,
        verdict: &HandleResult,
    ) -> Result<Option<RetryOutcome>, Error> {
        Ok(match verdict {
            HandleResult::Success => None,
            HandleResult::Retry(f) => Some(self.retry_or_dead_letter(conn, msg, f).await?),
            HandleResult::DeadLetter(f) => {
                self.dead_letter(conn, msg, f).await?;
                Some(RetryOutcome::DeadLettered)
            }
            HandleResult::Fail(f) => {
                let f = Failure::new(format!("fail:{}", f.error_type), f.message.clone());
                self.dead_letter(conn, msg, &f).await?;
                Some(RetryOutcome::DeadLettered)
            }
        })
    }

    /// Schedules this group's retry of `msg` after the retry policy's backoff (the retry
    /// entry, addressed to this group, is appended to the partition when due, by a later
    /// read), or dead-letters it when its retries are used up (error type
    /// `retries_exhausted:<type>`). XACK mode acknowledges `msg` in the same script. A
    /// retry of the same entry by this group is scheduled at most once while it waits.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing written);
    /// [`Error::Redis`].
    pub(crate) async fn retry_or_dead_letter(
        &self,
        conn: &mut Connection,
        msg: &Message,
        failure: &Failure,
    ) -> Result<RetryOutcome, Error> {
        let max = msg.max_retries.unwrap_or(self.retry.max_retries);
        if msg.retry_count >= max {
            let exhausted = Failure::new(
                format!("retries_exhausted:{}", failure.error_type),
                failure.message.clone(),
            );
            self.dead_letter(conn, msg, &exhausted).await?;
            return Ok(RetryOutcome::DeadLettered);
        }
        let delay = backoff(&self.retry, msg.retry_count);
        let fence = self.fence()?;
        let (kind, text) = (failure.error_type.as_str(), failure.message.as_str());
        let (keys, group) = (&self.keys, self.group.as_str());
        let scheduled = match self.mode {
            ReadMode::Xack => {
                ack_and_schedule(conn, keys, fence, group, msg, delay, kind, text).await?
            }
            ReadMode::NoAck => {
                schedule_without_ack(conn, keys, fence, group, msg, delay, (kind, text)).await?
            }
        };
        debug!(topic = %msg.topic, partition = msg.partition, id = %msg.id,
               retry = msg.retry_count + 1, ?delay, scheduled, "retry scheduled");
        Ok(if scheduled {
            RetryOutcome::Scheduled { delay }
        } else {
            RetryOutcome::AlreadyScheduled
        })
    }

    /// Appends `msg`, unchanged but for the `dlq.*` fields, to the partition's
    /// dead-letter stream with `failure`'s type and message; XACK mode acknowledges it in
    /// the same script.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another owner took the lease (nothing written);
    /// [`Error::Redis`].
    pub(crate) async fn dead_letter(
        &self,
        conn: &mut Connection,
        msg: &Message,
        failure: &Failure,
    ) -> Result<(), Error> {
        let cause = DeadLetterCause {
            topic: &self.topic,
            partition: self.partition,
            group: &self.group,
            id: &msg.id,
            original_id: msg.original_id(),
            attempts: msg.retry_count.saturating_add(1),
            error_type: &failure.error_type,
            error: &failure.message,
        };
        self.dead_letter_entry(conn, &cause, msg.entry_fields())
            .await
    }

    /// Dead-letters an entry that does not decode as a message (error type `malformed`).
    pub(super) async fn dead_letter_malformed(
        &self,
        conn: &mut Connection,
        e: RawEntry,
        reason: &str,
    ) -> Result<(), Error> {
        warn!(topic = %self.topic, partition = self.partition, id = %e.id, %reason,
              "malformed entry → dead letter");
        let cause = DeadLetterCause {
            topic: &self.topic,
            partition: self.partition,
            group: &self.group,
            id: &e.id,
            original_id: &e.id,
            attempts: 1,
            error_type: "malformed",
            error: reason,
        };
        self.dead_letter_entry(conn, &cause, e.fields).await
    }

    /// Dead-letters a claimed entry delivered `deliveries` times (its consumers kept
    /// dying or stalling on it) without handing it out again.
    pub(super) async fn dead_letter_redelivered(
        &self,
        conn: &mut Connection,
        m: &Message,
        deliveries: u64,
    ) -> Result<(), Error> {
        warn!(topic = %self.topic, partition = self.partition, id = %m.id, deliveries,
              "entry redelivered too often → dead letter");
        let why = format!(
            "delivered {deliveries} times without an acknowledgement (consumer crashed or stalled)"
        );
        let f = Failure::new("redeliveries_exhausted", why);
        self.dead_letter(conn, m, &f).await
    }

    async fn dead_letter_entry(
        &self,
        conn: &mut Connection,
        cause: &DeadLetterCause<'_>,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(), Error> {
        let (fence, ack) = (self.fence()?, self.mode == ReadMode::Xack);
        write_dead_letter(conn, &self.keys, fence, ack, cause, fields).await?;
        Ok(())
    }
}
