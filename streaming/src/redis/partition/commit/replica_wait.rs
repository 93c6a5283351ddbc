//! The batch commit's script call, optionally followed by `WAIT` for replicas, and the
//! check at job start that every master has the replicas a commit waits for.

use crate::mq::{Connection, Endpoint};
use crate::redis::ReplicaWait;
use crate::Error;
use redis::{Pipeline, Value};
use std::time::Duration;

/// Runs the commit transaction `commit` (`MULTI` … `EXEC` as plain commands) on `conn`.
/// With `wait`, `WAIT` follows `EXEC` in the same request: one request to one node (on a
/// cluster, the master of the commit's keys) over one connection, so `WAIT` counts the
/// replicas that acknowledged this commit.
///
/// Returns the reply of the transaction's last command (the commit's tail script) and,
/// with `wait`, the replicas `WAIT` counted.
///
/// # Errors
/// The server's or the connection's error, as [`Error::Redis`]; a transaction the server
/// discarded (`EXECABORT`, e.g. out of memory) is such an error.
pub(in crate::redis) async fn run_commit(
    conn: &mut Connection,
    mut commit: Pipeline,
    wait: Option<&ReplicaWait>,
) -> Result<(Value, Option<i64>), Error> {
    if let Some(w) = wait {
        commit.cmd("WAIT").arg(w.replicas).arg(w.timeout_ms());
    }
    let mut replies: Vec<Value> = commit.query_async(conn).await?;
    let acked = match wait {
        Some(_) => Some(redis::from_redis_value::<i64>(
            &replies.pop().unwrap_or(Value::Nil),
        )?),
        None => None,
    };
    let Some(Value::Array(mut results)) = replies.pop() else {
        return Err(Error::Engine {
            op: "commit",
            reason: "the commit's transaction returned no results".into(),
        });
    };
    // No command should fail: the guard checked every written key's type, Redis refuses a
    // transaction with writes that grow memory as a whole at its limit, and both scripts
    // write first with a DEL (never refused). Should one fail anyway, the batch is not
    // counted as done.
    if let Some(Value::ServerError(e)) = results.iter().find(|v| matches!(v, Value::ServerError(_)))
    {
        return Err(Error::Engine {
            op: "commit",
            reason: format!("a command of the commit's transaction failed: {e:?}"),
        });
    }
    Ok((results.pop().unwrap_or(Value::Nil), acked))
}

/// The error of a commit that `WAIT` confirmed on `acked` replicas, fewer than `w` asks.
pub(in crate::redis) fn not_confirmed(w: &ReplicaWait, acked: i64, partition: u32) -> Error {
    Error::Engine {
        op: "commit",
        reason: format!(
            "partition {partition}: commit confirmed by {acked} replica(s) within {:?}, fewer than the {} `commit_replica_wait` asks; not counted as done",
            w.timeout, w.replicas
        ),
    }
}

/// Fails when a master behind `endpoint` (the server, or every master of a cluster) has
/// fewer connected replicas than `w` asks (`connected_slaves` of `INFO replication`).
///
/// # Errors
/// [`Error::InvalidConfig`] naming `commit_replica_wait` and the master; a connection
/// error as [`Error::Connect`].
pub(in crate::redis) fn check_replicas_blocking(
    endpoint: &Endpoint,
    w: &ReplicaWait,
    timeout: Duration,
) -> Result<(), Error> {
    let mut conn = crate::mq::blocking_connection(endpoint, timeout)?;
    let info: Value = redis::cmd("INFO")
        .arg("replication")
        .query(&mut conn)
        .map_err(|e| crate::mq::connect_error(endpoint, e, timeout))?;
    let wanted = w.replicas;
    crate::mq::for_each_info(&info, |text| {
        let found = connected_replicas(text);
        if found >= wanted {
            Ok(())
        } else {
            Err(format!("{found} connected replica(s), fewer than {wanted}"))
        }
    })
    .map_err(|reason| Error::InvalidConfig {
        field: "commit_replica_wait",
        reason: format!(
            "{}: {reason}: every commit would fail to be confirmed (add replicas, or set `None` not to wait)",
            endpoint.address()
        ),
    })
}

/// `connected_slaves` of an `INFO replication` text (0 when absent).
fn connected_replicas(info: &str) -> u32 {
    info.lines()
        .find_map(|l| l.strip_prefix("connected_slaves:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connected_replicas_are_read_from_info_replication() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=...\r\n";
        assert_eq!(connected_replicas(info), 2);
        assert_eq!(connected_replicas("role:master\r\n"), 0);
    }

    #[test]
    fn the_wait_timeout_is_whole_milliseconds_and_never_zero() {
        assert_eq!(
            ReplicaWait::new(1, Duration::from_micros(1500)).timeout_ms(),
            1
        );
        assert_eq!(
            ReplicaWait::new(1, Duration::from_millis(250)).timeout_ms(),
            250
        );
    }
}
