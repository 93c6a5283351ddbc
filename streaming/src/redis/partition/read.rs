//! Reading one batch of a taken partition with its reader: in [`AckMode::Xack`](crate::redis::AckMode::Xack)
//! this consumer's pending entries are replayed before new ones; in Offset mode entries
//! are read with `NOACK` after the committed offset. The entries of the pipeline's other
//! inputs follow (see [`inputs`](super::inputs)).

use crate::mq::Connection;
use crate::mq::Message;
use crate::redis::partition::ack;
use crate::redis::partition::align;
use crate::redis::partition::context::Ctx;
use crate::redis::partition::inputs::merge_by_time;
use crate::redis::partition::ownership::Ownership;
use crate::redis::AckMode;
use crate::Error;
use std::time::Duration;

/// One batch as read.
pub(in crate::redis) struct Batch {
    /// The messages to run through the chain.
    pub(in crate::redis) msgs: Vec<Message>,
    /// What the commit acknowledges: in Xack mode every id read, skipped entries
    /// included; in Offset mode the last one (the offset committed).
    pub(in crate::redis) ids: Vec<String>,
    pub(in crate::redis) last_id: Option<String>,
    /// Entries skipped: retries addressed to another consumer group (field `rg`).
    pub(in crate::redis) skipped: u64,
    /// Xack mode, a read of new entries: the group's last-delivered id before it (the
    /// commit moves the frontier from there to the last id without walking the stream).
    pub(in crate::redis) read_after: Option<String>,
    /// The pipeline's other inputs read entries (after the first topic's, in `msgs`).
    pub(in crate::redis) others: bool,
}

impl Batch {
    /// Whether nothing was read (or released).
    pub(in crate::redis) fn is_empty(&self) -> bool {
        self.msgs.is_empty() && self.ids.is_empty() && !self.others
    }
}

/// Reads up to `count` entries (without waiting for more) of the partition and of the
/// pipeline's other inputs.
pub(in crate::redis) async fn read(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &mut Ownership,
    count: usize,
) -> Result<Batch, Error> {
    if owner.others.aligned() {
        return read_aligned(ctx, conn, owner, count).await;
    }
    let mut b = owner
        .reader()?
        .read(conn, count, Duration::from_millis(1))
        .await?;
    let last_id = b.last_id().cloned();
    let (ids, read_after) = ack::committed(ctx.spec.config.ack_mode(), &mut b);
    owner.others.read(ctx, conn, count).await?;
    let mut inputs = vec![b.messages];
    inputs.extend(owner.others.release_entries(None));
    Ok(Batch {
        others: owner.others.read_any(),
        msgs: merge_by_time(inputs),
        ids,
        last_id,
        skipped: b.skipped as u64,
        read_after,
    })
}

/// [`read`] when other inputs are read in step by event time (see
/// [`align`](super::align)): each input is read unless it holds entries, and the batch
/// gets what every input releases up to the horizon; the partition's commit
/// acknowledges what it released only.
async fn read_aligned(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &mut Ownership,
    count: usize,
) -> Result<Batch, Error> {
    let held_before = owner.held.holds();
    let mut fresh = None;
    if held_before {
        owner.held.not_read();
    } else {
        let reader = owner.reader()?;
        fresh = Some(reader.read(conn, count, Duration::from_millis(1)).await?);
    }
    owner.others.read(ctx, conn, count).await?;
    let skipped = fresh.as_ref().map_or(0, |b| b.skipped as u64);
    let mut read_after = None;
    if let Some(mut b) = fresh {
        read_after = b.read_after.take();
        owner.held.push(b, count);
    }
    let upto = align::horizon(std::iter::once(&owner.held).chain(owner.others.queues()));
    let first = owner.held.release(upto);
    let mut inputs = vec![first.msgs];
    inputs.extend(owner.others.release_entries(upto));
    let (ids, read_after) = match ctx.spec.config.ack_mode() {
        // The commit may move the frontier from the read's start only when it
        // acknowledges every entry of that read, and nothing before it is still pending.
        AckMode::Xack => (first.ids, read_after.filter(|_| !owner.held.holds())),
        AckMode::Offset => (first.last.iter().cloned().collect(), None),
    };
    Ok(Batch {
        others: owner.others.read_any(),
        msgs: merge_by_time(inputs),
        ids,
        last_id: first.last,
        skipped,
        read_after,
    })
}
