//! The commit frontier of (topic, group, partition) (see [`StartPolicy`](crate::mq::StartPolicy)).

use super::Connection;
use redis::{AsyncCommands, Script};
use std::sync::LazyLock;

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
pub(crate) const LUA_ADVANCE: &str = include_str!("lua/advance.lua");

/// Acknowledges ids and advances the frontier.
static ACK: LazyLock<Script> = lua_script!("advance.lua", "ack.lua");

/// Acknowledges `ids` of `group` on a partition and advances the frontier, atomically.
/// Returns how many ids were pending (XACK's count).
pub(crate) async fn ack(
    conn: &mut Connection,
    keys: &KeySpace,
    topic: &str,
    partition: u32,
    group: &str,
    ids: &[String],
) -> Result<u64, Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut inv = ACK.key(keys.stream(topic, partition));
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
