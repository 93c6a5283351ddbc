//! A partition's ownership: its partition reader, which holds the lease and fencing token
//! and the read position that goes with them (the group's pending list in
//! [`AckMode::Xack`](crate::redis::AckMode::Xack), the committed offset in [`AckMode::Offset`](crate::redis::AckMode::Offset)). Every write an owner
//! makes carries the lease's [`Fence`].

use crate::mq::lease::{Fence, Lease};
use crate::mq::reader::{PartitionReader, Position};
use crate::mq::{Backoff, Connection};
use crate::redis::partition::ack;
use crate::redis::partition::align::Queue;
use crate::redis::partition::context::Ctx;
use crate::redis::partition::inputs::OtherInputs;
use crate::Error;
use std::time::Duration;
use tokio::time::Instant;

pub(in crate::redis) use crate::mq::reader::is_leased_elsewhere;

/// The longest pause of a partition's reconnect / re-take backoff: once Redis answers
/// again, every partition tries again within this long.
pub(in crate::redis) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// A partition's ownership: its reader (with the lease and fencing token), whether it
/// must be taken (again), and when its lease is renewed or a take tried next.
pub(in crate::redis) struct Ownership {
    partition: u32,
    /// Kept across takes, so a take again moves its lease to a new token.
    pub(in crate::redis) reader: Option<PartitionReader>,
    /// The pipeline's other inputs' partitions, taken with this one.
    pub(in crate::redis) others: OtherInputs,
    /// The partition's entries read and held back for the other inputs (see
    /// [`align`](super::align)).
    pub(in crate::redis) held: Queue,
    /// The partition must be taken (again) before it runs: not taken yet, its lease was
    /// lost, or a failure reset it to its last commit.
    must_take: bool,
    next_renew: Instant,
    /// No take before this.
    retry_at: Instant,
    /// Pause before the next take after a failure (bounded, jittered).
    backoff: Backoff,
}

impl Ownership {
    /// Partition `partition` with the pipeline's `others` inputs, not taken.
    pub(in crate::redis) fn new(partition: u32, others: OtherInputs) -> Self {
        let now = Instant::now();
        Ownership {
            partition,
            reader: None,
            others,
            held: Queue::default(),
            must_take: true,
            next_renew: now,
            retry_at: now,
            backoff: Backoff::new(Duration::from_millis(50), MAX_BACKOFF),
        }
    }

    /// Whether the partition must be taken before it runs.
    pub(in crate::redis) fn must_take(&self) -> bool {
        self.must_take
    }

    /// Whether a take may be tried now.
    pub(in crate::redis) fn take_due(&self) -> bool {
        Instant::now() >= self.retry_at
    }

    /// Whether the lease is due for renewal (not while the partition must be taken: the
    /// take renews or moves it).
    /// When it is, the next renewal is `every` from now.
    pub(in crate::redis) fn renewal_due(&mut self, every: Duration) -> bool {
        let now = Instant::now();
        if self.must_take || now < self.next_renew {
            return false;
        }
        self.next_renew = now + every;
        true
    }

    /// The partition was taken: it runs, and its lease is renewed `renew_every` from now.
    pub(in crate::redis) fn taken(&mut self, renew_every: Duration) {
        self.must_take = false;
        self.next_renew = Instant::now() + renew_every;
    }

    /// The partition's lease was lost: it is taken again as soon as the lease is free.
    pub(in crate::redis) fn lost(&mut self) {
        self.reader = None;
        self.held.clear();
        self.others.lost();
        self.must_take = true;
        self.retry_at = Instant::now();
    }

    /// A step failed: the partition is taken again (from its last commit) after the
    /// returned backoff.
    pub(in crate::redis) fn reset_after_backoff(&mut self) -> Duration {
        self.must_take = true;
        self.retry_after_backoff()
    }

    /// A take failed: it is tried again after the returned backoff.
    pub(in crate::redis) fn retry_after_backoff(&mut self) -> Duration {
        let delay = self.backoff.next_delay();
        self.retry_at = Instant::now() + delay;
        delay
    }

    /// Another owner holds the lease: the take is tried again in `wait`.
    pub(in crate::redis) fn retry_in(&mut self, wait: Duration) {
        self.retry_at = Instant::now() + wait;
    }

    /// Work went through: the next failure waits the shortest backoff again.
    pub(in crate::redis) fn progressed(&mut self) {
        self.backoff.reset();
    }

    /// Takes the partition's lease under a new fencing token and its read position. A
    /// lease still held (a take again after a failure) moves to a new token rather than
    /// being kept: a write of the failed attempt that reaches Redis only now — a commit
    /// whose reply never came — is then refused, so what the take reads is final.
    /// [`AckMode::Xack`](crate::redis::AckMode::Xack): the group (created or restored from the commit frontier) and
    /// every pending entry claimed for this consumer, replayed before new entries;
    /// [`AckMode::Offset`](crate::redis::AckMode::Offset): the group moved to the committed offset.
    ///
    /// # Errors
    /// [`is_leased_elsewhere`] when another owner holds the lease.
    pub(in crate::redis) async fn take(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<(), Error> {
        // What was held back is read again from the committed position.
        self.held.clear();
        let (spec, config) = (ctx.spec, &ctx.spec.config);
        let (mode, from_frontier) = ack::reading(config);
        let at = ctx.at(self.partition);
        let reader = self.reader.get_or_insert_with(|| {
            PartitionReader::owner(mode, &ctx.keys, at, &ctx.consumer, config.mq_options())
        });
        let position = Position {
            start: spec.options.start,
            from_frontier,
            committed: None,
        };
        reader.take(conn, position).await?;
        // The other inputs' positions are read under the new token: no commit of an
        // earlier owner can move them any more.
        self.others.take(ctx, conn).await
    }

    /// Extends the lease (and the other inputs'); `false` when one expired or passed to
    /// another owner.
    pub(in crate::redis) async fn renew(&self, conn: &mut Connection) -> Result<bool, Error> {
        let renewed = match &self.reader {
            Some(r) => r.renew(conn).await?,
            None => false,
        };
        Ok(renewed && self.others.renew(conn).await?)
    }

    /// Releases the lease, so the next owner takes the partition at once.
    pub(in crate::redis) async fn release(&mut self, conn: &mut Connection) {
        self.others.release(conn).await;
        if let Some(mut r) = self.reader.take() {
            let _ = r.release(conn).await;
        }
    }

    /// The fence of the partition's writes under `lease`.
    pub(in crate::redis) fn fence<'a>(&self, ctx: &'a Ctx<'_>, lease: &'a Lease) -> Fence<'a> {
        let ttl = ctx.spec.config.mq_options().lease_ttl;
        Fence::held(&ctx.keys, ctx.at(self.partition), lease, ttl)
    }

    /// The lease held, or [`Error::Fenced`] when there is none.
    pub(in crate::redis) fn fenced_unless_held(&self, ctx: &Ctx<'_>) -> Result<Lease, Error> {
        (self.reader.as_ref())
            .and_then(PartitionReader::lease)
            .cloned()
            .ok_or_else(|| self.fenced_error(ctx, 0))
    }

    pub(in crate::redis) fn fenced_error(&self, ctx: &Ctx<'_>, token: u64) -> Error {
        Error::Fenced {
            topic: ctx.spec.topic.clone(),
            group: ctx.spec.group.clone(),
            partition: self.partition,
            token,
        }
    }

    /// The reader whose retry and dead letters take a failed record of `topic` (this
    /// partition's input or another one); `None` for a broadcast element on a job
    /// partition other than 0, which job partition 0 retries or dead-letters.
    ///
    /// # Errors
    /// [`Error::Engine`] when the partition is not taken.
    pub(in crate::redis) fn failure_reader(
        &mut self,
        ctx: &Ctx<'_>,
        topic: &str,
    ) -> Result<Option<&mut PartitionReader>, Error> {
        if topic != ctx.spec.topic {
            match self.others.failure_reader(topic) {
                Some(Some(_)) => {
                    return Ok(self.others.failure_reader(topic).flatten());
                }
                Some(None) => return Ok(None),
                None => {}
            }
        }
        self.reader().map(Some)
    }

    /// The reader of a taken partition.
    ///
    /// # Errors
    /// [`Error::Engine`] when the partition is not taken.
    pub(in crate::redis) fn reader(&mut self) -> Result<&mut PartitionReader, Error> {
        self.reader.as_mut().ok_or_else(not_taken)
    }
}

fn not_taken() -> Error {
    Error::Engine {
        op: "read",
        reason: "partition not taken".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_taken_before_it_runs_and_again_after_a_loss_or_a_failure() {
        let mut o = Ownership::new(3, OtherInputs::none());
        let every = Duration::from_secs(3600);
        assert!(
            o.must_take() && o.take_due(),
            "a new partition is taken first"
        );
        assert!(
            !o.renewal_due(Duration::ZERO),
            "nothing to renew before a take"
        );
        o.taken(every);
        assert!(!o.must_take());
        assert!(
            !o.renewal_due(every),
            "the first renewal is one interval after the take"
        );
        o.lost();
        assert!(
            o.must_take() && o.take_due(),
            "a lost lease is taken again at once"
        );
        o.taken(every);
        let first = o.reset_after_backoff();
        assert!(
            o.must_take() && !o.take_due(),
            "a failure waits its backoff"
        );
        let second = o.retry_after_backoff();
        assert!(second >= first / 2 && first <= MAX_BACKOFF && second <= MAX_BACKOFF);
        o.progressed();
        o.retry_in(Duration::ZERO);
        assert!(o.take_due());
    }
}
