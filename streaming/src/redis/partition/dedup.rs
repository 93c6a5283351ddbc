//! Input deduplication (`sink_deduplication_enabled`): a message whose idempotency key
//! this job (pipeline) already processed within `sink_deduplication_ttl` is acknowledged
//! without running the pipeline.
//!
//! A message's idempotency key is its header `x-idempotency-key` (set by the producer,
//! [`OutgoingMessage::idempotency_key`](crate::mq::OutgoingMessage::idempotency_key)),
//! else `x-original-message-id` (a retry's or a replayed dead letter's first id), else
//! its entry id; a message of another input than the pipeline's first (a `union` or
//! `connect` of topics) is marked as its topic, a NUL and that key. The keys processed are kept per partition in the sorted set
//! `{sink_dedup_key_prefix}{job}:{mq key prefix}:{T:n}:{group}` (key → expiry ms by the
//! committing process's clock), written in the batch commit, so a mark exists exactly when
//! the message's effects were committed; expired marks are dropped by each commit. The
//! queue's key prefix is part of the name because entry ids repeat across queues: two
//! environments on one Redis (prefixes `mq` and `staging`) must not skip each other's
//! messages.

use crate::mq::lease::ms;
use crate::mq::{Connection, Message, HEADER_IDEMPOTENCY_KEY, HEADER_ORIGINAL_ID};
use crate::redis::partition::context::Ctx;
use crate::redis::partition::Part;
use crate::Error;
use std::borrow::Cow;
use std::collections::HashSet;

/// The idempotency key of `m` (see the module docs).
pub(crate) fn idempotency_key(m: &Message) -> &str {
    (m.headers.get(HEADER_IDEMPOTENCY_KEY))
        .or_else(|| m.headers.get(HEADER_ORIGINAL_ID))
        .map_or(m.id.as_str(), String::as_str)
}

/// The key `m` is marked with in the dedup set of the pipeline of `ctx`: its idempotency
/// key, prefixed with its topic and a NUL for a message of another input than the first
/// (entry ids repeat across topics).
fn mark_of<'m>(ctx: &Ctx<'_>, m: &'m Message) -> Cow<'m, str> {
    let key = idempotency_key(m);
    if *m.topic == *ctx.spec.topic {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(format!("{}\0{key}", m.topic))
    }
}

/// The marks a batch commit writes: the dedup set, the keys, their expiry and now (ms).
pub(in crate::redis) struct DedupMarks {
    pub(in crate::redis) key: String,
    pub(in crate::redis) keys: Vec<String>,
    pub(in crate::redis) expiry_ms: u64,
    pub(in crate::redis) now_ms: u64,
}

use crate::redis::now_ms;

impl<C, S, O> Part<C, S, O> {
    /// The dedup set of this partition, when deduplication is on.
    fn dedup_key(&self, ctx: &Ctx<'_>) -> Option<String> {
        let config = &ctx.spec.config;
        config.sink_deduplication_enabled().then(|| {
            let tag = ctx.keys.hash_tag(&ctx.spec.topic, self.partition);
            let (prefix, job) = (config.sink_dedup_key_prefix(), config.job_name());
            let queue = &config.mq_options().key_prefix;
            format!("{prefix}{job}:{queue}:{tag}:{}", ctx.spec.group)
        })
    }

    /// The batch's messages to acknowledge without running: those whose key was marked
    /// within the TTL, and a repeat of a key earlier in the batch (one `ZMSCORE`).
    pub(in crate::redis) async fn duplicates(
        &self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        msgs: &[Message],
    ) -> Result<HashSet<usize>, Error> {
        let Some(key) = self.dedup_key(ctx) else {
            return Ok(HashSet::new());
        };
        if msgs.is_empty() {
            return Ok(HashSet::new());
        }
        let mut cmd = redis::cmd("ZMSCORE");
        cmd.arg(&key);
        for m in msgs {
            cmd.arg(mark_of(ctx, m).as_ref());
        }
        let scores: Vec<Option<f64>> = cmd.query_async(conn).await?;
        let now = now_ms() as f64;
        let mut seen = HashSet::new();
        let mut dup = HashSet::new();
        for (i, (m, score)) in msgs.iter().zip(scores).enumerate() {
            if score.is_some_and(|s| s > now) || !seen.insert(mark_of(ctx, m)) {
                dup.insert(i);
            }
        }
        Ok(dup)
    }

    /// The marks of the batch's messages not in `skip` (processed), for its commit.
    pub(in crate::redis) fn dedup_marks(
        &self,
        ctx: &Ctx<'_>,
        msgs: &[Message],
        skip: &HashSet<usize>,
    ) -> Option<DedupMarks> {
        let key = self.dedup_key(ctx)?;
        let now = now_ms();
        let keys: Vec<String> = (msgs.iter().enumerate())
            .filter(|(i, _)| !skip.contains(i))
            .map(|(_, m)| mark_of(ctx, m).into_owned())
            .collect();
        let ttl = ms(ctx.spec.config.sink_deduplication_ttl());
        Some(DedupMarks {
            key,
            keys,
            expiry_ms: now.saturating_add(ttl),
            now_ms: now,
        })
    }
}
