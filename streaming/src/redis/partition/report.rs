//! What a partition's commits report: the job's per-partition progress
//! ([`PartitionProgress`]) and the partition's metrics.

use crate::mq::topic::parse_xinfo_groups;
use crate::mq::Connection;
use crate::redis::metrics::LAG_SAMPLE_INTERVAL;
use crate::redis::partition::context::Ctx;
use crate::redis::partition::counts::BatchCounts;
use crate::redis::partition::Part;
use crate::redis::{JobErrorKind, PartitionProgress};
use tokio::time::Instant;

/// What one commit adds to a partition's progress.
struct Committed {
    last_id: Option<String>,
    counts: BatchCounts,
    /// An idle flush (else a batch, or processing-time timers).
    flushed: bool,
    watermark: Option<i64>,
    fired: u64,
    late: u64,
    gap_dropped: u64,
    awaiting_flush: bool,
}

impl<C, S, O> Part<C, S, O> {
    /// Reports an error met at this partition that the partition retries on its own
    /// (kept in the job's errors and logged), as "partition N of TOPIC: {what}".
    pub(in crate::redis) fn report_error(
        &self,
        ctx: &Ctx<'_>,
        kind: JobErrorKind,
        what: std::fmt::Arguments<'_>,
    ) {
        let text = format!("partition {} of {}: {what}", self.partition, ctx.spec.topic);
        ctx.job.error_at(self.progress.addr(), kind, text);
    }

    /// Reports a committed batch (or processing-time timers: no `last_id`, no records).
    pub(in crate::redis) fn report_batch(
        &mut self,
        ctx: &Ctx<'_>,
        last_id: Option<String>,
        counts: BatchCounts,
    ) {
        self.report(ctx, self.committed(last_id, counts));
    }

    /// Reports a committed idle flush.
    pub(in crate::redis) fn report_idle_flush(&mut self, ctx: &Ctx<'_>) {
        let flush = Committed {
            flushed: true,
            ..self.committed(None, BatchCounts::default())
        };
        self.report(ctx, flush);
    }

    /// A batch's counts; takes the window operators' counters.
    fn committed(&self, last_id: Option<String>, counts: BatchCounts) -> Committed {
        let counters = self.runner.counters();
        Committed {
            watermark: self.runner.watermark().map(|(w, _)| w),
            fired: counters.window_firings.replace(0),
            late: counters.late_elements.replace(0),
            gap_dropped: counters.window_gap_dropped.replace(0),
            last_id,
            counts,
            flushed: false,
            awaiting_flush: self.flush.awaiting,
        }
    }

    /// Counts `c` in the metrics and the job's per-partition progress.
    fn report(&mut self, ctx: &Ctx<'_>, c: Committed) {
        let m = &self.metrics;
        m.skipped.increment(c.counts.skipped);
        m.deduplicated.increment(c.counts.deduplicated);
        m.records.increment(c.counts.processed);
        m.failed.increment(c.counts.failed);
        m.window_fired.increment(c.fired);
        m.window_late_dropped.increment(c.late);
        if c.flushed {
            m.idle_flushes.increment(1);
        }
        let watermark = if c.flushed {
            Some(crate::time::MAX_WATERMARK)
        } else {
            c.watermark
        };
        ctx.job.update(&self.progress, |pr| {
            pr.subtask = ctx.subtask;
            count(pr, c);
        });
        if let Some(w) = watermark {
            self.metrics.watermark(w);
        }
    }
}

impl<C, S, O> Part<C, S, O> {
    /// Samples the partition's consumer lag when due (at most every
    /// [`LAG_SAMPLE_INTERVAL`]): the group's `lag` of `XINFO GROUPS`, entries not read yet.
    /// A failed sample is left for the next one.
    pub(in crate::redis) async fn sample_lag(&mut self, ctx: &Ctx<'_>, conn: &mut Connection) {
        let now = Instant::now();
        if now < self.next_lag_sample {
            return;
        }
        self.next_lag_sample = now + LAG_SAMPLE_INTERVAL;
        let (topic, p, group) = ctx.at(self.partition);
        let groups: Result<redis::Value, _> = redis::cmd("XINFO")
            .arg("GROUPS")
            .arg(ctx.keys.stream(topic, p))
            .query_async(conn)
            .await;
        match groups {
            Ok(v) => {
                let info = parse_xinfo_groups(&v).into_iter().find(|g| g.name == group);
                let lag = info.and_then(|g| g.lag);
                if let Some(lag) = lag {
                    self.metrics.lag(lag);
                }
                ctx.job.update(&self.progress, |pr| {
                    pr.lag = lag;
                    pr.lag_sampled_at = Some(std::time::SystemTime::now());
                });
            }
            Err(e) => tracing::debug!(topic, partition = p, "lag sample failed: {e}"),
        }
        self.owner.others.sample_lag(ctx, conn, p).await;
    }
}

/// Adds commit `c` to `pr`.
fn count(pr: &mut PartitionProgress, c: Committed) {
    pr.last_commit_at = Some(std::time::SystemTime::now());
    if c.last_id.is_some() {
        pr.last_committed_id = c.last_id;
    }
    pr.records += c.counts.processed;
    pr.failed += c.counts.failed;
    pr.skipped += c.counts.skipped;
    pr.deduplicated += c.counts.deduplicated;
    pr.batches += u64::from(!c.flushed);
    pr.idle_flushes += u64::from(c.flushed);
    pr.window_fired += c.fired;
    pr.window_late_dropped += c.late;
    pr.window_gap_dropped += c.gap_dropped;
    pr.awaiting_flush = c.awaiting_flush;
    if c.flushed {
        pr.watermark = Some(crate::time::MAX_WATERMARK);
    } else if let Some(w) = c.watermark {
        // After an idle flush the new epoch has no watermark until a record
        // arrives: the partition keeps reporting the flushed `i64::MAX`.
        let epoch_not_begun = w == crate::time::MIN_WATERMARK && pr.watermark == Some(i64::MAX);
        if !epoch_not_begun {
            pr.watermark = Some(w);
        }
    }
}
