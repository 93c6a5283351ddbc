//! Partition leases with fencing tokens: one owner per (topic, partition, group) at a time.
//!
//! The lease is the string key `P:{T:n}:lease:G` holding `"{token} {owner}"` with a TTL
//! ([`crate::mq::MqOptions::lease_ttl`]). Every acquisition draws a new fencing token from
//! the counter `P:{T:n}:fence:G` (`INCR`, in the partition's hash slot), so the value of a
//! lease is never the same twice: two acquisitions by consumers of the same name still
//! hold different leases. A lease is taken only when the key is absent; a name never
//! matches its way in. Renewal, release and every write an owner makes compare the whole
//! value, so a consumer whose lease expired and was taken cannot extend or drop the new
//! owner's lease, nor write for the partition (it is *fenced*).

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::Script;

use crate::Error;

const LUA_ACQUIRE: &str = r#"
-- KEYS: lease, fencing counter; ARGV: owner, ttl ms.
-- Takes a free lease under a new fencing token; returns the token, or 0 when held.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'PX', ARGV[2])
return token
"#;

const LUA_RENEW: &str = r#"
-- KEYS: lease, fencing counter; ARGV: held value "{token} {owner}", ttl ms.
-- Extends the lease; an expired lease that nobody took since (the counter still holds our
-- token) is taken back under the same token. Returns 1 when held now, else 0.
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if (not held) and redis.call('GET', KEYS[2]) == string.match(ARGV[1], '^(%d+) ') then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"#;

const LUA_RELEASE: &str = r#"
-- KEYS: lease; ARGV: held value.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#;

/// A lease held: its key and its value `"{token} {owner}"` (what every fenced write
/// compares).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) key: String,
    /// The partition's fencing-token counter (an expired lease whose token is still the
    /// counter's value was taken by nobody since, and may be taken back).
    pub(crate) fence: String,
    pub(crate) value: String,
    pub(crate) token: u64,
}

/// The three lease scripts, loaded once per subscription.
pub(crate) struct LeaseScripts {
    acquire: Script,
    renew: Script,
    release: Script,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl LeaseScripts {
    pub(crate) fn new() -> Self {
        Self {
            acquire: Script::new(LUA_ACQUIRE),
            renew: Script::new(LUA_RENEW),
            release: Script::new(LUA_RELEASE),
        }
    }

    /// Takes the lease `key` if nobody holds it, under a new token drawn from `fence`.
    pub(crate) async fn acquire(
        &self,
        conn: &mut ConnectionManager,
        key: &str,
        fence: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, Error> {
        let token: u64 = self
            .acquire
            .key(key)
            .key(fence)
            .arg(owner)
            .arg(ms(ttl))
            .invoke_async(conn)
            .await?;
        Ok((token > 0).then(|| Lease {
            key: key.to_string(),
            fence: fence.to_string(),
            value: format!("{token} {owner}"),
            token,
        }))
    }

    /// Extends `lease` (taking it back if it expired and nobody took it since: the token
    /// decides); `false` when another owner took it.
    pub(crate) async fn renew(
        &self,
        conn: &mut ConnectionManager,
        lease: &Lease,
        ttl: Duration,
    ) -> Result<bool, Error> {
        let n: i64 = self
            .renew
            .key(&lease.key)
            .key(&lease.fence)
            .arg(&lease.value)
            .arg(ms(ttl))
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }

    /// Deletes `lease`; `false` when it was not held any more.
    pub(crate) async fn release(
        &self,
        conn: &mut ConnectionManager,
        lease: &Lease,
    ) -> Result<bool, Error> {
        let n: i64 = self
            .release
            .key(&lease.key)
            .arg(&lease.value)
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }
}
