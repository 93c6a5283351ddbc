//! The commit frontier of (topic, group, partition) (see [`StartPolicy`](crate::mq::StartPolicy)).

use super::Connection;
use redis::{AsyncCommands, Script};

use crate::mq::topic::KeySpace;
use crate::Error;

/// Lua source of the helpers shared by every acknowledging script: stream id comparison
/// (`id_gt(a, b)`) and the frontier walk `advance(stream, acked_set, frontier_key, newly)`,
/// which takes a table whose keys are the ids the calling script just acknowledged, stores
/// the new frontier and returns it.
///
/// Public so that a caller's own commit script (e.g. the Redis engine writing state and
/// acknowledging in one script) can prepend it and keep the frontier
/// exact; pass the keys [`KeySpace::stream`], [`KeySpace::acked`] and
/// [`KeySpace::frontier`] of the partition (same hash tag) in `KEYS`.
pub(crate) const LUA_ADVANCE: &str = r#"
local function id_parts(id)
  local dash = string.find(id, '-', 1, true)
  if not dash then return tonumber(id), 0 end
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end
local function id_gt(a, b)
  local am, as = id_parts(a)
  local bm, bs = id_parts(b)
  if am ~= bm then return am > bm end
  return as > bs
end
local function advance(stream, acked, frontier, newly)
  local f = redis.call('GET', frontier)
  if not f then f = '0-0' end
  -- An id may be both newly acknowledged and parked (a failed record is acknowledged
  -- with its retry or dead letter, then again by its batch): the frontier passing it
  -- removes it from the set, which holds only ids above the frontier.
  local parked = redis.call('SCARD', acked) > 0
  local stop = false
  while not stop do
    local entries = redis.call('XRANGE', stream, '(' .. f, '+', 'COUNT', 256)
    if #entries == 0 then break end
    for _, e in ipairs(entries) do
      local id = e[1]
      if newly[id] then
        newly[id] = nil
        f = id
        if parked then redis.call('SREM', acked, id) end
      elseif redis.call('SREM', acked, id) == 1 then
        f = id
      else
        stop = true
        break
      end
    end
  end
  redis.call('SET', frontier, f)
  for id, _ in pairs(newly) do
    if id_gt(id, f) then redis.call('SADD', acked, id) end
  end
  return f
end
"#;

const LUA_ACK: &str = r#"
-- KEYS: stream, acked set, frontier; ARGV: group, id...
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
local newly = {}
for i = 2, #ARGV do newly[ARGV[i]] = true end
advance(KEYS[1], KEYS[2], KEYS[3], newly)
return n
"#;

pub(crate) fn ack_script() -> Script {
    Script::new(&format!("{LUA_ADVANCE}\n{LUA_ACK}"))
}

/// Acknowledges `ids` of `group` on a partition and advances the frontier, atomically.
/// Returns how many ids were pending (XACK's count).
pub(crate) async fn ack(
    conn: &mut Connection,
    script: &Script,
    keys: &KeySpace,
    topic: &str,
    partition: u32,
    group: &str,
    ids: &[String],
) -> Result<u64, Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut inv = script.key(keys.stream(topic, partition));
    inv.key(keys.acked(topic, partition, group))
        .key(keys.frontier(topic, partition, group))
        .arg(group);
    for id in ids {
        inv.arg(id);
    }
    Ok(inv.invoke_async(conn).await?)
}

/// Reads the stored frontier of (topic, group, partition); `None` when there is none.
pub(crate) async fn read(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partition: u32,
    group: &str,
) -> Result<Option<String>, Error> {
    Ok(conn.get(keys.frontier(topic, partition, group)).await?)
}
