//! Partition leases: one owner per (topic, partition, group) at a time.
//!
//! The lease is the string key `P:{T:n}:lease:G` holding the owner's consumer name with a
//! TTL ([`crate::mq::MqOptions::lease_ttl`]); the owner renews it every
//! `lease_renew_interval` and deletes it when it stops. Renewal and release compare the
//! owner first (Lua), so a consumer whose lease expired and was taken cannot extend or drop
//! the new owner's lease.

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::Script;

use crate::Error;

const LUA_ACQUIRE: &str = r#"
-- KEYS: lease; ARGV: owner, ttl ms. Takes a free lease or re-takes our own.
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"#;

const LUA_RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

const LUA_RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#;

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

    /// Takes the lease if free (or already ours); `true` when we hold it now.
    pub(crate) async fn acquire(
        &self,
        conn: &mut ConnectionManager,
        key: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, Error> {
        let n: i64 = self
            .acquire
            .key(key)
            .arg(owner)
            .arg(ms(ttl))
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }

    /// Extends our lease; `false` when it is not ours any more.
    pub(crate) async fn renew(
        &self,
        conn: &mut ConnectionManager,
        key: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, Error> {
        let n: i64 = self
            .renew
            .key(key)
            .arg(owner)
            .arg(ms(ttl))
            .invoke_async(conn)
            .await?;
        Ok(n == 1)
    }

    /// Deletes our lease; `false` when it was not ours.
    pub(crate) async fn release(
        &self,
        conn: &mut ConnectionManager,
        key: &str,
        owner: &str,
    ) -> Result<bool, Error> {
        let n: i64 = self.release.key(key).arg(owner).invoke_async(conn).await?;
        Ok(n == 1)
    }
}
