//! The per-partition worker of a subscription: claim, read, handle, acknowledge.
//!
//! Loop, while the partition is owned and the subscription runs:
//! 1. wait while paused;
//! 2. move due retries back into the stream ([`crate::mq::retry`]);
//! 3. every `claim_idle / 2`, `XAUTOCLAIM` entries pending longer than `claim_idle` (a
//!    dead consumer's) and handle them first; they stay in their partition; a claimed entry
//!    already delivered more than `max_retries + 1` times (its consumers kept crashing or
//!    stalling on it) is dead-lettered (`redeliveries_exhausted`) without calling the
//!    handler, so a poison message cannot crash-loop a job;
//! 4. else `XREADGROUP GROUP g c COUNT batch_count BLOCK poll_timeout STREAMS s >`;
//! 5. handle the batch in order; successes are acknowledged together at the end of the
//!    batch (one script: `XACK` + frontier), retries and dead letters one by one, each in
//!    its own atomic script. A retry entry addressed to another group (field `rg`, see
//!    [`crate::mq::retry`]) is not handed to the handler: it is acknowledged with the
//!    successes, so the commit frontier moves past it.
//!
//! A Redis error ends the step; unacknowledged entries stay pending and are claimed again
//! after `claim_idle` (at-least-once).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Connection;
use redis::{Script, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, error, warn};

use crate::mq::dlq::{ack_and_dead_letter, DeadLetterCause};
use crate::mq::group::ensure_group;
use crate::mq::handler::{CatchUnwind, Failure, HandleResult, MessageHandler};
use crate::mq::lease::Fence;
use crate::mq::message::{parse_entries, parse_read_reply, value_to_string, Message, RawEntry};
use crate::mq::options::{Assignment, MqOptions, SubscriptionOptions};
use crate::mq::retry::{ack_and_schedule, backoff, promote_due};
use crate::mq::topic::KeySpace;
use crate::mq::{frontier, retry};
use crate::Error;

/// State shared between a [`crate::mq::Subscription`] handle, its coordinator and workers
/// (not generic over the handler).
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) consumer: String,
    pub(crate) paused: watch::Sender<bool>,
    pub(crate) in_flight: AtomicU64,
    pub(crate) parked: std::sync::atomic::AtomicUsize,
    pub(crate) owned: Mutex<Vec<u32>>,
    pub(crate) assignment: Mutex<Option<Assignment>>,
    pub(crate) assignment_changed: tokio::sync::Notify,
    pub(crate) aborts: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// Everything a worker needs.
pub(crate) struct Shared<H> {
    pub(crate) ctl: Arc<Control>,
    pub(crate) endpoint: super::Endpoint,
    pub(crate) keys: KeySpace,
    pub(crate) opts: MqOptions,
    pub(crate) sub: SubscriptionOptions,
    pub(crate) topic: String,
    pub(crate) group: String,
    pub(crate) partitions: u32,
    pub(crate) handler: H,
    pub(crate) scripts: Scripts,
}

/// The Lua scripts a worker runs (hashes computed once).
pub(crate) struct Scripts {
    pub(crate) ack: Script,
    pub(crate) schedule: Script,
    pub(crate) promote: Script,
    pub(crate) dead_letter: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Self {
            ack: frontier::ack_script(),
            schedule: retry::schedule_script(),
            promote: retry::promote_script(),
            dead_letter: crate::mq::dlq::dead_letter_script(),
        }
    }
}

/// Decrements the in-flight count when a batch is done, also on error.
struct InFlight<'a>(&'a AtomicU64, u64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::SeqCst);
    }
}

/// Counts a worker as parked in pause while alive.
struct Parked<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Timers {
    next_promote: Instant,
    next_claim: Instant,
    retries_waiting: bool,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn claim_interval(opts: &MqOptions) -> Duration {
    (opts.claim_idle / 2).clamp(Duration::from_millis(10), Duration::from_secs(5))
}

/// Runs the worker of `partition` until `stop` turns true (or its sender is dropped).
pub(crate) async fn run<H: MessageHandler>(
    shared: Arc<Shared<H>>,
    partition: u32,
    mut stop: watch::Receiver<bool>,
) {
    let mut paused = shared.ctl.paused.subscribe();
    let mut conn: Option<Connection> = None;
    let mut timers = Timers {
        next_promote: Instant::now(),
        next_claim: Instant::now(),
        retries_waiting: false,
    };
    let mut failures: u32 = 0;
    loop {
        if *stop.borrow() {
            break;
        }
        if *paused.borrow() {
            shared.ctl.parked.fetch_add(1, Ordering::SeqCst);
            let _parked = Parked(&shared.ctl.parked);
            while *paused.borrow() && !*stop.borrow() {
                tokio::select! {
                    r = paused.changed() => if r.is_err() { return },
                    r = stop.changed() => if r.is_err() { return },
                }
            }
        }
        if *stop.borrow() {
            break;
        }
        let result = match conn.as_mut() {
            Some(c) => step(&shared, partition, c, &mut timers).await,
            None => match super::connect(
                &shared.endpoint,
                shared.opts.response_timeout,
                shared.sub.poll_timeout,
            )
            .await
            {
                Ok(c) => {
                    conn = Some(c);
                    Ok(())
                }
                Err(e) => Err(e),
            },
        };
        match result {
            Ok(()) => failures = 0,
            Err(e) => {
                failures = failures.saturating_add(1);
                let wait = Duration::from_millis(50u64 << failures.min(5));
                warn!(topic = %shared.topic, partition, group = %shared.group, error = %e,
                      "mq worker step failed; retrying in {wait:?}");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    r = stop.changed() => if r.is_err() { return },
                }
            }
        }
    }
    debug!(topic = %shared.topic, partition, "mq worker stopped");
}

async fn step<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    timers: &mut Timers,
) -> Result<(), Error> {
    let now = Instant::now();
    if now >= timers.next_promote {
        // Move due retries back into the stream; note whether more are waiting.
        let (t, g) = (sh.topic.as_str(), sh.group.as_str());
        let moved = promote_due(
            conn,
            &sh.scripts.promote,
            &sh.keys,
            Fence::unfenced(&sh.keys, (t, partition, g)),
            (t, partition),
            sh.sub.batch_count,
            sh.opts.max_len,
        )
        .await?;
        let waiting: u64 = redis::cmd("ZCARD")
            .arg(sh.keys.retry_due(t, partition))
            .query_async(conn)
            .await?;
        timers.retries_waiting = waiting > 0;
        timers.next_promote = now + sh.opts.retry_poll_interval;
        if moved > 0 {
            debug!(topic = t, partition, moved, "promoted due retries");
        }
    }
    let mut entries = Vec::new();
    let mut deliveries = HashMap::new();
    if now >= timers.next_claim {
        let Some(claimed) = claim_idle(sh, partition, conn, timers, now).await? else {
            return Ok(());
        };
        (entries, deliveries) = claimed;
    }
    if entries.is_empty() {
        let Some(read) = read_new(sh, partition, conn, timers).await? else {
            return Ok(());
        };
        entries = read;
    }
    if entries.is_empty() {
        return Ok(());
    }
    handle_batch(sh, partition, conn, entries, &deliveries).await
}

/// Claims pending entries idle for longer than `claim_idle` (`XAUTOCLAIM`), with their
/// delivery counts; `None` when the group had to be re-created.
async fn claim_idle<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    timers: &mut Timers,
    now: Instant,
) -> Result<Option<(Vec<RawEntry>, HashMap<String, u64>)>, Error> {
    let (t, g) = (sh.topic.as_str(), sh.group.as_str());
    let mut cmd = redis::cmd("XAUTOCLAIM");
    cmd.arg(sh.keys.stream(t, partition))
        .arg(g)
        .arg(&sh.ctl.consumer)
        .arg(ms(sh.opts.claim_idle))
        .arg("0-0")
        .arg("COUNT")
        .arg(sh.sub.batch_count);
    let Some(v) = query_or_regroup(sh, partition, conn, &cmd).await? else {
        return Ok(None);
    };
    let (more, claimed) = parse_autoclaim(&v)?;
    if !claimed.is_empty() {
        debug!(
            topic = t,
            partition,
            n = claimed.len(),
            "claimed idle pending entries"
        );
    }
    let mut deliveries = HashMap::new();
    if let (Some(first), Some(last)) = (claimed.first(), claimed.last()) {
        deliveries =
            delivery_counts(sh, partition, conn, &first.id, &last.id, claimed.len()).await?;
    }
    timers.next_claim = if more {
        now
    } else {
        now + claim_interval(&sh.opts)
    };
    Ok(Some((claimed, deliveries)))
}

/// Reads new entries (`XREADGROUP ... >`), blocking up to the poll timeout (shorter while
/// retries wait); `None` when the group had to be re-created.
async fn read_new<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    timers: &Timers,
) -> Result<Option<Vec<RawEntry>>, Error> {
    let block = if timers.retries_waiting {
        sh.sub.poll_timeout.min(sh.opts.retry_poll_interval)
    } else {
        sh.sub.poll_timeout
    };
    let mut cmd = redis::cmd("XREADGROUP");
    cmd.arg("GROUP")
        .arg(&sh.group)
        .arg(&sh.ctl.consumer)
        .arg("COUNT")
        .arg(sh.sub.batch_count)
        .arg("BLOCK")
        .arg(ms(block).max(1))
        .arg("STREAMS")
        .arg(sh.keys.stream(&sh.topic, partition))
        .arg(">");
    let Some(v) = query_or_regroup(sh, partition, conn, &cmd).await? else {
        return Ok(None);
    };
    Ok(Some(parse_read_reply(&v)?))
}

/// Delivery counts of our pending entries in `[first, last]` (`XPENDING .. consumer`).
async fn delivery_counts<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    first: &str,
    last: &str,
    count: usize,
) -> Result<HashMap<String, u64>, Error> {
    let v: Value = redis::cmd("XPENDING")
        .arg(sh.keys.stream(&sh.topic, partition))
        .arg(&sh.group)
        .arg(first)
        .arg(last)
        .arg(count)
        .arg(&sh.ctl.consumer)
        .query_async(conn)
        .await?;
    let mut out = HashMap::new();
    if let Value::Array(rows) = v {
        for row in rows {
            if let Value::Array(cols) = row {
                let id = cols.first().and_then(value_to_string);
                let n = match cols.get(3) {
                    Some(Value::Int(n)) => u64::try_from(*n).ok(),
                    _ => None,
                };
                if let (Some(id), Some(n)) = (id, n) {
                    out.insert(id, n);
                }
            }
        }
    }
    Ok(out)
}

/// Runs `cmd`; on `NOGROUP` (the group or stream was deleted under us) re-creates the
/// group from the subscription's start policy and returns `None`.
async fn query_or_regroup<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    cmd: &redis::Cmd,
) -> Result<Option<Value>, Error> {
    match cmd.query_async::<Value>(conn).await {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.code() == Some("NOGROUP") => {
            warn!(topic = %sh.topic, partition, group = %sh.group, "consumer group missing; re-creating it");
            ensure_group(
                conn,
                &sh.keys,
                &sh.topic,
                partition,
                &sh.group,
                sh.sub.start,
                false,
            )
            .await?;
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

fn parse_autoclaim(v: &Value) -> Result<(bool, Vec<RawEntry>), Error> {
    match v {
        Value::Array(parts) if parts.len() >= 2 => {
            let cursor = crate::mq::message::value_to_string(&parts[0]).unwrap_or_default();
            Ok((cursor != "0-0", parse_entries(&parts[1])?))
        }
        _ => Err(Error::Mq {
            op: "claim",
            reason: "unexpected XAUTOCLAIM reply".to_owned(),
        }),
    }
}

async fn handle_batch<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    entries: Vec<RawEntry>,
    deliveries: &HashMap<String, u64>,
) -> Result<(), Error> {
    let n = entries.len() as u64;
    sh.ctl.in_flight.fetch_add(n, Ordering::SeqCst);
    let _guard = InFlight(&sh.ctl.in_flight, n);
    let (t, g) = (sh.topic.as_str(), sh.group.as_str());
    let mut acks: Vec<String> = Vec::with_capacity(entries.len());
    for entry in entries {
        let msg = match entry.decode(t, partition) {
            Ok(m) => m,
            Err(reason) => {
                dead_letter_malformed(sh, partition, conn, entry, &reason).await?;
                continue;
            }
        };
        // Another group's retry: not ours to handle; acknowledge it so our frontier moves on.
        if !msg.is_for_group(g) {
            debug!(topic = t, partition, id = %msg.id, retry_group = ?msg.retry_group,
                   "skipping another group's retry");
            acks.push(msg.id);
            continue;
        }
        // A claimed entry delivered more often than the retry limit allows (its consumers
        // kept dying or stalling on it) is dead-lettered without calling the handler again.
        let max = msg.max_retries.unwrap_or(sh.opts.retry.max_retries);
        if let Some(&d) = deliveries.get(&msg.id) {
            if d > u64::from(max) + 1 {
                warn!(topic = t, partition, id = %msg.id, deliveries = d,
                      "entry redelivered too often → dead letter");
                let why = format!(
                    "delivered {d} times without an acknowledgement (consumer crashed or stalled)"
                );
                dead_letter(sh, conn, &msg, "redeliveries_exhausted", &why).await?;
                continue;
            }
        }
        if handle_message(sh, partition, conn, &msg).await? {
            acks.push(msg.id);
        }
    }
    frontier::ack(conn, &sh.scripts.ack, &sh.keys, t, partition, g, &acks).await?;
    Ok(())
}

/// Acknowledges and dead-letters an entry that does not decode as a message.
async fn dead_letter_malformed<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    entry: RawEntry,
    reason: &str,
) -> Result<(), Error> {
    let (t, g) = (sh.topic.as_str(), sh.group.as_str());
    warn!(topic = t, partition, id = %entry.id, %reason, "malformed entry → dead letter");
    let cause = DeadLetterCause {
        topic: t,
        partition,
        group: g,
        id: &entry.id,
        original_id: &entry.id,
        attempts: 1,
        error_type: "malformed",
        error: reason,
    };
    ack_and_dead_letter(
        conn,
        &sh.scripts.dead_letter,
        &sh.keys,
        Fence::unfenced(&sh.keys, (t, partition, g)),
        &cause,
        entry.fields,
    )
    .await?;
    Ok(())
}

/// Calls the handler on `msg` (a panic counts as a retryable failure) and carries out its
/// verdict; `true` when the message is to be acknowledged.
async fn handle_message<H: MessageHandler>(
    sh: &Shared<H>,
    partition: u32,
    conn: &mut Connection,
    msg: &Message,
) -> Result<bool, Error> {
    let t = sh.topic.as_str();
    let mut fut = std::pin::pin!(sh.handler.handle(msg.clone()));
    let verdict = match CatchUnwind(fut.as_mut()).await {
        Ok(v) => v,
        Err(panic) => {
            warn!(topic = t, partition, id = %msg.id, %panic, "handler panicked");
            HandleResult::Retry(Failure::new("panic", panic))
        }
    };
    match verdict {
        HandleResult::Success => return Ok(true),
        HandleResult::Retry(f) => retry_or_dead_letter(sh, conn, msg, &f).await?,
        HandleResult::DeadLetter(f) => {
            dead_letter(sh, conn, msg, &f.error_type, &f.message).await?;
        }
        HandleResult::Fail(f) => {
            error!(topic = t, partition, id = %msg.id, error_type = %f.error_type,
                   error = %f.message, "handler failed; message dead-lettered");
            let error_type = format!("fail:{}", f.error_type);
            dead_letter(sh, conn, msg, &error_type, &f.message).await?;
        }
    }
    Ok(false)
}

async fn retry_or_dead_letter<H: MessageHandler>(
    sh: &Shared<H>,
    conn: &mut Connection,
    msg: &Message,
    f: &Failure,
) -> Result<(), Error> {
    let max = msg.max_retries.unwrap_or(sh.opts.retry.max_retries);
    if msg.retry_count >= max {
        return dead_letter(
            sh,
            conn,
            msg,
            &format!("retries_exhausted:{}", f.error_type),
            &f.message,
        )
        .await;
    }
    let delay = backoff(&sh.opts.retry, msg.retry_count);
    let scheduled = ack_and_schedule(
        conn,
        &sh.scripts.schedule,
        &sh.keys,
        Fence::unfenced(&sh.keys, (&msg.topic, msg.partition, &sh.group)),
        &sh.group,
        msg,
        delay,
        &f.error_type,
        &f.message,
    )
    .await?;
    debug!(topic = %msg.topic, partition = msg.partition, id = %msg.id,
           retry = msg.retry_count + 1, ?delay, scheduled, "retry scheduled");
    Ok(())
}

async fn dead_letter<H: MessageHandler>(
    sh: &Shared<H>,
    conn: &mut Connection,
    msg: &Message,
    error_type: &str,
    error: &str,
) -> Result<(), Error> {
    let fields = msg.entry_fields();
    let cause = DeadLetterCause {
        topic: &msg.topic,
        partition: msg.partition,
        group: &sh.group,
        id: &msg.id,
        original_id: msg.original_id(),
        attempts: msg.retry_count.saturating_add(1),
        error_type,
        error,
    };
    let fence = Fence::unfenced(&sh.keys, (&msg.topic, msg.partition, &sh.group));
    ack_and_dead_letter(
        conn,
        &sh.scripts.dead_letter,
        &sh.keys,
        fence,
        &cause,
        fields,
    )
    .await?;
    Ok(())
}
