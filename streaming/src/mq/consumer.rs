//! Subscriptions: consumer-group membership, partition leases, rebalancing, pause/resume
//! and a draining stop.
//!
//! A subscription runs one coordinator task and one worker task per owned partition
//! ([`crate::mq::worker`]). Every `lease_renew_interval` the coordinator:
//! 1. heartbeats in `P:topic:T:members:G` (expiry = now + `lease_ttl`) and counts the live
//!    members;
//! 2. renews its leases; a lease it lost (expired and taken) stops that worker at once;
//! 3. computes its target: with an [`Assignment`] filter, every partition the filter
//!    accepts; else a fair share `ceil(partitions / live members)`; capped by
//!    `worker_count`;
//! 4. above target (or a partition left the filter): stops the worker, waits for its batch
//!    to finish (drain), then releases the lease, so another member takes it at once;
//! 5. below target: takes free leases (`SET NX PX`) and starts workers.
//!
//! Handover is at-least-once: between a release and the next owner's first read, entries
//! wait in the stream; entries a crashed owner had read but not acknowledged are claimed by
//! the next owner after `claim_idle`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::Connection;
use redis::AsyncCommands;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::mq::lease::{self, Lease};
use crate::mq::options::Assignment;
use crate::mq::topic::now_ms;
use crate::mq::worker::{self, Control, Shared};
use crate::mq::MessageHandler;
use crate::Error;

/// A running subscription; see the module docs. Dropping it stops it in the background
/// (drain, then release); [`Subscription::stop`] does the same and waits.
#[derive(Debug)]
pub struct Subscription {
    ctl: Arc<Control>,
    stop_tx: watch::Sender<bool>,
    coordinator: Option<JoinHandle<()>>,
}

impl Subscription {
    /// The consumer name of this subscription inside its group.
    pub fn consumer_name(&self) -> &str {
        &self.ctl.consumer
    }

    /// Stops reading new batches; batches being handled finish. Idempotent.
    pub fn pause(&self) {
        self.ctl.paused.send_replace(true);
    }

    /// Resumes reading after [`Subscription::pause`]. Idempotent.
    pub fn resume(&self) {
        self.ctl.paused.send_replace(false);
    }

    /// Whether the subscription is paused.
    pub fn is_paused(&self) -> bool {
        *self.ctl.paused.borrow()
    }

    /// Whether the pause has taken hold: paused, nothing in flight, and every worker of an
    /// owned partition waits for [`Subscription::resume`] (so nothing is read until then).
    pub fn is_parked(&self) -> bool {
        self.is_paused()
            && self.in_flight() == 0
            && self.ctl.parked.load(Ordering::SeqCst) >= self.owned_partitions().len()
    }

    /// Messages read and not yet finished (acknowledged, retried or dead-lettered).
    pub fn in_flight(&self) -> u64 {
        self.ctl.in_flight.load(Ordering::SeqCst)
    }

    /// The partitions this subscription owns now, ascending.
    pub fn owned_partitions(&self) -> Vec<u32> {
        self.ctl
            .owned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes the partition filter at run time (`None`: fair share of all partitions).
    /// Partitions leaving the filter are drained and released at the next coordinator
    /// round, which starts at once.
    pub fn set_assignment(&self, assignment: Option<Assignment>) {
        *self
            .ctl
            .assignment
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = assignment;
        self.ctl.assignment_changed.notify_one();
    }

    /// Stops: workers finish their current batch (in-flight work drains), then the leases
    /// are released and the member entry removed.
    ///
    /// # Errors
    /// [`Error::Mq`] if the coordinator task panicked.
    pub async fn stop(mut self) -> Result<(), Error> {
        self.stop_tx.send_replace(true);
        if let Some(h) = self.coordinator.take() {
            h.await.map_err(|e| Error::Mq {
                op: "stop",
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }

    /// Ends every task at once, without draining, acknowledging or releasing leases: what
    /// a crash looks like to the other members (leases expire after `lease_ttl`, pending
    /// entries are claimed after `claim_idle`). For fault tests and emergency shutdown.
    pub fn abort(mut self) {
        if let Some(h) = self.coordinator.take() {
            h.abort();
        }
        for a in self
            .ctl
            .aborts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            a.abort();
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stop_tx.send_replace(true);
    }
}

struct Worker {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
    lease: Lease,
}

pub(crate) fn start<H: MessageHandler>(shared: Arc<Shared<H>>, conn: Connection) -> Subscription {
    let (stop_tx, stop_rx) = watch::channel(false);
    let ctl = shared.ctl.clone();
    let coordinator = tokio::spawn(coordinate(shared, conn, stop_rx));
    Subscription {
        ctl,
        stop_tx,
        coordinator: Some(coordinator),
    }
}

async fn coordinate<H: MessageHandler>(
    sh: Arc<Shared<H>>,
    mut conn: Connection,
    mut stop: watch::Receiver<bool>,
) {
    let mut workers: BTreeMap<u32, Worker> = BTreeMap::new();
    // Workers whose lease was lost: told to stop, not yet finished; their partition is
    // not taken again until they are done.
    let mut lost: BTreeMap<u32, Worker> = BTreeMap::new();
    let mut tick = tokio::time::interval(sh.opts.lease_renew_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    info!(topic = %sh.topic, group = %sh.group, consumer = %sh.ctl.consumer, "subscription started");
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = sh.ctl.assignment_changed.notified() => {}
            r = stop.changed() => { if r.is_err() { break } }
        }
        if *stop.borrow() {
            break;
        }
        lost.retain(|_, w| !w.handle.is_finished());
        if let Err(e) = rebalance(&sh, &mut conn, &mut workers, &mut lost).await {
            warn!(topic = %sh.topic, group = %sh.group, error = %e, "rebalance failed");
        }
        publish_owned(&sh, &workers);
    }
    // Drain: every worker finishes its batch, then the leases go.
    for w in workers.values() {
        w.stop.send_replace(true);
    }
    for (p, w) in std::mem::take(&mut workers) {
        let _ = w.handle.await;
        release(&sh, &mut conn, p, &w.lease).await;
    }
    for (_, w) in std::mem::take(&mut lost) {
        let _ = w.handle.await;
    }
    publish_owned(&sh, &workers);
    let _: Result<(), _> = conn
        .zrem(sh.keys.members(&sh.topic, &sh.group), &sh.ctl.consumer)
        .await;
    info!(topic = %sh.topic, group = %sh.group, consumer = %sh.ctl.consumer, "subscription stopped");
}

fn publish_owned<H>(sh: &Shared<H>, workers: &BTreeMap<u32, Worker>) {
    *sh.ctl.owned.lock().unwrap_or_else(|e| e.into_inner()) = workers.keys().copied().collect();
}

async fn release<H>(sh: &Shared<H>, conn: &mut Connection, p: u32, lease: &Lease) {
    if let Err(e) = lease::release(conn, lease).await {
        warn!(topic = %sh.topic, partition = p, error = %e, "lease release failed; it expires by TTL");
    }
}

async fn stop_worker<H>(
    sh: &Shared<H>,
    conn: &mut Connection,
    workers: &mut BTreeMap<u32, Worker>,
    p: u32,
) {
    if let Some(w) = workers.remove(&p) {
        w.stop.send_replace(true);
        let _ = w.handle.await;
        release(sh, conn, p, &w.lease).await;
        debug!(topic = %sh.topic, partition = p, "partition released");
    }
}

async fn rebalance<H: MessageHandler>(
    sh: &Arc<Shared<H>>,
    conn: &mut Connection,
    workers: &mut BTreeMap<u32, Worker>,
    lost: &mut BTreeMap<u32, Worker>,
) -> Result<(), Error> {
    let live = heartbeat(sh, conn).await?;
    // Workers that ended on their own (should not happen) give their partition back.
    let finished: Vec<u32> = workers
        .iter()
        .filter(|(_, w)| w.handle.is_finished())
        .map(|(p, _)| *p)
        .collect();
    for p in finished {
        stop_worker(sh, conn, workers, p).await;
    }
    // Renew; a lost lease stops its worker without releasing (it is someone else's now).
    let (t, g) = (sh.topic.as_str(), sh.group.as_str());
    let owned: Vec<(u32, Lease)> = workers.iter().map(|(p, w)| (*p, w.lease.clone())).collect();
    for (p, lease) in owned {
        if !lease::renew(conn, &lease, sh.opts.lease_ttl).await? {
            warn!(
                topic = t,
                partition = p,
                group = g,
                "lease lost; stopping the partition"
            );
            if let Some(w) = workers.remove(&p) {
                w.stop.send_replace(true);
                lost.insert(p, w);
            }
        }
    }
    let assignment = *sh.ctl.assignment.lock().unwrap_or_else(|e| e.into_inner());
    let eligible: Vec<u32> = (0..sh.partitions)
        .filter(|p| assignment.is_none_or(|a| a.accepts(*p)))
        .collect();
    let target = if assignment.is_some() {
        eligible.len()
    } else {
        eligible.len().div_ceil(live.max(1) as usize)
    }
    .min(sh.opts.worker_count);
    give_up_partitions(sh, conn, workers, &eligible, target).await;
    acquire_partitions(sh, conn, workers, lost, &eligible, target).await
}

/// Registers this consumer in the group's member set (expiring after one lease TTL),
/// drops expired members and returns how many are live.
async fn heartbeat<H: MessageHandler>(
    sh: &Arc<Shared<H>>,
    conn: &mut Connection,
) -> Result<u32, Error> {
    let now = now_ms();
    let members = sh.keys.members(&sh.topic, &sh.group);
    let ttl_ms = i64::try_from(sh.opts.lease_ttl.as_millis()).unwrap_or(i64::MAX);
    let _: () = conn
        .zadd(&members, &sh.ctl.consumer, now.saturating_add(ttl_ms))
        .await?;
    let _: () = conn.zrembyscore(&members, "-inf", now).await?;
    Ok(conn.zcard(&members).await?)
}

/// Stops the workers of partitions this consumer may no longer hold, then the highest ones
/// until at most `target` are left.
async fn give_up_partitions<H: MessageHandler>(
    sh: &Arc<Shared<H>>,
    conn: &mut Connection,
    workers: &mut BTreeMap<u32, Worker>,
    eligible: &[u32],
    target: usize,
) {
    let leaving: Vec<u32> = workers
        .keys()
        .copied()
        .filter(|p| !eligible.contains(p))
        .collect();
    for p in leaving {
        stop_worker(sh, conn, workers, p).await;
    }
    while workers.len() > target {
        let Some(&p) = workers.keys().next_back() else {
            break;
        };
        info!(
            topic = %sh.topic,
            partition = p,
            group = %sh.group,
            target,
            "rebalancing: giving a partition up"
        );
        stop_worker(sh, conn, workers, p).await;
    }
}

/// Takes free leases of eligible partitions and starts their workers, up to `target`.
async fn acquire_partitions<H: MessageHandler>(
    sh: &Arc<Shared<H>>,
    conn: &mut Connection,
    workers: &mut BTreeMap<u32, Worker>,
    lost: &BTreeMap<u32, Worker>,
    eligible: &[u32],
    target: usize,
) -> Result<(), Error> {
    let (t, g) = (sh.topic.as_str(), sh.group.as_str());
    for &p in eligible {
        if workers.len() >= target {
            break;
        }
        if workers.contains_key(&p) || lost.contains_key(&p) {
            continue;
        }
        let key = sh.keys.lease(t, p, g);
        let fence = sh.keys.fence(t, p, g);
        let Some(lease) =
            lease::acquire(conn, &key, &fence, &sh.ctl.consumer, sh.opts.lease_ttl).await?
        else {
            continue;
        };
        info!(topic = t, partition = p, group = g, consumer = %sh.ctl.consumer, "partition acquired");
        let (stop_tx, stop_rx) = watch::channel(false);
        let handle = tokio::spawn(worker::run(sh.clone(), p, stop_rx));
        let mut aborts = sh.ctl.aborts.lock().unwrap_or_else(|e| e.into_inner());
        aborts.retain(|a| !a.is_finished());
        aborts.push(handle.abort_handle());
        drop(aborts);
        let worker = Worker {
            stop: stop_tx,
            handle,
            lease,
        };
        workers.insert(p, worker);
    }
    Ok(())
}

pub(crate) fn new_control(consumer: String, assignment: Option<Assignment>) -> Arc<Control> {
    Arc::new(Control {
        consumer,
        paused: watch::channel(false).0,
        in_flight: Default::default(),
        parked: Default::default(),
        owned: Mutex::new(Vec::new()),
        assignment: Mutex::new(assignment),
        assignment_changed: tokio::sync::Notify::new(),
        aborts: Mutex::new(Vec::new()),
    })
}
