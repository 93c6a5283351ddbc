//! The batch commit: the stores' changes, the sink's outputs and the acknowledgement, in
//! one Lua script under the lease check.
//!
//! - [`AckMode::Xack`]: `HSET`/`HDEL` state (a collection key: `DEL` when replaced, then
//!   `HSET`/`HDEL`, `SADD`/`SREM` or `RPUSH`) + `RPUSH` sink + `XACK` + frontier advance;
//! - [`AckMode::Offset`]: the entries were read with `NOACK`; the same state writes +
//!   `RPUSH` + `SET` of the committed offset (the group's commit-frontier key).
//!
//! With `commit_replica_wait`, `WAIT` follows the script in the same request to the same
//! node; a commit confirmed on fewer replicas than asked fails like one whose reply was
//! lost (the partition is read again from what Redis holds).

use super::context::{guarded, Ctx};
use super::part::Part;
use super::pending::{drain_into, KeyKind, Pending, PendingHash};
use super::persist::WATERMARK_STATE;
use super::replica_wait::{not_confirmed, run_commit};
use super::schema;
use super::{AckMode, RedisListSink};
use crate::api::state::CollectionKind;
use crate::api::Sink;
use crate::mq::frontier::LUA_ADVANCE;
use crate::mq::lease::{Lease, LUA_LEASE_HELD};
use crate::mq::Connection;
use crate::Error;
use redis::{Cmd, Script, Value};
use std::sync::LazyLock;

/// The batch commit (`lua/commit.lua`, after the frontier and lease functions it calls).
static COMMIT: LazyLock<Script> = LazyLock::new(|| {
    let body = include_str!("lua/commit.lua");
    Script::new(&format!("{LUA_ADVANCE}\n{LUA_LEASE_HELD}\n{body}"))
});

/// A Redis sink list's appends: (list key, values).
type ListWrites = Vec<(String, Vec<String>)>;

impl<C, S: Sink<O>, O> Part<C, S, O> {
    /// Adds every store's changes since the last drain to `pending`.
    pub(super) fn drain_changes(&self, pending: &mut Pending) -> Result<(), Error> {
        drain_into(&self.stores, &self.state_keys, pending, &mut Vec::new())
    }

    /// Writes the stores' changes, the sink's outputs and the acknowledgement of `ids` in
    /// one atomic script (`read_after`: see [`Batch::read_after`](super::read::Batch)).
    pub(super) async fn commit(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        mut pending: Pending,
        (ids, read_after): (&[String], Option<&str>),
    ) -> Result<(), Error> {
        if self.has_wanted() {
            // Timers and flushes run only on keys in memory (keys with timers stay); a
            // pass that missed a key must never commit.
            return Err(Error::Engine {
                op: "commit",
                reason: "a key's state was not in memory; taking the partition again".into(),
            });
        }
        self.drain_changes(&mut pending)?;
        self.deliver(ctx)?;
        self.hot.throttle(ctx, &pending).await;
        let lease = self.owner.fenced_unless_held(ctx)?;
        let fence = self.owner.fence(ctx, &lease);
        schema::flush(self.schema.as_ref(), conn, &self.state_keys, fence).await?;
        // 4. Commit state + sink lists + acknowledgement atomically.
        pending.hashes.retain(PendingHash::writes);
        let sampled = self.hot.sample_marks(&ctx.spec.config, &pending);
        let lists = self.list_writes(ctx);
        let call = CommitCall {
            ctx,
            partition: self.partition,
            state_index: self.state_keys.index(),
            lease: &lease,
            ids,
            read_after,
            hashes: &pending.hashes,
            sampled: &sampled,
            lists: &lists,
        };
        let wait = ctx.spec.config.commit_replica_wait();
        let started = std::time::Instant::now();
        let (reply, acked) = run_commit(conn, &COMMIT, &call.eval_cmd(), wait.as_ref()).await?;
        self.metrics.commit_seconds.record(started.elapsed());
        let Value::Array(_) = reply else {
            return Err(self.owner.fenced_error(ctx, lease.token));
        };
        if let (Some(w), Some(acked)) = (wait, acked) {
            if acked < i64::from(w.replicas) {
                return Err(not_confirmed(&w, acked, self.partition));
            }
        }
        for (_, store) in &self.stores {
            store.borrow_mut().committed();
        }
        let sizes: Vec<i64> = redis::from_redis_value(&reply)?;
        for (h, size) in pending.hashes.iter().zip(sizes) {
            if let Ok(size) = u64::try_from(size) {
                let hot = self.hot.sampled_size(ctx, h, size);
                let m = self.metrics.state(&h.operator, &h.state);
                m.size.set(size as f64);
                m.hot_keys.increment(u64::from(hot));
            }
        }
        self.count_commit(&pending);
        Ok(())
    }

    /// A commit's state writes and deletes, and the operators' timer queues, in the
    /// metrics.
    fn count_commit(&mut self, pending: &Pending) {
        for h in &pending.hashes {
            if h.state == WATERMARK_STATE {
                continue;
            }
            let deletes = h.fields.values().filter(|v| v.is_none()).count();
            let writes = h.fields.len() - deletes + h.appends.len() + usize::from(h.replace);
            let m = self.metrics.state(&h.operator, &h.state);
            m.writes.increment(writes as u64);
            m.deletes.increment(deletes as u64);
        }
        for (op, store) in &self.stores {
            if let Some(n) = store.borrow().timers() {
                self.metrics.timer_queue(op.as_str(), n);
            }
        }
    }

    /// 3. Outputs to the sink and the side outputs.
    fn deliver(&mut self, ctx: &Ctx<'_>) -> Result<(), Error> {
        let outputs = std::mem::take(&mut *self.out.borrow_mut());
        for v in outputs {
            guarded(ctx, "invoke", self.sink.invoke(v))?;
        }
        for side in &self.side_outputs {
            guarded(ctx, "invoke side output", side.borrow_mut().deliver())?;
        }
        Ok(())
    }

    /// Every Redis sink of the pipeline, main or side output, commits in this script.
    fn list_writes(&mut self, ctx: &Ctx<'_>) -> ListWrites {
        let (t, p) = (ctx.spec.topic.as_str(), self.partition);
        self.sink
            .take_commit_writes()
            .into_iter()
            .chain(
                self.side_outputs
                    .iter()
                    .filter_map(|side| side.borrow_mut().take_commit_writes()),
            )
            .filter(|w| !w.values.is_empty())
            .map(|w| (RedisListSink::<()>::key_for(&w.list, t, p), w.values))
            .collect()
    }
}

/// One batch commit's arguments (see `lua/commit.lua` for their order in KEYS and ARGV).
struct CommitCall<'a> {
    ctx: &'a Ctx<'a>,
    partition: u32,
    state_index: String,
    lease: &'a Lease,
    ids: &'a [String],
    read_after: Option<&'a str>,
    hashes: &'a [PendingHash],
    /// Per hash, whether the script returns its `HLEN`.
    sampled: &'a [bool],
    lists: &'a ListWrites,
}

impl CommitCall<'_> {
    /// `EVALSHA` of the commit script with its keys and arguments.
    fn eval_cmd(&self) -> Cmd {
        let (ctx, t, p) = (self.ctx, self.ctx.spec.topic.as_str(), self.partition);
        let g = ctx.spec.group.as_str();
        let mut inv = redis::cmd("EVALSHA");
        inv.arg(COMMIT.get_hash())
            .arg(6 + self.hashes.len() + self.lists.len())
            .arg(ctx.keys.stream(t, p))
            .arg(ctx.keys.acked(t, p, g))
            .arg(ctx.keys.frontier(t, p, g))
            .arg(&self.state_index)
            .arg(&self.lease.key)
            .arg(&self.lease.fence);
        for h in self.hashes {
            inv.arg(&h.key);
        }
        for (k, _) in self.lists {
            inv.arg(k);
        }
        self.head_args(&mut inv);
        self.hash_args(&mut inv);
        self.list_args(&mut inv);
        inv
    }

    /// Mode, group, state ttl, lease value and ttl, the ids acknowledged, where they were
    /// read from.
    fn head_args(&self, inv: &mut Cmd) {
        let config = &self.ctx.spec.config;
        let mode = match config.ack_mode() {
            AckMode::Xack => "x",
            AckMode::Offset => "o",
        };
        let ttl = config.state_ttl().map_or(0, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        let lease_ttl = config.mq_options().lease_ttl;
        inv.arg(mode)
            .arg(self.ctx.spec.group.as_str())
            .arg(ttl)
            .arg(&self.lease.value)
            .arg(
                u64::try_from(lease_ttl.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            )
            .arg(self.ids.len());
        for id in self.ids {
            inv.arg(id);
        }
        inv.arg(self.read_after.unwrap_or(""));
    }

    /// Per key: its kind, whether it is replaced, its sets (fields and values, set
    /// members or list elements), its deletes, whether it is sampled.
    fn hash_args(&self, inv: &mut Cmd) {
        inv.arg(self.hashes.len());
        for (h, sample) in self.hashes.iter().zip(self.sampled) {
            let kind = match h.kind {
                KeyKind::State => "i",
                KeyKind::Collection(CollectionKind::Map) => "h",
                KeyKind::Collection(CollectionKind::Set) => "s",
                KeyKind::Collection(CollectionKind::List) => "l",
            };
            inv.arg(kind).arg(if h.replace { "1" } else { "0" });
            let sets = h.fields.iter().filter(|(_, v)| v.is_some()).count();
            inv.arg(sets + h.appends.len());
            for (f, v) in &h.fields {
                match v {
                    Some(_) if kind == "s" => inv.arg(f),
                    Some(v) => inv.arg(f).arg(v),
                    None => continue,
                };
            }
            for v in &h.appends {
                inv.arg(v);
            }
            inv.arg(h.fields.len() - sets);
            for (f, v) in &h.fields {
                if v.is_none() {
                    inv.arg(f);
                }
            }
            inv.arg(if *sample { "1" } else { "0" });
        }
    }

    /// Per sink list: its values.
    fn list_args(&self, inv: &mut Cmd) {
        inv.arg(self.lists.len());
        for (_, values) in self.lists {
            inv.arg(values.len());
            for v in values {
                inv.arg(v);
            }
        }
    }
}
