//! Reading a partition without a consumer group ([`Mq::read_partition`]): what a tail or
//! an inspection needs, leaving every group's position and pending entries as they are.

use std::time::Duration;

use redis::Value;

use super::message::parse_read_reply;
use super::{Message, Mq};
use crate::Error;

/// An entry that does not decode into a [`Message`] (written by hand, or by something
/// else than a [`Producer`](super::Producer)): its id and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MalformedEntry {
    /// The entry id.
    pub id: String,
    /// Why it does not decode (the reason a reader's dead letter would carry).
    pub reason: String,
}

impl Mq {
    /// The id of the last entry of partition `partition` of `topic` (`None` while it is
    /// empty): where [`read_partition`](Self::read_partition) starts to read only what
    /// comes next.
    ///
    /// # Errors
    /// Redis errors.
    pub async fn partition_end(&self, topic: &str, partition: u32) -> Result<Option<String>, Error> {
        let reply: Value = redis::cmd("XREVRANGE")
            .arg(self.keys.stream(topic, partition))
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut self.conn.clone())
            .await?;
        let entries = super::message::parse_entries(reply)?;
        Ok(entries.into_iter().next().map(|e| e.id))
    }

    /// Up to `count` entries of partition `partition` of `topic` after entry id `after`
    /// (`"0-0"` from the start; an id read before to go on), waiting up to `block` for
    /// one when there is none yet (capped at half the response timeout; zero: no wait).
    /// Reads without a consumer group (`XREAD`): no group's position, pending entries or
    /// lag changes. Entries that do not decode come back as [`MalformedEntry`] in their
    /// place.
    ///
    /// # Errors
    /// [`Error::Mq`] for an unknown topic or a partition out of range; Redis errors.
    pub async fn read_partition(
        &self,
        topic: &str,
        partition: u32,
        after: &str,
        count: usize,
        block: Duration,
    ) -> Result<Vec<Result<Message, MalformedEntry>>, Error> {
        let partitions = self.partitions(topic).await?;
        if partition >= partitions {
            return Err(Error::Mq {
                op: "read_partition",
                reason: format!("topic {topic} has {partitions} partitions, no partition {partition}"),
            });
        }
        let block = block.min(self.opts.response_timeout / 2);
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(count.max(1));
        if !block.is_zero() {
            cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
        }
        cmd.arg("STREAMS").arg(self.keys.stream(topic, partition)).arg(after);
        let reply: Value = cmd.query_async(&mut self.conn.clone()).await?;
        let topic = arcstr::ArcStr::from(topic);
        Ok(parse_read_reply(reply)?
            .into_iter()
            .map(|raw| {
                raw.decode(&topic, partition)
                    .map_err(|(raw, reason)| MalformedEntry { id: raw.id, reason })
            })
            .collect())
    }
}
