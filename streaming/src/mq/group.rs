//! Consumer-group creation from an explicit start policy, and moving a group's
//! last-delivered id (`XGROUP SETID`) instead of destroying it.

use super::Connection;
use redis::{AsyncCommands, Script, Value};
use tracing::{info, warn};

use crate::mq::lease::{is_fenced_reply, Fence, LUA_LEASE_HELD};
use crate::mq::options::StartPolicy;
use crate::mq::topic::{parse_xinfo_groups, GroupInfo, KeySpace};
use crate::Error;

fn is_busygroup(e: &redis::RedisError) -> bool {
    e.code() == Some("BUSYGROUP") || e.to_string().contains("BUSYGROUP")
}

async fn group_info(
    conn: &mut Connection,
    stream: &str,
    group: &str,
) -> Result<Option<GroupInfo>, Error> {
    let v: Value = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(stream)
        .query_async(conn)
        .await?;
    Ok(parse_xinfo_groups(&v).into_iter().find(|g| g.name == group))
}

/// Makes sure `group` exists on the partition's stream. A missing group is created at the
/// id `start` names (never an implicit replay) — or, with `restore_from_frontier`, at the
/// commit frontier whenever there is one, whatever `start` says (a group lost while its
/// frontier survived is rebuilt, not replayed); a missing frontier is initialised to the
/// group's last-delivered id when nothing is pending. Returns the start id when the group
/// was created, `None` when it existed.
pub(crate) async fn ensure_group(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partition: u32,
    group: &str,
    start: StartPolicy,
    restore_from_frontier: bool,
) -> Result<Option<String>, Error> {
    let stream = keys.stream(topic, partition);
    let frontier_key = keys.frontier(topic, partition, group);
    let frontier: Option<String> = conn.get(&frontier_key).await?;
    let start_id = match (start, &frontier) {
        (_, Some(f)) if restore_from_frontier => f.clone(),
        (StartPolicy::FrontierOrLatest | StartPolicy::FrontierOrEarliest, Some(f)) => f.clone(),
        (StartPolicy::FrontierOrLatest | StartPolicy::Latest, _) => "$".to_owned(),
        (StartPolicy::FrontierOrEarliest | StartPolicy::Earliest, _) => "0".to_owned(),
    };
    let _: () = conn.sadd(keys.groups(topic), group).await?;
    let created: Result<(), redis::RedisError> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(&stream)
        .arg(group)
        .arg(&start_id)
        .arg("MKSTREAM")
        .query_async(conn)
        .await;
    let created = match created {
        Ok(()) => {
            info!(topic, partition, group, start = %start_id, "created consumer group");
            true
        }
        Err(e) if is_busygroup(&e) => false,
        Err(e) => return Err(e.into()),
    };
    if frontier.is_none() {
        if let Some(g) = group_info(conn, &stream, group).await? {
            if g.pending == 0 {
                let _: () = redis::cmd("SET")
                    .arg(&frontier_key)
                    .arg(&g.last_delivered_id)
                    .arg("NX")
                    .query_async(conn)
                    .await?;
            } else {
                warn!(
                    topic,
                    partition,
                    group,
                    pending = g.pending,
                    "group has pending entries but no commit frontier; the frontier starts at 0-0"
                );
            }
        }
    }
    Ok(created.then_some(start_id))
}

const LUA_POSITION: &str = r#"
-- KEYS: stream, lease, fencing counter; ARGV: lease value held, lease ttl ms, group, id
-- Points the group at `id` (creating it there if missing), if the lease is still ours.
if not lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then return 'fenced' end
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[3], ARGV[4], 'MKSTREAM')
if type(created) == 'table' and created.err then
  if not string.find(created.err, 'BUSYGROUP') then return redis.error_reply(created.err) end
  redis.call('XGROUP', 'SETID', KEYS[1], ARGV[3], ARGV[4])
end
return 1
"#;

const LUA_CLAIM: &str = r#"
-- KEYS: stream, lease, fencing counter; ARGV: lease value held, lease ttl ms, group,
--       consumer, cursor, count
-- One XAUTOCLAIM step (ids only) moving pending entries to the owner, if the lease is
-- still ours; returns the next cursor.
if not lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then return 'fenced' end
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[3], ARGV[4], 0, ARGV[5], 'COUNT', ARGV[6], 'JUSTID')
return r[1]
"#;

const LUA_READ: &str = r#"
-- KEYS: stream, lease, fencing counter; ARGV: lease value held, lease ttl ms, group,
--       consumer, count, from id ('>' = new entries), noack ('1' | '0')
-- XREADGROUP (never blocking) if the lease is still ours: a stale owner's read neither
-- moves the group's last-delivered id nor takes entries into its pending list.
if not lease_held(KEYS[2], KEYS[3], ARGV[1], ARGV[2]) then return 'fenced' end
if ARGV[7] == '1' then
  return redis.call('XREADGROUP', 'GROUP', ARGV[3], ARGV[4], 'COUNT', ARGV[5], 'NOACK',
                    'STREAMS', KEYS[1], ARGV[6])
end
return redis.call('XREADGROUP', 'GROUP', ARGV[3], ARGV[4], 'COUNT', ARGV[5],
                  'STREAMS', KEYS[1], ARGV[6])
"#;

/// The scripts a partition owner uses on its group: each first checks the owner's lease
/// (see [`crate::mq::lease`]), so a stale owner moves, claims and reads nothing.
pub(crate) struct OwnerScripts {
    position: Script,
    claim: Script,
    read: Script,
}

impl OwnerScripts {
    pub(crate) fn new() -> Self {
        let with_fence = |body: &str| Script::new(&format!("{LUA_LEASE_HELD}\n{body}"));
        Self {
            position: with_fence(LUA_POSITION),
            claim: with_fence(LUA_CLAIM),
            read: with_fence(LUA_READ),
        }
    }

    /// Points `group` at `id` (`XGROUP SETID`, creating the group there if missing) for the
    /// holder of `fence`'s lease, keeping the group: restoring moves the group's last id
    /// and never destroys the group (which would wipe its pending entries).
    ///
    /// # Errors
    /// [`Error::Fenced`] (nothing moved) when another owner took the lease.
    pub(crate) async fn set_group_id(
        &self,
        conn: &mut Connection,
        fence: Fence<'_>,
        (stream, groups_set): (&str, &str),
        group: &str,
        id: &str,
    ) -> Result<(), Error> {
        let _: () = conn.sadd(groups_set, group).await?;
        let mut inv = self.position.key(stream);
        fence.push(&mut inv);
        inv.arg(group).arg(id);
        let v: Value = inv.invoke_async(conn).await?;
        fence.int_reply(&v)?;
        Ok(())
    }

    /// Moves every pending entry of `group` to `consumer` (the partition's owner, holding
    /// `fence`'s lease), so it is processed again before new entries.
    ///
    /// # Errors
    /// [`Error::Fenced`] (nothing claimed) when another owner took the lease.
    pub(crate) async fn claim_all(
        &self,
        conn: &mut Connection,
        fence: Fence<'_>,
        stream: &str,
        group: &str,
        consumer: &str,
    ) -> Result<(), Error> {
        let mut cursor = "0-0".to_string();
        for _ in 0..100_000 {
            let mut inv = self.claim.key(stream);
            fence.push(&mut inv);
            inv.arg(group).arg(consumer).arg(&cursor).arg(1000);
            let v: Value = inv.invoke_async(conn).await?;
            if is_fenced_reply(&v) {
                return Err(fence.error());
            }
            let next: String = redis::from_redis_value(&v)?;
            if next == "0-0" {
                break;
            }
            cursor = next;
        }
        Ok(())
    }

    /// Reads up to `count` entries of `group` from `from` (`>`: new ones) without
    /// blocking, for the holder of `fence`'s lease; the reply of `XREADGROUP`.
    ///
    /// # Errors
    /// [`Error::Fenced`] (nothing read) when another owner took the lease.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn read(
        &self,
        conn: &mut Connection,
        fence: Fence<'_>,
        stream: &str,
        (group, consumer): (&str, &str),
        count: usize,
        from: &str,
        noack: bool,
    ) -> Result<Value, Error> {
        let mut inv = self.read.key(stream);
        fence.push(&mut inv);
        inv.arg(group)
            .arg(consumer)
            .arg(count.max(1))
            .arg(from)
            .arg(if noack { "1" } else { "0" });
        let v: Value = inv.invoke_async(conn).await?;
        if is_fenced_reply(&v) {
            return Err(fence.error());
        }
        Ok(v)
    }
}
