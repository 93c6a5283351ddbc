//! Partition leases with fencing tokens: one owner per (topic, partition, group) at a time.
//!
//! The lease is the string key `P:{T:n}:lease:G` holding `"{token} {owner}"` with a TTL
//! ([`crate::mq::MqOptions::lease_ttl`]). Every acquisition draws a new fencing token from
//! the counter `P:{T:n}:fence:G` (`INCR`, in the partition's hash slot), so the value of a
//! lease is never the same twice: two acquisitions by consumers of the same name still
//! hold different leases. A lease is taken when the key is absent, or when it already
//! names the caller: owner names are unique to one live holder (a subtask's consumer
//! name, a process's instance id), so such a lease was left by an acquisition or
//! re-fencing of the caller's own whose reply was lost (a Redis restart, a reset
//! connection); taking it moves it to a new token, which fences whatever that attempt
//! could still write. Renewal, release and every write an owner makes compare the whole
//! value, so a consumer whose lease expired and was taken cannot extend or drop the new
//! owner's lease, nor write for the partition (it is *fenced*).

use std::time::Duration;

use super::Connection;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

use crate::mq::topic::KeySpace;
use crate::Error;

/// Lua prelude of every script that writes for a partition owner (`lua/lease_held.lua`):
/// `lease_held(lease, fence, value, ttl)` is true when the lease holds `value` (extended by
/// `ttl` ms) or expired and nobody took it since (the counter still holds our token: taken
/// back under it), and false when another owner took it — the script then writes nothing
/// and returns `'fenced'`. An empty `value` is a caller that holds no lease (not fenced).
const LUA_LEASE_HELD: &str = include_str!("lua/lease_held.lua");

/// The text of a script of `body` run by a partition owner: the lease check's prelude
/// ([`LUA_LEASE_HELD`]), then `body`, which calls `lease_held` before it writes. Every
/// script that writes for a partition owner gets the check this way (or through
/// `fenced_script!`, which calls this).
pub(crate) fn lease_guarded(body: &str) -> String {
    format!("{LUA_LEASE_HELD}\n{body}")
}

/// The lease a fenced script checks for one partition of a group: its lease and counter
/// keys (passed even without a lease, so a script always has the same keys, all in the
/// partition's slot) and the value held, if any.
#[derive(Clone, Copy)]
pub(crate) struct Fence<'a> {
    keys: &'a KeySpace,
    topic: &'a str,
    partition: u32,
    group: &'a str,
    lease: Option<&'a Lease>,
    ttl: Duration,
}

impl<'a> Fence<'a> {
    /// `lease` (of `group` on the partition) checked and extended by `ttl`.
    pub(crate) fn held(
        keys: &'a KeySpace,
        partition: (&'a str, u32, &'a str),
        lease: &'a Lease,
        ttl: Duration,
    ) -> Self {
        Self::of(keys, partition, Some(lease), ttl)
    }

    /// No lease held (a subscription's write): the script checks nothing.
    pub(crate) fn unfenced(keys: &'a KeySpace, partition: (&'a str, u32, &'a str)) -> Self {
        Self::of(keys, partition, None, Duration::from_millis(1))
    }

    fn of(
        keys: &'a KeySpace,
        (topic, partition, group): (&'a str, u32, &'a str),
        lease: Option<&'a Lease>,
        ttl: Duration,
    ) -> Self {
        Self {
            keys,
            topic,
            partition,
            group,
            lease,
            ttl,
        }
    }

    /// Appends the lease and counter keys to `inv`'s keys and the held value and ttl to
    /// its arguments: call it after the script's own keys and before its own arguments
    /// (the script calls `lease_held(KEYS[n+1], KEYS[n+2], ARGV[1], ARGV[2])`).
    pub(crate) fn push(&self, inv: &mut ScriptInvocation<'_>) {
        let (lease, fence, value, ttl) = self.parts();
        inv.key(lease).key(fence).arg(value).arg(ttl);
    }

    /// The lease and counter keys, then the held value ("" without a lease) and the ttl in
    /// ms: what [`Self::push`] appends, for a script sent as a plain `EVAL` command.
    pub(crate) fn parts(&self) -> (String, String, &'a str, u64) {
        let (t, p, g) = (self.topic, self.partition, self.group);
        (
            self.keys.lease(t, p, g),
            self.keys.fence(t, p, g),
            self.lease.map_or("", |l| l.value.as_str()),
            ms(self.ttl),
        )
    }

    /// The error of a write this fence refused.
    pub(crate) fn error(&self) -> Error {
        Error::Fenced {
            topic: self.topic.to_string(),
            group: self.group.to_string(),
            partition: self.partition,
            token: self.lease.map_or(0, |l| l.token),
        }
    }

    /// The integer reply of a fenced script, or [`Error::Fenced`] when it refused.
    pub(crate) fn int_reply(&self, v: &Value) -> Result<i64, Error> {
        if is_fenced_reply(v) {
            return Err(self.error());
        }
        Ok(redis::from_redis_value(v)?)
    }
}

/// Whether a fenced script's reply is its refusal (`'fenced'`).
pub(crate) fn is_fenced_reply(v: &Value) -> bool {
    match v {
        Value::BulkString(b) => b == b"fenced",
        Value::SimpleString(s) => s == "fenced",
        _ => false,
    }
}

/// Takes a free lease under a new fencing token.
static ACQUIRE: LazyLock<Script> = lua_script!("lease_acquire.lua");

/// Extends a lease held (or takes it back when nobody took it since).
static RENEW: LazyLock<Script> = fenced_script!(include_str!("lua/lease_renew.lua"));

/// Moves a lease held to a new fencing token.
static REFENCE: LazyLock<Script> = fenced_script!(include_str!("lua/lease_refence.lua"));

/// Deletes a lease still held.
static RELEASE: LazyLock<Script> = lua_script!("lease_release.lua");

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

impl Lease {
    /// The lease `owner` took (key `key`, counter `fence`) under `token`, drawn by a script
    /// that returns 0 when another owner holds it (`None`).
    fn taken(key: &str, fence: &str, owner: &str, token: u64) -> Option<Lease> {
        (token > 0).then(|| Lease {
            key: key.to_string(),
            fence: fence.to_string(),
            value: format!("{token} {owner}"),
            token,
        })
    }

    /// `script` run by the holder of this lease: KEYS = the lease, its counter; ARGV = the
    /// value held, `ttl` in ms (the script's own arguments follow).
    fn held<'s>(&self, script: &'s Script, ttl: Duration) -> ScriptInvocation<'s> {
        let mut inv = script.key(&self.key);
        inv.key(&self.fence).arg(&self.value).arg(ms(ttl));
        inv
    }
}

/// `d` in whole milliseconds, at least 1 (a zero TTL would be refused or mean none).
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Takes the lease `key` under a new token drawn from `fence` if nobody holds it or it
/// already names `owner` (the caller's own, left by an attempt whose reply was lost).
pub(crate) async fn acquire(
    conn: &mut Connection,
    key: &str,
    fence: &str,
    owner: &str,
    ttl: Duration,
) -> Result<Option<Lease>, Error> {
    let token: u64 = ACQUIRE
        .key(key)
        .key(fence)
        .arg(owner)
        .arg(ms(ttl))
        .invoke_async(conn)
        .await?;
    Ok(Lease::taken(key, fence, owner, token))
}

/// Extends `lease` (taking it back if it expired and nobody took it since: the token
/// decides); `false` when another owner took it.
pub(crate) async fn renew(
    conn: &mut Connection,
    lease: &Lease,
    ttl: Duration,
) -> Result<bool, Error> {
    let n: i64 = lease.held(&RENEW, ttl).invoke_async(conn).await?;
    Ok(n == 1)
}

/// Moves `lease`, still held (or expired and taken by nobody since), to a new fencing
/// token, so that a write made under the old one that reaches Redis later is refused;
/// `None` when another owner took it. A lease naming `owner` under another token counts
/// as held (a re-fencing of ours whose reply was lost moved it there).
pub(crate) async fn refence(
    conn: &mut Connection,
    lease: &Lease,
    owner: &str,
    ttl: Duration,
) -> Result<Option<Lease>, Error> {
    let mut refence = lease.held(&REFENCE, ttl);
    let token: u64 = refence.arg(owner).invoke_async(conn).await?;
    Ok(Lease::taken(&lease.key, &lease.fence, owner, token))
}

/// Deletes `lease`; `false` when it was not held any more.
pub(crate) async fn release(conn: &mut Connection, lease: &Lease) -> Result<bool, Error> {
    let n: i64 = RELEASE
        .key(&lease.key)
        .arg(&lease.value)
        .invoke_async(conn)
        .await?;
    Ok(n == 1)
}
