//! Taking a partition (its lease and read position, a fresh chain, and the state the last
//! commit left), resetting it to its last commit, and giving it up.

use crate::api::Sink;
use crate::mq::Connection;
use crate::ops::Operator;
use crate::redis::job::id_at_least;
use crate::redis::partition::context::{guarded, Ctx};
use crate::redis::partition::Part;
use crate::redis::state::pending::Pending;
use crate::redis::state::{persist, schema};
use crate::Error;
use std::sync::atomic::Ordering;

impl<C, S, O> Part<C, S, O>
where
    C: Operator<crate::mq::Message>,
    S: Sink<O>,
{
    /// Takes (or re-takes after a failure) the partition: lease and read position, a fresh
    /// chain, and the state the last commit left.
    pub(in crate::redis) async fn take(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let spec = ctx.spec;
        self.owner.take(ctx, conn).await?;
        self.rebuild(ctx, conn).await?;
        self.confirm_unconfirmed(ctx).await?;
        // Under the new token no earlier owner's commit can apply any more: what Redis
        // recorded is final.
        self.recover_two_phase(ctx, conn).await?;
        self.reconcile_flush_mark(ctx, conn).await?;
        if self.owner.others.unwritten() {
            // An input's start position, chosen now, is kept before anything is read.
            self.commit_no_input(ctx, conn, Pending::default()).await?;
        }
        let awaiting = self.flush.awaiting;
        ctx.job
            .update(&self.progress, |pr| pr.awaiting_flush |= awaiting);
        ctx.job.taken(conn, &self.progress, &ctx.consumer).await?;
        (self.owner).taken(spec.config.mq_options().lease_renew_interval);
        Ok(())
    }

    /// After a take: the partition awaits an idle flush when its restored windows or
    /// event-time timers are unfired, or when Redis marks it so (an earlier owner processed
    /// records since its last flush); then Redis marks it so — an empty commit writes the
    /// mark when it differs (e.g. state restored from a checkpoint, or a pipeline without
    /// event time now, whose mark would never be cleared).
    async fn reconcile_flush_mark(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let (spec, p) = (ctx.spec, self.partition);
        let key = ctx.keys.flush_pending(&spec.topic, p, &spec.group);
        let marked: bool = redis::cmd("EXISTS").arg(&key).query_async(conn).await?;
        self.flush.marked = Some(marked);
        if self.runner.watermark().is_some() {
            // Restored windows or timers fire only at the next idle flush.
            let work = (self.runner.stores().iter()).any(|(_, s)| s.borrow().has_event_time_work());
            self.flush.awaiting |= work || marked;
        } else {
            self.flush.awaiting = false;
        }
        if self.flush.awaiting != marked {
            self.commit_no_input(ctx, conn, Pending::default()).await?;
        }
        Ok(())
    }

    /// Counts a batch whose commit reply was lost when the commit frontier shows Redis
    /// applied it (counters count committed work); otherwise the batch is read again. The
    /// take moved the lease to a new token first, so that commit can no longer apply
    /// later: the frontier read here is final for it, and the batch is counted once.
    async fn confirm_unconfirmed(&mut self, ctx: &Ctx<'_>) -> Result<(), Error> {
        if self.unconfirmed.is_none() {
            return Ok(());
        }
        let spec = ctx.spec;
        let frontier = ctx
            .mq
            .commit_frontier(&spec.topic, &spec.group, self.partition)
            .await?;
        let Some(u) = self.unconfirmed.take() else {
            return Ok(());
        };
        if frontier.is_some_and(|f| id_at_least(&f, &u.last_id)) {
            if u.counts.processed > 0 && self.runner.watermark().is_some() {
                self.flush.awaiting = true;
            }
            self.report_batch(ctx, Some(u.last_id), u.counts);
        }
        ctx.job.in_flight.fetch_sub(u.in_flight, Ordering::SeqCst);
        Ok(())
    }

    /// A fresh chain with the committed state (drops uncommitted changes and outputs).
    pub(in crate::redis) async fn rebuild(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        // The old chain's side outputs go with it: a rolled-back batch delivers nothing.
        self.discard_outputs();
        self.runner.reset()?;
        let (config, keys, stores) = (&ctx.spec.config, self.runner.keys(), self.runner.stores());
        let catalog = ctx.job.state_catalog(&ctx.spec.topic, &ctx.spec.group);
        self.schema = persist::open_schema(config, conn, keys, stores, catalog).await?;
        self.load_state(conn).await?;
        let lease = self.owner.fenced_unless_held(ctx)?;
        let fence = self.owner.fence(ctx, &lease);
        schema::flush(self.schema.as_ref(), conn, self.runner.keys(), fence).await?;
        Ok(())
    }

    /// Drops what the partition holds in memory (state cache, chain, outputs, reader,
    /// lease) after its lease was lost: the next take reloads what the last commit left.
    pub(in crate::redis) fn forget(&mut self, ctx: &Ctx<'_>) {
        self.discard_outputs();
        if let Err(e) = self.runner.reset() {
            self.report_error(
                ctx,
                crate::redis::JobErrorKind::Chain,
                format_args!("rebuilding a chain: {e}"),
            );
        }
        self.owner.lost();
        if let Some(u) = self.unconfirmed.take() {
            ctx.job.in_flight.fetch_sub(u.in_flight, Ordering::SeqCst);
        }
        ctx.job.let_go(&self.progress, &ctx.consumer);
    }

    /// Gives the partition up at a batch boundary (rebalance, rescale, cancel): closes its
    /// chain and sink and releases its lease, so the next owner takes it at once.
    pub(in crate::redis) async fn hand_over(mut self, ctx: &Ctx<'_>, conn: &mut Connection) {
        let (job, p) = (ctx.job, self.partition);
        let (addr, chain) = (self.progress.addr(), crate::redis::JobErrorKind::Chain);
        if let Err(e) = self.runner.close() {
            job.error_at(addr, chain, format!("closing chain of partition {p}: {e}"));
        }
        if let Err(e) = guarded(ctx, "close sink", self.sink.close()) {
            let sink = crate::redis::JobErrorKind::Sink;
            job.error_at(addr, sink, format!("closing sink of partition {p}: {e}"));
        }
        if let Some(u) = self.unconfirmed.take() {
            job.in_flight.fetch_sub(u.in_flight, Ordering::SeqCst);
        }
        self.owner.release(conn).await;
        job.let_go(&self.progress, &ctx.consumer);
    }
}
