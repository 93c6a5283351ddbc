//! Reading one batch of a taken partition with its reader: in [`AckMode::Xack`](crate::redis::AckMode::Xack)
//! this consumer's pending entries are replayed before new ones; in Offset mode entries
//! are read with `NOACK` after the committed offset. The entries of the pipeline's other
//! inputs follow (see [`inputs`](super::inputs)).

use crate::mq::Connection;
use crate::mq::Message;
use crate::redis::partition::ack;
use crate::redis::partition::context::Ctx;
use crate::redis::partition::ownership::Ownership;
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
    /// Whether nothing was read.
    pub(in crate::redis) fn is_empty(&self) -> bool {
        self.ids.is_empty() && !self.others
    }
}

/// Reads up to `count` entries (without waiting for more).
pub(in crate::redis) async fn read(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &mut Ownership,
    count: usize,
) -> Result<Batch, Error> {
    let mut b = owner
        .reader()?
        .read(conn, count, Duration::from_millis(1))
        .await?;
    let last_id = b.last_id().cloned();
    let (ids, read_after) = ack::committed(ctx.spec.config.ack_mode(), &mut b);
    let mut msgs = b.messages;
    owner.others.read(ctx, conn, count, &mut msgs).await?;
    Ok(Batch {
        others: owner.others.read_any(),
        msgs,
        ids,
        last_id,
        skipped: b.skipped as u64,
        read_after,
    })
}
