//! Whether a job has caught up with its streams: the check of every partition's committed
//! position in Redis.

use super::progress::PartitionProgress;
use super::shared::JobShared;
use crate::mq::topic::parse_xinfo_groups;
use crate::redis::AckMode;
use crate::Error;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long one caught-up check may always take, however short the wait's timeout: a
/// zero timeout still checks once against a healthy but busy server.
pub(super) const MIN_CHECK: Duration = Duration::from_millis(250);

/// One caught-up check's connection: every wait on it is bounded by `budget` and ends by
/// `end`.
struct Check {
    conn: crate::mq::BlockingConnection,
    budget: Duration,
    end: Instant,
}

impl Check {
    /// The connection, its timeouts set for the next query: what is left until `end` (at
    /// least `MIN_CHECK`, so a zero timeout still checks once), at most the budget.
    fn bound(&mut self) -> Result<&mut crate::mq::BlockingConnection, Error> {
        let left = self.end.saturating_duration_since(Instant::now());
        let t = Some(left.max(MIN_CHECK).min(self.budget));
        self.conn.set_read_timeout(t)?;
        self.conn.set_write_timeout(t)?;
        Ok(&mut self.conn)
    }
}

/// What Redis shows of one partition, read atomically in one slot (one script, so it is
/// one command on a Redis Cluster too): the stream's last entry, the retries due, the
/// groups (none when nothing was written to the partition yet: `XINFO GROUPS` of a missing
/// stream fails), the commit frontier and the lease.
/// KEYS: stream, retry schedule, frontier, lease. ARGV: none.
const PARTITION_VIEW: &str = "local groups = {} \
     if redis.call('EXISTS', KEYS[1]) == 1 then groups = redis.call('XINFO', 'GROUPS', KEYS[1]) end \
     return {redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1), \
     redis.call('ZRANGE', KEYS[2], 0, -1), groups, \
     redis.call('GET', KEYS[3]), redis.call('GET', KEYS[4])}";

/// What Redis shows of one partition ([`PARTITION_VIEW`]): its stream's last entry, the
/// retries due, the groups, the commit frontier and the lease.
type PartitionView = (
    redis::Value,
    Vec<String>,
    redis::Value,
    Option<String>,
    Option<String>,
);

impl JobShared {
    /// Whether every partition of every pipeline is taken, running, and committed up to
    /// its stream's last entry, with no retry scheduled (one script per partition). Every
    /// wait on Redis (connect and each reply) is bounded by `budget` and ends by `end`.
    pub(super) fn caught_up(&self, budget: Duration, end: Instant) -> Result<bool, Error> {
        let progress = self.progress.lock().map(|p| p.clone()).unwrap_or_default();
        let conn = crate::mq::blocking_connection(&self.endpoint, budget)?;
        let mut check = Check { conn, budget, end };
        for (topic, group) in &self.pipelines {
            let partitions: Option<u32> = redis::cmd("HGET")
                .arg(self.keys.meta(topic))
                .arg("partitions")
                .query(check.bound()?)?;
            let Some(partitions) = partitions else {
                return Ok(false);
            };
            for p in 0..partitions {
                // A partition this process does not hold (another process's share, or not
                // taken yet) is judged by what Redis shows committed, like the others.
                let mine = progress
                    .iter()
                    .find(|x| x.partition == p && &x.topic == topic && &x.group == group);
                if !self.partition_caught_up(&mut check, (topic, p, group), mine)? {
                    return Ok(false);
                }
            }
        }
        // A batch leaves `in_flight` after its progress is recorded: nothing in flight now
        // means every commit seen above is in the diagnostics too.
        Ok(self.in_flight.load(Ordering::SeqCst) == 0)
    }

    /// Whether partition `p` is held (here or by another process), did not stop here, has
    /// no retry of its group scheduled, and is committed up to its stream's last entry;
    /// `mine` is its progress in this process, if any.
    fn partition_caught_up(
        &self,
        check: &mut Check,
        (topic, p, group): (&String, u32, &String),
        mine: Option<&PartitionProgress>,
    ) -> Result<bool, Error> {
        if mine.is_some_and(|x| x.stopped.is_some()) {
            return Ok(false);
        }
        let here = mine.filter(|x| x.owned);
        let (last, retries, groups, frontier, lease) = self.view(check, (topic, p, group))?;
        if here.is_none() && lease.is_none() {
            // Neither this process nor another holds it: not taken (yet, or any more).
            return Ok(false);
        }
        let never_taken = mine.is_none_or(|x| x.takes == 0);
        if here.is_none() && never_taken && lease.as_deref().is_some_and(|l| self.holds(l)) {
            // One of our subtasks has just won the lease for the first time and is still
            // loading the partition (restored windows may await a flush): not done yet.
            // After a first take, a partition between two owners of this process (e.g.
            // after an outage) is judged by what Redis shows committed, as before.
            return Ok(false);
        }
        // Retry tokens are `{group}\n{id}` (a bare id: an older retry for every group).
        let ours = format!("{group}\n");
        if retries
            .iter()
            .any(|t| t.starts_with(&ours) || !t.contains('\n'))
        {
            return Ok(false);
        }
        let Some(last) = last_entry_id(&last) else {
            return Ok(true); // empty stream
        };
        let Some(g) = parse_xinfo_groups(&groups)
            .into_iter()
            .find(|g| &g.name == group)
        else {
            return Ok(false);
        };
        Ok(match self.ack_mode {
            AckMode::Xack => g.pending == 0 && id_at_least(&g.last_delivered_id, &last),
            AckMode::Offset => {
                let at_take = here.and_then(|_| {
                    let t = self.taken_at.lock().ok()?;
                    t.get(&(topic.clone(), group.clone(), p)).cloned()
                });
                let committed_here = here.and_then(|x| x.last_committed_id.clone());
                [frontier, at_take, committed_here]
                    .into_iter()
                    .flatten()
                    .any(|c| id_at_least(&c, &last))
            }
        })
    }

    /// Reads what Redis shows of partition `p` in one script.
    fn view(
        &self,
        check: &mut Check,
        (topic, p, group): (&String, u32, &String),
    ) -> Result<PartitionView, Error> {
        Ok(redis::cmd("EVAL")
            .arg(PARTITION_VIEW)
            .arg(4)
            .arg(self.keys.stream(topic, p))
            .arg(self.keys.retry_due(topic, p))
            .arg(self.keys.frontier(topic, p, group))
            .arg(self.keys.lease(topic, p, group))
            .query(check.bound()?)?)
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
