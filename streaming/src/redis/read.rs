//! Reading one batch of a taken partition: in [`AckMode::Xack`](super::AckMode::Xack)
//! under the lease check (promoting due retries first, replaying this consumer's pending
//! entries before new ones), in Offset mode from the exclusive reader.

use super::context::Ctx;
use super::failure::malformed;
use super::ownership::{Ownership, Reader, OWNER};
use crate::mq::lease::Fence;
use crate::mq::message::{parse_read_reply, RawEntry};
use crate::mq::retry::{promote_due, promote_script};
use crate::mq::Connection;
use crate::mq::Message;
use crate::Error;
use redis::Script;
use std::sync::LazyLock;
use std::time::Duration;
use tokio::time::Instant;

/// Moves due retries back into the stream.
static PROMOTE: LazyLock<Script> = LazyLock::new(promote_script);

/// One batch as read.
pub(super) struct Batch {
    /// The messages to run through the chain.
    pub(super) msgs: Vec<Message>,
    /// Every id read (the commit acknowledges them), skipped entries included.
    pub(super) ids: Vec<String>,
    pub(super) last_id: Option<String>,
    /// Entries skipped: retries addressed to another consumer group (field `rg`).
    pub(super) skipped: u64,
}

/// Reads up to `count` entries.
pub(super) async fn read(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &mut Ownership,
    count: usize,
) -> Result<Batch, Error> {
    match owner.reader.as_mut() {
        Some(Reader::Xack { .. }) => read_xack(ctx, conn, owner, count).await,
        Some(Reader::Offset(r)) => {
            let b = r.read(count, Duration::from_millis(1)).await?;
            Ok(Batch {
                ids: b.last_id.iter().cloned().collect(),
                msgs: b.messages,
                last_id: b.last_id,
                skipped: b.skipped as u64,
            })
        }
        None => Err(not_taken()),
    }
}

fn not_taken() -> Error {
    Error::Engine {
        op: "read",
        reason: "partition not taken".into(),
    }
}

async fn read_xack(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &mut Ownership,
    count: usize,
) -> Result<Batch, Error> {
    let (spec, p) = (ctx.spec, owner.partition());
    let entries = fetch_xack(ctx, conn, owner, count).await?;
    let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
    let last_id = ids.last().cloned();
    let mut msgs = Vec::with_capacity(entries.len());
    let mut skipped = 0;
    for e in entries {
        match e.decode(&spec.topic, p) {
            Ok(m) if m.is_for_group(&spec.group) => msgs.push(m),
            // Another group's retry: not run through the chain; its id stays
            // in `ids`, so the commit acknowledges it and the frontier moves on.
            Ok(m) => {
                skipped += 1;
                tracing::debug!(topic = %spec.topic, group = %spec.group, partition = p,
                                id = %m.id, retry_group = ?m.retry_group,
                                "skipping another group's retry");
            }
            Err(reason) => malformed(ctx, conn, owner, e, &reason).await?,
        }
    }
    Ok(Batch {
        msgs,
        ids,
        last_id,
        skipped,
    })
}

/// Promotes due retries when it is time, then reads the entries under the lease check.
async fn fetch_xack(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &mut Ownership,
    count: usize,
) -> Result<Vec<RawEntry>, Error> {
    let (spec, p) = (ctx.spec, owner.partition());
    let config = &spec.config;
    let Some(Reader::Xack {
        replaying,
        next_promote,
    }) = owner.reader.as_mut()
    else {
        return Err(not_taken());
    };
    let Some(lease) = owner.lease.as_ref() else {
        return Err(owner.fenced_error(ctx, 0));
    };
    let fence = Fence::held(&ctx.keys, ctx.at(p), lease, config.mq_options().lease_ttl);
    if Instant::now() >= *next_promote {
        promote_due(
            conn,
            &PROMOTE,
            &ctx.keys,
            fence,
            (&spec.topic, p),
            count,
            config.mq_options().max_len,
        )
        .await?;
        *next_promote = Instant::now() + config.mq_options().retry_poll_interval;
    }
    let stream = ctx.keys.stream(&spec.topic, p);
    let from = if *replaying { "0" } else { ">" };
    // Under the lease check: a stale owner takes no entry into its pending list.
    let who = (spec.group.as_str(), ctx.consumer.as_str());
    let v = OWNER
        .read(conn, fence, &stream, who, count, from, false)
        .await?;
    let entries = parse_read_reply(&v)?;
    if *replaying && entries.is_empty() {
        *replaying = false;
    }
    Ok(entries)
}
