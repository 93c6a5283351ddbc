//! A pipeline's subtasks: one thread each, running the loop over the partitions of its
//! share (one operator chain per owned partition).

pub(crate) mod membership;

use crate::api::Sink;
use crate::dataflow::{BuildPlan, Plan};
use crate::mq::Connection;
use crate::mq::{Message, Mq};
use crate::ops::Operator;
use crate::redis::job::JobShared;
use crate::redis::metrics;
use crate::redis::partition::checkpoint_part::OpenCheckpoints;
use crate::redis::partition::context::{Ctx, PipelineSpec};
use crate::redis::partition::ownership::MAX_BACKOFF;
use crate::redis::partition::runner::MakeChain;
use crate::redis::partition::Part;
use crate::redis::state::chain::{build_chain, chain_settings};
use crate::redis::subtask::membership::Membership;
use crate::redis::RedisRuntime;
use crate::Error;
use std::cell::RefCell;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Starts the subtasks of one pipeline and registers how to start more
/// ([`SubtaskRegistry::scale`](crate::redis::job::subtasks::SubtaskRegistry::scale)). Each runs on
/// a thread of its own that nobody joins: its end is counted in the job
/// ([`JobSignals::subtask_ended`](crate::redis::job::signals::JobSignals::subtask_ended)), even
/// when it panics.
pub(crate) fn start<P, S>(plan: P, sink: S, spec: PipelineSpec, job: Arc<JobShared>)
where
    P: BuildPlan<RedisRuntime> + Plan<Head = Message> + Clone + Send + 'static,
    S: Sink<<P as Plan>::Out> + Clone + Send + 'static,
{
    let n = spec.config.pipeline_parallelism();
    let spawn = move |shared: &Arc<JobShared>, subtask: u32, siblings: Vec<String>| {
        let (plan, sink, spec) = (plan.clone(), sink.clone(), spec.clone());
        let job = Arc::clone(shared);
        job.signals.subtask_started();
        let consumer = siblings[subtask as usize % siblings.len()].clone();
        job.subtasks.register(&consumer);
        let name = format!("streaming-{}-{subtask}", spec.topic);
        let ended = SubtaskEnd {
            job: Arc::clone(&job),
            consumer: consumer.clone(),
        };
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let _ended = ended;
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
                job.error(
                    crate::redis::JobErrorKind::Task,
                    format!(
                        "subtask {subtask} of {}/{} stopped: {e}",
                        spec.topic, spec.group
                    ),
                );
            }
        });
        if let Err(e) = spawned {
            // The closure, and `ended` with it, was dropped: the subtask counts as ended.
            shared.error(
                crate::redis::JobErrorKind::Task,
                format!("cannot spawn subtask {subtask}: {e}"),
            );
        }
    };
    let names: Vec<String> = (0..n).map(|_| job.consumer_name()).collect();
    for subtask in 0..n {
        spawn(&job, subtask, names.clone());
    }
    // The registry belongs to the job: its spawner holds the job weakly (no cycle).
    let weak = Arc::downgrade(&job);
    let spawn_more = move |subtask: u32, siblings: Vec<String>| {
        if let Some(job) = weak.upgrade() {
            spawn(&job, subtask, siblings);
        }
    };
    job.subtasks.add_pipeline(names, Box::new(spawn_more));
}

/// Counts a subtask's end in the job when dropped: at the end of its thread, when the
/// thread unwinds from a panic, or when it could not be spawned.
struct SubtaskEnd {
    job: Arc<JobShared>,
    consumer: String,
}

impl Drop for SubtaskEnd {
    fn drop(&mut self) {
        self.job.subtasks.left(&self.consumer);
        self.job.signals.subtask_ended();
    }
}

/// Runs `subtask` until it ends, or until the job's stop deadline (`response_timeout`
/// after the cancel): a subtask still waiting on a frozen or silent Redis by then is
/// dropped where it stands (its uncommitted batch is read again by the next run; its
/// leases expire), so that [`JobClient::shutdown`](crate::redis::JobClient::shutdown) can wait
/// for it within a bound.
async fn bounded_by_cancel(
    subtask: impl std::future::Future<Output = Result<(), Error>>,
    job: &JobShared,
) -> Result<(), Error> {
    tokio::select! {
        r = subtask => r,
        () = job.signals.stop_deadline_passed() => {
            tracing::warn!("subtask still waiting on Redis {:?} after the cancel: dropped", job.config.mq_options().response_timeout);
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
    let config = &spec.config;
    let mut backoff = crate::mq::Backoff::new(Duration::from_millis(100), MAX_BACKOFF);
    while !job.signals.is_cancelled() {
        let opened = async {
            let mq = Mq::from_endpoint(spec.endpoint.clone(), config.mq_options().clone()).await?;
            let partitions = mq.partitions(&spec.topic).await?;
            Ok::<_, Error>((mq, partitions))
        }
        .await;
        match opened {
            Ok(opened) => return Ok(Some(opened)),
            Err(e @ (Error::Connect { .. } | Error::Redis { .. })) => {
                job.error(
                    crate::redis::JobErrorKind::Task,
                    format!(
                        "subtask {subtask} of {}/{}: cannot start, retrying: {e}",
                        spec.topic, spec.group
                    ),
                );
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
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
    P: BuildPlan<RedisRuntime> + Plan<Head = Message> + Clone + 'static,
    S: Sink<<P as Plan>::Out> + Clone,
{
    let opened = open_queue(spec, subtask, job).await;
    if subtask == 0 && opened.is_err() {
        let (name, topic, group) = (spec.config.job_name(), &spec.topic, &spec.group);
        metrics::job::pipeline(name, topic, group, false);
    }
    let Some((mq, partitions)) = opened? else {
        return Ok(());
    };
    let ctx = Ctx::new(spec, job, mq, consumer, subtask);
    let mut conn = ctx.mq.connection();
    let settings = chain_settings(&spec.config);
    let make: MakeChain<_, _> =
        Rc::new(move |out: &Rc<RefCell<Vec<_>>>| build_chain(&plan, out, settings));
    let renew_every = spec.config.mq_options().lease_renew_interval;
    let mut members = Membership::new(&ctx, siblings, partitions);
    let mut parts = BTreeMap::new();
    // Idle turns wait 1 ms, doubling up to min(poll_timeout, 10 ms): a steady input
    // that the subtask keeps catching up with waits ~1 ms, an idle one costs little.
    let longest = spec.options.poll_timeout.min(Duration::from_millis(10));
    let mut idle = crate::mq::Backoff::new(Duration::from_millis(1).min(longest), longest);
    let mut checkpoints = OpenCheckpoints::new(&ctx);
    while !job.signals.is_cancelled() && !members.leaving() {
        if members.due() {
            rebalance(&ctx, &mut conn, &mut members, &mut parts, &make, &sink).await?;
        }
        if job.paused.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        checkpoints.poll(&ctx, &mut conn).await;
        let mut busy = false;
        for part in parts.values_mut() {
            if job.signals.is_cancelled() || part.stopped {
                continue;
            }
            part.checkpoint(&ctx, &mut conn, &checkpoints.open).await;
            busy |= part.turn(&ctx, &mut conn, renew_every).await;
        }
        if busy {
            // Batches committed and left `in_flight` (their progress signalled already,
            // while they were still in flight).
            job.signals.signal_change();
            idle.reset();
        } else {
            tokio::time::sleep(idle.next_delay()).await;
        }
    }
    for part in std::mem::take(&mut parts).into_values() {
        part.hand_over(&ctx, &mut conn).await;
    }
    members.leave(&ctx, &mut conn).await;
    Ok(())
}

/// Heartbeats the membership, sets up the partitions that joined this subtask's share and
/// hands over those that left it.
async fn rebalance<C, S, O>(
    ctx: &Ctx<'_>,
    conn: &mut Connection,
    members: &mut Membership,
    parts: &mut BTreeMap<u32, Part<C, S, O>>,
    make: &MakeChain<C, O>,
    sink: &S,
) -> Result<(), Error>
where
    C: Operator<Message>,
    S: Sink<O> + Clone,
{
    if let Err(e) = members.heartbeat(ctx, conn).await {
        ctx.job.error(
            crate::redis::JobErrorKind::Task,
            format!(
                "subtask {} of {}/{}: membership heartbeat failed: {e}",
                ctx.subtask, ctx.spec.topic, ctx.spec.group
            ),
        );
    }
    for p in members.assigned() {
        if let Entry::Vacant(e) = parts.entry(p) {
            e.insert(Part::new(ctx, p, Rc::clone(make), sink.clone())?);
        }
    }
    let leaving: Vec<u32> = (parts.keys().copied())
        .filter(|p| !members.is_assigned(*p))
        .collect();
    for p in leaving {
        if let Some(part) = parts.remove(&p) {
            part.hand_over(ctx, conn).await;
        }
    }
    Ok(())
}
