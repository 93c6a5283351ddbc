//! A partition's ownership: its lease and fencing token, and the read position that goes
//! with them (the group's pending list in [`AckMode::Xack`], the exclusive reader in
//! [`AckMode::Offset`]). Every write an owner makes carries the lease's [`Fence`].

use super::context::Ctx;
use super::AckMode;
use crate::mq::group::OwnerScripts;
use crate::mq::lease::{Fence, Lease, LeaseScripts};
use crate::mq::Connection;
use crate::mq::ExclusiveReader;
use crate::Error;
use std::sync::LazyLock;
use tokio::time::Instant;

/// The lease scripts (acquire, renew, release).
static LEASES: LazyLock<LeaseScripts> = LazyLock::new(LeaseScripts::new);

/// The owner's scripts on its group (claim, read), each under the lease check.
pub(super) static OWNER: LazyLock<OwnerScripts> = LazyLock::new(OwnerScripts::new);

/// How a taken partition reads.
pub(super) enum Reader {
    Xack {
        replaying: bool,
        next_promote: Instant,
    },
    Offset(Box<ExclusiveReader>),
}

/// What a partition holds while it is taken: its reader and, in [`AckMode::Xack`], its
/// lease (in Offset mode the reader holds it).
pub(super) struct Ownership {
    partition: u32,
    pub(super) reader: Option<Reader>,
    /// The partition's lease in [`AckMode::Xack`] (in Offset mode the reader holds it).
    pub(super) lease: Option<Lease>,
}

impl Ownership {
    /// Partition `partition`, not taken.
    pub(super) fn new(partition: u32) -> Self {
        Ownership {
            partition,
            reader: None,
            lease: None,
        }
    }

    pub(super) fn partition(&self) -> u32 {
        self.partition
    }

    /// Takes the partition's lease under a new fencing token and its read position. A
    /// lease still held (a take again after a failure) moves to a new token rather than
    /// being kept: a write of the failed attempt that reaches Redis only now — a commit
    /// whose reply never came — is then refused, so what the take reads is final.
    ///
    /// # Errors
    /// [`is_leased_elsewhere`] when another owner holds the lease.
    pub(super) async fn take(&mut self, ctx: &Ctx<'_>, conn: &mut Connection) -> Result<(), Error> {
        match ctx.spec.config.ack_mode() {
            AckMode::Xack => self.take_xack(ctx, conn).await,
            AckMode::Offset => self.take_offset(ctx, conn).await,
        }
    }

    /// The lease, the group (created or restored from the commit frontier) and every
    /// pending entry claimed for this consumer, replayed before new entries.
    async fn take_xack(&mut self, ctx: &Ctx<'_>, conn: &mut Connection) -> Result<(), Error> {
        let (spec, p) = (ctx.spec, self.partition);
        let config = &spec.config;
        let ttl = config.mq_options().lease_ttl;
        let kept = match self.lease.take() {
            Some(l) => LEASES.refence(conn, &l, &ctx.consumer, ttl).await?,
            None => None,
        };
        let lease = match kept {
            Some(l) => l,
            None => {
                let key = ctx.keys.lease(&spec.topic, p, &spec.group);
                let fence = ctx.keys.fence(&spec.topic, p, &spec.group);
                let acquired = LEASES
                    .acquire(conn, &key, &fence, &ctx.consumer, ttl)
                    .await?;
                acquired.ok_or_else(|| leased_elsewhere(p))?
            }
        };
        crate::mq::group::ensure_group(
            conn,
            &ctx.keys,
            &spec.topic,
            p,
            &spec.group,
            spec.options.start,
            config.restore_group_from_commit_frontier(),
        )
        .await?;
        let fence = Fence::held(&ctx.keys, ctx.at(p), &lease, ttl);
        let stream = ctx.keys.stream(&spec.topic, p);
        OWNER
            .claim_all(conn, fence, &stream, &spec.group, &ctx.consumer)
            .await?;
        self.lease = Some(lease);
        self.reader = Some(Reader::Xack {
            replaying: true,
            next_promote: Instant::now(),
        });
        Ok(())
    }

    /// An exclusive reader from the committed offset.
    async fn take_offset(&mut self, ctx: &Ctx<'_>, conn: &mut Connection) -> Result<(), Error> {
        let (spec, p) = (ctx.spec, self.partition);
        let ttl = spec.config.mq_options().lease_ttl;
        // A lease still held moves to a new token (the reader keeps that one); else a new
        // one is taken. Only then is the committed offset read.
        let held = match self.reader.take() {
            Some(Reader::Offset(old)) => match old.lease() {
                Some(l) => LEASES.refence(conn, l, &ctx.consumer, ttl).await?,
                None => None,
            },
            _ => None,
        };
        let committed = ctx.mq.commit_frontier(&spec.topic, &spec.group, p).await?;
        let reader = ctx
            .mq
            .exclusive_reader_keeping(
                &spec.topic,
                &spec.group,
                p,
                &ctx.consumer,
                committed.as_deref(),
                spec.options.start,
                held,
            )
            .await
            .map_err(|e| match e {
                Error::Mq {
                    op: "exclusive_reader",
                    ..
                } => leased_elsewhere(p),
                e => e,
            })?;
        self.reader = Some(Reader::Offset(Box::new(reader)));
        Ok(())
    }

    /// Extends the lease; `false` when it expired or passed to another owner.
    pub(super) async fn renew(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
    ) -> Result<bool, Error> {
        match &mut self.reader {
            Some(Reader::Offset(r)) => r.renew().await,
            _ => match &self.lease {
                Some(lease) => {
                    LEASES
                        .renew(conn, lease, ctx.spec.config.mq_options().lease_ttl)
                        .await
                }
                None => Ok(false),
            },
        }
    }

    /// Releases the lease, so the next owner takes the partition at once.
    pub(super) async fn release(&mut self, conn: &mut Connection) {
        match self.reader.take() {
            Some(Reader::Offset(r)) => {
                let _ = r.release().await;
            }
            _ => {
                if let Some(lease) = self.lease.take() {
                    let _ = LEASES.release(conn, &lease).await;
                }
            }
        }
    }

    /// Lets go of reader and lease without a word to Redis (after the lease was lost).
    pub(super) fn drop_hold(&mut self) {
        self.reader = None;
        self.lease = None;
    }

    /// The lease held for the partition (its value goes into every fenced write).
    fn held_lease(&self) -> Option<&Lease> {
        match &self.reader {
            Some(Reader::Offset(r)) => r.lease(),
            _ => self.lease.as_ref(),
        }
    }

    /// The fence of the partition's writes under `lease`.
    pub(super) fn fence<'a>(&self, ctx: &'a Ctx<'_>, lease: &'a Lease) -> Fence<'a> {
        let ttl = ctx.spec.config.mq_options().lease_ttl;
        Fence::held(&ctx.keys, ctx.at(self.partition), lease, ttl)
    }

    /// The lease held, or [`Error::Fenced`] when there is none.
    pub(super) fn fenced_unless_held(&self, ctx: &Ctx<'_>) -> Result<Lease, Error> {
        self.held_lease()
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
}

/// The error of a take that found the partition's lease held by another owner.
fn leased_elsewhere(p: u32) -> Error {
    Error::Mq {
        op: "take partition",
        reason: format!("partition {p} is leased by another consumer"),
    }
}

/// Whether a take failed only because another owner holds the lease (not an error of
/// this process: the partition is someone else's for now).
pub(super) fn is_leased_elsewhere(e: &Error) -> bool {
    matches!(
        e,
        Error::Mq {
            op: "take partition",
            ..
        }
    )
}
