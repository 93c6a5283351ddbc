//! Consumer-group creation from an explicit start policy (moving a group's last-delivered
//! id instead of destroying it is the partition reader's, under its lease).

use super::Connection;
use redis::{AsyncCommands, Value};
use tracing::{info, warn};

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
