//! Whether a job has caught up with its streams: the check of every partition's committed
//! position in Redis, and whether a change here or only Redis can move what it waits for.

use super::progress::PartitionProgress;
use super::shared::JobShared;
use crate::mq::topic::parse_xinfo_groups;
use crate::mq::Connection;
use crate::redis::AckMode;
use crate::Error;
use redis::Script;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::LazyLock;
use std::time::Duration;

/// How long one caught-up check may always take, however short the wait's timeout: a
/// zero timeout still checks once against a healthy but busy server.
pub(super) const MIN_CHECK: Duration = Duration::from_millis(250);

/// What Redis shows of one partition, read atomically in one slot (one script, so it is
/// one command on a Redis Cluster too).
static PARTITION_VIEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/partition_view.lua")));

/// What Redis shows of one partition ([`PARTITION_VIEW`]): its stream's last entry, the
/// retries due, the groups, the commit frontier, the lease, and whether it awaits an idle
/// flush.
type PartitionView = (
    redis::Value,
    Vec<String>,
    redis::Value,
    Option<String>,
    Option<String>,
    bool,
);

/// What a wait waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Goal {
    /// Every partition held by a live subtask and committed up to its stream's end.
    CaughtUp,
    /// Caught up, and no partition awaits an idle flush.
    Flushed,
}

/// What one caught-up check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Check {
    /// Caught up.
    CaughtUp,
    /// Not yet, and what it waits for is work of this process (a partition it holds
    /// reading, committing or being taken, records in flight): that work signals the job's
    /// change signal when it moves.
    AwaitingHere,
    /// Not yet, and what it waits for shows only in Redis: a partition another process
    /// holds, or nobody, a retry scheduled, a topic or group not created yet.
    AwaitingRedis,
}

impl JobShared {
    /// Whether every partition of every pipeline is taken, running, and committed up to
    /// its stream's last entry, with no retry scheduled (one script per partition, on
    /// `conn`), and if not, what it waits for. Each reply is bounded by `conn`'s response
    /// timeout.
    ///
    /// # Errors
    /// [`Error::Redis`] when a call fails.
    pub(super) async fn caught_up(
        &self,
        conn: &mut Connection,
        goal: Goal,
    ) -> Result<Check, Error> {
        let progress = self.partitions.progress();
        for (topic, group) in &self.pipelines {
            let members = self.live_members(conn, topic, group).await?;
            let partitions: Option<u32> = redis::cmd("HGET")
                .arg(self.keys.meta(topic))
                .arg("partitions")
                .query_async(conn)
                .await?;
            let Some(partitions) = partitions else {
                return Ok(Check::AwaitingRedis);
            };
            for p in 0..partitions {
                // A partition this process does not hold (another process's share, or not
                // taken yet) is judged by what Redis shows committed, like the others.
                let mine = progress
                    .iter()
                    .find(|x| x.partition == p && &x.topic == topic && &x.group == group);
                let mut view = self.view(conn, (topic, p, group)).await?;
                if view
                    .4
                    .as_deref()
                    .is_some_and(|l| !self.subtasks.holds(l) && !members.live(l))
                {
                    // Its owner missed its heartbeats (killed, frozen, cut off): nobody
                    // works on it until its lease expires and a live subtask takes it.
                    view.4 = None;
                }
                let awaits_flush = goal == Goal::Flushed && view.5;
                let check = match self.partition_caught_up((topic, p, group), mine, view) {
                    Check::CaughtUp if awaits_flush && mine.is_some_and(|x| x.owned) => {
                        Check::AwaitingHere
                    }
                    // Flushed by another process, or by the next owner.
                    Check::CaughtUp if awaits_flush => Check::AwaitingRedis,
                    check => check,
                };
                let check = match check {
                    Check::CaughtUp => {
                        let here = mine.is_some_and(|x| x.owned);
                        self.other_inputs_caught_up(conn, (topic, p, group), here)
                            .await?
                    }
                    check => check,
                };
                if check != Check::CaughtUp {
                    return Ok(check);
                }
            }
        }
        // A batch leaves `in_flight` after its progress is recorded: nothing in flight now
        // means every commit seen above is in the diagnostics too.
        Ok(if self.in_flight.load(Ordering::SeqCst) == 0 {
            Check::CaughtUp
        } else {
            Check::AwaitingHere
        })
    }

    /// Whether partition `p` is held (here or by another process), did not stop here, has
    /// no retry of its group scheduled, and is committed up to its stream's last entry;
    /// `mine` is its progress in this process, if any, `view` what Redis shows of it.
    fn partition_caught_up(
        &self,
        (topic, p, group): (&String, u32, &String),
        mine: Option<&PartitionProgress>,
        (last, retries, groups, frontier, lease, _): PartitionView,
    ) -> Check {
        if mine.is_some_and(|x| x.stopped.is_some()) {
            // It reads nothing more; the other partitions' changes still wake the wait.
            return Check::AwaitingHere;
        }
        let here = mine.filter(|x| x.owned);
        if here.is_none() && lease.is_none() {
            // Neither this process nor another holds it: not taken (yet, or any more).
            return Check::AwaitingRedis;
        }
        let never_taken = mine.is_none_or(|x| x.takes == 0);
        if here.is_none() && never_taken && lease.as_deref().is_some_and(|l| self.subtasks.holds(l))
        {
            // One of our subtasks has just won the lease for the first time and is still
            // loading the partition (restored windows may await a flush): not done yet.
            // After a first take, a partition between two owners of this process (e.g.
            // after an outage) is judged by what Redis shows committed, as before.
            return Check::AwaitingHere;
        }
        // What only Redis shows moves it from here on, unless this process holds it.
        let awaiting = if here.is_some() {
            Check::AwaitingHere
        } else {
            Check::AwaitingRedis
        };
        // Retry tokens are `{group}\n{id}` (a bare id: an older retry for every group).
        let ours = format!("{group}\n");
        if retries
            .iter()
            .any(|t| t.starts_with(&ours) || !t.contains('\n'))
        {
            // Promoted when due, by whichever process holds it, or by another job.
            return Check::AwaitingRedis;
        }
        let Some(last) = last_entry_id(&last) else {
            return Check::CaughtUp; // empty stream
        };
        let Some(g) = parse_xinfo_groups(&groups)
            .into_iter()
            .find(|g| &g.name == group)
        else {
            return Check::AwaitingRedis;
        };
        let committed = match self.config.ack_mode() {
            AckMode::Xack => g.pending == 0 && id_at_least(&g.last_delivered_id, &last),
            AckMode::Offset => {
                let at_take = here.and_then(|_| {
                    let handle = self.partitions.find(topic, group, p)?;
                    let at = handle.lock().taken_at.clone();
                    at
                });
                let committed_here = here.and_then(|x| x.last_committed_id.clone());
                [frontier, at_take, committed_here]
                    .into_iter()
                    .flatten()
                    .any(|c| id_at_least(&c, &last))
            }
        };
        if committed {
            Check::CaughtUp
        } else {
            awaiting
        }
    }

    /// Whether partition `p` of every other input of the pipeline reading (`topic`,
    /// `group`) is committed up to its stream's last entry (the position the job keeps in
    /// `topic`'s partition), with no retry of its group scheduled; `here`: this process
    /// holds the job partition.
    async fn other_inputs_caught_up(
        &self,
        conn: &mut Connection,
        (topic, p, group): (&String, u32, &String),
        here: bool,
    ) -> Result<Check, Error> {
        let Some(inputs) = self.other_inputs.get(&(topic.clone(), group.clone())) else {
            return Ok(Check::CaughtUp);
        };
        let awaiting = if here {
            Check::AwaitingHere
        } else {
            Check::AwaitingRedis
        };
        for (input, input_group) in inputs {
            // A broadcast input's one partition is read by every job partition.
            let broadcast = (self.broadcast_inputs).contains(&(input.clone(), input_group.clone()));
            let at = if broadcast { 0 } else { p };
            let retries: Vec<String> = redis::cmd("ZRANGE")
                .arg(self.keys.retry_due(input, at))
                .arg(0)
                .arg(-1)
                .query_async(conn)
                .await?;
            let ours = format!("{input_group}\n");
            if retries
                .iter()
                .any(|t| t.starts_with(&ours) || !t.contains('\n'))
            {
                return Ok(Check::AwaitingRedis);
            }
            let last: redis::Value = redis::cmd("XREVRANGE")
                .arg(self.keys.stream(input, at))
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query_async(conn)
                .await?;
            let Some(last) = last_entry_id(&last) else {
                continue;
            };
            let key = self
                .keys
                .input_position(topic, p, group, input, input_group);
            let position: Option<String> = redis::cmd("GET").arg(key).query_async(conn).await?;
            if !position.is_some_and(|c| id_at_least(&c, &last)) {
                return Ok(awaiting);
            }
        }
        Ok(Check::CaughtUp)
    }

    /// Reads what Redis shows of partition `p` in one script.
    async fn view(
        &self,
        conn: &mut Connection,
        (topic, p, group): (&String, u32, &String),
    ) -> Result<PartitionView, Error> {
        Ok(PARTITION_VIEW
            .key(self.keys.stream(topic, p))
            .key(self.keys.retry_due(topic, p))
            .key(self.keys.frontier(topic, p, group))
            .key(self.keys.lease(topic, p, group))
            .key(self.keys.flush_pending(topic, p, group))
            .invoke_async(conn)
            .await?)
    }
}

impl JobShared {
    /// The subtasks reading (`topic`, `group`) whose membership heartbeat is on time (one
    /// `HGETALL` of the assignment hash).
    ///
    /// # Errors
    /// [`Error::Redis`] when the call fails.
    async fn live_members(
        &self,
        conn: &mut Connection,
        topic: &str,
        group: &str,
    ) -> Result<LiveMembers, Error> {
        let fields: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(self.keys.assignment(topic, group))
            .query_async(conn)
            .await?;
        let opts = self.config.mq_options();
        // A heartbeat sets the expiry to its time + `lease_ttl`, every renew interval: one
        // whose last heartbeat is more than two intervals old is late.
        let (ttl, renew) = (ms(opts.lease_ttl), ms(opts.lease_renew_interval));
        let on_time_after = crate::mq::topic::now_ms()
            .saturating_add(ttl)
            .saturating_sub(renew.saturating_mul(2));
        let names = (fields.into_iter())
            .filter_map(|(f, v)| Some((f.strip_prefix("m:")?.to_owned(), v.parse::<i64>().ok()?)))
            .filter(|(_, expiry)| *expiry > on_time_after)
            .map(|(name, _)| name)
            .collect();
        Ok(LiveMembers(names))
    }
}

/// `d` in ms, saturating.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The consumer names of the subtasks of a (topic, group) whose heartbeat is on time.
struct LiveMembers(HashSet<String>);

impl LiveMembers {
    /// Whether lease value `lease` (`"{fencing token} {owner}"`) names one of them.
    fn live(&self, lease: &str) -> bool {
        let owner = lease.split_once(' ').map_or(lease, |(_, owner)| owner);
        self.0.contains(owner)
    }
}

/// The id of the entry in an `XREVRANGE .. COUNT 1` reply.
fn last_entry_id(v: &redis::Value) -> Option<String> {
    let redis::Value::Array(entries) = v else {
        return None;
    };
    match entries.first()? {
        redis::Value::Array(entry) => redis::from_redis_value(entry.first()?).ok(),
        _ => None,
    }
}

/// `ms-seq` as a pair (a missing sequence counts as 0).
fn id_parts(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// Whether stream id `a` ≥ `b` (false when either does not parse).
pub(crate) fn id_at_least(a: &str, b: &str) -> bool {
    matches!((id_parts(a), id_parts(b)), (Some(a), Some(b)) if a >= b)
}
