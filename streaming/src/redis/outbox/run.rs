//! The dispatcher's task: rounds over the partitions' lanes, delivering each lane's
//! records in order until one fails (it then waits its backoff while the other lanes go
//! on), and sleeping the poll interval when no lane has anything to do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::warn;

use super::lane::{Failed, Lane};
use super::options::RedisOutboxDispatcher;
use super::OutboxTarget;
use crate::mq::retry::truncate;
use crate::mq::{Backoff, Connection};
use crate::Error;

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) delivered: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) dead_lettered: AtomicU64,
}

/// The task's state: its connection and the partitions' lanes.
pub(super) struct Run {
    pub(super) d: Arc<RedisOutboxDispatcher>,
    pub(super) conn: Connection,
    pub(super) lanes: Vec<Lane>,
    pub(super) stats: Arc<Counters>,
}

impl Run {
    /// Delivers until `stopped` turns true (or the task is aborted). A Redis error ends
    /// the round; the next one starts after a backoff (the connection reconnects on its
    /// next call).
    pub(super) async fn run<T: OutboxTarget>(
        mut self,
        mut target: T,
        mut stopped: watch::Receiver<bool>,
    ) {
        let mut redis_backoff = Backoff::new(self.d.backoff_initial, self.d.backoff_max);
        loop {
            if *stopped.borrow() {
                return;
            }
            let wait = match self.round(&mut target, &stopped).await {
                Ok(true) => {
                    redis_backoff.reset();
                    continue;
                }
                Ok(false) => self.idle_wait(),
                Err(e) => {
                    warn!(outbox = %self.d.name, error = %e, "outbox dispatcher: redis call failed; trying again");
                    redis_backoff.next_delay()
                }
            };
            tokio::select! {
                _ = stopped.changed() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The poll interval, or less when a lane's backoff ends sooner.
    fn idle_wait(&self) -> Duration {
        let now = Instant::now();
        self.lanes
            .iter()
            .filter(|l| !l.is_empty() && l.not_before > now)
            .map(|l| l.not_before - now)
            .fold(self.d.poll_interval, Duration::min)
    }

    /// One pass over the lanes whose backoff has ended; whether any record was settled.
    async fn round<T: OutboxTarget>(
        &mut self,
        target: &mut T,
        stopped: &watch::Receiver<bool>,
    ) -> Result<bool, Error> {
        let mut worked = false;
        for i in 0..self.lanes.len() {
            if self.lanes[i].not_before > Instant::now() {
                continue;
            }
            self.lanes[i].fill(&mut self.conn, &self.d).await?;
            // The lane's records in order, until one fails or none is left.
            while !*stopped.borrow() {
                match self.deliver_head(i, target).await? {
                    Some(Failed::Retry) => {
                        worked = true;
                        break;
                    }
                    Some(_) => worked = true,
                    None => break,
                }
            }
        }
        Ok(worked)
    }

    /// Delivers lane `i`'s head record and settles it: `None` when the lane has none,
    /// `Some(Failed::Gone)` as "settled" after a success too (the caller only tells
    /// `Retry` from the rest).
    async fn deliver_head<T: OutboxTarget>(
        &mut self,
        i: usize,
        target: &mut T,
    ) -> Result<Option<Failed>, Error> {
        let lane = &mut self.lanes[i];
        let Some((record, delivered)) = lane.head(&mut self.conn).await? else {
            return Ok(None);
        };
        let outcome = if delivered {
            Ok(())
        } else {
            target.deliver(&record).await
        };
        match outcome {
            Ok(()) => {
                lane.settle_delivered(&mut self.conn, &self.d.group).await?;
                self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                Ok(Some(Failed::Gone))
            }
            Err(e) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                let permanent = e.downcast_ref::<Error>().is_some_and(Error::is_permanent);
                let reason = truncate(&e.to_string());
                let failed = lane
                    .settle_failed(&mut self.conn, &self.d, &reason, permanent)
                    .await?;
                if failed == Failed::DeadLettered {
                    self.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
                    warn!(outbox = %self.d.name, partition = record.partition, id = %record.id,
                        attempts = record.attempt, reason = %reason, "outbox record dead-lettered");
                }
                Ok(Some(failed))
            }
        }
    }
}
