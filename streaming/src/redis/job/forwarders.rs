//! The forwarders a Redis job starts itself: one per pipeline ending in a
//! [`RedisTopicSink`](crate::redis::sinks::topics::RedisTopicSink) (unless the sink opted out), over every
//! partition of the pipeline's source topic, in each process of the job, until the job is
//! cancelled; then, once the job's subtasks have stopped, each forwards what its outboxes
//! hold until the job's stop deadline (one response timeout after the cancel) before it
//! stops, and the job's termination waits for that.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::mq::{Backoff, Mq, MqOptions};
use crate::redis::job::{spawn_task, JobShared};
use crate::redis::sinks::topics::forwarder::{RedisTopicForwarder, TopicForwarding};
use crate::redis::sinks::topics::run::{ErrorSink, Share};

/// Starts the job's forwarders for `pairs` (source topic, target topic) on a thread of
/// their own. A forwarder that cannot start (Redis unreachable, the target topic missing)
/// is reported in the job's errors and tried again with backoff (up to 10 s).
pub(crate) fn start_job_forwarders(
    job: &Arc<JobShared>,
    opts: MqOptions,
    mut pairs: Vec<(String, Arc<str>)>,
) {
    // Two pipelines of one source (two groups) into one target share the outbox.
    pairs.sort();
    pairs.dedup();
    if pairs.is_empty() {
        return;
    }
    let what = ("streaming-forwarders", "topic forwarders");
    spawn_task(
        job,
        what,
        |_| {},
        |job| async move { run(&job, opts, pairs).await },
    );
}

/// Starts what is waiting until all run, then waits for the cancel and stops them.
async fn run(job: &Arc<JobShared>, opts: MqOptions, mut waiting: Vec<(String, Arc<str>)>) {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
    let mut running: Vec<TopicForwarding> = Vec::new();
    let mut mq: Option<Mq> = None;
    while !job.signals.is_cancelled() {
        if !waiting.is_empty() {
            if mq.is_none() {
                match Mq::connect_to(job.endpoint.clone(), opts.clone()).await {
                    Ok(m) => mq = Some(m),
                    Err(e) => job.error(
                        crate::redis::JobErrorKind::Task,
                        format!("topic forwarders: {e}"),
                    ),
                }
            }
            if let Some(mq) = &mq {
                waiting = start_waiting(job, mq, waiting, &mut running).await;
            }
        }
        if waiting.is_empty() {
            job.signals.cancelled_signal().await;
            break;
        }
        tokio::select! {
            () = job.signals.cancelled_signal() => {}
            () = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
    // The last batches commit while the subtasks stop: wait for them (each stops by the
    // job's stop deadline), then forward what they left until that deadline — also with
    // a forwarder that could not start so far (its target topic created late), if it
    // starts now. What is left then stays in the outboxes for the next run.
    let by =
        (job.signals.stop_deadline()).unwrap_or_else(|| Instant::now() + opts.response_timeout);
    let mut changes = job.signals.changes();
    let stopped = changes.wait_for(|_| job.signals.running() == 0);
    let _ = tokio::time::timeout_at(by, stopped).await;
    if let (false, Some(mq)) = (waiting.is_empty(), &mq) {
        let _ = tokio::time::timeout_at(by, start_waiting(job, mq, waiting, &mut running)).await;
    }
    for f in running {
        f.drain(by.saturating_duration_since(Instant::now())).await;
    }
}

/// Starts each waiting forwarder; the ones that could not start.
async fn start_waiting(
    job: &Arc<JobShared>,
    mq: &Mq,
    waiting: Vec<(String, Arc<str>)>,
    running: &mut Vec<TopicForwarding>,
) -> Vec<(String, Arc<str>)> {
    let mut still = Vec::new();
    for (source, target) in waiting {
        let started = match RedisTopicForwarder::builder(mq, &source, &target).build() {
            Ok(f) => {
                let reporting = Arc::clone(job);
                let report: ErrorSink =
                    Arc::new(move |e| reporting.error(crate::redis::JobErrorKind::Task, e));
                // Each process forwards the source partitions it holds (for any group).
                let holding = Arc::clone(job);
                let topic = source.clone();
                let share: Share = Arc::new(move |p| holding.holds_partition(&topic, p));
                f.start_reporting(Some(report), Some(share)).await
            }
            Err(e) => Err(e),
        };
        match started {
            Ok(f) => running.push(f),
            Err(e) => {
                job.error(
                    crate::redis::JobErrorKind::Task,
                    format!(
                        "topic forwarder `{source}` → `{target}` did not start (trying again): {e}"
                    ),
                );
                still.push((source, target));
            }
        }
    }
    still
}
