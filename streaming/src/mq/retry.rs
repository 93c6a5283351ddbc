//! Retry with backoff, done atomically, per consumer group (see [`RetryPolicy`]).

use std::time::Duration;

use super::Connection;
use rand::Rng;
use redis::{Script, Value};

use crate::mq::frontier::LUA_ADVANCE;
use crate::mq::lease::{Fence, LUA_LEASE_HELD};
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

const LUA_SCHEDULE: &str = r#"
-- KEYS: stream, acked, frontier, due zset, data hash, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, group, failed entry id,
--       token (group + '\n' + id), delay ms, field, value, ...
-- (the fields include `rg` = group)
if not lease_held(KEYS[6], KEYS[7], ARGV[1], ARGV[2]) then return 'fenced' end
if redis.call('XACK', KEYS[1], ARGV[3], ARGV[4]) == 0 then return 0 end
local fields = {}
for i = 7, #ARGV do fields[#fields + 1] = ARGV[i] end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[5], ARGV[5], cmsgpack.pack(fields))
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[6]), ARGV[5])
local newly = {}
newly[ARGV[4]] = true
advance(KEYS[1], KEYS[2], KEYS[3], newly)
return 1
"#;

const LUA_PROMOTE: &str = r#"
-- KEYS: stream, due zset, data hash, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, limit, maxlen (0 = none)
-- The stored fields carry `rg` (the group the retry is addressed to), so the new entry
-- does too.
if not lease_held(KEYS[4], KEYS[5], ARGV[1], ARGV[2]) then return 'fenced' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, tok in ipairs(tokens) do
  local packed = redis.call('HGET', KEYS[3], tok)
  if packed then
    local fields = cmsgpack.unpack(packed)
    if tonumber(ARGV[4]) > 0 then
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', unpack(fields))
    else
      redis.call('XADD', KEYS[1], '*', unpack(fields))
    end
  end
  redis.call('HDEL', KEYS[3], tok)
  redis.call('ZREM', KEYS[2], tok)
end
return #tokens
"#;

const LUA_SCHEDULE_NOACK: &str = r#"
-- KEYS: due zset, data hash, lease, fencing counter
-- ARGV: lease value held ('' = none), lease ttl ms, token (group + '\n' + id), delay ms,
--       field, value, ... (the fields include `rg` = group)
-- For NOACK readers: nothing to acknowledge; a token already scheduled (by this group) is
-- not scheduled twice.
if not lease_held(KEYS[3], KEYS[4], ARGV[1], ARGV[2]) then return 'fenced' end
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return 0 end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], ARGV[3], cmsgpack.pack(fields))
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
return 1
"#;

pub(crate) fn schedule_noack_script() -> Script {
    Script::new(&format!("{LUA_LEASE_HELD}\n{LUA_SCHEDULE_NOACK}"))
}

pub(crate) fn schedule_script() -> Script {
    Script::new(&format!("{LUA_ADVANCE}\n{LUA_LEASE_HELD}\n{LUA_SCHEDULE}"))
}

pub(crate) fn promote_script() -> Script {
    Script::new(&format!("{LUA_LEASE_HELD}\n{LUA_PROMOTE}"))
}

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
        .or_insert_with(|| msg.id.clone());
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
    script: &Script,
    keys: &KeySpace,
    fence: Fence<'_>,
    group: &str,
    msg: &Message,
    delay: Duration,
    error_type: &str,
    error: &str,
) -> Result<bool, Error> {
    let (t, p) = (msg.topic.as_str(), msg.partition);
    let mut inv = script.key(keys.stream(t, p));
    inv.key(keys.acked(t, p, group))
        .key(keys.frontier(t, p, group))
        .key(keys.retry_due(t, p))
        .key(keys.retry_data(t, p));
    fence.push(&mut inv);
    inv.arg(group)
        .arg(&msg.id)
        .arg(retry_token(group, &msg.id))
        .arg(delay_ms(delay));
    for (f, v) in retry_fields(msg, group, error_type, error) {
        inv.arg(f).arg(v);
    }
    let v: Value = inv.invoke_async(conn).await?;
    Ok(fence.int_reply(&v)? == 1)
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
    script: &Script,
    keys: &KeySpace,
    fence: Fence<'_>,
    group: &str,
    msg: &Message,
    delay: Duration,
    failure: (&str, &str),
) -> Result<bool, Error> {
    let (t, p) = (msg.topic.as_str(), msg.partition);
    let mut inv = script.key(keys.retry_due(t, p));
    inv.key(keys.retry_data(t, p));
    fence.push(&mut inv);
    inv.arg(retry_token(group, &msg.id)).arg(delay_ms(delay));
    for (f, v) in retry_fields(msg, group, failure.0, failure.1) {
        inv.arg(f).arg(v);
    }
    let v: Value = inv.invoke_async(conn).await?;
    Ok(fence.int_reply(&v)? == 1)
}

/// Moves up to `limit` due retries of a partition back into its stream, if `fence` (a
/// lease of the retrying group) still holds the partition; returns how many.
///
/// # Errors
/// [`Error::Fenced`] (nothing moved) when another owner took the lease.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn promote_due(
    conn: &mut Connection,
    script: &Script,
    keys: &KeySpace,
    fence: Fence<'_>,
    (topic, partition): (&str, u32),
    limit: usize,
    max_len: Option<usize>,
) -> Result<u64, Error> {
    let mut inv = script.key(keys.stream(topic, partition));
    inv.key(keys.retry_due(topic, partition))
        .key(keys.retry_data(topic, partition));
    fence.push(&mut inv);
    inv.arg(limit).arg(max_len.unwrap_or(0));
    let v: Value = inv.invoke_async(conn).await?;
    let n = fence.int_reply(&v)?;
    Ok(u64::try_from(n).unwrap_or(0))
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
