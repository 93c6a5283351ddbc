//! The job's leader election (`leader_election_enabled`): the processes of a job compete
//! for the lease `C{J}:leader` (`SET NX PX leader_lease_ttl` under a new fencing token
//! from `INCR C{J}:leader:token`); the leader renews it every `leader_renew_interval`
//! (compare-and-expire) and releases it when the job stops (compare-and-delete); a
//! follower tries to take it at the same interval. The partition leases use the same
//! scripts ([`crate::mq::lease`]).

use crate::mq::lease;
use crate::mq::Connection;
use crate::redis::job::JobShared;
use std::time::Duration;

/// Runs the election until the job is cancelled or its subtasks all stopped, then
/// releases the lease if held. A cancel interrupts a connect or a renewal waiting on
/// Redis at once, and the release is best effort by the job's stop deadline.
pub(super) async fn run(job: &JobShared) {
    let options = job.config.checkpoint();
    if !options.leader_election_enabled {
        return;
    }
    let (ttl, every) = (options.leader_lease_ttl, options.leader_renew_interval);
    let mut conn: Option<Connection> = None;
    while !job.signals.stopping() {
        if conn.is_none() {
            tokio::select! {
                () = job.signals.stopping_signal() => break,
                c = job.connect() => conn = c.ok(),
            }
        }
        if let Some(c) = conn.as_mut() {
            tokio::select! {
                () = job.signals.stopping_signal() => break,
                r = tick(job, c, ttl) => if let Err(e) = r {
                    tracing::debug!(job = %job.config.job_name(), "leader election: {e}");
                },
            }
        }
        tokio::select! {
            () = job.signals.stopping_signal() => {}
            () = tokio::time::sleep(every) => {}
        }
    }
    let held = job.checkpoints.lease.lock().ok().and_then(|mut l| l.take());
    if let (Some(held), Some(c)) = (held, conn.as_mut()) {
        let released = tokio::time::timeout_at(job.stop_by(), lease::release(c, &held)).await;
        if !matches!(released, Ok(Ok(true))) {
            tracing::debug!(job = %job.config.job_name(), "leader lease not released; it expires");
        }
    }
}

/// Renews the lease held, or tries to take it; then notes who leads.
async fn tick(job: &JobShared, conn: &mut Connection, ttl: Duration) -> Result<(), crate::Error> {
    let keys = &job.checkpoints.keys;
    let held = job.checkpoints.lease();
    let now = match held {
        Some(l) => {
            if lease::renew(conn, &l, ttl).await? {
                Some(l)
            } else {
                tracing::warn!(job = %job.config.job_name(), token = l.token, "lost the leader lease to another process");
                None
            }
        }
        None => {
            let won = lease::acquire(
                conn,
                &keys.leader(),
                &keys.leader_token(),
                job.config.job_instance_id(),
                ttl,
            )
            .await?;
            if let Some(l) = &won {
                tracing::info!(job = %job.config.job_name(), token = l.token, "leads the job");
            }
            won
        }
    };
    if now.is_some() {
        // Before the lease: whoever sees this process lead sees it as the leader too.
        if let Ok(mut l) = job.checkpoints.leader_instance.lock() {
            *l = Some(job.config.job_instance_id().to_owned());
        }
    }
    if let Ok(mut l) = job.checkpoints.lease.lock() {
        *l = now;
    }
    let value: Option<String> = redis::cmd("GET")
        .arg(keys.leader())
        .query_async(conn)
        .await?;
    let leader = value.and_then(|v| v.split_once(' ').map(|(_, instance)| instance.to_string()));
    if let Ok(mut l) = job.checkpoints.leader_instance.lock() {
        *l = leader;
    }
    refresh_latest(job, conn).await;
    job.signals.signal_change();
    Ok(())
}

/// This process's view of the latest complete checkpoint, whoever completed it (a new
/// leader's included; the id counter itself is in Redis, so ids simply go on).
async fn refresh_latest(job: &JobShared, conn: &mut Connection) {
    let newest: Result<Vec<u64>, _> = redis::cmd("ZRANGE")
        .arg(job.checkpoints.keys.complete())
        .arg(-1)
        .arg(-1)
        .query_async(conn)
        .await;
    if let Some(id) = newest.ok().and_then(|v| v.last().copied()) {
        job.checkpoints.saw_complete(id);
    }
}
