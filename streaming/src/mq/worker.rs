//! The per-partition worker of a subscription: read, handle, acknowledge.
//!
//! Loop, while the partition is owned and the subscription runs:
//! 1. wait while paused;
//! 2. read a batch with the partition's [`PartitionReader`] (a subscription member's: it
//!    promotes due retries, every `claim_idle / 2` claims entries pending longer than
//!    `claim_idle` (a dead consumer's) and replays them first, dead-letters a claimed
//!    entry already delivered more than `max_retries + 1` times (`redeliveries_exhausted`,
//!    so a poison message cannot crash-loop a job), else reads new entries with
//!    `XREADGROUP .. BLOCK poll_timeout`; malformed entries go to the dead-letter queue);
//! 3. handle the batch in order; retries and dead letters go one by one, each in its own
//!    atomic script that acknowledges the entry; then the whole batch is acknowledged in
//!    one script (`XACK` + frontier). A retry entry addressed to another group (field `rg`,
//!    see [`crate::mq::retry`]) is not handed to the handler: it is acknowledged with the
//!    batch, so the commit frontier moves past it.
//!
//! A Redis error ends the step; unacknowledged entries stay pending and are claimed again
//! after `claim_idle` (at-least-once).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Connection;
use tokio::sync::watch;
use tracing::{debug, error, warn};

use crate::mq::handler::{CatchUnwind, Failure, HandleResult, MessageHandler};
use crate::mq::message::Message;
use crate::mq::options::{Assignment, MqOptions, SubscriptionOptions};
use crate::mq::reader::PartitionReader;
use crate::mq::topic::KeySpace;
use crate::Error;

/// State shared between a [`crate::mq::Subscription`] handle, its coordinator and workers
/// (not generic over the handler).
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) consumer: String,
    pub(crate) paused: watch::Sender<bool>,
    pub(crate) in_flight: AtomicU64,
    pub(crate) parked: std::sync::atomic::AtomicUsize,
    pub(crate) owned: Mutex<Vec<u32>>,
    pub(crate) assignment: Mutex<Option<Assignment>>,
    pub(crate) assignment_changed: tokio::sync::Notify,
    pub(crate) aborts: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// Everything a worker needs.
pub(crate) struct Shared<H> {
    pub(crate) ctl: Arc<Control>,
    pub(crate) endpoint: super::Endpoint,
    pub(crate) keys: KeySpace,
    pub(crate) opts: MqOptions,
    pub(crate) sub: SubscriptionOptions,
    pub(crate) topic: String,
    pub(crate) group: String,
    pub(crate) partitions: u32,
    pub(crate) handler: H,
}

/// Decrements the in-flight count when a batch is done, also on error.
struct InFlight<'a>(&'a AtomicU64, u64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::SeqCst);
    }
}

/// Counts a worker as parked in pause while alive.
struct Parked<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs the worker of `partition` until `stop` turns true (or its sender is dropped).
pub(crate) async fn run<H: MessageHandler>(
    shared: Arc<Shared<H>>,
    partition: u32,
    mut stop: watch::Receiver<bool>,
) {
    let mut paused = shared.ctl.paused.subscribe();
    let mut conn: Option<Connection> = None;
    let at = (shared.topic.as_str(), partition, shared.group.as_str());
    let mut reader = PartitionReader::subscription(
        &shared.keys,
        at,
        &shared.ctl.consumer,
        &shared.opts,
        shared.sub.start,
    );
    let mut failures: u32 = 0;
    loop {
        if *stop.borrow() {
            break;
        }
        if *paused.borrow() {
            shared.ctl.parked.fetch_add(1, Ordering::SeqCst);
            let _parked = Parked(&shared.ctl.parked);
            while *paused.borrow() && !*stop.borrow() {
                tokio::select! {
                    r = paused.changed() => if r.is_err() { return },
                    r = stop.changed() => if r.is_err() { return },
                }
            }
        }
        if *stop.borrow() {
            break;
        }
        let result = match conn.as_mut() {
            Some(c) => step(&shared, &mut reader, c).await,
            None => match super::connect(
                &shared.endpoint,
                shared.opts.response_timeout,
                shared.sub.poll_timeout,
            )
            .await
            {
                Ok(c) => {
                    conn = Some(c);
                    Ok(())
                }
                Err(e) => Err(e),
            },
        };
        match result {
            Ok(()) => failures = 0,
            Err(e) => {
                failures = failures.saturating_add(1);
                let wait = Duration::from_millis(50u64 << failures.min(5));
                warn!(topic = %shared.topic, partition, group = %shared.group, error = %e,
                      "mq worker step failed; retrying in {wait:?}");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    r = stop.changed() => if r.is_err() { return },
                }
            }
        }
    }
    debug!(topic = %shared.topic, partition, "mq worker stopped");
}

/// Reads a batch, hands its messages to the handler in order and carries out each
/// verdict, then acknowledges the batch.
async fn step<H: MessageHandler>(
    sh: &Shared<H>,
    reader: &mut PartitionReader,
    conn: &mut Connection,
) -> Result<(), Error> {
    let batch = reader
        .read(conn, sh.sub.batch_count, sh.sub.poll_timeout)
        .await?;
    if batch.ids.is_empty() {
        return Ok(());
    }
    let n = batch.ids.len() as u64;
    sh.ctl.in_flight.fetch_add(n, Ordering::SeqCst);
    let _guard = InFlight(&sh.ctl.in_flight, n);
    for msg in &batch.messages {
        let verdict = handle(sh, msg).await;
        if let HandleResult::Fail(f) = &verdict {
            error!(topic = %msg.topic, partition = msg.partition, id = %msg.id,
                   error_type = %f.error_type, error = %f.message,
                   "handler failed; message dead-lettered");
        }
        reader.settle(conn, msg, &verdict).await?;
    }
    // Every entry is settled now: handled, retried, dead-lettered or another group's
    // retry (acknowledged here, so the commit frontier moves past it).
    reader.acknowledge(conn, &batch.ids).await?;
    Ok(())
}

/// The handler's verdict on `msg`; a panic counts as a retryable failure.
async fn handle<H: MessageHandler>(sh: &Shared<H>, msg: &Message) -> HandleResult {
    let mut fut = std::pin::pin!(sh.handler.handle(msg.clone()));
    match CatchUnwind(fut.as_mut()).await {
        Ok(v) => v,
        Err(panic) => {
            warn!(topic = %msg.topic, partition = msg.partition, id = %msg.id, %panic,
                  "handler panicked");
            HandleResult::Retry(Failure::new("panic", panic))
        }
    }
}
