//! A partition owner writing its part of the open checkpoints, at a batch boundary.
//!
//! The part is a server-side copy (see [`keys`](crate::redis::job::checkpoint::keys)) in steps, each a script
//! that first checks the partition's lease and fencing token: a begin step (copies of
//! the index, schema, frontier and acked set; an earlier owner's unfinished copy
//! removed), one step per chunk of 500 fields of each state hash (`HSCAN`, with the
//! chunk's per-key collections), and an end step writing the part record. The owner
//! commits nothing between the steps, so the copy is the state as of its last commit
//! — consistent with the offset copied with it — and no step blocks Redis for long.
//!
//! Every step also checks the partition's checkpoint registry (see
//! [`keys`](crate::redis::job::checkpoint::keys)): the begin step registers the checkpoint `live` unless
//! retention deleted it there, and the later steps write only while it is `live`; the
//! report to the coordinator (the parts hash) is written only while the checkpoint's
//! record exists. An owner whose list of open checkpoints is a little old so never
//! writes a part of a checkpoint retention deleted.

use crate::api::Sink;
use crate::mq::lease::is_fenced_reply;
use crate::mq::Connection;
use crate::redis::job::checkpoint::store::COPY_CHUNK;
use crate::redis::job::checkpoint::{now_ms, part_field};
use crate::redis::partition::context::Ctx;
use crate::redis::partition::Part;
use crate::redis::state::persist::{PANES_STATE, ROLLING_STATE, TIMERS_STATE, WATERMARK_STATE};
use crate::Error;
use redis::{Script, Value};
use std::sync::LazyLock;
use std::time::Duration;
use tokio::time::Instant;

static BEGIN: LazyLock<Script> =
    crate::mq::fenced_script!(include_str!("lua/checkpoint_part_begin.lua"));
static END: LazyLock<Script> =
    crate::mq::fenced_script!(include_str!("lua/checkpoint_part_end.lua"));
static REPORT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/checkpoint_part_report.lua")));

/// Fields per copy step.
const CHUNK_FIELDS: usize = 500;

/// How often a subtask looks for open checkpoints in Redis (a checkpoint opened by this
/// process is seen at once).
const POLL_EVERY: Duration = Duration::from_millis(100);

/// A subtask's view of the job's open checkpoints.
pub(crate) struct OpenCheckpoints {
    /// (id, deadline in ms since the Unix epoch).
    pub(crate) open: Vec<(u64, u64)>,
    next_poll: Instant,
    opened: tokio::sync::watch::Receiver<u64>,
}

impl OpenCheckpoints {
    pub(crate) fn new(ctx: &Ctx<'_>) -> Self {
        OpenCheckpoints {
            open: Vec::new(),
            next_poll: Instant::now(),
            opened: ctx.job.checkpoints.opened.subscribe(),
        }
    }

    /// Reads the open checkpoints when due (every 100 ms, or at once after this process
    /// opened one). A failed read keeps the last list.
    pub(crate) async fn poll(&mut self, ctx: &Ctx<'_>, conn: &mut Connection) {
        let changed = self.opened.has_changed().unwrap_or(false);
        if !changed && Instant::now() < self.next_poll {
            return;
        }
        self.opened.mark_unchanged();
        self.next_poll = Instant::now() + POLL_EVERY;
        let read: Result<Vec<(u64, f64)>, _> = redis::cmd("ZRANGE")
            .arg(ctx.job.checkpoints.keys.open())
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(conn)
            .await;
        if let Ok(open) = read {
            let now = now_ms();
            self.open = (open.into_iter())
                .map(|(id, deadline)| (id, deadline as u64))
                .filter(|(_, deadline)| *deadline > now)
                .collect();
        }
    }
}

/// What writing a part came to.
enum Wrote {
    /// The part is in Redis (written now, or by an earlier owner).
    Part,
    /// The checkpoint's deadline passed first: it fails without this part.
    TooLate,
    /// Retention deleted the checkpoint: nothing (more) written.
    Gone,
}

impl<C, S: Sink<O>, O> Part<C, S, O> {
    /// Writes this partition's part of every open checkpoint it has not written yet.
    /// Call at a batch boundary of a taken partition.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the lease passed to another owner; Redis errors.
    pub(crate) async fn write_checkpoint_parts(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        open: &[(u64, u64)],
    ) -> Result<(), Error> {
        self.checkpoints_written
            .retain(|id| open.iter().any(|(o, _)| o == id));
        for &(id, deadline) in open {
            if self.checkpoints_written.contains(&id) {
                continue;
            }
            let started = std::time::Instant::now();
            if let Wrote::Part = self.write_part(ctx, conn, id, deadline).await? {
                self.metrics
                    .checkpoint_part_seconds
                    .record(started.elapsed());
            }
            self.checkpoints_written.push(id);
        }
        Ok(())
    }

    async fn write_part(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        id: u64,
        deadline: u64,
    ) -> Result<Wrote, Error> {
        if now_ms() > deadline {
            return Ok(Wrote::TooLate);
        }
        let lease = self.owner.fenced_unless_held(ctx)?;
        let fence = self.owner.fence(ctx, &lease);
        let keys = &ctx.job.checkpoints.keys;
        let step = Step {
            fence: fence.parts(),
            id,
            copy: keys.copy_prefix(id),
            record: keys.part_record(id, self.runner.keys()),
            registry: keys.part_registry(self.runner.keys()),
        };
        let begun = match self.begin_part(ctx, conn, &step).await? {
            Begun::Started(begun) if begun.len() >= 3 => begun,
            Begun::Done => {
                // An earlier owner wrote the part and may have died before saying so.
                let offset: Option<String> = redis::cmd("HGET")
                    .arg(&step.record)
                    .arg("offset")
                    .query_async(conn)
                    .await?;
                self.part_written(ctx, conn, id, &offset.unwrap_or_default())
                    .await?;
                return Ok(Wrote::Part);
            }
            Begun::Gone => return Ok(Wrote::Gone),
            Begun::Started(_) | Begun::Fenced => return Err(fence.error()),
        };
        let (offset, hashes) = (begun[0].clone(), &begun[3..]);
        let mut fields = vec![
            ("offset".to_string(), offset.clone()),
            ("next".into(), begun[1].clone()),
            ("added".into(), begun[2].clone()),
            ("token".into(), lease.token.to_string()),
            ("consumer".into(), ctx.consumer.clone()),
            ("at_ms".into(), now_ms().to_string()),
        ];
        for hash in hashes {
            let base = self.collection_base(hash);
            match copy_hash(conn, &step, hash, base.as_deref(), deadline).await? {
                Copied::All => {}
                Copied::TooLate => return Ok(Wrote::TooLate),
                Copied::Gone => return Ok(Wrote::Gone),
                Copied::Fenced => return Err(fence.error()),
            }
            if let Some(base) = base {
                fields.push((format!("c:{hash}"), base));
            }
        }
        fields.extend(self.owner.others.checkpoint_fields(conn).await?);
        let (lease_key, fence_key, value, ttl) = &step.fence;
        let mut inv = END.key(lease_key);
        inv.key(fence_key).key(&step.record).key(&step.registry);
        inv.arg(*value).arg(*ttl).arg(id);
        for (f, v) in &fields {
            inv.arg(f).arg(v);
        }
        let done: Value = inv.invoke_async(conn).await?;
        if fence.int_reply(&done)? == 0 {
            return Ok(Wrote::Gone);
        }
        self.part_written(ctx, conn, id, &offset).await?;
        Ok(Wrote::Part)
    }

    /// Tells the coordinator the partition's part of checkpoint `id` is written (the
    /// parts hash, in the job's slot; idempotent; nothing when the checkpoint is gone).
    async fn part_written(
        &self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        id: u64,
        offset: &str,
    ) -> Result<(), Error> {
        let (t, p, g) = ctx.at(self.partition);
        let keys = &ctx.job.checkpoints.keys;
        let _: i64 = REPORT
            .key(keys.meta(id))
            .key(keys.parts(id))
            .arg(part_field(t, g, p))
            .arg(offset)
            .invoke_async(conn)
            .await?;
        Ok(())
    }

    /// The begin step (see [`Begun`]).
    async fn begin_part(
        &self,
        ctx: &Ctx<'_>,
        conn: &mut Connection,
        step: &Step<'_>,
    ) -> Result<Begun, Error> {
        let (t, p, g) = ctx.at(self.partition);
        let own = [
            self.runner.keys().index(),
            self.runner.keys().schema(),
            ctx.keys.frontier(t, p, g),
            ctx.keys.acked(t, p, g),
        ];
        let copies: Vec<String> = own.iter().map(|k| format!("{}{k}", step.copy)).collect();
        let (lease_key, fence_key, value, ttl) = &step.fence;
        let mut inv = BEGIN.key(lease_key);
        inv.key(fence_key).key(&step.record);
        for k in own.iter().chain(&copies) {
            inv.key(k);
        }
        inv.key(ctx.keys.stream(t, p)).key(&step.registry);
        let reply: Value = (inv
            .arg(*value)
            .arg(*ttl)
            .arg(&step.copy)
            .arg(g)
            .arg(step.id))
        .invoke_async(conn)
        .await?;
        if is_fenced_reply(&reply) {
            return Ok(Begun::Fenced);
        }
        if is_gone_reply(&reply) {
            return Ok(Begun::Gone);
        }
        if matches!(&reply, Value::BulkString(b) if b == b"done") {
            return Ok(Begun::Done);
        }
        Ok(Begun::Started(redis::from_redis_value(&reply)?))
    }

    /// The base name of the per-key collections of state hash `hash` (`base:k:{key}`),
    /// `None` when its state keeps none: known from the chain's operators and the
    /// state's schema fingerprint (a collection's has `/2<`); when the chain cannot tell
    /// (an operator it does not have, no fingerprint), the hash's own unsharded name, so
    /// that any collection is copied.
    fn collection_base(&self, hash: &str) -> Option<String> {
        for (op, _) in self.runner.stores() {
            let Some(state) = self.runner.keys().state_of(hash, op.as_str()) else {
                continue;
            };
            if [PANES_STATE, ROLLING_STATE, TIMERS_STATE, WATERMARK_STATE].contains(&state) {
                return None;
            }
            let fingerprint = self
                .schema
                .as_ref()
                .and_then(|g| g.fingerprint(op.as_str(), state));
            return match fingerprint {
                Some(f) if !f.contains("/2<") => None,
                _ => Some(self.runner.keys().unsharded(op.as_str(), state)),
            };
        }
        Some(
            crate::redis::job::checkpoint::keys::unsharded_name(hash, self.runner.keys().shards())
                .to_string(),
        )
    }
}

/// What every step of one part checks and writes: the lease's (key, counter key, value,
/// ttl ms), the checkpoint's id and copy prefix, the part record, the partition's
/// checkpoint registry.
struct Step<'a> {
    fence: (String, String, &'a str, u64),
    id: u64,
    copy: String,
    record: String,
    registry: String,
}

/// Whether a part step's reply says retention deleted the checkpoint (`'gone'`).
fn is_gone_reply(v: &Value) -> bool {
    matches!(v, Value::BulkString(b) if b == b"gone")
        || matches!(v, Value::SimpleString(s) if s == "gone")
}

/// What the begin step of a part found.
enum Begun {
    /// An earlier owner wrote the part.
    Done,
    /// Another owner holds the lease: nothing written.
    Fenced,
    /// Retention deleted the checkpoint: nothing written.
    Gone,
    /// Started: the offset, the next entry after it, the stream's entries-added counter,
    /// then the state hashes to copy.
    Started(Vec<String>),
}

/// How copying one state hash ended.
enum Copied {
    All,
    /// The checkpoint's deadline passed first.
    TooLate,
    /// Another owner holds the lease.
    Fenced,
    /// Retention deleted the checkpoint (the copy of this chunk not written).
    Gone,
}

/// Copies state hash `hash` (and, with a collection `base`, its keys' collections) in
/// steps of 500 fields.
async fn copy_hash(
    conn: &mut Connection,
    step: &Step<'_>,
    hash: &str,
    base: Option<&str>,
    deadline: u64,
) -> Result<Copied, Error> {
    let (lease_key, fence_key, value, ttl) = &step.fence;
    let mut cursor = "0".to_string();
    loop {
        if now_ms() > deadline {
            return Ok(Copied::TooLate);
        }
        let next: Value = COPY_CHUNK
            .key(lease_key)
            .key(fence_key)
            .key(hash)
            .key(format!("{}{hash}", step.copy))
            .key(&step.registry)
            .arg(*value)
            .arg(*ttl)
            .arg(&cursor)
            .arg(CHUNK_FIELDS)
            .arg(base.unwrap_or(""))
            .arg("")
            .arg(&step.copy)
            .arg("")
            .arg(step.id)
            .invoke_async(conn)
            .await?;
        if is_fenced_reply(&next) {
            return Ok(Copied::Fenced);
        }
        if is_gone_reply(&next) {
            return Ok(Copied::Gone);
        }
        cursor = redis::from_redis_value(&next)?;
        if cursor == "0" {
            return Ok(Copied::All);
        }
    }
}
