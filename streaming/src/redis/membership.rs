//! Membership: the live subtasks reading a (topic, group), from every process of the
//! job, and the share of partitions each owns (partition `p` belongs to the
//! `p % live`-th live name).

use super::context::Ctx;
use crate::mq::Connection;
use crate::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

/// A subtask's view of the live subtasks reading its (topic, group), from every process
/// of the job: each heartbeats its consumer name into the runners sorted set (score =
/// expiry) every `lease_renew_interval`; the live names, sorted, give each its share:
/// partition `p` belongs to the `p % live`-th name.
pub(super) struct Membership {
    key: String,
    consumer: String,
    /// The consumer names of the subtasks this process starts with: registered with the
    /// first heartbeat, so that siblings do not take each other's partitions at start.
    siblings: Vec<String>,
    partitions: u32,
    live: Vec<String>,
    next: Instant,
    first: bool,
    /// The subtask was asked to stop (scaled away): it hands its partitions over.
    stop: Option<Arc<AtomicBool>>,
}

impl Membership {
    pub(super) fn new(ctx: &Ctx<'_>, siblings: &[String], partitions: u32) -> Self {
        Membership {
            key: ctx.keys.runners(&ctx.spec.topic, &ctx.spec.group),
            consumer: ctx.consumer.clone(),
            siblings: siblings.to_vec(),
            partitions,
            live: Vec::new(),
            next: Instant::now(),
            first: true,
            stop: ctx.job.subtask_stop(&ctx.consumer),
        }
    }

    pub(super) fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    pub(super) fn leaving(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// Registers (renews) this subtask and reads the live names.
    pub(super) async fn heartbeat(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let opts = ctx.spec.config.mq_options();
        self.next = Instant::now() + opts.lease_renew_interval;
        let now = crate::mq::topic::now_ms();
        let ttl = i64::try_from(opts.lease_ttl.as_millis()).unwrap_or(i64::MAX);
        let expiry = now.saturating_add(ttl);
        let mut pipe = redis::pipe();
        pipe.atomic();
        if std::mem::take(&mut self.first) {
            for s in &self.siblings {
                pipe.cmd("ZADD")
                    .arg(&self.key)
                    .arg("NX")
                    .arg(expiry)
                    .arg(s)
                    .ignore();
            }
        }
        pipe.cmd("ZADD")
            .arg(&self.key)
            .arg(expiry)
            .arg(&self.consumer)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&self.key)
            .arg("-inf")
            .arg(now)
            .ignore()
            .cmd("ZRANGE")
            .arg(&self.key)
            .arg(0)
            .arg(-1);
        let (mut live,): (Vec<String>,) = pipe.query_async(conn).await?;
        live.sort();
        self.live = live;
        Ok(())
    }

    pub(super) fn is_assigned(&self, p: u32) -> bool {
        match self.live.iter().position(|c| *c == self.consumer) {
            Some(i) => p as usize % self.live.len() == i,
            None => false,
        }
    }

    pub(super) fn assigned(&self) -> Vec<u32> {
        (0..self.partitions)
            .filter(|p| self.is_assigned(*p))
            .collect()
    }

    /// Deregisters, so that the others take over at their next heartbeat.
    pub(super) async fn leave(&self, ctx: &Ctx<'_>, conn: &mut Connection) {
        let _: Result<(), _> = redis::cmd("ZREM")
            .arg(&self.key)
            .arg(&self.consumer)
            .query_async(conn)
            .await;
        ctx.job.subtask_left(&self.consumer);
    }
}
