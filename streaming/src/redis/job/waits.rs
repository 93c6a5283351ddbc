//! The waits of a [`JobClient`]: termination, caught up, flushed. Each is `async` and
//! sleeps on the job's change signal (commits, takes, stops); each has a `blocking_`
//! variant that runs it on a runtime of its own.

use super::caught_up::{Check, Goal, MIN_CHECK};
use super::client::JobClient;
use super::shared::JobShared;
use crate::mq::Connection;
use crate::Error;
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often a wait checks Redis again while what it waits for shows only there (a
/// partition another process holds, or nobody) or Redis does not answer: nothing in this
/// process signals those changes.
const RECHECK: Duration = Duration::from_millis(100);

/// The least time between the starts of two checks of Redis woken by this process's
/// changes: a busy job commits far more often than a wait needs to look.
const MIN_SPACING: Duration = Duration::from_millis(5);

impl JobClient {
    /// Waits until every subtask stopped (after [`cancel`](Self::cancel) or a fatal
    /// error), at most `timeout` (`Duration::MAX`: no deadline); `true` when they all
    /// stopped and so did the job's background tasks: the job registry's (the instance
    /// left the registry, its key removed), the checkpoints and leader election (the
    /// leader lease released), the topic forwarders (they forwarded what the last
    /// batches committed, see [`RedisTopicSink`](crate::redis::RedisTopicSink)). After a
    /// cancel each of them ends within about
    /// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout) whatever
    /// Redis does; what it could not do by then (Redis frozen or silent) is left to
    /// expire, or to the job's next run. It asks nothing of Redis.
    pub async fn await_termination(&self, timeout: Duration) -> bool {
        let end = deadline(timeout);
        let job = &*self.shared;
        let mut changes = job.signals.changes();
        let stopped = async {
            changes
                .wait_for(|_| job.signals.running() == 0 && job.signals.tasks_running() == 0)
                .await
                .is_ok()
        };
        tokio::time::timeout_at(end, stopped).await == Ok(true)
    }

    /// [`await_termination`](Self::await_termination), blocking the calling thread.
    ///
    /// # Panics
    /// When called from within an async runtime (it would block the runtime's thread):
    /// `.await` [`await_termination`](Self::await_termination) there (a
    /// `spawn_blocking` thread may call it).
    pub fn blocking_await_termination(&self, timeout: Duration) -> bool {
        block_on(
            "blocking_await_termination",
            self.await_termination(timeout),
        )
        .unwrap_or(false)
    }

    /// Waits until the job has caught up with its streams, at most `timeout`: `true` once,
    /// for every partition of every pipeline, the partition is held by this process or by
    /// another process of the job (its lease is held: so never before the job's partitions
    /// were all taken; a lease whose owner missed two membership heartbeats — every
    /// `lease_renew_interval` — counts as not held: its process was killed, frozen or cut
    /// off, and nobody works on the partition until a live subtask takes it), did not stop here, has no retry of its group scheduled, and its
    /// committed position in Redis has reached the stream's last entry as it was when
    /// checked — in [`AckMode::Xack`](crate::redis::AckMode::Xack) the group has delivered up to it and nothing is
    /// pending; in [`AckMode::Offset`](crate::redis::AckMode::Offset) the committed offset (or, for a partition held
    /// here, before its first commit, the position it was taken at) is at or past it. For
    /// a pipeline of several topics (`union`, `connect`), the same partition of every
    /// other input also has no retry of its group scheduled, and the position the job
    /// committed for it has reached that stream's last entry.
    /// With several processes, any of them answers for the whole job. `false` on timeout,
    /// or at once when every subtask of this process has stopped and the job is not
    /// caught up. When it returns `true`, nothing is in flight in this process and
    /// [`diagnostics`](Self::diagnostics) already counts every record this process
    /// committed (other processes' counts are in their own diagnostics).
    ///
    /// It checks Redis once at the start, then again after each change in this process
    /// (a commit, a partition taken or let go, a stop), over one connection of its own
    /// that it keeps for the whole wait; every 100 ms instead while what it waits for is
    /// only visible in Redis (partitions held by another process, or by nobody yet, a
    /// retry scheduled) or Redis does not answer. Between changes it holds no thread:
    /// it runs on any tokio runtime, a current-thread one included.
    ///
    /// Producers still writing move the end: it is the end as of each check. Messages
    /// produced before the job started are read only by a subscription that starts at the
    /// beginning ([`StartPolicy::Earliest`](crate::mq::StartPolicy::Earliest)): with the
    /// default start policy a new consumer group starts at the end of the stream, and the
    /// job is caught up at once without them.
    ///
    /// It returns within `timeout` — or 250 ms, the time one check may always take (so
    /// `Duration::ZERO` checks once) — whatever Redis does: each wait on Redis is bounded
    /// by the time left and by
    /// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout). While
    /// Redis is unreachable (restarting, loading its data, frozen) it keeps checking, as
    /// the job keeps retrying; `Duration::MAX` waits without a deadline.
    ///
    /// # Errors
    /// [`Error::Connect`] (naming the address) when the time ran out while the last check
    /// could not reach Redis or got no reply in time; [`Error::Redis`] for an unexpected
    /// reply.
    pub async fn await_caught_up(&self, timeout: Duration) -> Result<bool, Error> {
        Waiter::new(&self.shared, timeout, Goal::CaughtUp)
            .caught_up()
            .await
    }

    /// [`await_caught_up`](Self::await_caught_up), blocking the calling thread.
    ///
    /// # Errors
    /// As [`await_caught_up`](Self::await_caught_up); [`Error::Engine`] when no runtime
    /// can be started for the wait (e.g. no file descriptor left).
    ///
    /// # Panics
    /// When called from within an async runtime (it would block the runtime's thread):
    /// `.await` [`await_caught_up`](Self::await_caught_up) there (a
    /// `spawn_blocking` thread may call it).
    pub fn blocking_await_caught_up(&self, timeout: Duration) -> Result<bool, Error> {
        block_on("blocking_await_caught_up", self.await_caught_up(timeout))?
    }

    /// Waits until the job is done with a finite input, at most `timeout`: caught up as
    /// in [`await_caught_up`](Self::await_caught_up), and every partition of the job with
    /// event-time work — whichever process holds it — has been idle-flushed (every window
    /// and event-time timer has fired and committed). A partition has such work when
    /// records went through it since its last idle flush (whatever its watermark, even
    /// `i64::MIN`), or when it was taken holding windows or event-time timers a previous
    /// run left unfired (a restart with no new input waits for that flush); see
    /// [`PartitionProgress::awaiting_flush`](super::PartitionProgress::awaiting_flush). Each commit records this in Redis under the
    /// partition's lease (the key `{prefix}:{{topic:n}}:flushpending:{group}`), in the
    /// same transaction as the batch, so a partition left by a killed process stays
    /// unflushed until its next owner has flushed it, and one check sees the whole job
    /// at once: the stream's end, the committed position and the mark of a partition are
    /// read together, so input arriving during a flush is not missed. Partitions
    /// that never received a message have nothing to flush — so produce the input before
    /// calling it (or check the record counts in [`diagnostics`](Self::diagnostics)): on a
    /// topic nothing was written to yet it returns `true` at once (and logs a `tracing`
    /// warning when no partition processed a record: input produced before the job
    /// started is read only with `StartPolicy::Earliest`). `false` on timeout or when the
    /// job cannot progress. It checks Redis as
    /// [`await_caught_up`](Self::await_caught_up) does, woken by the job's changes (an
    /// idle flush is one), and runs on any tokio runtime.
    ///
    /// When it returns `true`, [`diagnostics`](Self::diagnostics) already counts every
    /// idle flush this process committed (`idle_flushes`).
    ///
    /// Needs [`RedisRuntimeConfig::watermark_idle_timeout`](crate::redis::RedisRuntimeConfig::watermark_idle_timeout): the flush comes that long
    /// after a partition's last message.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `watermark_idle_timeout`) when the job has no idle
    /// timeout (nothing would ever flush); [`Error::Connect`] when a check cannot reach
    /// Redis in time (it returns within `timeout` or 250 ms, as
    /// [`await_caught_up`](Self::await_caught_up)).
    pub async fn await_flushed(&self, timeout: Duration) -> Result<bool, Error> {
        if self.shared.config.watermark_idle_timeout().is_none() {
            return Err(Error::InvalidConfig {
                field: "watermark_idle_timeout",
                reason: "await_flushed waits for idle flushes: set \
                         RedisRuntimeConfig::watermark_idle_timeout (e.g. 500 ms)"
                    .into(),
            });
        }
        let mut wait = Waiter::new(&self.shared, timeout, Goal::Flushed);
        let flushed = wait.caught_up().await?;
        if flushed {
            self.warn_if_nothing_read("await_flushed");
        }
        Ok(flushed)
    }

    /// [`await_flushed`](Self::await_flushed), blocking the calling thread.
    ///
    /// # Errors
    /// As [`await_flushed`](Self::await_flushed); [`Error::Engine`] when no runtime can
    /// be started for the wait (e.g. no file descriptor left).
    ///
    /// # Panics
    /// When called from within an async runtime (it would block the runtime's thread):
    /// `.await` [`await_flushed`](Self::await_flushed) there (a
    /// `spawn_blocking` thread may call it).
    pub fn blocking_await_flushed(&self, timeout: Duration) -> Result<bool, Error> {
        block_on("blocking_await_flushed", self.await_flushed(timeout))?
    }

    /// Logs a warning when `wait` returned `true` while no partition of this process has
    /// processed a record or idle-flushed: the usual cause is input produced before the
    /// job first started, which a new consumer group with the default start policy
    /// skips. (A process that only flushed what a killed one left, or another process
    /// that did the work, is not warned about.)
    fn warn_if_nothing_read(&self, wait: &str) {
        let nothing = (self.shared.partitions.progress().iter())
            .all(|pr| pr.records == 0 && pr.idle_flushes == 0);
        if nothing {
            tracing::warn!(
                "{wait}: done, but no partition has processed a record or flushed windows in \
                 this process; if the input was produced before the job first started: such \
                 messages are read only with StartPolicy::Earliest (the default \
                 FrontierOrLatest starts a new consumer group at the end of the stream)"
            );
        }
    }
}

impl JobShared {
    /// Every subtask has stopped, or every partition has (e.g. a schema mismatch under
    /// [`SchemaMismatchPolicy::Fail`](crate::redis::SchemaMismatchPolicy::Fail)).
    fn cannot_progress(&self) -> bool {
        if self.signals.running() == 0 {
            return true;
        }
        let all = self.partitions.progress();
        !all.is_empty() && all.iter().all(|pr| pr.stopped.is_some())
    }
}

/// One caught-up wait: the job's change signal, the deadline, and the connection its
/// checks share (opened by the first, opened again after a failure).
struct Waiter<'a> {
    job: &'a JobShared,
    goal: Goal,
    changes: watch::Receiver<u64>,
    end: Instant,
    conn: Option<Connection>,
    last_check: Option<Instant>,
}

impl<'a> Waiter<'a> {
    fn new(job: &'a JobShared, timeout: Duration, goal: Goal) -> Self {
        Waiter {
            job,
            goal,
            changes: job.signals.changes(),
            end: deadline(timeout),
            conn: None,
            last_check: None,
        }
    }

    fn expired(&self) -> bool {
        Instant::now() >= self.end
    }

    /// Checks until caught up (`true`), the deadline passes or the job cannot progress
    /// (`false`, or the last check's connection error).
    async fn caught_up(&mut self) -> Result<bool, Error> {
        loop {
            let (unreachable, recheck) = match self.check().await {
                Ok(Check::CaughtUp) => return Ok(true),
                Ok(Check::AwaitingHere) => (None, None),
                Ok(Check::AwaitingRedis) => (None, Some(RECHECK)),
                // Redis restarting, loading or frozen: the job keeps retrying, so does the
                // wait, until its time is up.
                Err(e @ Error::Connect { .. }) => (Some(e), Some(RECHECK)),
                Err(e) => return Err(e),
            };
            if self.expired() || self.job.cannot_progress() {
                return unreachable.map_or(Ok(false), Err);
            }
            if !self.next_change(recheck).await {
                return unreachable.map_or(Ok(false), Err);
            }
        }
    }

    /// One check ([`JobShared::caught_up`]) on the wait's connection, bounded by the time
    /// left (at least [`MIN_CHECK`]). Changes signalled from now on wake the next
    /// [`next_change`](Self::next_change). Errors reaching Redis (refused, timed out,
    /// reset, still loading its data set) are [`Error::Connect`], and drop the connection.
    async fn check(&mut self) -> Result<Check, Error> {
        self.changes.borrow_and_update();
        let now = Instant::now();
        self.last_check = Some(now);
        let bound = self.end.saturating_duration_since(now).max(MIN_CHECK);
        let (job, goal) = (self.job, self.goal);
        let timeout = job.config.mq_options().response_timeout;
        let conn = &mut self.conn;
        let checked = tokio::time::timeout(bound, async {
            let conn = match conn {
                Some(c) => c,
                None => {
                    conn.insert(crate::mq::connect(&job.endpoint, timeout, Duration::ZERO).await?)
                }
            };
            job.caught_up(conn, goal).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(Error::from(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no reply before the wait's deadline",
            ))))
        });
        let checked = checked.map_err(|e| match e {
            Error::Redis { source: e, .. }
                if e.is_timeout()
                    || e.is_io_error()
                    || e.is_connection_refusal()
                    || e.is_connection_dropped()
                    || e.kind() == redis::ErrorKind::BusyLoadingError =>
            {
                crate::mq::connect_error(&job.endpoint, e, timeout.min(bound))
            }
            other => other,
        });
        if matches!(checked, Err(Error::Connect { .. })) {
            // A connection that failed, or whose reply is still due, is not reused: the
            // next check connects again.
            self.conn = None;
        }
        checked
    }

    /// Waits for the next change the job signals, or with `recheck` at most that long;
    /// `false` when the deadline passed first. A change within [`MIN_SPACING`] of the
    /// last check waits out the rest of it.
    async fn next_change(&mut self, recheck: Option<Duration>) -> bool {
        let changes = &mut self.changes;
        let changed = async {
            if changes.changed().await.is_err() {
                // The job outlives the wait, and the signal with it: not reached.
                std::future::pending::<()>().await;
            }
        };
        let woken = async {
            match recheck {
                Some(d) => {
                    let _ = tokio::time::timeout(d, changed).await;
                }
                None => changed.await,
            }
        };
        if tokio::time::timeout_at(self.end, woken).await.is_err() {
            return false;
        }
        if let Some(last) = self.last_check {
            tokio::time::sleep_until((last + MIN_SPACING).min(self.end)).await;
        }
        true
    }
}

/// `now + timeout`, or a deadline a century away when that does not fit in an `Instant`
/// (`Duration::MAX` means "no deadline").
fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// Runs `wait` to its end on a current-thread runtime of its own, for the `blocking_`
/// waits (`what` names the one called).
///
/// # Errors
/// [`Error::Engine`] when no runtime can be started.
///
/// # Panics
/// When called from within an async runtime (tokio's "cannot start a runtime from within
/// a runtime"); a thread of `spawn_blocking` may call it.
pub(super) fn block_on<F: Future>(what: &'static str, wait: F) -> Result<F::Output, Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Engine {
            op: what,
            reason: format!("cannot start a tokio runtime for the wait: {e}"),
        })?;
    Ok(rt.block_on(wait))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::RedisRuntimeConfig;
    use std::sync::Arc;

    /// A client of a job with no pipeline whose Redis refuses connections (port 1).
    fn client() -> JobClient {
        let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
        let shared = JobShared::new(
            &RedisRuntimeConfig::default(),
            crate::mq::Endpoint::single(client),
            Vec::new(),
        );
        JobClient::new(Arc::new(shared))
    }

    fn is_send<T: Send>(_: &T) {}

    #[test]
    fn the_waits_futures_are_send() {
        let job = client();
        is_send(&job.await_termination(Duration::ZERO));
        is_send(&job.await_caught_up(Duration::ZERO));
        is_send(&job.await_flushed(Duration::ZERO));
        is_send(&job.shutdown(Duration::ZERO));
    }

    #[test]
    fn await_termination_wakes_when_the_last_subtask_ends() {
        let job = client();
        job.shared.signals.subtask_started();
        let shared = Arc::clone(&job.shared);
        let ending = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            shared.signals.subtask_ended();
        });
        assert!(!job.blocking_await_termination(Duration::ZERO));
        assert!(job.blocking_await_termination(Duration::MAX));
        ending.join().unwrap();
    }

    #[test]
    fn blocking_waits_run_on_a_spawn_blocking_thread_and_panic_in_async_code() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let job = client();
        let waiting = rt.spawn_blocking(move || {
            let stopped = job.blocking_await_termination(Duration::ZERO);
            (job, stopped)
        });
        let (job, stopped) = rt.block_on(waiting).unwrap();
        assert!(stopped, "no subtask runs");
        let in_async = rt.block_on(async {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                job.blocking_await_termination(Duration::ZERO)
            }))
        });
        assert!(in_async.is_err());
    }

    #[test]
    fn a_wait_that_cannot_reach_redis_ends_by_its_deadline_naming_the_address() {
        let job = client();
        job.shared.signals.subtask_started();
        let t = std::time::Instant::now();
        match job.blocking_await_caught_up(Duration::from_millis(300)) {
            Err(Error::Connect { addr, .. }) => assert_eq!(addr, "127.0.0.1:1"),
            other => panic!("expected a connect error, got {other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}
