//! Starting a [`RedisOutboxDispatcher`], and the handle of a running one.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use super::lane::Lane;
use super::options::RedisOutboxDispatcher;
use super::run::{Counters, Run};
use super::OutboxTarget;
use crate::mq::connect;
use crate::Error;

impl RedisOutboxDispatcher {
    /// Creates the consumer group on each partition's outbox stream where it is missing
    /// (at id `0`, making the stream if needed), then delivers to `target` on a tokio task
    /// until [`OutboxDispatch::stop`] (or until the handle is dropped). Starting again
    /// after a stop (or a crash) goes on where the last run left off. Redis errors while
    /// running are logged and retried with the backoff; they do not end the task.
    ///
    /// # Errors
    /// [`Error::Connect`] when no connection can be made; [`Error::Redis`] when a group
    /// cannot be created.
    pub async fn start<T: OutboxTarget>(&self, target: T) -> Result<OutboxDispatch, Error> {
        let timeout = self.mq.options().response_timeout;
        let mut conn = connect(self.mq.endpoint(), timeout, Duration::ZERO).await?;
        let mut lanes = Vec::with_capacity(self.partitions.len());
        for &p in &self.partitions {
            let lane = Lane::new(self, p);
            lane.ensure_group(&mut conn, &self.group).await?;
            lanes.push(lane);
        }
        info!(
            outbox = %self.name,
            topic = %self.topic,
            partitions = self.partitions.len(),
            group = %self.group,
            "outbox dispatcher started"
        );
        let (stop, stopped) = watch::channel(false);
        let stats = Arc::new(Counters::default());
        let run = Run {
            d: Arc::new(self.clone()),
            conn,
            lanes,
            stats: Arc::clone(&stats),
        };
        let task = tokio::spawn(run.run(target, stopped));
        Ok(OutboxDispatch {
            stop,
            task: Some(task),
            stats,
        })
    }
}

/// What a dispatcher has done since it started (this process only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxStats {
    /// Records delivered, acknowledged and deleted.
    pub delivered: u64,
    /// Failed deliveries (each retried or dead-lettered).
    pub failed: u64,
    /// Records moved to the dead-letter stream.
    pub dead_lettered: u64,
}

/// A running [`RedisOutboxDispatcher`]. [`stop`](Self::stop) ends it after the delivery
/// in progress; dropping the handle aborts the task at its next await (a delivery in
/// progress is then neither acknowledged nor counted, and is delivered again by the next
/// dispatcher).
#[derive(Debug)]
pub struct OutboxDispatch {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    stats: Arc<Counters>,
}

impl OutboxDispatch {
    /// Counters since the start.
    pub fn stats(&self) -> OutboxStats {
        OutboxStats {
            delivered: self.stats.delivered.load(Ordering::Relaxed),
            failed: self.stats.failed.load(Ordering::Relaxed),
            dead_lettered: self.stats.dead_lettered.load(Ordering::Relaxed),
        }
    }

    /// Asks the task to stop and waits until it has: the delivery in progress (and its
    /// acknowledgement) completes first, no new one begins.
    ///
    /// # Panics
    /// If the target panicked (the panic is resumed here).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            if let Err(e) = task.await {
                if e.is_panic() {
                    std::panic::resume_unwind(e.into_panic());
                }
            }
        }
    }
}

impl Drop for OutboxDispatch {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
