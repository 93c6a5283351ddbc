//! Membership: the live subtasks reading a (topic, group), from every process of the
//! job, and the share of partitions each owns: a sticky, balanced assignment kept in
//! Redis (`lua/membership.lua`), so a change of the live set moves only the partitions
//! it must.

use crate::mq::Connection;
use crate::redis::partition::context::Ctx;
use crate::Error;
use redis::Script;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use tokio::time::Instant;

/// Heartbeats a subtask and returns its partitions (see the script's header).
static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/membership.lua")));

/// A subtask's membership of its (topic, group): every `lease_renew_interval` it
/// heartbeats its consumer name into the assignment hash (expiry: now + `lease_ttl`),
/// which drops expired names and answers with the subtask's partitions. The assignment
/// is one for the whole job, kept in Redis: each live subtask holds `partitions / live`
/// partitions (rounded down or up); a partition stays with its live owner, a dead
/// subtask's partitions go to the others, and a joining subtask gets its share from those
/// above theirs. A subtask that missed two heartbeats keeps its partitions until it
/// expires but is dealt no new one.
pub(in crate::redis) struct Membership {
    key: String,
    consumer: String,
    /// The consumer names of the subtasks this process starts with: registered with the
    /// first heartbeat, so that siblings do not take each other's partitions at start.
    siblings: Vec<String>,
    partitions: u32,
    /// This subtask's partitions at the last heartbeat, ascending.
    assigned: Vec<u32>,
    next: Instant,
    first: bool,
    /// The subtask was asked to stop (scaled away): it hands its partitions over.
    stop: Option<Arc<AtomicBool>>,
}

impl Membership {
    pub(in crate::redis) fn new(ctx: &Ctx<'_>, siblings: &[String], partitions: u32) -> Self {
        Membership {
            key: ctx.keys.assignment(&ctx.spec.topic, &ctx.spec.group),
            consumer: ctx.consumer.clone(),
            siblings: siblings.to_vec(),
            partitions,
            assigned: Vec::new(),
            next: Instant::now(),
            first: true,
            stop: ctx.job.subtasks.stop_of(&ctx.consumer),
        }
    }

    pub(in crate::redis) fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    pub(in crate::redis) fn leaving(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// Registers (renews) this subtask and reads its partitions.
    pub(in crate::redis) async fn heartbeat(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let opts = ctx.spec.config.mq_options();
        self.next = Instant::now() + opts.lease_renew_interval;
        let now = crate::mq::topic::now_ms();
        let ttl = i64::try_from(opts.lease_ttl.as_millis()).unwrap_or(i64::MAX);
        let renew = i64::try_from(opts.lease_renew_interval.as_millis()).unwrap_or(i64::MAX);
        let expiry = now.saturating_add(ttl);
        let mut inv = HEARTBEAT.key(&self.key);
        inv.arg(now)
            .arg(expiry)
            .arg(self.partitions)
            .arg(&self.consumer)
            // Heartbeats more than two intervals old are late.
            .arg(expiry.saturating_sub(renew.saturating_mul(2)));
        if self.first {
            inv.arg(&self.siblings);
        }
        self.assigned = inv.invoke_async(conn).await?;
        self.first = false;
        Ok(())
    }

    pub(in crate::redis) fn is_assigned(&self, p: u32) -> bool {
        self.assigned.binary_search(&p).is_ok()
    }

    pub(in crate::redis) fn assigned(&self) -> Vec<u32> {
        self.assigned.clone()
    }

    /// Deregisters, so that the others take over at their next heartbeat.
    pub(in crate::redis) async fn leave(&self, ctx: &Ctx<'_>, conn: &mut Connection) {
        let _: Result<(), _> = redis::cmd("HDEL")
            .arg(&self.key)
            .arg(format!("m:{}", self.consumer))
            .query_async(conn)
            .await;
        ctx.job.subtasks.left(&self.consumer);
    }
}
