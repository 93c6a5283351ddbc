//! A failed record goes to retry or the dead-letter queue, with headers that say why; a
//! malformed entry goes to the dead-letter queue.

use super::context::Ctx;
use super::job::is_misuse;
use super::ownership::{Ownership, Reader};
use super::{ProcessingErrorResult, RedisRuntimeConfig};
use crate::mq::dlq::{ack_and_dead_letter, dead_letter_script, DeadLetterCause};
use crate::mq::lease::Fence;
use crate::mq::message::{encode_fields, RawEntry};
use crate::mq::retry::{ack_and_schedule, backoff, schedule_script};
use crate::mq::Connection;
use crate::mq::{ExclusiveReader, Failure, Message};
use crate::Error;
use redis::Script;
use std::sync::LazyLock;

/// Header naming the job of a retried or dead-lettered record.
pub const HEADER_RUNTIME_JOB: &str = "x-runtime-job";
/// Header naming the consumer group.
pub const HEADER_RUNTIME_GROUP: &str = "x-runtime-group";
/// Header with the failure's type (`user_function`, `panic`, ...).
pub const HEADER_RUNTIME_ERROR_TYPE: &str = "x-runtime-error-type";
/// Header with the failure's message, at most 512 characters.
pub const HEADER_RUNTIME_ERROR_MESSAGE: &str = "x-runtime-error-message";

/// Acknowledges a record and schedules its retry.
static SCHEDULE: LazyLock<Script> = LazyLock::new(schedule_script);

/// Acknowledges a record and appends it to the dead-letter queue.
static DEAD_LETTER: LazyLock<Script> = LazyLock::new(dead_letter_script);

fn error_type(e: &Error) -> &'static str {
    match e {
        e if e.is_decode() => "decode",
        Error::UserFunction { .. } => "user_function",
        Error::Panic { .. } => "panic",
        Error::StateType { .. } | Error::StateNotPersistent { .. } => "state",
        Error::StateDecode { .. } => "state_decode",
        Error::MqDecode { .. } => "decode",
        Error::HotKey { .. } => "hot_key",
        Error::TimerQueueFull { .. } => "timer_queue_full",
        Error::WindowBounds { .. } => "window_bounds",
        _ => "error",
    }
}

/// A record's failure, as retry and dead letter see it.
struct Failed {
    /// The error type (header `x-runtime-error-type`).
    kind: &'static str,
    /// The message, at most 512 characters.
    text: String,
    /// Whether a retry may help (the policy retries; not a misuse, not permanent).
    retry: bool,
    /// The error type of a dead letter sent without retrying.
    dead_letter_type: String,
}

impl Failed {
    fn new(config: &RedisRuntimeConfig, e: &Error) -> Self {
        let kind = error_type(e);
        let misuse = is_misuse(e);
        // A misuse or a permanent error (bad input, `Error::permanent`): no retry helps.
        let retry = config.processing_error_result() == ProcessingErrorResult::Retry
            && !misuse
            && !e.is_permanent();
        let dead_letter_type = match config.processing_error_result() {
            ProcessingErrorResult::Fail if !misuse => format!("fail:{kind}"),
            _ => kind.to_string(),
        };
        Failed {
            kind,
            text: e.to_string().chars().take(512).collect(),
            retry,
            dead_letter_type,
        }
    }

    /// `msg` with the `x-runtime-*` headers.
    fn headers(&self, ctx: &Ctx<'_>, msg: &Message) -> Message {
        let mut m = msg.clone();
        m.headers
            .insert(HEADER_RUNTIME_JOB.into(), ctx.spec.config.job_name());
        m.headers
            .insert(HEADER_RUNTIME_GROUP.into(), ctx.spec.group.clone());
        m.headers
            .insert(HEADER_RUNTIME_ERROR_TYPE.into(), self.kind.into());
        m.headers
            .insert(HEADER_RUNTIME_ERROR_MESSAGE.into(), self.text.clone());
        m
    }
}

/// Sends a failed record to retry or the dead-letter queue.
pub(super) async fn fail(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &mut Ownership,
    msg: &Message,
    e: &Error,
) -> Result<(), Error> {
    let failed = Failed::new(&ctx.spec.config, e);
    let m = failed.headers(ctx, msg);
    match owner.reader.as_mut() {
        Some(Reader::Offset(r)) => fail_offset(r, &m, failed).await,
        _ => fail_xack(ctx, conn, owner, &m, failed).await,
    }
}

/// Offset mode: the exclusive reader retries or dead-letters (without acknowledging).
async fn fail_offset(r: &mut ExclusiveReader, m: &Message, failed: Failed) -> Result<(), Error> {
    if failed.retry {
        r.retry_or_dead_letter(m, &Failure::new(failed.kind, failed.text))
            .await?;
    } else {
        r.dead_letter(m, &Failure::new(failed.dead_letter_type, failed.text))
            .await?;
    }
    Ok(())
}

/// XACK mode: acknowledges the record and schedules its retry, or (retries exhausted,
/// or no retry helps) appends it to the dead-letter queue, in one fenced script.
async fn fail_xack(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &Ownership,
    m: &Message,
    failed: Failed,
) -> Result<(), Error> {
    let policy = ctx.spec.config.mq_options().retry;
    let lease = owner.fenced_unless_held(ctx)?;
    let fence = owner.fence(ctx, &lease);
    let max = m.max_retries.unwrap_or(policy.max_retries);
    if failed.retry && m.retry_count < max {
        let delay = backoff(&policy, m.retry_count);
        let (kind, text) = (failed.kind, failed.text.as_str());
        let group = &ctx.spec.group;
        ack_and_schedule(
            conn, &SCHEDULE, &ctx.keys, fence, group, m, delay, kind, text,
        )
        .await?;
    } else {
        let et = if failed.retry {
            format!("retries_exhausted:{}", failed.kind)
        } else {
            failed.dead_letter_type
        };
        let partition = owner.partition();
        dead_letter(ctx, conn, fence, partition, m, &et, &failed.text).await?;
    }
    Ok(())
}

/// Acknowledges `m` and appends it, unchanged but for its headers, to the dead-letter
/// queue with error type `error_type`.
async fn dead_letter(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    fence: Fence<'_>,
    partition: u32,
    m: &Message,
    error_type: &str,
    error: &str,
) -> Result<(), Error> {
    let fields = encode_fields(
        m.key.as_deref(),
        &m.payload,
        &m.headers,
        m.timestamp_ms,
        m.retry_count,
        m.max_retries,
    )
    .into_iter()
    .map(|(f, v)| (f.as_bytes().to_vec(), v))
    .collect();
    let cause = DeadLetterCause {
        topic: &ctx.spec.topic,
        partition,
        group: &ctx.spec.group,
        id: &m.id,
        original_id: m.original_id(),
        attempts: m.retry_count.saturating_add(1),
        error_type,
        error,
    };
    ack_and_dead_letter(conn, &DEAD_LETTER, &ctx.keys, fence, &cause, fields).await?;
    Ok(())
}

/// Sends an entry that does not decode as a message to the dead-letter queue.
pub(super) async fn malformed(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    owner: &Ownership,
    e: RawEntry,
    reason: &str,
) -> Result<(), Error> {
    let spec = ctx.spec;
    let partition = owner.partition();
    tracing::warn!(topic = %spec.topic, partition, id = %e.id, %reason,
                   "malformed entry → dead letter");
    let cause = DeadLetterCause {
        topic: &spec.topic,
        partition,
        group: &spec.group,
        id: &e.id,
        original_id: &e.id,
        attempts: 1,
        error_type: "malformed",
        error: reason,
    };
    let lease = owner.fenced_unless_held(ctx)?;
    let fence = owner.fence(ctx, &lease);
    ack_and_dead_letter(conn, &DEAD_LETTER, &ctx.keys, fence, &cause, e.fields).await?;
    Ok(())
}
