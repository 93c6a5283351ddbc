//! The forwarder's task: rounds over the source partitions, reading each outbox after the
//! partition's position and forwarding its records in order; the position starts at the
//! largest forwarding mark of the partition (over the target partitions) and moves with
//! each record forwarded, and what lies at or before it is trimmed from the outbox.

use std::time::Duration;

use redis::Value;
use tokio::sync::watch;
use tracing::warn;

use super::target::{parse_id, TopicTarget};
use crate::mq::message::{parse_entry, RawEntry};
use crate::mq::Backoff;
use crate::redis::outbox::{entry_records, OutboxRecord};
use crate::Error;

/// One source partition's outbox.
pub(super) struct Lane {
    pub(super) partition: u32,
    pub(super) key: String,
    /// The last entry id forwarded (by any forwarder); `None` until read from the marks.
    position: Option<String>,
}

impl Lane {
    pub(super) fn new(partition: u32, key: String) -> Self {
        Lane {
            partition,
            key,
            position: None,
        }
    }
}

/// The task's state.
pub(super) struct Run {
    pub(super) target: TopicTarget,
    pub(super) lanes: Vec<Lane>,
    pub(super) batch_size: usize,
    pub(super) poll_interval: Duration,
    pub(super) backoff: Backoff,
}

/// What a forwarder's task is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// Go on forwarding.
    No,
    /// Forward what the outboxes hold, then stop (at the latest at the instant).
    Drain(tokio::time::Instant),
    /// Stop after the record in flight.
    Now,
}

impl Run {
    /// Forwards until `stopped` says [`Stop::Now`] (or the task is aborted), or, after
    /// [`Stop::Drain`], until a round finds nothing left or the drain's deadline passed.
    /// A Redis error ends the round; the next one starts after a backoff (positions stay:
    /// they only move after a record's script succeeded).
    pub(super) async fn run(mut self, mut stopped: watch::Receiver<Stop>) {
        loop {
            let drain = match *stopped.borrow() {
                Stop::Now => return,
                Stop::Drain(until) if tokio::time::Instant::now() >= until => return,
                Stop::Drain(_) => true,
                Stop::No => false,
            };
            let wait = match self.round(&stopped).await {
                Ok(true) => {
                    self.backoff.reset();
                    continue;
                }
                Ok(false) if drain => return,
                Ok(false) => self.poll_interval,
                Err(e) => {
                    self.target
                        .counts
                        .failed
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    warn!(target_topic = %self.target.target, error = %e, "topic forwarder: redis call failed; trying again");
                    self.backoff.next_delay()
                }
            };
            tokio::select! {
                _ = stopped.changed() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass over the lanes; whether any record was forwarded (or skipped).
    async fn round(&mut self, stopped: &watch::Receiver<Stop>) -> Result<bool, Error> {
        let mut worked = false;
        for i in 0..self.lanes.len() {
            let position = match self.lanes[i].position.clone() {
                Some(p) => p,
                None => self.start_lane(i).await?,
            };
            let entries = self.read(&self.lanes[i].key.clone(), &position).await?;
            let Some(last) = entries.last().map(|e| e.id.clone()) else {
                continue;
            };
            for entry in entries {
                let p = self.lanes[i].partition;
                for record in records(p, &entry) {
                    if *stopped.borrow() == Stop::Now {
                        return Ok(worked);
                    }
                    self.target.forward(&record).await?;
                    worked = true;
                }
                self.lanes[i].position = Some(entry.id);
            }
            self.trim(i, &last).await?;
        }
        Ok(worked)
    }

    /// The lane's position from the marks: just before the entry of the largest mark over
    /// the target partitions (that entry may be forwarded in part: the marks skip what
    /// was), and the outbox trimmed up to it.
    async fn start_lane(&mut self, i: usize) -> Result<String, Error> {
        let p = self.lanes[i].partition;
        let position = (self.target.forwarded_position(p).await?)
            .map_or_else(|| "0-0".to_owned(), |(ms, seq)| previous_id(ms, seq));
        self.trim(i, &position).await?;
        self.lanes[i].position = Some(position.clone());
        Ok(position)
    }

    /// `XRANGE outbox (position + COUNT n`: the next entries in id order.
    async fn read(&mut self, key: &str, position: &str) -> Result<Vec<RawEntry>, Error> {
        let reply: Value = redis::cmd("XRANGE")
            .arg(key)
            .arg(format!("({position}"))
            .arg("+")
            .arg("COUNT")
            .arg(self.batch_size)
            .query_async(&mut self.target.conn)
            .await?;
        let Value::Array(items) = reply else {
            return Ok(Vec::new());
        };
        let mut entries = Vec::with_capacity(items.len());
        for item in items {
            entries.extend(parse_entry(item)?);
        }
        Ok(entries)
    }

    /// Deletes the lane's entries up to `id` (all forwarded): `XTRIM outbox MINID` of the
    /// id after it.
    async fn trim(&mut self, i: usize, id: &str) -> Result<(), Error> {
        let Some(next) = next_id(id) else {
            return Ok(());
        };
        let _: i64 = redis::cmd("XTRIM")
            .arg(&self.lanes[i].key)
            .arg("MINID")
            .arg(next)
            .query_async(&mut self.target.conn)
            .await?;
        Ok(())
    }
}

/// The smallest stream id after `id`; `None` for a malformed id or the very last one.
fn next_id(id: &str) -> Option<String> {
    let (ms, seq) = parse_id(id)?;
    match seq.checked_add(1) {
        Some(s) => Some(format!("{ms}-{s}")),
        None => ms.checked_add(1).map(|m| format!("{m}-0")),
    }
}

/// The stream id just before `{ms}-{seq}` (`0-0` for the first one).
fn previous_id(ms: u64, seq: u64) -> String {
    match (seq.checked_sub(1), ms.checked_sub(1)) {
        (Some(s), _) => format!("{ms}-{s}"),
        (None, Some(m)) => format!("{m}-{}", u64::MAX),
        (None, None) => "0-0".to_owned(),
    }
}

/// The records of an outbox entry as the target forwards them.
fn records(partition: u32, e: &RawEntry) -> Vec<OutboxRecord> {
    (0u32..)
        .zip(entry_records(e))
        .map(|(index, r)| OutboxRecord {
            id: r.id,
            partition,
            payload: r.payload.into(),
            timestamp_ms: r.timestamp_ms,
            key: r.key,
            entry_id: e.id.clone(),
            index,
            attempt: 1,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_compare_and_step_as_numbers() {
        assert!(parse_id("10-0") > parse_id("9-9"));
        assert!(parse_id("10-10") > parse_id("10-9"));
        assert_eq!(parse_id("x"), None);
        assert_eq!(next_id("5-1").as_deref(), Some("5-2"));
        assert_eq!(next_id(&format!("5-{}", u64::MAX)).as_deref(), Some("6-0"));
        assert_eq!(next_id("0-0").as_deref(), Some("0-1"));
        assert_eq!(previous_id(5, 2), "5-1");
        assert_eq!(previous_id(5, 0), format!("4-{}", u64::MAX));
        assert_eq!(previous_id(0, 0), "0-0");
    }
}
