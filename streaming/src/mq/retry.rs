//! Retry with backoff, done atomically, per consumer group (see [`RetryPolicy`]).

use std::time::Duration;

use super::Connection;
use rand::Rng;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

use crate::mq::lease::{is_fenced_reply, Fence};
use crate::mq::message::{
    encode_fields, Message, F_RETRY_GROUP, HEADER_ERROR_MESSAGE, HEADER_ERROR_TYPE,
    HEADER_ORIGINAL_ID,
};
use crate::mq::options::RetryPolicy;
use crate::mq::topic::KeySpace;
use crate::Error;

/// What [`crate::mq::ExclusiveReader::retry_or_dead_letter`] did with a failed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOutcome {
    /// A retry entry will be added to the partition after `delay`.
    Scheduled {
        /// The backoff drawn from the [`RetryPolicy`].
        delay: Duration,
    },
    /// A retry of this entry was already scheduled (e.g. the batch is processed again
    /// after a crash before the offset commit); nothing was added.
    AlreadyScheduled,
    /// The message had used up its retries and went to the dead-letter stream.
    DeadLettered,
}

/// Longest error message stored in a header or dead letter, in characters
/// (`x-runtime-error-message` is truncated to 512 chars).
pub(crate) const MAX_ERROR_CHARS: usize = 512;

/// The delay before retry number `attempt` (0-based), per [`RetryPolicy`]'s formula;
/// `unit` is a uniform sample in `[-1, 1]` that scales the jitter.
pub(crate) fn backoff_with(policy: &RetryPolicy, attempt: u32, unit: f64) -> Duration {
    let initial = policy.initial_backoff.as_secs_f64();
    let max = policy.max_backoff.as_secs_f64();
    let exp = i32::try_from(attempt).unwrap_or(i32::MAX);
    let base = (initial * policy.multiplier.powi(exp)).min(max);
    let jittered = base * (1.0 + policy.jitter * unit.clamp(-1.0, 1.0));
    Duration::from_secs_f64(jittered.clamp(0.0, max))
}

/// The delay before retry number `attempt` (0-based) with random jitter.
pub(crate) fn backoff(policy: &RetryPolicy, attempt: u32) -> Duration {
    let unit = rand::rng().random_range(-1.0..=1.0);
    backoff_with(policy, attempt, unit)
}

/// The retry schedule's token (member of `P:{T:n}:retry:due`, field of
/// `P:{T:n}:retry:data`) of `group`'s retry of entry `id`: `"{group}\n{id}"`. Group names
/// are `[A-Za-z0-9_.-]` only, so the newline separates them unambiguously.
pub fn retry_token(group: &str, id: &str) -> String {
    format!("{group}\n{id}")
}

pub(crate) fn truncate(s: &str) -> String {
    s.chars().take(MAX_ERROR_CHARS).collect()
}

/// Acknowledges a failed entry and schedules its retry.
static SCHEDULE: LazyLock<Script> = fenced_script!(
    include_str!("lua/advance.lua"),
    include_str!("lua/schedule_retry.lua"),
    include_str!("lua/schedule.lua"),
);

/// Schedules a retry without acknowledging (NOACK readers).
static SCHEDULE_NOACK: LazyLock<Script> =
    fenced_script!(
        include_str!("lua/schedule_retry.lua"),
        include_str!("lua/settle.lua"),
        include_str!("lua/schedule_noack.lua"),
    );

/// Moves due retries back into the stream.
static PROMOTE: LazyLock<Script> = fenced_script!(include_str!("lua/promote.lua"));

/// The fields of `group`'s retry entry of `msg`: same key, payload, timestamp, max retries
/// and headers, `rc + 1`, `x-original-message-id` (kept if present), error headers, and
/// `rg` = `group`.
fn retry_fields(
    msg: &Message,
    group: &str,
    error_type: &str,
    error: &str,
) -> Vec<(&'static str, Vec<u8>)> {
    let mut headers = msg.headers.clone();
    headers
        .entry(HEADER_ORIGINAL_ID.to_owned())
        .or_insert_with(|| msg.id.to_string());
    headers.insert(HEADER_ERROR_TYPE.to_owned(), truncate(error_type));
    headers.insert(HEADER_ERROR_MESSAGE.to_owned(), truncate(error));
    let mut fields = encode_fields(
        msg.key.as_deref(),
        &msg.payload,
        &headers,
        msg.timestamp_ms,
        msg.retry_count.saturating_add(1),
        msg.max_retries,
    );
    fields.push((F_RETRY_GROUP, group.as_bytes().to_vec()));
    fields
}

fn delay_ms(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

/// Acknowledges `msg` for `group` and schedules `group`'s retry of it after `delay`,
/// atomically, if `fence` still holds the partition's lease. Returns `false` when the
/// original was no longer pending (nothing scheduled).
///
/// # Errors
/// [`Error::Fenced`] (nothing written) when another owner took the lease.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn ack_and_schedule(
    conn: &mut Connection,
    keys: &KeySpace,
    fence: Fence<'_>,
    group: &str,
    msg: &Message,
    delay: Duration,
    error_type: &str,
    error: &str,
) -> Result<bool, Error> {
    let (t, p) = (msg.topic.as_str(), msg.partition);
    let mut inv = SCHEDULE.key(keys.stream(t, p));
    inv.key(keys.acked(t, p, group))
        .key(keys.frontier(t, p, group))
        .key(keys.retry_due(t, p))
        .key(keys.retry_data(t, p));
    fence.push(&mut inv);
    inv.arg(group).arg(msg.id.as_str());
    schedule(inv, conn, fence, group, msg, delay, (error_type, error)).await
}

/// Schedules `group`'s retry of `msg` after `delay` without acknowledging (NOACK
/// readers), if `fence` still holds the partition's lease. Returns `false` when `group`'s
/// retry of this entry is already scheduled.
///
/// # Errors
/// [`Error::Fenced`] (nothing written) when another owner took the lease.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn schedule_without_ack(
    conn: &mut Connection,
    keys: &KeySpace,
    fence: Fence<'_>,
    group: &str,
    msg: &Message,
    delay: Duration,
    failure: (&str, &str),
) -> Result<bool, Error> {
    let (t, p) = (msg.topic.as_str(), msg.partition);
    let mut inv = SCHEDULE_NOACK.key(keys.retry_due(t, p));
    inv.key(keys.retry_data(t, p));
    fence.push(&mut inv);
    inv.key(keys.settled(t, p, group));
    schedule(inv, conn, fence, group, msg, delay, failure).await
}

/// Runs a scheduling script `inv` (its keys and leading arguments given) with the retry's
/// token, its delay in ms and the retry entry's fields as the arguments that follow;
/// `true` when it scheduled the retry.
async fn schedule(
    mut inv: ScriptInvocation<'_>,
    conn: &mut Connection,
    fence: Fence<'_>,
    group: &str,
    msg: &Message,
    delay: Duration,
    (error_type, error): (&str, &str),
) -> Result<bool, Error> {
    inv.arg(retry_token(group, &msg.id)).arg(delay_ms(delay));
    for (f, v) in retry_fields(msg, group, error_type, error) {
        inv.arg(f).arg(v);
    }
    let v: Value = inv.invoke_async(conn).await?;
    Ok(fence.int_reply(&v)? == 1)
}

/// Moves up to `limit` due retries of a partition back into its stream, if `fence` (a
/// lease of the retrying group) still holds the partition; returns how many moved and how
/// many stay scheduled.
///
/// # Errors
/// [`Error::Fenced`] (nothing moved) when another owner took the lease.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn promote_due(
    conn: &mut Connection,
    keys: &KeySpace,
    fence: Fence<'_>,
    (topic, partition): (&str, u32),
    limit: usize,
    max_len: Option<usize>,
) -> Result<(u64, u64), Error> {
    let mut inv = PROMOTE.key(keys.stream(topic, partition));
    inv.key(keys.retry_due(topic, partition))
        .key(keys.retry_data(topic, partition));
    fence.push(&mut inv);
    inv.arg(limit).arg(max_len.unwrap_or(0));
    let v: Value = inv.invoke_async(conn).await?;
    if is_fenced_reply(&v) {
        return Err(fence.error());
    }
    Ok(redis::from_redis_value(&v)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_retries: 5,
            initial_backoff: Duration::from_millis(100),
            multiplier: 2.0,
            max_backoff: Duration::from_millis(1000),
            jitter: 0.5,
        }
    }

    #[test]
    fn exponential_then_capped() {
        let p = policy();
        let ms = |a| backoff_with(&p, a, 0.0).as_millis();
        assert_eq!(
            [ms(0), ms(1), ms(2), ms(3), ms(4), ms(40)],
            [100, 200, 400, 800, 1000, 1000]
        );
    }

    #[test]
    fn jitter_bounds() {
        let p = policy();
        assert_eq!(backoff_with(&p, 0, -1.0).as_millis(), 50);
        assert_eq!(backoff_with(&p, 0, 1.0).as_millis(), 150);
        // The cap holds after jitter too.
        assert_eq!(backoff_with(&p, 4, 1.0).as_millis(), 1000);
        for a in 0..10 {
            let d = backoff(&p, a);
            assert!(d <= p.max_backoff, "{d:?}");
        }
    }

    #[test]
    fn tokens_name_the_group() {
        assert_eq!(retry_token("g-1", "5-0"), "g-1\n5-0");
        assert_ne!(retry_token("a", "5-0"), retry_token("b", "5-0"));
    }

    #[test]
    fn truncates_by_chars() {
        let long = "é".repeat(600);
        assert_eq!(truncate(&long).chars().count(), 512);
    }
}
