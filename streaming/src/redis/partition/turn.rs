//! One turn of the subtask loop for a partition: renew its lease when due, take it when
//! it needs it, else run a batch (or timers and the idle flush when there is no input),
//! and recover from what failed.

use crate::api::Sink;
use crate::mq::Connection;
use crate::mq::Message;
use crate::ops::Operator;
use crate::redis::job::{JobErrorKind, JobShared, PartitionHandle};
use crate::redis::partition::context::Ctx;
use crate::redis::partition::ownership::is_leased_elsewhere;
use crate::redis::partition::Part;
use crate::redis::state::schema;
use crate::Error;
use std::time::Duration;
use tracing::Instrument;

impl<C, S, O> Part<C, S, O>
where
    C: Operator<Message>,
    S: Sink<O>,
{
    /// One turn of the subtask loop for this partition: renew the lease when due, take the
    /// partition when it needs it, else run a batch (or timers and the idle flush when
    /// there is no input). `true` when a batch read entries.
    pub(in crate::redis) async fn turn(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        renew_every: Duration,
    ) -> bool {
        if !self.renew_if_due(ctx, conn, renew_every).await {
            return false;
        }
        if self.owner.must_take() {
            if self.owner.take_due() {
                self.retake(ctx, conn, renew_every).await;
            }
            return false;
        }
        self.sample_lag(ctx, conn).await;
        let (kind, r) = match self.step(ctx, conn).await {
            Ok(0) => match self.fire_processing_timers(ctx, conn).await {
                Ok(()) => (
                    JobErrorKind::IdleFlush,
                    self.maybe_flush_idle(ctx, conn).await,
                ),
                Err(e) => (JobErrorKind::Timers, Err(e)),
            },
            Ok(_) => {
                // Only work that went through resets the backoff: a take that succeeds
                // before the same batch fails again must not (it retried every 50 ms).
                self.owner.progressed();
                return true;
            }
            Err(e) => (JobErrorKind::Batch, Err(e)),
        };
        match r {
            Ok(()) => self.owner.progressed(),
            Err(e) => self.recover(ctx, kind, e),
        }
        false
    }

    /// Writes the partition's part of the open checkpoints it has not written yet, at
    /// this batch boundary (nothing uncommitted). A part that fails is tried again at the
    /// next boundary; a fenced one drops the partition like a fenced commit.
    pub(in crate::redis) async fn checkpoint(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        open: &[(u64, u64)],
    ) {
        if (open.is_empty() && self.checkpoints_written.is_empty()) || self.owner.must_take() {
            return;
        }
        let span = part_span!("checkpoint", ctx, self.partition, open = open.len() as i64);
        if let Err(e) = self
            .write_checkpoint_parts(ctx, conn, open)
            .instrument(span)
            .await
        {
            if e.is_fenced() {
                self.recover(ctx, JobErrorKind::Checkpoint, e);
            } else {
                let (spec, p) = (ctx.spec, self.partition);
                ctx.job.partition_error(&self.progress, JobErrorKind::Checkpoint, format!(
                    "partition {p} of {}: checkpoint part not written, trying again at the next batch boundary: {e}",
                    spec.topic
                ));
            }
        }
    }

    /// Renews the lease when due; `false` when it was found lost (the partition is then
    /// dropped from memory until its lease is won again).
    async fn renew_if_due(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        renew_every: Duration,
    ) -> bool {
        let (job, spec, p) = (ctx.job, ctx.spec, self.partition);
        if !self.owner.renewal_due(renew_every) {
            return true;
        }
        match self.owner.renew(conn).await {
            Ok(true) => {}
            Ok(false) => {
                // Expired (e.g. this process stalled or Redis was down longer than the
                // TTL), maybe taken: drop it and take it again when its lease is free.
                job.partition_error(&self.progress, JobErrorKind::Lease, format!(
                    "partition {p} of `{}` (group `{}`): fenced, the lease passed to another owner while this process stalled; nothing more is written: dropped from memory until its lease is won again",
                    spec.topic, spec.group
                ));
                job.update(&self.progress, |pr| pr.fenced += 1);
                self.forget(ctx);
                return false;
            }
            Err(e) => {
                job.partition_error(
                    &self.progress,
                    JobErrorKind::Lease,
                    format!("partition {p}: lease renewal failed: {e}"),
                );
            }
        }
        true
    }

    /// After the step of `kind` failed with `e`: stops the partition (a schema mismatch under `SchemaMismatchPolicy::Fail`),
    /// drops it (fenced), or resets it to its last commit after a backoff.
    fn recover(&mut self, ctx: &Ctx<'_>, kind: JobErrorKind, e: Error) {
        let (job, spec, p) = (ctx.job, ctx.spec, self.partition);
        if schema::stops_partition(&e) {
            stopped(job, &self.progress, &e);
            self.stopped = true;
        } else if e.is_fenced() {
            job.partition_error(
                &self.progress,
                JobErrorKind::Lease,
                format!("{e}: dropped from memory until its lease is won again"),
            );
            job.update(&self.progress, |pr| pr.fenced += 1);
            self.forget(ctx);
        } else {
            let delay = self.owner.reset_after_backoff();
            job.partition_error(
                &self.progress,
                kind,
                format!(
                    "partition {p} of {}: {} not committed, reading again from the last commit in {delay:?}: {e}",
                    spec.topic, step(kind)
                ),
            );
        }
    }

    /// Takes the partition again (after a failure, a loss, or when newly assigned).
    async fn retake(&mut self, ctx: &Ctx<'_>, conn: &mut Connection, renew_every: Duration) {
        let (job, spec, p) = (ctx.job, ctx.spec, self.partition);
        let span = part_span!("take", ctx, p);
        match self.take(ctx, conn).instrument(span).await {
            Ok(()) => {}
            Err(e) if schema::stops_partition(&e) => {
                stopped(job, &self.progress, &e);
                self.stopped = true;
            }
            Err(e) if is_leased_elsewhere(&e) => {
                // Its owner hands it over at a batch boundary, or its lease expires.
                tracing::debug!(topic = %spec.topic, partition = p, "partition leased elsewhere; waiting");
                self.owner.retry_in(renew_every / 2);
            }
            Err(e) => {
                let delay = self.owner.retry_after_backoff();
                job.partition_error(
                    &self.progress,
                    JobErrorKind::Take,
                    format!(
                        "partition {p} of {}: taking it again failed, retrying in {delay:?}: {e}",
                        spec.topic
                    ),
                );
            }
        }
    }
}

/// What a failed step of `kind` left uncommitted, as the error message names it.
fn step(kind: JobErrorKind) -> &'static str {
    match kind {
        JobErrorKind::Timers => "processing-time timers",
        JobErrorKind::IdleFlush => "idle flush",
        JobErrorKind::Checkpoint => "checkpoint part",
        _ => "batch",
    }
}

/// Reports that the partition of `handle` stopped on `e` (see [`schema::stops_partition`]).
fn stopped(job: &JobShared, handle: &PartitionHandle, e: &Error) {
    let a = handle.addr();
    let text = format!(
        "partition {} of {}/{} stopped: {e}",
        a.partition, a.topic, a.group
    );
    job.update(handle, |p| p.stopped = Some(e.to_string()));
    let kind = match e {
        Error::StateSchema { .. } => JobErrorKind::StateSchema,
        _ => JobErrorKind::Sink,
    };
    job.error_at(a, kind, text);
}
