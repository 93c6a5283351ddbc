//! A partition's ownership: its partition reader, which holds the lease and fencing token
//! and the read position that goes with them (the group's pending list in
//! [`AckMode::Xack`], the committed offset in [`AckMode::Offset`]). Every write an owner
//! makes carries the lease's [`Fence`].

use super::context::Ctx;
use super::AckMode;
use crate::mq::lease::{Fence, Lease};
use crate::mq::reader::{PartitionReader, Position, ReadMode};
use crate::mq::Connection;
use crate::Error;

pub(super) use crate::mq::reader::is_leased_elsewhere;

/// What a partition holds while it is taken: its reader (with the lease).
pub(super) struct Ownership {
    partition: u32,
    /// Kept across takes, so a take again moves its lease to a new token.
    pub(super) reader: Option<PartitionReader>,
}

impl Ownership {
    /// Partition `partition`, not taken.
    pub(super) fn new(partition: u32) -> Self {
        Ownership {
            partition,
            reader: None,
        }
    }

    /// Takes the partition's lease under a new fencing token and its read position. A
    /// lease still held (a take again after a failure) moves to a new token rather than
    /// being kept: a write of the failed attempt that reaches Redis only now — a commit
    /// whose reply never came — is then refused, so what the take reads is final.
    /// [`AckMode::Xack`]: the group (created or restored from the commit frontier) and
    /// every pending entry claimed for this consumer, replayed before new entries;
    /// [`AckMode::Offset`]: the group moved to the committed offset.
    ///
    /// # Errors
    /// [`is_leased_elsewhere`] when another owner holds the lease.
    pub(super) async fn take(&mut self, ctx: &Ctx<'_>, conn: &mut Connection) -> Result<(), Error> {
        let (spec, config) = (ctx.spec, &ctx.spec.config);
        let (mode, from_frontier) = match config.ack_mode() {
            AckMode::Xack => (ReadMode::Xack, config.restore_group_from_commit_frontier()),
            // The engine's Offset commits store the offset as the commit frontier.
            AckMode::Offset => (ReadMode::NoAck, true),
        };
        let at = ctx.at(self.partition);
        let reader = self.reader.get_or_insert_with(|| {
            PartitionReader::owner(mode, &ctx.keys, at, &ctx.consumer, &config.mq_options())
        });
        let position = Position {
            start: spec.options.start,
            from_frontier,
            committed: None,
        };
        reader.take(conn, position).await
    }

    /// Extends the lease; `false` when it expired or passed to another owner.
    pub(super) async fn renew(&self, conn: &mut Connection) -> Result<bool, Error> {
        match &self.reader {
            Some(r) => r.renew(conn).await,
            None => Ok(false),
        }
    }

    /// Releases the lease, so the next owner takes the partition at once.
    pub(super) async fn release(&mut self, conn: &mut Connection) {
        if let Some(mut r) = self.reader.take() {
            let _ = r.release(conn).await;
        }
    }

    /// Lets go of reader and lease without a word to Redis (after the lease was lost).
    pub(super) fn drop_hold(&mut self) {
        self.reader = None;
    }

    /// The fence of the partition's writes under `lease`.
    pub(super) fn fence<'a>(&self, ctx: &'a Ctx<'_>, lease: &'a Lease) -> Fence<'a> {
        let ttl = ctx.spec.config.mq_options().lease_ttl;
        Fence::held(&ctx.keys, ctx.at(self.partition), lease, ttl)
    }

    /// The lease held, or [`Error::Fenced`] when there is none.
    pub(super) fn fenced_unless_held(&self, ctx: &Ctx<'_>) -> Result<Lease, Error> {
        (self.reader.as_ref())
            .and_then(PartitionReader::lease)
            .cloned()
            .ok_or_else(|| self.fenced_error(ctx, 0))
    }

    pub(super) fn fenced_error(&self, ctx: &Ctx<'_>, token: u64) -> Error {
        Error::Fenced {
            topic: ctx.spec.topic.clone(),
            group: ctx.spec.group.clone(),
            partition: self.partition,
            token,
        }
    }

    /// The reader of a taken partition.
    ///
    /// # Errors
    /// [`Error::Engine`] when the partition is not taken.
    pub(super) fn reader(&mut self) -> Result<&mut PartitionReader, Error> {
        self.reader.as_mut().ok_or_else(|| Error::Engine {
            op: "read",
            reason: "partition not taken".into(),
        })
    }
}
