//! Work without input: processing-time timers due at the wall clock, and the idle flush.

use crate::api::Sink;
use crate::mq::Connection;
use crate::mq::Message;
use crate::ops::Operator;
use crate::redis::partition::context::Ctx;
use crate::redis::partition::counts::BatchCounts;
use crate::redis::partition::Part;
use crate::redis::state::pending::{Pending, PendingHash};
use crate::redis::JobErrorKind;
use crate::time::clock::wall_clock_ms;
use crate::Error;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::Instant;

impl<C, S, O> Part<C, S, O>
where
    C: Operator<Message>,
    S: Sink<O>,
{
    /// Fires processing-time timers due at the wall clock while the partition has no
    /// input (with input they fire on the record path), and commits what they changed and
    /// emitted. Timers run on the subtask that owns the partition — the one thread that
    /// may touch its state — so there is no timer pool to size (`timer_threads` is 1).
    pub(in crate::redis) async fn fire_processing_timers(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        if Instant::now() < self.next_timers {
            return Ok(());
        }
        let now = wall_clock_ms();
        if let Err(e) = self
            .run_loaded(conn, |chain| chain.on_processing_time(now))
            .await
        {
            // A failing timer function: roll back to the last commit and try again later
            // (the timer is still in the committed state).
            self.report_error(
                ctx,
                JobErrorKind::Timers,
                format_args!("a processing-time timer failed, retried in 1 s: {e}"),
            );
            self.next_timers = Instant::now() + Duration::from_secs(1);
            return self.rebuild(ctx, conn).await;
        }
        let mut pending = Pending::default();
        self.runner.drain(&mut pending)?;
        pending.hashes.retain(PendingHash::writes);
        if pending.hashes.is_empty() && self.runner.no_outputs() {
            return Ok(());
        }
        self.commit_no_input(ctx, conn, pending).await?;
        self.report_batch(ctx, None, BatchCounts::default());
        Ok(())
    }

    /// Idle flush: when the partition has read nothing for
    /// `watermark_idle_timeout` (or its generator marked it idle) and its watermark epoch
    /// has begun, the watermark goes to `i64::MAX` — every due window and event-time timer
    /// fires — and the results, the state and a watermark reset to `i64::MIN` commit
    /// together. The chain is then rebuilt (fresh watermark generators; the state cache
    /// stays), so the next message starts a new epoch from its own event time. Keys the
    /// fired windows or timers touch that are not in memory are fetched and the flush runs
    /// again, as for a batch.
    pub(in crate::redis) async fn maybe_flush_idle(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        let Some(timeout) = ctx.spec.config.watermark_idle_timeout() else {
            return Ok(());
        };
        let Some((watermark, idle)) = self.runner.watermark() else {
            return Ok(());
        };
        let began = (self.runner.stores().iter())
            .any(|(_, s)| s.borrow().watermark().is_some_and(|(w, _)| w > i64::MIN));
        // A partition with work flushes whatever its watermark (it may never leave
        // `i64::MIN`, e.g. negative event times and a large out-of-orderness).
        if !(began || self.flush.awaiting) || (!idle && self.flush.idle() < timeout) {
            return Ok(());
        }
        tracing::debug!(topic = %ctx.spec.topic, partition = self.partition, watermark,
                        idle, "idle flush: watermark to MAX");
        let flushed = self
            .run_loaded(conn, |chain| chain.on_watermark(crate::time::MAX_WATERMARK))
            .await;
        if let Err(e) = flushed {
            // A user function failed while windows fired: nothing is committed; the next
            // attempt runs after another idle timeout.
            self.report_error(
                ctx,
                JobErrorKind::IdleFlush,
                format_args!("idle flush failed, retried after the idle timeout: {e}"),
            );
            self.flush.restart_idle();
            return self.rebuild(ctx, conn).await;
        }
        for (_, s) in self.runner.stores() {
            s.borrow_mut().reset_epoch();
        }
        // The flush's commit clears Redis's flush mark; the flush stays in `in_flight`
        // until reported, so a wait that sees the mark gone finds it in the diagnostics.
        self.flush.awaiting = false;
        ctx.job.in_flight.fetch_add(1, Ordering::SeqCst);
        let committed = self.commit_no_input(ctx, conn, Pending::default()).await;
        if committed.is_ok() {
            self.report_idle_flush(ctx);
        } else {
            self.flush.awaiting = true;
        }
        ctx.job.in_flight.fetch_sub(1, Ordering::SeqCst);
        ctx.job.signals.signal_change();
        committed?;
        self.flush.restart_idle();
        // Fresh watermark generators; the state cache (clean: just committed) stays.
        self.renew_chain()
    }
}
