//! The forwarder's task: rounds over the source partitions, reading each outbox after the
//! partition's position (from the start of the stream at first: what a forwarder
//! confirmed is trimmed, so that is at most one read's worth of records forwarded already,
//! which the marks skip) and forwarding a read's records in one pipelined round trip per
//! target partition; once they all went through, the position moves past them and they
//! are trimmed from the outbox. The position never moves past a record that failed, so every record before a
//! trimmed one reached its target partition.

use std::time::Duration;

use tokio::time::Instant;

use redis::Value;
use tokio::sync::watch;
use tracing::warn;

use crate::mq::message::{parse_entry, RawEntry};
use crate::mq::Backoff;
use crate::redis::outbox::{entry_records, OutboxRecord};
use crate::redis::sinks::topics::target::{parse_id, TopicTarget};
use crate::Error;

/// One source partition's outbox.
pub(super) struct Lane {
    pub(super) partition: u32,
    pub(super) key: String,
    /// The last entry id this forwarder forwarded (`None`: from the stream's start).
    position: Option<String>,
    /// The wait after a failed read of this lane.
    backoff: Backoff,
    /// No read of this lane before this instant (it failed and waits its backoff).
    not_before: Instant,
}

impl Lane {
    pub(super) fn new(partition: u32, key: String, backoff: Backoff) -> Self {
        Lane {
            partition,
            key,
            position: None,
            backoff,
            not_before: Instant::now(),
        }
    }
}

/// The task's state.
pub(super) struct Run {
    pub(super) target: TopicTarget,
    pub(super) lanes: Vec<Lane>,
    pub(super) batch_size: usize,
    pub(super) poll_interval: Duration,
    /// The wait after the next round that finds nothing (see [`next_idle_wait`]).
    pub(super) idle_wait: Duration,
    /// Where failed rounds are reported besides the log.
    pub(super) on_error: Option<ErrorSink>,
    /// The source partitions forwarded outside a drain (`None`: all).
    pub(super) share: Option<Share>,
}

/// Receives a forwarder's failures (a job's error list).
pub(crate) type ErrorSink = std::sync::Arc<dyn Fn(String) + Send + Sync>;

/// Which source partitions a forwarder forwards now (a job's forwarder: those the
/// process holds); a drain forwards every partition.
pub(crate) type Share = std::sync::Arc<dyn Fn(u32) -> bool + Send + Sync>;

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
    /// A source partition whose read fails (a Redis error) waits its own backoff; the
    /// others go on (positions stay: they only move after a read went through).
    pub(super) async fn run(mut self, mut stopped: watch::Receiver<Stop>) {
        loop {
            let drain = match *stopped.borrow() {
                Stop::Now => return,
                Stop::Drain(until) if tokio::time::Instant::now() >= until => return,
                Stop::Drain(_) => true,
                Stop::No => false,
            };
            let (worked, failing) = self.round(&stopped, drain).await;
            if worked {
                self.idle_wait = FIRST_IDLE_WAIT.min(self.poll_interval);
                continue;
            }
            if drain && !failing {
                return;
            }
            let idle = self.idle_wait;
            self.idle_wait = next_idle_wait(idle, self.poll_interval);
            let wait = (self.lanes.iter())
                .filter(|l| l.not_before > Instant::now())
                .map(|l| l.not_before - Instant::now())
                .min()
                .map_or(idle, |w| w.min(idle));
            tokio::select! {
                _ = stopped.changed() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One pass over the lanes not waiting a backoff: whether any record was forwarded
    /// (or skipped), and whether a lane failed.
    async fn round(&mut self, stopped: &watch::Receiver<Stop>, drain: bool) -> (bool, bool) {
        let (mut worked, mut failing) = (false, false);
        for i in 0..self.lanes.len() {
            if *stopped.borrow() == Stop::Now {
                break;
            }
            let p = self.lanes[i].partition;
            if !drain && self.share.as_ref().is_some_and(|ours| !ours(p)) {
                continue;
            }
            if self.lanes[i].not_before > Instant::now() {
                failing = true;
                continue;
            }
            match self.forward_lane(i).await {
                Ok(w) => {
                    worked |= w;
                    self.lanes[i].backoff.reset();
                }
                Err(e) => {
                    failing = true;
                    self.failed(i, &e);
                }
            }
        }
        (worked, failing)
    }

    /// Counts and reports lane `i`'s failure and sets its backoff.
    fn failed(&mut self, i: usize, e: &Error) {
        let p = self.lanes[i].partition;
        self.target
            .counts
            .failed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        warn!(target_topic = %self.target.target, source_partition = p, error = %e, "topic forwarder: redis call failed; trying again");
        if let Some(report) = &self.on_error {
            report(format!(
                "topic forwarder into `{}`, source partition {p}: {e} (its records wait; trying again)",
                self.target.target
            ));
        }
        let lane = &mut self.lanes[i];
        lane.not_before = Instant::now() + lane.backoff.next_delay();
    }

    /// Forwards one read of lane `i`'s outbox; whether it held anything.
    async fn forward_lane(&mut self, i: usize) -> Result<bool, Error> {
        let position = (self.lanes[i].position.clone()).unwrap_or_else(|| "0-0".to_owned());
        let entries = self.read(&self.lanes[i].key.clone(), &position).await?;
        let Some(last) = entries.last().map(|e| e.id.clone()) else {
            return Ok(false);
        };
        let p = self.lanes[i].partition;
        let records: Vec<OutboxRecord> = entries.iter().flat_map(|e| records(p, e)).collect();
        self.target.forward(&records).await?;
        self.lanes[i].position = Some(last.clone());
        self.trim(i, &last).await?;
        Ok(true)
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

/// The wait after the first round that finds nothing following one that forwarded
/// records: outputs committed while a source is busy go on within milliseconds.
pub(super) const FIRST_IDLE_WAIT: Duration = Duration::from_millis(5);

/// The wait after the idle round following one that waited `idle`: doubling, up to the
/// poll interval.
fn next_idle_wait(idle: Duration, poll_interval: Duration) -> Duration {
    idle.saturating_mul(2).min(poll_interval)
}

/// The smallest stream id after `id`; `None` for a malformed id or the very last one.
fn next_id(id: &str) -> Option<String> {
    let (ms, seq) = parse_id(id)?;
    match seq.checked_add(1) {
        Some(s) => Some(format!("{ms}-{s}")),
        None => ms.checked_add(1).map(|m| format!("{m}-0")),
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
    fn idle_waits_double_up_to_the_poll_interval() {
        let poll = Duration::from_millis(100);
        let mut waits = vec![FIRST_IDLE_WAIT];
        while waits.len() < 7 {
            waits.push(next_idle_wait(waits[waits.len() - 1], poll));
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [5, 10, 20, 40, 80, 100, 100]);
    }

    #[test]
    fn ids_compare_and_step_as_numbers() {
        assert!(parse_id("10-0") > parse_id("9-9"));
        assert!(parse_id("10-10") > parse_id("10-9"));
        assert_eq!(parse_id("x"), None);
        assert_eq!(next_id("5-1").as_deref(), Some("5-2"));
        assert_eq!(next_id(&format!("5-{}", u64::MAX)).as_deref(), Some("6-0"));
        assert_eq!(next_id("0-0").as_deref(), Some("0-1"));
    }
}
