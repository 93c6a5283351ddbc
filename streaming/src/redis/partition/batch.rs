//! One batch of a partition: read up to `batch_count` entries, run them through the
//! partition's chain (its [`runner`](super::runner)) against the in-memory state cache
//! (see [`cache`](super::cache)), hand the outputs to the sink, then commit state, sink
//! writes and the acknowledgement in one transaction (see [`commit`](super::commit)).
//!
//! Keyed state is fetched per key: a pass over the batch that finds a key's state not in
//! memory runs on a guess; the batch is then rolled back, the missed keys fetched (one
//! round trip), and the batch runs again.
//!
//! A record that fails (error or panic in a user function) may have changed state before
//! failing, so the batch is rolled back: the chain is rebuilt, the keys the batch changed
//! are fetched again from Redis (what the last commit left), the record goes to retry /
//! dead letter (with `x-runtime-*` headers), and the batch runs again without it. State
//! therefore reflects exactly the acknowledged, successful records. A failed commit (e.g.
//! Redis restarting) resets the partition and reads again from the last commit.

use crate::api::Sink;
use crate::mq::Connection;
use crate::mq::Message;
use crate::mq::RetryOutcome;
use crate::ops::Operator;
use crate::redis::partition::context::Ctx;
use crate::redis::partition::counts::BatchCounts;
use crate::redis::partition::counts::Unconfirmed;
use crate::redis::partition::failure::fail;
use crate::redis::partition::hot_keys::HotKeys;
use crate::redis::partition::read::{read, Batch};
use crate::redis::partition::runner::{Outcome, WriteCheck};
use crate::redis::partition::Part;
use crate::redis::state::pending::Pending;
use crate::redis::state::schema;
use crate::redis::HotKeyPolicy;
use crate::Error;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use tracing::Instrument;

/// Most fetches of one batch: each follows a pass over the records that missed keys (a
/// chain whose keys depend on state may miss new keys in each pass).
const MAX_PASSES: u32 = 64;

/// [`HotKeyPolicy::FailFast`]: a record's write to an armed hot hash fails the record.
struct FailFast<'a> {
    hot: &'a HotKeys,
    on: bool,
}

impl WriteCheck for FailFast<'_> {
    fn armed(&self) -> bool {
        self.on && self.hot.any_armed()
    }

    fn check(&self, pending: &Pending, touched: &[usize]) -> Result<(), Error> {
        self.hot.check(pending, touched)
    }
}

impl<C, S, O> Part<C, S, O>
where
    C: Operator<Message>,
    S: Sink<O>,
{
    /// Reads, processes and commits one batch; returns how many entries it read.
    pub(in crate::redis) async fn step(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<usize, Error> {
        // 1. Read.
        let batch = read(ctx, conn, &mut self.owner, ctx.spec.options.batch_count).await?;
        if batch.is_empty() {
            return Ok(0);
        }
        self.flush.restart_idle();
        let n = batch.msgs.len() as u64;
        ctx.job.in_flight.fetch_add(n, Ordering::SeqCst);
        let span = part_span!("batch", ctx, self.partition, records = n as i64);
        let result = self
            .process_and_commit(ctx, conn, batch)
            .instrument(span)
            .await;
        match &mut self.unconfirmed {
            Some(u) if result.is_err() => u.in_flight = n,
            _ => {
                ctx.job.in_flight.fetch_sub(n, Ordering::SeqCst);
            }
        }
        result.map(|()| n as usize)
    }

    async fn process_and_commit(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        batch: Batch,
    ) -> Result<(), Error> {
        let Batch {
            msgs,
            ids,
            last_id,
            read_after,
            skipped,
            others: _,
        } = batch;
        // 2. Process, rolling back and skipping failed records.
        let started = std::time::Instant::now();
        let duplicates = self.duplicates(ctx, conn, &msgs).await?;
        let mut skip: HashSet<usize> = duplicates.clone();
        let pending = self.run_batch(ctx, conn, &msgs, &mut skip).await?;
        let counts = BatchCounts {
            processed: (msgs.len() - skip.len()) as u64,
            failed: (skip.len() - duplicates.len()) as u64,
            skipped,
            deduplicated: duplicates.len() as u64,
        };
        self.metrics.handle_seconds.record(started.elapsed());
        let marks = self.dedup_marks(ctx, &msgs, &skip);
        let awaited = self.flush.awaiting;
        if counts.processed > 0 && self.runner.watermark().is_some() {
            // Committed with the batch: Redis marks the partition as awaiting a flush.
            self.flush.awaiting = true;
        }
        let span = part_span!("commit", ctx, self.partition, records = msgs.len() as i64);
        if let Err(e) = self
            .commit(
                ctx,
                conn,
                pending,
                (&ids, read_after.as_deref()),
                marks.as_ref(),
            )
            .instrument(span)
            .await
        {
            self.flush.awaiting = awaited;
            self.commit_failed(&e, last_id, counts);
            return Err(e);
        }
        self.report_batch(ctx, last_id, counts);
        (self.runner).trim(ctx.spec.config.state_cache_max_entries());
        Ok(())
    }

    /// Runs the batch's records but those in `skip` until a pass completes with every
    /// key it touched in memory: a pass that missed keys is rolled back and runs again
    /// after a fetch; a record that fails is rejected (retry or dead letter), added to
    /// `skip`, and the batch runs again without it. Returns the pass's state writes
    /// drained so far.
    async fn run_batch(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        msgs: &[Message],
        skip: &mut HashSet<usize>,
    ) -> Result<Pending, Error> {
        let fail_fast = ctx.spec.config.hot_key_policy() == HotKeyPolicy::FailFast;
        let mut fetches = 0u32;
        loop {
            let check = FailFast {
                hot: &self.hot,
                on: fail_fast,
            };
            let Outcome {
                pending,
                failed,
                missed,
            } = self.runner.run(msgs, skip, &self.spans, &check);
            if missed {
                // A record found a key's state not in memory: the pass ran on a guess, and
                // so may have failed because of it. Roll back, fetch, run again.
                fetches += 1;
                if fetches > MAX_PASSES {
                    return Err(Error::Engine {
                        op: "load state",
                        reason: format!("keys still missing after {MAX_PASSES} fetches"),
                    });
                }
                self.roll_back(&pending)?;
                self.fetch_wanted(conn).await?;
                continue;
            }
            match failed {
                None => return Ok(pending),
                Some((i, e)) => {
                    self.reject(ctx, conn, &msgs[i], e, &pending).await?;
                    skip.insert(i);
                }
            }
        }
    }

    /// A record failed: it goes to retry or the dead-letter queue, and the chain is rolled
    /// back to the last commit: the keys the batch changed are fetched again (a failure
    /// that stops the partition is returned instead).
    async fn reject(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        m: &Message,
        e: Error,
        pending: &Pending,
    ) -> Result<(), Error> {
        if schema::stops_partition(&e) {
            return Err(e);
        }
        let spec = ctx.spec;
        tracing::warn!(topic = %spec.topic, group = %spec.group, partition = self.partition,
                       id = %m.id, "record failed: {e}");
        let Some(reader) = self.owner.failure_reader(ctx, &m.topic)? else {
            // A broadcast element: job partition 0 retries or dead-letters it; every other
            // partition skips it (its broadcast state stays without it, as partition 0's).
            self.metrics.failure(false, crate::error::failure_type(&e));
            self.roll_back(pending)?;
            return self.fetch_wanted(conn).await;
        };
        let (error_type, outcome) = fail(ctx, conn, reader, m, &e).await?;
        match outcome {
            Some(RetryOutcome::DeadLettered) => self.metrics.failure(true, error_type),
            Some(RetryOutcome::Scheduled { .. }) => self.metrics.failure(false, error_type),
            _ => {}
        }
        ctx.job.report_misuse(&e);
        if matches!(e, Error::HotKey { .. }) {
            if let Ok(mut h) = ctx.job.hot.lock() {
                h.rejected += 1;
            }
        }
        self.roll_back(pending)?;
        self.fetch_wanted(conn).await
    }

    /// A commit that failed: unless the script refused it (fenced: nothing was applied),
    /// Redis may have applied it, so its counts wait for the next take to confirm them.
    fn commit_failed(&mut self, e: &Error, last_id: Option<String>, counts: BatchCounts) {
        // Fenced: the script refused it; a stop (schema, sinks): found before it was sent.
        if !e.is_fenced() && !schema::stops_partition(e) {
            self.unconfirmed = last_id.map(|last_id| Unconfirmed {
                last_id,
                counts,
                in_flight: 0,
            });
        }
    }
}
