//! The batch commit: the stores' changes, the sink's outputs and the acknowledgement, in
//! one transaction under the lease check:
//!
//! `MULTI` → guard script (lease check; when fenced, or when a written key holds another
//! type, moves the written keys aside) → the writes as plain commands (`HSET`/`HDEL`
//! state; a collection key: `DEL` when replaced, then `HSET`/`HDEL`, `SADD`/`SREM` or
//! `RPUSH`; `RPUSH` sink lists; `SADD` to the state index; `PEXPIRE` with a state TTL) →
//! tail script (puts the keys back after a refusal; else acknowledges) → `EXEC`.
//!
//! - [`AckMode::Xack`](crate::redis::AckMode::Xack): the ids are `XACK`ed and the frontier advanced; when the batch is
//!   every entry after the group's position before the read (a plain read of new
//!   entries), `XACK` is a plain command of the transaction (the guard moves the stream
//!   aside too when it refuses) and the tail moves the frontier to the last id; otherwise
//!   the tail `XACK`s them;
//! - [`AckMode::Offset`](crate::redis::AckMode::Offset): the entries were read with `NOACK`; the tail `SET`s the
//!   committed offset (the group's commit-frontier key).
//!
//! The positions of a pipeline's other inputs (see [`inputs`](super::inputs)) are plain
//! `SET`s among the writes, in the partition's slot, moved aside like any written key
//! when the guard refuses.
//!
//! The writes are not script arguments because Redis converts every argument of a script
//! into a Lua string and back, which costs several times the writes themselves (500
//! fields into a 10,000-field hash: `HSET` 0.08–0.11 ms, the same from a script
//! 0.27–0.37 ms; `redis_engine_bench -- --lua-args`). Guard and
//! tail go as `EVAL` (an `EVALSHA` the server lost by a restart would fail inside the
//! transaction while the writes ran unchecked).
//!
//! With `commit_replica_wait`, `WAIT` follows `EXEC` in the same request to the same
//! node; a commit confirmed on fewer replicas than asked fails like one whose reply was
//! lost (the partition is read again from what Redis holds).

pub(crate) mod replica_wait;
pub(crate) mod script;

use crate::api::state::CollectionKind;
use crate::api::Sink;
use crate::mq::lease::ms;
use crate::mq::Connection;
use crate::redis::partition::ack;
use crate::redis::partition::commit::replica_wait::{not_confirmed, run_commit};
use crate::redis::partition::commit::script::{
    GuardCall, KeyType, SizeOf, TailAck, TailCall, TailKeys, Written, GUARD, TAIL,
};
use crate::redis::partition::context::{guarded, Ctx};
use crate::redis::partition::dedup::DedupMarks;
use crate::redis::partition::two_phase::Prepared;
use crate::redis::partition::Part;
use crate::redis::sinks::commit_writes::{check_key_types, SinkPlace, SinkWrite};
use crate::redis::state::pending::{KeyKind, Pending, PendingHash};
use crate::redis::state::persist::WATERMARK_STATE;
use crate::redis::state::schema;
use crate::Error;
use redis::{Pipeline, Value};

/// The Redis sinks' writes of a batch.
type SinkWrites = Vec<SinkWrite>;

impl<C, S: Sink<O>, O> Part<C, S, O> {
    /// Writes the stores' changes, the sink's outputs and the acknowledgement of `ids` in
    /// one transaction (`read_after`: see [`Batch::read_after`](crate::redis::partition::read::Batch)).
    pub(in crate::redis) async fn commit(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        mut pending: Pending,
        (ids, read_after): (&[String], Option<&str>),
        dedup: Option<&DedupMarks>,
    ) -> Result<(), Error> {
        if self.runner.has_wanted() {
            // Timers and flushes run only on keys in memory (keys with timers stay); a
            // pass that missed a key must never commit.
            return Err(Error::Engine {
                op: "commit",
                reason: "a key's state was not in memory; taking the partition again".into(),
            });
        }
        self.runner.drain(&mut pending)?;
        pending.dedup();
        self.deliver(ctx)?;
        self.hot.throttle(ctx, &pending).await;
        let lease = self.owner.fenced_unless_held(ctx)?;
        let fence = self.owner.fence(ctx, &lease);
        let guard = fence.parts();
        schema::flush(self.schema.as_ref(), conn, self.runner.keys(), fence).await?;
        // 4. Commit state + sink lists + acknowledgement atomically.
        pending.hashes.retain(PendingHash::writes);
        let sampled = self.hot.sample_marks(&ctx.spec.config, &pending);
        let offset = self.commit_offset(ids, lease.token);
        let mut lists = self.list_writes(ctx, &offset);
        check_key_types(&lists)?;
        for w in &mut lists {
            w.check_seen(conn).await?;
        }
        // Phase 1 of the two-phase sinks; their handles commit with the batch.
        let prepared = self.pre_commit_two_phase(ctx, lease.token, &offset).await?;
        let handles = (self.handles_key_for(&prepared), prepared);
        let flush_mark = self.flush_mark(ctx);
        let positions = self.owner.others.positions();
        let call = CommitCall {
            ctx,
            partition: self.partition,
            state_index: self.runner.keys().index(),
            stream: ctx.keys.stream(ctx.spec.topic.as_str(), self.partition),
            guard,
            ids,
            read_after,
            hashes: &pending.hashes,
            sampled: &sampled,
            lists: &lists,
            dedup: dedup.filter(|d| !d.keys.is_empty()),
            two_phase: &handles,
            flush_mark: flush_mark.as_ref(),
            positions: &positions,
        };
        let wait = ctx.spec.config.commit_replica_wait();
        let started = std::time::Instant::now();
        // A lost reply or a failed command leaves the prepared transactions to the next
        // take's recovery: Redis may have recorded them.
        let (reply, acked) = run_commit(conn, call.pipeline(), wait.as_ref()).await?;
        self.metrics.commit_seconds.record(started.elapsed());
        let sizes: Vec<i64> = match reply {
            Value::Array(_) => redis::from_redis_value(&reply)?,
            refused => return Err(self.refused(ctx, refused, lease.token, &handles.1).await),
        };
        if let (Some(w), Some(acked)) = (wait, acked) {
            if acked < i64::from(w.replicas) {
                return Err(not_confirmed(&w, acked, self.partition));
            }
        }
        for (_, store) in self.runner.stores() {
            store.borrow_mut().committed();
        }
        self.flush.committed();
        self.owner.others.committed();
        self.count_commit(ctx, &pending, sizes);
        // Phase 2: a failure takes the partition again, whose recovery commits them.
        self.commit_two_phase(&handles.1).await
    }

    /// What names the commit's outputs: its last id; for timers and idle flushes, which
    /// read no input, `t{token}.{n}`: unique per owner (its fencing token) and per such
    /// commit of its ownership.
    fn commit_offset(&mut self, ids: &[String], token: u64) -> String {
        match ids.last() {
            Some(last) => last.clone(),
            None => {
                self.no_input_commits += 1;
                format!("t{token}.{}", self.no_input_commits)
            }
        }
    }

    /// The write of Redis's flush mark, when Redis may hold another value (see
    /// [`FlushState::mark_to_write`](crate::redis::partition::flush::FlushState::mark_to_write)).
    fn flush_mark(&mut self, ctx: &Ctx<'_>) -> Option<(String, bool)> {
        let awaiting = self.flush.mark_to_write()?;
        let key = (ctx.keys).flush_pending(&ctx.spec.topic, self.partition, &ctx.spec.group);
        Some((key, awaiting))
    }

    /// Commits what the chain holds without input (timers, an idle flush, a flush mark).
    ///
    /// # Errors
    /// As [`commit`](Self::commit).
    pub(in crate::redis) async fn commit_no_input(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        pending: Pending,
    ) -> Result<(), Error> {
        self.commit(ctx, conn, pending, (&[], None), None).await
    }

    /// The error of a commit the guard refused (nothing of it applied: the two-phase
    /// sinks' transactions are aborted): another owner took the partition, or a written
    /// key holds another type.
    async fn refused(
        &mut self,
        ctx: &Ctx<'_>,
        reply: Value,
        token: u64,
        prepared: &Prepared,
    ) -> Error {
        self.abort_two_phase(ctx, prepared).await;
        match reply {
            Value::BulkString(why) if why.starts_with(b"WRONGTYPE") => Error::Engine {
                op: "commit",
                reason: format!(
                    "{}; nothing of the batch was written",
                    String::from_utf8_lossy(&why)
                ),
            },
            _ => self.owner.fenced_error(ctx, token),
        }
    }

    /// A commit's state writes, deletes and sampled sizes (`sizes`, per hash), and the
    /// operators' timer queues, in the metrics.
    fn count_commit(&mut self, ctx: &Ctx<'_>, pending: &Pending, sizes: Vec<i64>) {
        for (h, size) in pending.hashes.iter().zip(sizes) {
            if let Ok(size) = u64::try_from(size) {
                let hot = self.hot.sampled_size(ctx, h, size);
                let m = self.metrics.state(&h.operator, &h.state);
                m.size.set(size as f64);
                m.hot_keys.increment(u64::from(hot));
            }
        }
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
        for (op, store) in self.runner.stores() {
            if let Some(n) = store.borrow().timers() {
                self.metrics.timer_queue(op.as_str(), n);
            }
        }
    }

    /// 3. Outputs to the sink and the side outputs.
    fn deliver(&mut self, ctx: &Ctx<'_>) -> Result<(), Error> {
        let outputs = self.runner.take_outputs();
        for v in outputs {
            guarded(ctx, "invoke", self.sink.invoke(v))?;
        }
        guarded(ctx, "flush", self.sink.flush())?;
        for side in self.runner.side_outputs() {
            guarded(ctx, "invoke side output", side.borrow_mut().deliver())?;
        }
        Ok(())
    }

    /// Every Redis sink of the pipeline, main or side output, commits in this script.
    fn list_writes(&mut self, ctx: &Ctx<'_>, offset: &str) -> SinkWrites {
        let (t, p) = (ctx.spec.topic.as_str(), self.partition);
        let offset = offset.to_owned();
        let prefix = &ctx.spec.config.mq_options().key_prefix;
        let at = SinkPlace {
            topic: t,
            partition: p,
            keys: &ctx.keys,
            mq_prefix: prefix,
            job: &ctx.job_name,
            group: &ctx.spec.group,
            offset,
        };
        self.sink
            .take_commit_writes()
            .into_iter()
            .chain(
                (self.runner.side_outputs().iter())
                    .filter_map(|side| side.borrow_mut().take_commit_writes()),
            )
            .filter(|w| !w.write.is_empty())
            .map(|w| SinkWrite::new(w, &at))
            .collect()
    }
}

/// One batch commit's keys and values (see `lua/commit_guard.lua` and
/// `lua/commit_tail.lua` for the scripts' KEYS and ARGV).
struct CommitCall<'a> {
    ctx: &'a Ctx<'a>,
    partition: u32,
    state_index: String,
    /// The partition's stream.
    stream: String,
    /// The lease key, fencing counter, lease value held and lease ttl in ms (the guard's
    /// check, as [`Fence::parts`](crate::mq::lease::Fence::parts) gives them).
    guard: (String, String, &'a str, u64),
    ids: &'a [String],
    read_after: Option<&'a str>,
    hashes: &'a [PendingHash],
    /// Per hash, whether the tail returns its size.
    sampled: &'a [bool],
    lists: &'a SinkWrites,
    /// Input deduplication marks of the batch's processed messages.
    dedup: Option<&'a DedupMarks>,
    /// The partition's two-phase handles hash and the batch's prepared (sink, handle).
    two_phase: &'a (String, Prepared),
    /// The partition's flush-pending key and whether it is set (`SET`) or cleared
    /// (`DEL`), when Redis may hold another value.
    flush_mark: Option<&'a (String, bool)>,
    /// The other inputs' positions to write: (key, last id).
    positions: &'a [(String, String)],
}

/// The Redis type a written key must have (or have none).
fn type_of(kind: KeyKind) -> KeyType {
    match kind {
        KeyKind::State | KeyKind::Collection(CollectionKind::Map) => KeyType::Hash,
        KeyKind::Collection(CollectionKind::Set) => KeyType::Set,
        KeyKind::Collection(CollectionKind::List) => KeyType::List,
    }
}

impl<'a> CommitCall<'a> {
    /// The written keys in the scripts' order (each key's hash, the sink lists, the state
    /// index when a state hash is written) with the type each must have.
    fn written(&self) -> Vec<Written<'_>> {
        let two_phase = (!self.two_phase.1.is_empty()).then_some(self.two_phase.0.as_str());
        let mut keys: Vec<Written<'_>> = (self.hashes.iter())
            .map(|h| (h.key.as_str(), type_of(h.kind)))
            .chain(self.lists.iter().flat_map(SinkWrite::keys))
            .chain(self.dedup.map(|d| (d.key.as_str(), KeyType::SortedSet)))
            .chain(two_phase.map(|k| (k, KeyType::Hash)))
            .chain(self.flush_mark.map(|(k, _)| (k.as_str(), KeyType::String)))
            .chain(
                self.positions
                    .iter()
                    .map(|(k, _)| (k.as_str(), KeyType::String)),
            )
            .collect();
        if self.hashes.iter().any(|h| h.kind == KeyKind::State) {
            keys.push((self.state_index.as_str(), KeyType::Set));
        }
        if self.acknowledging().0 {
            keys.push((self.stream.as_str(), KeyType::Stream));
        }
        // Two sinks may append to one list: the guard moves each key aside once (a second
        // entry would make the tail delete the key it just put back).
        let mut seen = std::collections::HashSet::with_capacity(keys.len());
        keys.retain(|(k, _)| seen.insert(*k));
        keys
    }

    /// Whether the transaction `XACK`s the ids as a plain command, what the tail does and
    /// the ids it gets (see [`ack::acknowledging`]).
    fn acknowledging(&self) -> (bool, TailAck, &'a [String]) {
        ack::acknowledging(self.ctx.spec.config.ack_mode(), self.ids, self.read_after)
    }

    /// `MULTI`, the guard, the writes, the tail, `EXEC` (a plain pipeline: the caller may
    /// add `WAIT` after it).
    fn pipeline(&self) -> Pipeline {
        let (ctx, t, p) = (self.ctx, self.ctx.spec.topic.as_str(), self.partition);
        let g = ctx.spec.group.as_str();
        let written = self.written();
        let undo = ctx.keys.commit_undo(t, p, g);
        let (lease, fence, held, lease_ttl_ms) = &self.guard;
        let mut pipe = redis::pipe();
        pipe.cmd("MULTI");
        let guard = GuardCall {
            lease,
            fence,
            undo: &undo,
            written: &written,
            held,
            lease_ttl_ms: *lease_ttl_ms,
        };
        pipe.cmd("EVAL").arg(GUARD.as_str()).arg(&guard);
        self.writes(&mut pipe);
        let (native_ack, ack, ids) = self.acknowledging();
        if native_ack {
            pipe.cmd("XACK").arg(&self.stream).arg(g).arg(self.ids);
        }
        let sizes: Vec<SizeOf> = (0..written.len())
            .map(|i| {
                let asked = self.sampled.get(i).copied().unwrap_or(false);
                SizeOf(
                    self.hashes
                        .get(i)
                        .filter(|_| asked)
                        .map(|h| type_of(h.kind)),
                )
            })
            .collect();
        let keys = TailKeys {
            stream: self.stream.clone(),
            acked: ctx.keys.acked(t, p, g),
            frontier: ctx.keys.frontier(t, p, g),
            undo,
            settled: ctx.keys.settled(t, p, g),
        };
        let tail = TailCall {
            keys: &keys,
            written: &written,
            ack,
            group: g,
            ids,
            read_after: self.read_after,
            sizes: &sizes,
        };
        pipe.cmd("EVAL").arg(TAIL.as_str()).arg(&tail);
        pipe.cmd("EXEC");
        pipe
    }

    /// The batch's writes as plain commands: per key its delete when replaced, sets and
    /// deletes (or appends), expiry; the sink lists' appends; the state index.
    fn writes(&self, pipe: &mut Pipeline) {
        let ttl = self.ctx.spec.config.state_ttl().map(ms);
        for h in self.hashes {
            if h.replace {
                pipe.cmd("DEL").arg(&h.key);
            }
            let (set, del) = match h.kind {
                KeyKind::Collection(CollectionKind::Set) => ("SADD", Some("SREM")),
                KeyKind::Collection(CollectionKind::List) => ("RPUSH", None),
                _ => ("HSET", Some("HDEL")),
            };
            let pairs = set == "HSET";
            let sets = h.fields.values().filter(|v| v.is_some()).count() + h.appends.len();
            if sets > 0 {
                let cmd = pipe.cmd(set).arg(&h.key);
                for (f, v) in h.fields.iter() {
                    match v {
                        Some(v) if pairs => cmd.arg(f).arg(v),
                        Some(_) => cmd.arg(f),
                        None => continue,
                    };
                }
                for v in &h.appends {
                    cmd.arg(v);
                }
            }
            let deletes = sets < h.fields.len() + h.appends.len();
            if let Some(del) = del.filter(|_| deletes) {
                let cmd = pipe.cmd(del).arg(&h.key);
                for (f, v) in h.fields.iter() {
                    if v.is_none() {
                        cmd.arg(f);
                    }
                }
            }
            if let Some(ttl) = ttl {
                pipe.cmd("PEXPIRE").arg(&h.key).arg(ttl);
            }
        }
        for w in self.lists {
            w.push(pipe);
        }
        if let Some(d) = self.dedup {
            let zadd = pipe.cmd("ZADD").arg(&d.key);
            for k in &d.keys {
                zadd.arg(d.expiry_ms).arg(k);
            }
            pipe.cmd("ZREMRANGEBYSCORE")
                .arg(&d.key)
                .arg("-inf")
                .arg(d.now_ms);
        }
        let (handles, prepared) = self.two_phase;
        if !prepared.is_empty() {
            let hset = pipe.cmd("HSET").arg(handles);
            for (sink, handle) in prepared {
                hset.arg(sink).arg(handle);
            }
        }
        let index: Vec<&str> = (self.hashes.iter())
            .filter(|h| h.kind == KeyKind::State)
            .map(|h| h.key.as_str())
            .collect();
        if !index.is_empty() {
            pipe.cmd("SADD").arg(&self.state_index).arg(index);
        }
        match self.flush_mark {
            Some((key, true)) => pipe.cmd("SET").arg(key).arg(1),
            Some((key, false)) => pipe.cmd("DEL").arg(key),
            None => &mut *pipe,
        };
        for (key, id) in self.positions {
            pipe.cmd("SET").arg(key).arg(id);
        }
    }
}
