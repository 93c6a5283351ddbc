//! The batch runner: one thread per subtask, one operator chain per owned partition.
//!
//! Per partition and batch: read up to `batch_count` entries, run them
//! through the partition's chain against the in-memory state cache (loaded once when the
//! partition was taken), hand the outputs to the sink, then write the changed state
//! entries, the sink's buffered list appends and the acknowledgement in ONE Lua script:
//! - [`AckMode::Xack`]: `HSET`/`HDEL` state + `RPUSH` sink + `XACK` + frontier advance;
//! - [`AckMode::Offset`]: the entries were read with `NOACK`; `HSET`/`HDEL` + `RPUSH` +
//!   `SET` of the committed offset (the group's commit-frontier key).
//!
//! A record that fails (error or panic in a user function) may have changed state before
//! failing, so the batch is rolled back: the chain is rebuilt, its state reloaded from
//! Redis (what the last commit left), the record goes to retry / dead letter (with
//! `x-runtime-*` headers), and the batch runs again without it. State therefore
//! reflects exactly the acknowledged, successful records. A failed commit (e.g. Redis
//! restarting) resets the partition the same way and reads again from the last commit.

use super::env::{EnvInner, MqTopicSource};
use super::job::JobShared;
use super::keys::{mdc_sampled, StateKeys};
use super::persist::DynStore;
use super::persist::{StateLimits, WATERMARK_STATE};
use super::runtime::DynSideOutput;
use super::{AckMode, HotKeyPolicy, ProcessingErrorResult, RedisListSink, RedisRuntime};
use crate::api::Sink;
use crate::dataflow::{BuildPlan, Plan};
use crate::mq::dlq::{ack_and_dead_letter, dead_letter_script, DeadLetterCause};
use crate::mq::frontier::LUA_ADVANCE;
use crate::mq::group::OwnerScripts;
use crate::mq::lease::{Fence, Lease, LeaseScripts, LUA_LEASE_HELD};
use crate::mq::message::{encode_fields, parse_read_reply, RawEntry};
use crate::mq::retry::{ack_and_schedule, backoff, promote_due, promote_script, schedule_script};
use crate::mq::{ExclusiveReader, Failure, KeySpace, Message, Mq, SubscriptionOptions};
use crate::ops::{Counters, Operator, OperatorId};
use crate::time::clock::wall_clock_ms;
use crate::Error;
use redis::aio::ConnectionManager;
use redis::{Script, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Header naming the job of a retried or dead-lettered record.
pub const HEADER_RUNTIME_JOB: &str = "x-runtime-job";
/// Header naming the consumer group.
pub const HEADER_RUNTIME_GROUP: &str = "x-runtime-group";
/// Header with the failure's type (`user_function`, `panic`, ...).
pub const HEADER_RUNTIME_ERROR_TYPE: &str = "x-runtime-error-type";
/// Header with the failure's message, at most 512 characters.
pub const HEADER_RUNTIME_ERROR_MESSAGE: &str = "x-runtime-error-message";

/// What a registered pipeline runs on.
#[derive(Clone)]
pub(crate) struct PipelineSpec {
    pub(crate) env: Arc<EnvInner>,
    pub(crate) topic: String,
    pub(crate) group: String,
    pub(crate) options: SubscriptionOptions,
}

const LUA_LOAD: &str = r#"
-- KEYS: the state index; returns key, {field, value, ...}, key, ...
local out = {}
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  out[#out + 1] = k
  out[#out + 1] = redis.call('HGETALL', k)
end
return out
"#;

const LUA_COMMIT: &str = r#"
-- KEYS: stream, acked set, frontier (= committed offset in Offset mode), state index,
--       lease, fencing counter, state hashes..., sink lists...
-- ARGV: mode ('x' | 'o'), group, ttl ms (0 = none), lease value held "{token} {owner}",
--       lease ttl ms, n ids, ids...,
--       n hashes, per hash: n set, field, value, ..., n del, field, ..., sample (0 | 1),
--       n lists, per list: n, value, ...
-- Returns per hash its HLEN after the writes when sampled, else -1; or the string
-- 'fenced' (and writes nothing) when another owner took the lease since. A lease that
-- expired during a long batch and that nobody took (the counter still holds our token) is
-- taken back; a held lease is extended: a commit renews the lease.
-- ARGV[from..to] without copying them into a table first.
local function chunked_argv(cmd, key, from, to)
  local i = from
  while i <= to do
    local j = math.min(i + 3999, to)
    redis.call(cmd, key, unpack(ARGV, i, j))
    i = j + 1
  end
end
if not lease_held(KEYS[5], KEYS[6], ARGV[4], ARGV[5]) then return 'fenced' end
local i = 6
local nids = tonumber(ARGV[i]); i = i + 1
local ids = {}
for j = 1, nids do ids[j] = ARGV[i]; i = i + 1 end
local ttl = tonumber(ARGV[3])
local nh = tonumber(ARGV[i]); i = i + 1
local sizes = {}
for h = 1, nh do
  local key = KEYS[6 + h]
  local nset = tonumber(ARGV[i]); i = i + 1
  if nset > 0 then
    chunked_argv('HSET', key, i, i + 2 * nset - 1)
    i = i + 2 * nset
  end
  local ndel = tonumber(ARGV[i]); i = i + 1
  if ndel > 0 then
    chunked_argv('HDEL', key, i, i + ndel - 1)
    i = i + ndel
  end
  redis.call('SADD', KEYS[4], key)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  if ARGV[i] == '1' then sizes[h] = redis.call('HLEN', key) else sizes[h] = -1 end
  i = i + 1
end
local nl = tonumber(ARGV[i]); i = i + 1
for l = 1, nl do
  local key = KEYS[6 + nh + l]
  local n = tonumber(ARGV[i]); i = i + 1
  if n > 0 then chunked_argv('RPUSH', key, i, i + n - 1) end
  i = i + n
end
if nids > 0 then
  if ARGV[1] == 'x' then
    local newly = {}
    for j = 1, nids do newly[ids[j]] = true end
    local j = 1
    while j <= nids do
      local k = math.min(j + 3999, nids)
      redis.call('XACK', KEYS[1], ARGV[2], unpack(ids, j, k))
      j = k + 1
    end
    advance(KEYS[1], KEYS[2], KEYS[3], newly)
  else
    local cur = redis.call('GET', KEYS[3])
    if (not cur) or id_gt(ids[nids], cur) then redis.call('SET', KEYS[3], ids[nids]) end
  end
end
return sizes
"#;

struct Scripts {
    load: Script,
    commit: Script,
    leases: LeaseScripts,
    owner: OwnerScripts,
    schedule: Script,
    dead_letter: Script,
    promote: Script,
}

/// What every partition of a subtask shares.
struct Ctx<'a> {
    spec: &'a PipelineSpec,
    job: &'a JobShared,
    mq: Mq,
    keys: KeySpace,
    scripts: Scripts,
    consumer: String,
    subtask: u32,
    /// The job name (a metrics label).
    job_name: String,
}

/// The chain's last operator: collects the batch's outputs for the sink.
struct BufferOp<T> {
    out: Rc<RefCell<Vec<T>>>,
}

impl<T> Operator<T> for BufferOp<T> {
    fn open(&mut self) -> Result<(), Error> {
        Ok(())
    }
    #[inline]
    fn process(&mut self, value: T, _timestamp: i64) -> Result<(), Error> {
        self.out.borrow_mut().push(value);
        Ok(())
    }
    fn on_watermark(&mut self, _watermark: i64) -> Result<(), Error> {
        Ok(())
    }
    fn finish(&mut self) -> Result<(), Error> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

type Stores = Vec<(OperatorId, DynStore)>;

/// One state hash's writes in a batch: field (key as JSON) → value (`None` = delete).
struct PendingHash {
    key: String,
    operator: String,
    state: String,
    fields: HashMap<String, Option<String>>,
}

/// A batch's state writes, per hash (later writes of a field replace earlier ones).
#[derive(Default)]
struct Pending {
    hashes: Vec<PendingHash>,
    index: HashMap<String, usize>,
}

/// Moves every store's changes into `pending`; `touched` gets the hashes written.
fn drain_into(
    stores: &Stores,
    keys: &StateKeys,
    pending: &mut Pending,
    touched: &mut Vec<usize>,
) -> Result<(), Error> {
    for (op, store) in stores {
        // Unsharded, every field of one (operator, state) goes to the same hash: remember
        // the last one instead of formatting and looking up its key per field.
        let mut last: Option<(String, usize)> = None;
        store
            .borrow_mut()
            .drain(op.as_str(), &mut |(state, field, value)| {
                if let Some((s, i)) = &last {
                    if keys.single_hash() && s == state {
                        let i = *i;
                        pending.hashes[i].fields.insert(field, value);
                        touched.push(i);
                        return;
                    }
                }
                let key = keys.hash(op.as_str(), state, &field);
                let i = match pending.index.get(&key) {
                    Some(i) => *i,
                    None => {
                        pending.hashes.push(PendingHash {
                            key: key.clone(),
                            operator: op.as_str().to_string(),
                            state: state.to_string(),
                            fields: HashMap::new(),
                        });
                        pending.index.insert(key, pending.hashes.len() - 1);
                        pending.hashes.len() - 1
                    }
                };
                pending.hashes[i].fields.insert(field, value);
                touched.push(i);
                last = Some((state.to_string(), i));
            })?;
    }
    Ok(())
}

/// A hash found hot: its policy applies until `until`.
struct HotArm {
    until: Instant,
}

/// Builds a partition's chain (a closure over the plan, so the chain's opaque type is a
/// plain type parameter of [`Part`]).
trait Make<C, O>: Fn(&Rc<RefCell<Vec<O>>>) -> Result<Built<C>, Error> {}
impl<C, O, F: Fn(&Rc<RefCell<Vec<O>>>) -> Result<Built<C>, Error>> Make<C, O> for F {}

/// A built chain with its stores, its window operators' counters and its side outputs.
type Built<C> = (C, Stores, Rc<Counters>, Vec<DynSideOutput>);

fn build_chain<P, O>(
    plan: &P,
    out: &Rc<RefCell<Vec<O>>>,
    limits: StateLimits,
) -> Result<Built<impl Operator<Message> + use<P, O>>, Error>
where
    P: BuildPlan<RedisRuntime> + Plan<Root = MqTopicSource, Head = Message, Out = O> + Clone,
{
    let rt = RedisRuntime::new(limits);
    let (_root, mut chain) = plan.clone().build(
        &rt,
        BufferOp {
            out: Rc::clone(out),
        },
    )?;
    chain.open()?;
    let (stores, counters, side_outputs) = rt.into_parts();
    Ok((chain, stores, counters, side_outputs))
}

/// The partition's watermark: that of its last watermark operator (the first registered
/// store that has one — a chain registers its last operator first), and its idle flag.
fn effective_watermark(stores: &Stores) -> Option<(i64, bool)> {
    stores.iter().find_map(|(_, s)| s.borrow().watermark())
}

/// Starts the subtasks of one pipeline and registers how to start more
/// ([`JobShared::scale`]).
pub(crate) fn start<P, S>(
    plan: P,
    sink: S,
    spec: PipelineSpec,
    job: Arc<JobShared>,
) -> Vec<std::thread::JoinHandle<()>>
where
    P: BuildPlan<RedisRuntime>
        + Plan<Root = MqTopicSource, Head = Message>
        + Clone
        + Send
        + 'static,
    S: Sink<<P as Plan>::Out> + Clone + Send + 'static,
{
    let n = spec.env.config.pipeline_parallelism();
    let spawn = move |job: &Arc<JobShared>, subtask: u32, siblings: Vec<String>| {
        let (plan, sink, spec, job) = (plan.clone(), sink.clone(), spec.clone(), Arc::clone(job));
        job.subtask_started();
        let consumer = siblings[subtask as usize % siblings.len()].clone();
        job.register_subtask(&consumer);
        let name = format!("streaming-{}-{subtask}", spec.topic);
        let job2 = Arc::clone(&job);
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let result = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::Engine {
                    op: "subtask",
                    reason: format!("cannot start a tokio runtime: {e}"),
                })
                .and_then(|rt| {
                    rt.block_on(bounded_by_cancel(
                        run_subtask(plan, sink, &spec, subtask, &consumer, &siblings, &job),
                        &job,
                    ))
                });
            if let Err(e) = result {
                job.error(format!(
                    "subtask {subtask} of {}/{} stopped: {e}",
                    spec.topic, spec.group
                ));
            }
            job.subtask_left(&consumer);
            job.subtask_ended();
        });
        match spawned {
            Ok(t) => Some(t),
            Err(e) => {
                job2.error(format!("cannot spawn subtask {subtask}: {e}"));
                job2.subtask_ended();
                None
            }
        }
    };
    let names: Vec<String> = (0..n).map(|_| job.consumer_name()).collect();
    let threads = (0..n)
        .filter_map(|subtask| spawn(&job, subtask, names.clone()))
        .collect();
    job.add_pipeline(names, Box::new(spawn));
    threads
}

/// Runs `subtask` until it ends, or until `response_timeout` after the job was cancelled:
/// a subtask still waiting on a frozen or silent Redis by then is dropped where it stands
/// (its uncommitted batch is read again by the next run; its leases expire), so that
/// [`JobClient::cancel`](super::JobClient::cancel) returns within a bound.
async fn bounded_by_cancel(
    subtask: impl std::future::Future<Output = Result<(), Error>>,
    job: &JobShared,
) -> Result<(), Error> {
    let grace = async {
        while !job.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(job.response_timeout).await;
    };
    tokio::select! {
        r = subtask => r,
        () = grace => {
            tracing::warn!("subtask still waiting on Redis {:?} after the cancel: dropped", job.response_timeout);
            Ok(())
        }
    }
}

/// Connects a subtask's queue handle and reads the topic's partition count, retrying with
/// a bounded, jittered backoff while the server cannot be reached (each failure, naming
/// the address, is in the job's errors); `None` when the job was cancelled meanwhile.
///
/// # Errors
/// Anything but a connection failure, e.g. an unknown topic.
async fn open_queue(
    spec: &PipelineSpec,
    subtask: u32,
    job: &JobShared,
) -> Result<Option<(Mq, u32)>, Error> {
    let config = &spec.env.config;
    let mut backoff = crate::mq::Backoff::new(Duration::from_millis(100), MAX_BACKOFF);
    while !job.is_cancelled() {
        let opened = async {
            let mq = Mq::from_client(spec.env.client.clone(), config.mq_options()).await?;
            let partitions = mq.partitions(&spec.topic).await?;
            Ok::<_, Error>((mq, partitions))
        }
        .await;
        match opened {
            Ok(opened) => return Ok(Some(opened)),
            Err(e @ (Error::Connect { .. } | Error::Redis(_))) => {
                job.error(format!(
                    "subtask {subtask} of {}/{}: cannot start, retrying: {e}",
                    spec.topic, spec.group
                ));
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// The longest pause of a partition's reconnect / re-take backoff: once Redis answers
/// again, every partition tries again within this long.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

enum Reader {
    Xack {
        replaying: bool,
        next_promote: Instant,
    },
    Offset(Box<ExclusiveReader>),
}

/// A partition's `metrics` handles, labelled job/topic/group/partition (see the
/// [`redis`](super) module docs). Registered when the job starts: install the recorder
/// before [`RedisEnv::execute_async`](super::RedisEnv::execute_async).
struct PartMetrics {
    records: metrics::Counter,
    failed: metrics::Counter,
    window_fired: metrics::Counter,
    window_late_dropped: metrics::Counter,
    idle_flushes: metrics::Counter,
    skipped: metrics::Counter,
    watermark: metrics::Gauge,
}

impl PartMetrics {
    fn new(job: &str, topic: &str, group: &str, partition: u32) -> Self {
        let labels = [
            ("job", job.to_string()),
            ("topic", topic.to_string()),
            ("group", group.to_string()),
            ("partition", partition.to_string()),
        ];
        PartMetrics {
            records: metrics::counter!("streaming_records_total", &labels),
            failed: metrics::counter!("streaming_records_failed_total", &labels),
            window_fired: metrics::counter!("streaming_window_fired_total", &labels),
            window_late_dropped: metrics::counter!("streaming_window_late_dropped_total", &labels),
            idle_flushes: metrics::counter!("streaming_idle_flushes_total", &labels),
            skipped: metrics::counter!("streaming_records_skipped_total", &labels),
            watermark: metrics::gauge!("streaming_watermark_ms", &labels),
        }
    }
}

/// The counts of a batch whose commit is not confirmed.
struct Unconfirmed {
    last_id: String,
    processed: u64,
    failed: u64,
    skipped: u64,
    /// Its records stay in the job's `in_flight` until confirmed or dropped, so that
    /// `await_caught_up` does not see the frontier before the counters.
    in_flight: u64,
}

struct Part<C, S, O> {
    partition: u32,
    state_keys: StateKeys,
    chain: C,
    stores: Stores,
    counters: Rc<Counters>,
    /// The chain's side outputs (late data), delivered when a batch commits.
    side_outputs: Vec<DynSideOutput>,
    /// When the partition last read an entry (drives the idle flush).
    last_read: Instant,
    /// The next idle flush has work: records went through the chain since the last one,
    /// or the partition was taken holding unfired windows or event-time timers.
    awaiting_flush: bool,
    /// Entries of the batch being processed that were skipped: retries addressed to
    /// another consumer group (field `rg`).
    skipped: u64,
    /// A batch whose commit got no reply (e.g. the connection reset): Redis may have
    /// applied it. Counted when the next take finds the commit frontier at its last id.
    unconfirmed: Option<Unconfirmed>,
    /// Earliest next processing-time timer check (pushed back after a failing timer).
    next_timers: Instant,
    out: Rc<RefCell<Vec<O>>>,
    sink: S,
    reader: Option<Reader>,
    /// The partition's lease in [`AckMode::Xack`] (in Offset mode the reader holds it).
    lease: Option<Lease>,
    next_renew: Instant,
    needs_reset: bool,
    /// Pause before the next re-take after a failure (bounded, jittered).
    backoff: crate::mq::Backoff,
    retry_at: Instant,
    /// State field writes committed so far (drives the size sampling).
    writes: u64,
    /// Hashes found hot, by key.
    hot: HashMap<String, HotArm>,
    /// Last sampled field count per hash.
    hot_fields: HashMap<String, u64>,
    /// Its metric handles (registered once, when the partition is set up).
    metrics: PartMetrics,
    /// The state schema check of the current chain (see `schema`).
    schema: Option<super::schema::SchemaGate>,
    /// Stopped for good (e.g. a state schema mismatch under FAIL): not read any more.
    stopped: bool,
}

async fn run_subtask<P, S>(
    plan: P,
    sink: S,
    spec: &PipelineSpec,
    subtask: u32,
    consumer: &str,
    siblings: &[String],
    job: &JobShared,
) -> Result<(), Error>
where
    P: BuildPlan<RedisRuntime> + Plan<Root = MqTopicSource, Head = Message> + Clone,
    S: Sink<<P as Plan>::Out> + Clone,
{
    let config = &spec.env.config;
    let Some((mq, partitions)) = open_queue(spec, subtask, job).await? else {
        return Ok(());
    };
    let ctx = Ctx {
        spec,
        job,
        keys: mq.keys().clone(),
        mq,
        scripts: Scripts {
            load: Script::new(LUA_LOAD),
            commit: Script::new(&format!("{LUA_ADVANCE}\n{LUA_LEASE_HELD}\n{LUA_COMMIT}")),
            leases: LeaseScripts::new(),
            owner: OwnerScripts::new(),
            schedule: schedule_script(),
            dead_letter: dead_letter_script(),
            promote: promote_script(),
        },
        consumer: consumer.to_string(),
        subtask,
        job_name: config.job_name(),
    };
    let mut conn = ctx.mq.connection();
    let limits = StateLimits {
        window_max_fires_per_record: config.window_max_fires_per_record() as usize,
        event_time_timer_max_size: config.event_time_timer_max_size() as usize,
    };
    let make = |out: &Rc<RefCell<Vec<_>>>| build_chain(&plan, out, limits);
    let plan = &make;
    let new_part = |p: u32| {
        let out = Rc::new(RefCell::new(Vec::new()));
        let (chain, stores, counters, side_outputs) = plan(&out)?;
        let tag = ctx.keys.hash_tag(&spec.topic, p);
        let mut part = Part {
            partition: p,
            state_keys: StateKeys::new(
                &config.state_key_prefix(),
                &config.job_name(),
                &tag,
                &spec.group,
                config.keyed_state_shard_count(),
            ),
            chain,
            stores,
            counters,
            side_outputs,
            last_read: Instant::now(),
            awaiting_flush: false,
            skipped: 0,
            unconfirmed: None,
            next_timers: Instant::now(),
            out,
            sink: sink.clone(),
            reader: None,
            lease: None,
            next_renew: Instant::now(),
            needs_reset: true,
            backoff: crate::mq::Backoff::new(Duration::from_millis(50), MAX_BACKOFF),
            retry_at: Instant::now(),
            writes: 0,
            hot: HashMap::new(),
            hot_fields: HashMap::new(),
            metrics: PartMetrics::new(&ctx.job_name, &spec.topic, &spec.group, p),
            schema: None,
            stopped: false,
        };
        guarded(&ctx, "open sink", part.sink.open())?;
        job.progress(&spec.topic, &spec.group, p, |pr| pr.subtask = subtask);
        Ok::<_, Error>(part)
    };
    let renew_every = config.mq_options().lease_renew_interval;
    let mut members = Membership::new(&ctx, siblings, partitions);
    let mut parts: BTreeMap<u32, Part<_, S, _>> = BTreeMap::new();
    let idle = ctx.spec.options.poll_timeout.min(Duration::from_millis(10));
    while !job.is_cancelled() && !members.leaving() {
        if members.due() {
            if let Err(e) = members.heartbeat(&ctx, &mut conn).await {
                job.error(format!(
                    "subtask {subtask} of {}/{}: membership heartbeat failed: {e}",
                    spec.topic, spec.group
                ));
            }
            for p in members.assigned() {
                if let std::collections::btree_map::Entry::Vacant(e) = parts.entry(p) {
                    e.insert(new_part(p)?);
                }
            }
            let leaving: Vec<u32> = (parts.keys().copied())
                .filter(|p| !members.is_assigned(*p))
                .collect();
            for p in leaving {
                if let Some(part) = parts.remove(&p) {
                    part.hand_over(&ctx, &mut conn).await;
                }
            }
        }
        if job.paused.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let mut busy = false;
        for part in parts.values_mut() {
            if job.is_cancelled() || part.stopped {
                continue;
            }
            busy |= part.turn(plan, &ctx, &mut conn, renew_every).await;
        }
        if !busy {
            tokio::time::sleep(idle).await;
        }
    }
    for part in std::mem::take(&mut parts).into_values() {
        part.hand_over(&ctx, &mut conn).await;
    }
    members.leave(&ctx, &mut conn).await;
    Ok(())
}

/// A subtask's view of the live subtasks reading its (topic, group), from every process
/// of the job: each heartbeats its consumer name into the runners sorted set (score =
/// expiry) every `lease_renew_interval`; the live names, sorted, give each its share:
/// partition `p` belongs to the `p % live`-th name.
struct Membership {
    key: String,
    consumer: String,
    /// The consumer names of the subtasks this process starts with: registered with the
    /// first heartbeat, so that siblings do not take each other's partitions at start.
    siblings: Vec<String>,
    partitions: u32,
    live: Vec<String>,
    next: Instant,
    first: bool,
    /// The subtask was asked to stop (scaled away): it hands its partitions over.
    stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl Membership {
    fn new(ctx: &Ctx<'_>, siblings: &[String], partitions: u32) -> Self {
        Membership {
            key: ctx.keys.runners(&ctx.spec.topic, &ctx.spec.group),
            consumer: ctx.consumer.clone(),
            siblings: siblings.to_vec(),
            partitions,
            live: Vec::new(),
            next: Instant::now(),
            first: true,
            stop: ctx.job.subtask_stop(&ctx.consumer),
        }
    }

    fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    fn leaving(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// Registers (renews) this subtask and reads the live names.
    async fn heartbeat(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
    ) -> Result<(), Error> {
        let opts = ctx.spec.env.config.mq_options();
        self.next = Instant::now() + opts.lease_renew_interval;
        let now = crate::mq::topic::now_ms();
        let ttl = i64::try_from(opts.lease_ttl.as_millis()).unwrap_or(i64::MAX);
        let expiry = now.saturating_add(ttl);
        let mut pipe = redis::pipe();
        pipe.atomic();
        if std::mem::take(&mut self.first) {
            for s in &self.siblings {
                pipe.cmd("ZADD")
                    .arg(&self.key)
                    .arg("NX")
                    .arg(expiry)
                    .arg(s)
                    .ignore();
            }
        }
        pipe.cmd("ZADD")
            .arg(&self.key)
            .arg(expiry)
            .arg(&self.consumer)
            .ignore()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&self.key)
            .arg("-inf")
            .arg(now)
            .ignore()
            .cmd("ZRANGE")
            .arg(&self.key)
            .arg(0)
            .arg(-1);
        let (mut live,): (Vec<String>,) = pipe.query_async(conn).await?;
        live.sort();
        self.live = live;
        Ok(())
    }

    fn is_assigned(&self, p: u32) -> bool {
        match self.live.iter().position(|c| *c == self.consumer) {
            Some(i) => p as usize % self.live.len() == i,
            None => false,
        }
    }

    fn assigned(&self) -> Vec<u32> {
        (0..self.partitions)
            .filter(|p| self.is_assigned(*p))
            .collect()
    }

    /// Deregisters, so that the others take over at their next heartbeat.
    async fn leave(&self, ctx: &Ctx<'_>, conn: &mut ConnectionManager) {
        let _: Result<(), _> = redis::cmd("ZREM")
            .arg(&self.key)
            .arg(&self.consumer)
            .query_async(conn)
            .await;
        ctx.job.subtask_left(&self.consumer);
    }
}

fn guarded<T>(ctx: &Ctx<'_>, what: &str, r: Result<T, crate::BoxError>) -> Result<T, Error> {
    r.map_err(|e| Error::Engine {
        op: "sink",
        reason: format!("{what} ({}): {e}", ctx.spec.topic),
    })
}

fn error_type(e: &Error) -> &'static str {
    match e {
        e if e.is_decode() => "decode",
        Error::UserFunction { .. } => "user_function",
        Error::Panic { .. } => "panic",
        Error::StateType { .. } | Error::StateNotPersistent { .. } => "state",
        Error::StateDecode { .. } => "state_decode",
        Error::MqDecode { .. } => "decode",
        Error::HotKey { .. } => "hot_key",
        Error::TimerQueueFull { .. } => "timer_queue_full",
        Error::WindowBounds { .. } => "window_bounds",
        _ => "error",
    }
}

impl<C, S, O> Part<C, S, O>
where
    C: Operator<Message>,
    S: Sink<O>,
{
    /// One turn of the subtask loop for this partition: renew the lease when due, take the
    /// partition when it needs it, else run a batch (or timers and the idle flush when
    /// there is no input). `true` when a batch read entries.
    async fn turn<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
        renew_every: Duration,
    ) -> bool {
        let (job, spec, p) = (ctx.job, ctx.spec, self.partition);
        let now = Instant::now();
        if now >= self.next_renew && !self.needs_reset {
            self.next_renew = now + renew_every;
            match self.renew(ctx, conn).await {
                Ok(true) => {}
                Ok(false) => {
                    // Expired (e.g. this process stalled or Redis was down longer than the
                    // TTL), maybe taken: drop it and take it again when its lease is free.
                    job.partition_error(&spec.topic, &spec.group, p, format!(
                        "partition {p} of `{}` (group `{}`): fenced, the lease passed to another owner while this process stalled; nothing more is written: dropped from memory until its lease is won again",
                        spec.topic, spec.group
                    ));
                    job.progress(&spec.topic, &spec.group, p, |pr| pr.fenced += 1);
                    self.forget(plan, ctx);
                    return false;
                }
                Err(e) => {
                    job.partition_error(
                        &spec.topic,
                        &spec.group,
                        p,
                        format!("partition {p}: lease renewal failed: {e}"),
                    );
                }
            }
        }
        if self.needs_reset {
            if Instant::now() >= self.retry_at {
                self.retake(plan, ctx, conn, renew_every).await;
            }
            return false;
        }
        let (what, r) = match self.step(plan, ctx, conn).await {
            Ok(0) => match self.fire_processing_timers(plan, ctx, conn).await {
                Ok(()) => (
                    "idle flush not committed",
                    self.maybe_flush_idle(plan, ctx, conn).await,
                ),
                Err(e) => ("processing-time timers not committed", Err(e)),
            },
            Ok(_) => return true,
            Err(e) => ("batch not committed", Err(e)),
        };
        match r {
            Ok(()) => {}
            Err(e) if super::schema::stops_partition(&e) => {
                super::schema::stopped(job, &spec.topic, &spec.group, p, &e);
                self.stopped = true;
            }
            Err(e) if e.is_fenced() => {
                job.partition_error(
                    &spec.topic,
                    &spec.group,
                    p,
                    format!("{e}: dropped from memory until its lease is won again"),
                );
                job.progress(&spec.topic, &spec.group, p, |pr| pr.fenced += 1);
                self.forget(plan, ctx);
            }
            Err(e) => {
                job.partition_error(
                    &spec.topic,
                    &spec.group,
                    p,
                    format!(
                        "partition {p} of {}: {what}, reading again from the last commit: {e}",
                        spec.topic
                    ),
                );
                self.needs_reset = true;
                self.retry_at = Instant::now() + self.backoff.next_delay();
            }
        }
        false
    }

    /// Takes the partition again (after a failure, a loss, or when newly assigned).
    async fn retake<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
        renew_every: Duration,
    ) {
        let (job, spec, p) = (ctx.job, ctx.spec, self.partition);
        match self.take(plan, ctx, conn).await {
            Ok(()) => {
                self.needs_reset = false;
                self.backoff.reset();
            }
            Err(e) if super::schema::stops_partition(&e) => {
                super::schema::stopped(job, &spec.topic, &spec.group, p, &e);
                self.stopped = true;
            }
            Err(e) if is_leased_elsewhere(&e) => {
                // Its owner hands it over at a batch boundary, or its lease expires.
                tracing::debug!(topic = %spec.topic, partition = p, "partition leased elsewhere; waiting");
                self.retry_at = Instant::now() + renew_every / 2;
            }
            Err(e) => {
                let delay = self.backoff.next_delay();
                job.partition_error(
                    &spec.topic,
                    &spec.group,
                    p,
                    format!(
                        "partition {p} of {}: taking it again failed, retrying in {delay:?}: {e}",
                        spec.topic
                    ),
                );
                self.retry_at = Instant::now() + delay;
            }
        }
    }

    /// Drops what the partition holds in memory (state cache, chain, outputs, reader,
    /// lease) after its lease was lost: the next take reloads what the last commit left.
    fn forget<F: Make<C, O>>(&mut self, plan: &F, ctx: &Ctx<'_>) {
        let _ = self.chain.close();
        self.out.borrow_mut().clear();
        let _ = self.sink.take_commit_writes();
        match plan(&self.out) {
            Ok((chain, stores, counters, side_outputs)) => {
                self.chain = chain;
                self.stores = stores;
                self.counters = counters;
                self.side_outputs = side_outputs;
            }
            Err(e) => ctx.job.error(format!("rebuilding a chain: {e}")),
        }
        self.reader = None;
        self.lease = None;
        if let Some(u) = self.unconfirmed.take() {
            ctx.job.in_flight.fetch_sub(u.in_flight, Ordering::SeqCst);
        }
        self.needs_reset = true;
        self.retry_at = Instant::now();
        let spec = ctx.spec;
        ctx.job
            .progress(&spec.topic, &spec.group, self.partition, |pr| {
                pr.owned = false
            });
    }

    /// Gives the partition up at a batch boundary (rebalance, rescale, cancel): closes its
    /// chain and sink and releases its lease, so the next owner takes it at once.
    async fn hand_over(mut self, ctx: &Ctx<'_>, conn: &mut ConnectionManager) {
        let (job, spec, p) = (ctx.job, ctx.spec, self.partition);
        if let Err(e) = self.chain.close() {
            job.error(format!("closing chain of partition {p}: {e}"));
        }
        if let Err(e) = guarded(ctx, "close sink", self.sink.close()) {
            job.error(format!("closing sink of partition {p}: {e}"));
        }
        if let Some(u) = self.unconfirmed.take() {
            job.in_flight.fetch_sub(u.in_flight, Ordering::SeqCst);
        }
        match self.reader.take() {
            Some(Reader::Offset(r)) => {
                let _ = r.release().await;
            }
            _ => {
                if let Some(lease) = self.lease.take() {
                    let _ = ctx.scripts.leases.release(conn, &lease).await;
                }
            }
        }
        job.progress(&spec.topic, &spec.group, p, |pr| pr.owned = false);
    }

    /// Takes (or re-takes after a failure) the partition: lease and read position, a fresh
    /// chain, and the state the last commit left.
    async fn take<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
    ) -> Result<(), Error> {
        let (spec, p) = (ctx.spec, self.partition);
        let config = &spec.env.config;
        match config.ack_mode() {
            AckMode::Xack => {
                let ttl = config.mq_options().lease_ttl;
                let kept = match self.lease.take() {
                    Some(l) if ctx.scripts.leases.renew(conn, &l, ttl).await? => Some(l),
                    _ => None,
                };
                let lease = match kept {
                    Some(l) => l,
                    None => {
                        let key = ctx.keys.lease(&spec.topic, p, &spec.group);
                        let fence = ctx.keys.fence(&spec.topic, p, &spec.group);
                        let acquired = ctx
                            .scripts
                            .leases
                            .acquire(conn, &key, &fence, &ctx.consumer, ttl)
                            .await?;
                        acquired.ok_or_else(|| leased_elsewhere(p))?
                    }
                };
                crate::mq::group::ensure_group(
                    conn,
                    &ctx.keys,
                    &spec.topic,
                    p,
                    &spec.group,
                    spec.options.start,
                    config.restore_group_from_commit_frontier(),
                )
                .await?;
                let at = (spec.topic.as_str(), p, spec.group.as_str());
                let fence = Fence::held(&ctx.keys, at, &lease, ttl);
                let stream = ctx.keys.stream(&spec.topic, p);
                (ctx.scripts.owner)
                    .claim_all(conn, fence, &stream, &spec.group, &ctx.consumer)
                    .await?;
                self.lease = Some(lease);
                self.reader = Some(Reader::Xack {
                    replaying: true,
                    next_promote: Instant::now(),
                });
            }
            AckMode::Offset => {
                // A lease still held is kept (same token); else a new one is taken.
                let held = match self.reader.take() {
                    Some(Reader::Offset(old)) => old.lease().cloned(),
                    _ => None,
                };
                let committed = ctx.mq.commit_frontier(&spec.topic, &spec.group, p).await?;
                let reader = ctx
                    .mq
                    .exclusive_reader_keeping(
                        &spec.topic,
                        &spec.group,
                        p,
                        &ctx.consumer,
                        committed.as_deref(),
                        spec.options.start,
                        held,
                    )
                    .await
                    .map_err(|e| match e {
                        Error::Mq {
                            op: "exclusive_reader",
                            ..
                        } => leased_elsewhere(p),
                        e => e,
                    })?;
                self.reader = Some(Reader::Offset(Box::new(reader)));
            }
        }
        self.rebuild(plan, ctx, conn).await?;
        self.confirm_unconfirmed(ctx).await?;
        if effective_watermark(&self.stores).is_some()
            && self
                .stores
                .iter()
                .any(|(_, s)| s.borrow().has_event_time_work())
        {
            // Restored windows or timers fire only at the next idle flush.
            self.awaiting_flush = true;
        }
        let awaiting = self.awaiting_flush;
        ctx.job.progress(&spec.topic, &spec.group, p, |pr| {
            pr.awaiting_flush |= awaiting
        });
        self.next_renew = Instant::now() + config.mq_options().lease_renew_interval;
        ctx.job.taken(conn, &spec.topic, &spec.group, p).await?;
        Ok(())
    }

    /// Counts a batch whose commit reply was lost when the commit frontier shows Redis
    /// applied it (counters count committed work); otherwise the batch is read again.
    async fn confirm_unconfirmed(&mut self, ctx: &Ctx<'_>) -> Result<(), Error> {
        if self.unconfirmed.is_none() {
            return Ok(());
        }
        let spec = ctx.spec;
        let frontier = ctx
            .mq
            .commit_frontier(&spec.topic, &spec.group, self.partition)
            .await?;
        let Some(u) = self.unconfirmed.take() else {
            return Ok(());
        };
        if frontier.is_some_and(|f| super::job::id_at_least(&f, &u.last_id)) {
            if u.processed > 0 && effective_watermark(&self.stores).is_some() {
                self.awaiting_flush = true;
            }
            self.skipped = u.skipped;
            self.report(ctx, Some(u.last_id), u.processed, u.failed, false);
            self.skipped = 0;
        }
        ctx.job.in_flight.fetch_sub(u.in_flight, Ordering::SeqCst);
        Ok(())
    }

    /// A fresh chain with the committed state (drops uncommitted changes and outputs).
    async fn rebuild<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
    ) -> Result<(), Error> {
        let _ = self.chain.close();
        self.out.borrow_mut().clear();
        let _ = self.sink.take_commit_writes();
        // The old chain's side outputs go with it: a rolled-back batch delivers nothing.
        let (chain, stores, counters, side_outputs) = plan(&self.out)?;
        // The same plan type builds the same chain type.
        self.chain = chain;
        self.stores = stores;
        self.counters = counters;
        self.side_outputs = side_outputs;
        let config = &ctx.spec.env.config;
        self.schema =
            super::persist::open_schema(config, conn, &self.state_keys, &self.stores).await?;
        let v: Value = ctx
            .scripts
            .load
            .key(self.state_keys.index())
            .invoke_async(conn)
            .await?;
        let items: Vec<Value> = redis::from_redis_value(&v)?;
        for pair in items.chunks(2) {
            let [k, fields] = pair else { continue };
            let key: String = redis::from_redis_value(k)?;
            let flat: Vec<String> = redis::from_redis_value(fields)?;
            for (op, store) in &self.stores {
                if let Some(state) = self.state_keys.state_of(&key, op.as_str()) {
                    if (self.schema.as_ref()).is_some_and(|g| g.cleared(op.as_str(), state)) {
                        continue;
                    }
                    let mut entries = Vec::with_capacity(flat.len() / 2);
                    let mut it = flat.iter();
                    while let (Some(f), Some(v)) = (it.next(), it.next()) {
                        entries.push((f.clone(), v.clone()));
                    }
                    store.borrow_mut().load(op.as_str(), state, entries)?;
                }
            }
        }
        let lease = self.fenced_unless_held(ctx)?;
        let fence = self.fence(ctx, &lease);
        super::schema::flush(self.schema.as_ref(), conn, &self.state_keys, fence).await?;
        Ok(())
    }

    async fn renew(&mut self, ctx: &Ctx<'_>, conn: &mut ConnectionManager) -> Result<bool, Error> {
        let spec = ctx.spec;
        match &mut self.reader {
            Some(Reader::Offset(r)) => r.renew().await,
            _ => match &self.lease {
                Some(lease) => {
                    ctx.scripts
                        .leases
                        .renew(conn, lease, spec.env.config.mq_options().lease_ttl)
                        .await
                }
                None => Ok(false),
            },
        }
    }

    /// Reads, processes and commits one batch; returns how many entries it read.
    async fn step<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
    ) -> Result<usize, Error> {
        let spec = ctx.spec;
        let config = &spec.env.config;
        let p = self.partition;
        let count = spec.options.batch_count;
        // 1. Read.
        let (msgs, ids, last_id) = match self.reader.as_mut() {
            Some(Reader::Xack {
                replaying,
                next_promote,
            }) => {
                let Some(lease) = self.lease.as_ref() else {
                    return Err(self.fenced_error(ctx, 0));
                };
                let at = (spec.topic.as_str(), p, spec.group.as_str());
                let fence = Fence::held(&ctx.keys, at, lease, config.mq_options().lease_ttl);
                if Instant::now() >= *next_promote {
                    promote_due(
                        conn,
                        &ctx.scripts.promote,
                        &ctx.keys,
                        fence,
                        (&spec.topic, p),
                        count,
                        config.mq_options().max_len,
                    )
                    .await?;
                    *next_promote = Instant::now() + config.mq_options().retry_poll_interval;
                }
                let stream = ctx.keys.stream(&spec.topic, p);
                let from = if *replaying { "0" } else { ">" };
                // Under the lease check: a stale owner takes no entry into its pending list.
                let who = (spec.group.as_str(), ctx.consumer.as_str());
                let v = (ctx.scripts.owner)
                    .read(conn, fence, &stream, who, count, from, false)
                    .await?;
                let entries = parse_read_reply(&v)?;
                if *replaying && entries.is_empty() {
                    *replaying = false;
                }
                let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
                let last = ids.last().cloned();
                let mut msgs = Vec::with_capacity(entries.len());
                let mut skipped = 0;
                for e in entries {
                    match e.decode(&spec.topic, p) {
                        Ok(m) if m.is_for_group(&spec.group) => msgs.push(m),
                        // Another group's retry: not run through the chain; its id stays
                        // in `ids`, so the commit acknowledges it and the frontier moves on.
                        Ok(m) => {
                            skipped += 1;
                            tracing::debug!(topic = %spec.topic, group = %spec.group, partition = p,
                                            id = %m.id, retry_group = ?m.retry_group,
                                            "skipping another group's retry");
                        }
                        Err(reason) => self.malformed(ctx, conn, e, &reason).await?,
                    }
                }
                self.skipped = skipped;
                (msgs, ids, last)
            }
            Some(Reader::Offset(r)) => {
                let b = r.read(count, Duration::from_millis(1)).await?;
                self.skipped = b.skipped as u64;
                let ids = b.last_id.iter().cloned().collect();
                (b.messages, ids, b.last_id)
            }
            None => {
                return Err(Error::Engine {
                    op: "read",
                    reason: "partition not taken".into(),
                })
            }
        };
        if ids.is_empty() {
            return Ok(0);
        }
        self.last_read = Instant::now();
        let n = msgs.len() as u64;
        ctx.job.in_flight.fetch_add(n, Ordering::SeqCst);
        let result = self
            .process_and_commit(plan, ctx, conn, msgs, ids, last_id)
            .await;
        match &mut self.unconfirmed {
            Some(u) if result.is_err() => u.in_flight = n,
            _ => {
                ctx.job.in_flight.fetch_sub(n, Ordering::SeqCst);
            }
        }
        result.map(|()| n as usize)
    }

    async fn process_and_commit<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
        msgs: Vec<Message>,
        ids: Vec<String>,
        last_id: Option<String>,
    ) -> Result<(), Error> {
        let spec = ctx.spec;
        let config = &spec.env.config;
        // 2. Process, rolling back and skipping failed records.
        let fail_fast = config.hot_key_policy() == HotKeyPolicy::FailFast;
        let (mdc, mdc_rate) = (config.mdc_enabled(), config.mdc_sample_rate());
        let job_name = if mdc {
            config.job_name()
        } else {
            String::new()
        };
        let mut skip: HashSet<usize> = HashSet::new();
        let pending = loop {
            let mut pending = Pending::default();
            // FAIL_FAST needs each record's writes: drain after every record while a hash
            // is armed (otherwise once per batch).
            let check = fail_fast && self.any_armed();
            let mut failure = None;
            for (i, m) in msgs.iter().enumerate() {
                if skip.contains(&i) {
                    continue;
                }
                let mut r = if mdc && mdc_sampled(&m.id, mdc_rate) {
                    let span = tracing::info_span!(
                        "message",
                        job = %job_name,
                        topic = %spec.topic,
                        group = %spec.group,
                        consumer = %ctx.consumer,
                        id = %m.id,
                        key = m.key.as_deref().unwrap_or(""),
                        partition = self.partition,
                    );
                    let _entered = span.enter();
                    self.chain.process(m.clone(), m.timestamp_ms)
                } else {
                    self.chain.process(m.clone(), m.timestamp_ms)
                };
                if r.is_ok() && check {
                    r = self.drain_checked(&mut pending);
                }
                if let Err(e) = r {
                    failure = Some((i, e));
                    break;
                }
            }
            let Some((i, e)) = failure else { break pending };
            if super::schema::stops_partition(&e) {
                return Err(e);
            }
            tracing::warn!(topic = %spec.topic, group = %spec.group, partition = self.partition,
                           id = %msgs[i].id, "record failed: {e}");
            self.fail(ctx, conn, &msgs[i], &e).await?;
            ctx.job.report_misuse(&e);
            if matches!(e, Error::HotKey { .. }) {
                if let Ok(mut h) = ctx.job.hot.lock() {
                    h.rejected += 1;
                }
            }
            skip.insert(i);
            self.rebuild(plan, ctx, conn).await?;
        };
        let processed = (msgs.len() - skip.len()) as u64;
        if let Err(e) = self.commit(ctx, conn, pending, &ids).await {
            if e.is_fenced() {
                // Refused in the script: nothing was applied.
                self.skipped = 0;
                return Err(e);
            }
            self.unconfirmed = last_id.map(|last_id| Unconfirmed {
                last_id,
                processed,
                failed: skip.len() as u64,
                skipped: self.skipped,
                in_flight: 0,
            });
            self.skipped = 0;
            return Err(e);
        }
        if processed > 0 && effective_watermark(&self.stores).is_some() {
            self.awaiting_flush = true;
        }
        let failed = skip.len() as u64;
        self.report(ctx, last_id, processed, failed, false);
        self.skipped = 0;
        Ok(())
    }

    /// Reports a committed batch (or idle flush) in the job's per-partition progress.
    fn report(
        &self,
        ctx: &Ctx<'_>,
        last_id: Option<String>,
        processed: u64,
        failed: u64,
        flushed: bool,
    ) {
        let spec = ctx.spec;
        let watermark = effective_watermark(&self.stores).map(|(w, _)| w);
        let fired = self.counters.window_firings.replace(0);
        let late = self.counters.late_elements.replace(0);
        let gap_dropped = self.counters.window_gap_dropped.replace(0);
        let m = &self.metrics;
        let skipped = self.skipped;
        m.skipped.increment(skipped);
        m.records.increment(processed);
        m.failed.increment(failed);
        m.window_fired.increment(fired);
        m.window_late_dropped.increment(late);
        if flushed {
            m.idle_flushes.increment(1);
        }
        let mut reported = None;
        ctx.job
            .progress(&spec.topic, &spec.group, self.partition, |pr| {
                pr.subtask = ctx.subtask;
                pr.last_commit_at = Some(std::time::SystemTime::now());
                if last_id.is_some() {
                    pr.last_committed_id = last_id;
                }
                pr.records += processed;
                pr.failed += failed;
                pr.skipped += skipped;
                pr.batches += u64::from(!flushed);
                pr.idle_flushes += u64::from(flushed);
                pr.window_fired += fired;
                pr.window_late_dropped += late;
                pr.window_gap_dropped += gap_dropped;
                pr.awaiting_flush = self.awaiting_flush;
                if flushed {
                    pr.watermark = Some(crate::time::MAX_WATERMARK);
                } else if let Some(w) = watermark {
                    // After an idle flush the new epoch has no watermark until a record
                    // arrives: the partition keeps reporting the flushed `i64::MAX`.
                    let epoch_not_begun =
                        w == crate::time::MIN_WATERMARK && pr.watermark == Some(i64::MAX);
                    if !epoch_not_begun {
                        pr.watermark = Some(w);
                    }
                }
                reported = pr.watermark;
            });
        if let Some(w) = reported {
            self.metrics.watermark.set(w as f64);
        }
    }

    /// Fires processing-time timers due at the wall clock while the partition has no
    /// input (with input they fire on the record path), and commits what they changed and
    /// emitted. Timers run on the subtask that owns the partition — the one thread that
    /// may touch its state — so `timer_threads` does not add threads.
    async fn fire_processing_timers<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
    ) -> Result<(), Error> {
        if Instant::now() < self.next_timers {
            return Ok(());
        }
        if let Err(e) = self.chain.on_processing_time(wall_clock_ms()) {
            // A failing timer function: roll back to the last commit and try again later
            // (the timer is still in the committed state).
            ctx.job.error(format!(
                "partition {} of {}: a processing-time timer failed, retried in 1 s: {e}",
                self.partition, ctx.spec.topic
            ));
            self.next_timers = Instant::now() + Duration::from_secs(1);
            return self.rebuild(plan, ctx, conn).await;
        }
        let mut pending = Pending::default();
        drain_into(
            &self.stores,
            &self.state_keys,
            &mut pending,
            &mut Vec::new(),
        )?;
        pending.hashes.retain(|h| !h.fields.is_empty());
        if pending.hashes.is_empty() && self.out.borrow().is_empty() {
            return Ok(());
        }
        self.commit(ctx, conn, pending, &[]).await?;
        self.report(ctx, None, 0, 0, false);
        Ok(())
    }

    /// Idle flush: when the partition has read nothing for
    /// `watermark_idle_timeout` (or its generator marked it idle) and its watermark epoch
    /// has begun, the watermark goes to `i64::MAX` — every due window and event-time timer
    /// fires — and the results, the state and a watermark reset to `i64::MIN` commit
    /// together. The chain is then rebuilt (fresh watermark generators), so the next
    /// message starts a new epoch from its own event time.
    async fn maybe_flush_idle<F: Make<C, O>>(
        &mut self,
        plan: &F,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
    ) -> Result<(), Error> {
        let Some(timeout) = ctx.spec.env.config.watermark_idle_timeout() else {
            return Ok(());
        };
        let Some((watermark, idle)) = effective_watermark(&self.stores) else {
            return Ok(());
        };
        let began = self
            .stores
            .iter()
            .any(|(_, s)| s.borrow().watermark().is_some_and(|(w, _)| w > i64::MIN));
        // A partition with work flushes whatever its watermark (it may never leave
        // `i64::MIN`, e.g. negative event times and a large out-of-orderness).
        if !(began || self.awaiting_flush) || (!idle && self.last_read.elapsed() < timeout) {
            return Ok(());
        }
        tracing::debug!(topic = %ctx.spec.topic, partition = self.partition, watermark,
                        idle, "idle flush: watermark to MAX");
        if let Err(e) = self.chain.on_watermark(crate::time::MAX_WATERMARK) {
            // A user function failed while windows fired: nothing is committed; the next
            // attempt runs after another idle timeout.
            ctx.job.error(format!(
                "partition {} of {}: idle flush failed, retried after the idle timeout: {e}",
                self.partition, ctx.spec.topic
            ));
            self.last_read = Instant::now();
            return self.rebuild(plan, ctx, conn).await;
        }
        for (_, s) in &self.stores {
            s.borrow_mut().reset_epoch();
        }
        self.commit(ctx, conn, Pending::default(), &[]).await?;
        self.awaiting_flush = false;
        self.report(ctx, None, 0, 0, true);
        self.last_read = Instant::now();
        self.rebuild(plan, ctx, conn).await
    }

    /// Writes the stores' changes, the sink's outputs and the acknowledgement of `ids` in
    /// one atomic script.
    async fn commit(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
        mut pending: Pending,
        ids: &[String],
    ) -> Result<(), Error> {
        let spec = ctx.spec;
        let config = &spec.env.config;
        drain_into(
            &self.stores,
            &self.state_keys,
            &mut pending,
            &mut Vec::new(),
        )?;
        // 3. Outputs to the sink and the side outputs.
        let outputs = std::mem::take(&mut *self.out.borrow_mut());
        for v in outputs {
            guarded(ctx, "invoke", self.sink.invoke(v))?;
        }
        for side in &self.side_outputs {
            guarded(ctx, "invoke side output", side.borrow_mut().deliver())?;
        }
        // THROTTLE: back-pressure before writing to a hot hash.
        if config.hot_key_policy() == HotKeyPolicy::Throttle
            && pending
                .hashes
                .iter()
                .any(|h| !h.fields.is_empty() && self.is_armed(&h.key))
        {
            if let Ok(mut h) = ctx.job.hot.lock() {
                h.throttled += 1;
            }
            tokio::time::sleep(config.hot_key_throttle_max()).await;
        }
        let lease = self.fenced_unless_held(ctx)?;
        let fence = self.fence(ctx, &lease);
        super::schema::flush(self.schema.as_ref(), conn, &self.state_keys, fence).await?;
        // 4. Commit state + sink lists + acknowledgement atomically.
        let (t, p, g) = (spec.topic.as_str(), self.partition, spec.group.as_str());
        pending.hashes.retain(|h| !h.fields.is_empty());
        let every = match (
            config.state_size_report_every_n_writes(),
            config.hot_key_fields_warn_threshold(),
        ) {
            (0, 0) => 0,
            (0, _) => 1,
            (n, _) => n,
        };
        let mut sampled = Vec::with_capacity(pending.hashes.len());
        for h in &pending.hashes {
            if h.state == WATERMARK_STATE {
                // The engine's own bookkeeping, not user state: not sampled.
                sampled.push(false);
                continue;
            }
            let before = self.writes;
            self.writes += h.fields.len() as u64;
            sampled.push(every > 0 && self.writes / every > before / every);
        }
        // Every Redis sink of the pipeline, main or side output, commits in this script.
        let lists: Vec<(String, Vec<String>)> = self
            .sink
            .take_commit_writes()
            .into_iter()
            .chain(
                self.side_outputs
                    .iter()
                    .filter_map(|side| side.borrow_mut().take_commit_writes()),
            )
            .filter(|w| !w.values.is_empty())
            .map(|w| (RedisListSink::<()>::key_for(&w.list, t, p), w.values))
            .collect();
        let mut inv = ctx.scripts.commit.key(ctx.keys.stream(t, p));
        inv.key(ctx.keys.acked(t, p, g))
            .key(ctx.keys.frontier(t, p, g))
            .key(self.state_keys.index())
            .key(&lease.key)
            .key(&lease.fence);
        for h in &pending.hashes {
            inv.key(&h.key);
        }
        for (k, _) in &lists {
            inv.key(k);
        }
        let mode = match config.ack_mode() {
            AckMode::Xack => "x",
            AckMode::Offset => "o",
        };
        let ttl = config.state_ttl().map_or(0, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
        });
        let lease_ttl = config.mq_options().lease_ttl;
        inv.arg(mode)
            .arg(g)
            .arg(ttl)
            .arg(&lease.value)
            .arg(
                u64::try_from(lease_ttl.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            )
            .arg(ids.len());
        for id in ids {
            inv.arg(id);
        }
        inv.arg(pending.hashes.len());
        for (h, sample) in pending.hashes.iter().zip(&sampled) {
            let sets = h.fields.iter().filter(|(_, v)| v.is_some()).count();
            inv.arg(sets);
            for (f, v) in &h.fields {
                if let Some(v) = v {
                    inv.arg(f).arg(v);
                }
            }
            inv.arg(h.fields.len() - sets);
            for (f, v) in &h.fields {
                if v.is_none() {
                    inv.arg(f);
                }
            }
            inv.arg(if *sample { "1" } else { "0" });
        }
        inv.arg(lists.len());
        for (_, values) in &lists {
            inv.arg(values.len());
            for v in values {
                inv.arg(v);
            }
        }
        let reply: Value = inv.invoke_async(conn).await?;
        let Value::Array(_) = reply else {
            return Err(self.fenced_error(ctx, lease.token));
        };
        let sizes: Vec<i64> = redis::from_redis_value(&reply)?;
        for (h, size) in pending.hashes.iter().zip(sizes) {
            if let Ok(size) = u64::try_from(size) {
                self.sampled_size(ctx, h, size);
            }
        }
        Ok(())
    }

    /// The lease held for the partition (its value goes into every fenced write).
    fn held_lease(&self) -> Option<&Lease> {
        match &self.reader {
            Some(Reader::Offset(r)) => r.lease(),
            _ => self.lease.as_ref(),
        }
    }

    /// The fence of the partition's writes under `lease`.
    fn fence<'a>(&self, ctx: &'a Ctx<'_>, lease: &'a Lease) -> Fence<'a> {
        let spec = ctx.spec;
        let at = (spec.topic.as_str(), self.partition, spec.group.as_str());
        Fence::held(&ctx.keys, at, lease, spec.env.config.mq_options().lease_ttl)
    }

    /// The lease held, or [`Error::Fenced`] when there is none.
    fn fenced_unless_held(&self, ctx: &Ctx<'_>) -> Result<Lease, Error> {
        self.held_lease()
            .cloned()
            .ok_or_else(|| self.fenced_error(ctx, 0))
    }

    fn fenced_error(&self, ctx: &Ctx<'_>, token: u64) -> Error {
        Error::Fenced {
            topic: ctx.spec.topic.clone(),
            group: ctx.spec.group.clone(),
            partition: self.partition,
            token,
        }
    }

    fn is_armed(&self, key: &str) -> bool {
        self.hot.get(key).is_some_and(|a| Instant::now() < a.until)
    }

    fn any_armed(&self) -> bool {
        let now = Instant::now();
        self.hot.values().any(|a| now < a.until)
    }

    /// Drains the record's writes into `pending`; a write to an armed hot hash fails the
    /// record (FAIL_FAST).
    fn drain_checked(&mut self, pending: &mut Pending) -> Result<(), Error> {
        let mut touched = Vec::new();
        drain_into(&self.stores, &self.state_keys, pending, &mut touched)?;
        for i in touched {
            let h = &pending.hashes[i];
            if self.is_armed(&h.key) {
                return Err(Error::HotKey {
                    operator: h.operator.clone(),
                    state: h.state.clone(),
                    fields: self.hot_fields.get(&h.key).copied().unwrap_or(0),
                });
            }
        }
        Ok(())
    }

    /// Records a sampled `HLEN`; at the threshold, warns (once per interval per hash) and
    /// arms the hot-key policy for the interval.
    fn sampled_size(&mut self, ctx: &Ctx<'_>, h: &PendingHash, size: u64) {
        let config = &ctx.spec.env.config;
        self.hot_fields.insert(h.key.clone(), size);
        let threshold = config.hot_key_fields_warn_threshold();
        let hot = threshold > 0 && size >= threshold;
        let warn = hot && !self.is_armed(&h.key);
        if let Ok(mut stats) = ctx.job.hot.lock() {
            stats.sizes.insert(h.key.clone(), size);
            if warn {
                stats.warnings += 1;
            }
        }
        tracing::debug!(key = %h.key, fields = size, "state size sampled");
        if warn {
            let interval = config.hot_key_warn_interval();
            tracing::warn!(job = %config.job_name(), operator = %h.operator, state = %h.state,
                           key = %h.key, fields = size, threshold, policy = ?config.hot_key_policy(),
                           "hot key: state hash has {size} fields (threshold {threshold}); policy armed for {interval:?}");
            self.hot.insert(
                h.key.clone(),
                HotArm {
                    until: Instant::now() + interval,
                },
            );
        }
    }

    async fn malformed(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
        e: RawEntry,
        reason: &str,
    ) -> Result<(), Error> {
        let spec = ctx.spec;
        tracing::warn!(topic = %spec.topic, partition = self.partition, id = %e.id, %reason,
                       "malformed entry → dead letter");
        let cause = DeadLetterCause {
            topic: &spec.topic,
            partition: self.partition,
            group: &spec.group,
            id: &e.id,
            original_id: &e.id,
            attempts: 1,
            error_type: "malformed",
            error: reason,
        };
        let lease = self.fenced_unless_held(ctx)?;
        let fence = self.fence(ctx, &lease);
        ack_and_dead_letter(
            conn,
            &ctx.scripts.dead_letter,
            &ctx.keys,
            fence,
            &cause,
            e.fields,
        )
        .await?;
        Ok(())
    }

    /// Sends a failed record to retry or the dead-letter queue.
    async fn fail(
        &mut self,
        ctx: &Ctx<'_>,
        conn: &mut ConnectionManager,
        msg: &Message,
        e: &Error,
    ) -> Result<(), Error> {
        let spec = ctx.spec;
        let config = &spec.env.config;
        let kind = error_type(e);
        let text: String = e.to_string().chars().take(512).collect();
        let mut m = msg.clone();
        m.headers
            .insert(HEADER_RUNTIME_JOB.into(), config.job_name());
        m.headers
            .insert(HEADER_RUNTIME_GROUP.into(), spec.group.clone());
        m.headers
            .insert(HEADER_RUNTIME_ERROR_TYPE.into(), kind.into());
        m.headers
            .insert(HEADER_RUNTIME_ERROR_MESSAGE.into(), text.clone());
        let misuse = super::job::is_misuse(e);
        // A misuse or a permanent error (bad input, `Error::permanent`): no retry helps.
        let retry = config.processing_error_result() == ProcessingErrorResult::Retry
            && !misuse
            && !e.is_permanent();
        let dl_type = match config.processing_error_result() {
            ProcessingErrorResult::Fail if !misuse => format!("fail:{kind}"),
            _ => kind.to_string(),
        };
        let policy = config.mq_options().retry;
        match self.reader.as_mut() {
            Some(Reader::Offset(r)) => {
                if retry {
                    r.retry_or_dead_letter(&m, &Failure::new(kind, text))
                        .await?;
                } else {
                    r.dead_letter(&m, &Failure::new(dl_type, text)).await?;
                }
            }
            _ => {
                let lease = self.fenced_unless_held(ctx)?;
                let fence = self.fence(ctx, &lease);
                let max = m.max_retries.unwrap_or(policy.max_retries);
                if retry && m.retry_count < max {
                    let delay = backoff(&policy, m.retry_count);
                    ack_and_schedule(
                        conn,
                        &ctx.scripts.schedule,
                        &ctx.keys,
                        fence,
                        &spec.group,
                        &m,
                        delay,
                        kind,
                        &text,
                    )
                    .await?;
                } else {
                    let et = if retry {
                        format!("retries_exhausted:{kind}")
                    } else {
                        dl_type
                    };
                    let fields = encode_fields(
                        m.key.as_deref(),
                        &m.payload,
                        &m.headers,
                        m.timestamp_ms,
                        m.retry_count,
                        m.max_retries,
                    )
                    .into_iter()
                    .map(|(f, v)| (f.as_bytes().to_vec(), v))
                    .collect();
                    let cause = DeadLetterCause {
                        topic: &spec.topic,
                        partition: self.partition,
                        group: &spec.group,
                        id: &m.id,
                        original_id: m.original_id(),
                        attempts: m.retry_count.saturating_add(1),
                        error_type: &et,
                        error: &text,
                    };
                    let dlq = &ctx.scripts.dead_letter;
                    ack_and_dead_letter(conn, dlq, &ctx.keys, fence, &cause, fields).await?;
                }
            }
        }
        Ok(())
    }
}

/// The error of a take that found the partition's lease held by another owner.
fn leased_elsewhere(p: u32) -> Error {
    Error::Mq {
        op: "take partition",
        reason: format!("partition {p} is leased by another consumer"),
    }
}

/// Whether a take failed only because another owner holds the lease (not an error of
/// this process: the partition is someone else's for now).
fn is_leased_elsewhere(e: &Error) -> bool {
    matches!(
        e,
        Error::Mq {
            op: "take partition",
            ..
        }
    )
}
