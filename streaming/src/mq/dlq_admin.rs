//! [`Mq`]'s dead-letter administration: list, read, replay (as it was or with a corrected
//! payload), delete and purge a topic's dead letters.

use super::{dlq, validate_name, DeadLetter, Mq};
use crate::Error;

impl Mq {
    /// Up to `limit_per_partition` dead letters of each partition of `topic`, oldest
    /// first, by partition.
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist; [`Error::Redis`].
    pub async fn dead_letters(
        &self,
        topic: &str,
        limit_per_partition: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        let n = self.partitions(topic).await?;
        let mut conn = self.conn.clone();
        dlq::list(&mut conn, &self.keys, topic, n, limit_per_partition.max(1)).await
    }

    /// Up to `count` dead letters of partition `partition` of `topic`, oldest first,
    /// starting after dead-letter id `after` (from the first with `None`): pages through
    /// one partition's dead-letter stream (pass the last `dlq_id` of a page as `after`).
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist; [`Error::InvalidConfig`] for a
    /// partition out of range; [`Error::Redis`] (also for an `after` that is not a
    /// stream id).
    pub async fn dead_letters_in(
        &self,
        topic: &str,
        partition: u32,
        after: Option<&str>,
        count: usize,
    ) -> Result<Vec<DeadLetter>, Error> {
        self.check_partition(topic, partition).await?;
        let start = after.map_or_else(|| "-".to_owned(), |id| format!("({id}"));
        let mut conn = self.conn.clone();
        let at = (topic, partition);
        dlq::range(&mut conn, &self.keys, at, (&start, "+"), count.max(1)).await
    }

    /// Dead letter `dlq_id` of partition `partition` of `topic`, or `None` if there is no
    /// such dead letter (e.g. replayed or purged).
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist; [`Error::InvalidConfig`] for a
    /// partition out of range; [`Error::Redis`] (also for a `dlq_id` that is not a stream
    /// id).
    pub async fn dead_letter(
        &self,
        topic: &str,
        partition: u32,
        dlq_id: &str,
    ) -> Result<Option<DeadLetter>, Error> {
        self.check_partition(topic, partition).await?;
        let mut conn = self.conn.clone();
        let at = (topic, partition);
        let found = dlq::range(&mut conn, &self.keys, at, (dlq_id, dlq_id), 1).await?;
        Ok(found.into_iter().next())
    }

    /// Deletes dead letter `dlq_id` of partition `partition` of `topic` (`XDEL`, without
    /// replaying it); returns whether it existed.
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist; [`Error::InvalidConfig`] for a
    /// partition out of range; [`Error::Redis`].
    pub async fn delete_dead_letter(
        &self,
        topic: &str,
        partition: u32,
        dlq_id: &str,
    ) -> Result<bool, Error> {
        self.check_partition(topic, partition).await?;
        let mut conn = self.conn.clone();
        dlq::delete(&mut conn, &self.keys, topic, partition, dlq_id).await
    }

    /// Fails unless `topic` exists and has partition `partition`.
    async fn check_partition(&self, topic: &str, partition: u32) -> Result<(), Error> {
        let partitions = self.partitions(topic).await?;
        if partition >= partitions {
            return Err(Error::InvalidConfig {
                field: "partition",
                reason: format!("{partition} out of range 0..{partitions}"),
            });
        }
        Ok(())
    }

    /// Moves dead letter `dlq_id` of `partition` back to that partition's stream, with its
    /// key, payload, headers and timestamp, retry count 0 and `x-original-message-id`;
    /// atomically (`XDEL` + `XADD` in one script). The replayed entry is addressed to the
    /// group that dead-lettered it (field `rg`): other groups of the topic skip it. Returns the new entry id, or `None` if
    /// no such dead letter exists (e.g. already replayed).
    ///
    /// # Errors
    /// [`Error::Mq`] for a dead letter without fields or with more than
    /// 1000 fields (a malformed entry; the dead letter stays where it is, and
    /// [`Mq::dead_letter`] still reads its key, payload and headers); [`Error::Redis`].
    pub async fn replay_dead_letter(
        &self,
        topic: &str,
        partition: u32,
        dlq_id: &str,
    ) -> Result<Option<String>, Error> {
        validate_name("topic", topic)?;
        let mut conn = self.conn.clone();
        dlq::replay(&mut conn, &self.keys, topic, partition, dlq_id, None).await
    }

    /// Like [`replay_dead_letter`](Self::replay_dead_letter), with `payload` in place of
    /// the dead letter's payload (key, headers, timestamp and addressing as replayed):
    /// corrects a message whose payload failed (bad JSON, say) before it goes back. For a
    /// malformed entry (one that did not decode) only the payload field is replaced; its
    /// other fields go back as they are.
    ///
    /// # Errors
    /// As [`replay_dead_letter`](Self::replay_dead_letter).
    pub async fn replay_dead_letter_with_payload(
        &self,
        topic: &str,
        partition: u32,
        dlq_id: &str,
        payload: &[u8],
    ) -> Result<Option<String>, Error> {
        validate_name("topic", topic)?;
        let mut conn = self.conn.clone();
        dlq::replay(
            &mut conn,
            &self.keys,
            topic,
            partition,
            dlq_id,
            Some(payload),
        )
        .await
    }

    /// Deletes every dead letter of `topic`; returns how many there were.
    ///
    /// # Errors
    /// [`Error::Mq`] if the topic does not exist; [`Error::Redis`].
    pub async fn purge_dead_letters(&self, topic: &str) -> Result<u64, Error> {
        let n = self.partitions(topic).await?;
        let mut conn = self.conn.clone();
        dlq::purge(&mut conn, &self.keys, topic, n).await
    }
}
