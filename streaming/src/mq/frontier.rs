//! The commit frontier of (topic, group, partition) (see [`StartPolicy`](crate::mq::StartPolicy)).

use super::Connection;
use redis::{AsyncCommands, Script};
use std::sync::LazyLock;

use crate::mq::topic::KeySpace;
use crate::Error;

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
