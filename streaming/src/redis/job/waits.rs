//! The waits of a [`JobClient`]: termination, caught up, flushed.

use super::caught_up::MIN_CHECK;
use super::client::JobClient;
use crate::Error;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl JobClient {
    /// Waits until every subtask stopped (after [`cancel`](Self::cancel) or a fatal
    /// error), at most `timeout`; `true` when they all stopped.
    pub fn await_termination(&self, timeout: Duration) -> bool {
        let end = deadline(timeout);
        let (lock, cv) = &self.shared.done;
        let Ok(mut guard) = lock.lock() else {
            return false;
        };
        while self.shared.running.load(Ordering::SeqCst) > 0 {
            let now = Instant::now();
            if now >= end {
                return false;
            }
            guard = match cv.wait_timeout(guard, end - now) {
                Ok((g, _)) => g,
                Err(_) => return false,
            };
        }
        true
    }

    /// Waits until the job has caught up with its streams, at most `timeout`: `true` once,
    /// for every partition of every pipeline, the partition is held by this process or by
    /// another process of the job (its lease is held: so never before the job's partitions
    /// were all taken), did not stop here, has no retry of its group scheduled, and its
    /// committed position in Redis has reached the stream's last entry as it was when
    /// checked — in [`AckMode::Xack`](crate::redis::AckMode::Xack) the group has delivered up to it and nothing is
    /// pending; in [`AckMode::Offset`](crate::redis::AckMode::Offset) the committed offset (or, for a partition held
    /// here, before its first commit, the position it was taken at) is at or past it.
    /// With several processes, any of them answers for the whole job. `false` on timeout,
    /// or at once when every subtask of this process has stopped and the job is not
    /// caught up. Checks every 20 ms over a blocking connection of its own; when it
    /// returns `true`, nothing is in flight in this process and
    /// [`diagnostics`](Self::diagnostics) already counts every record this process
    /// committed (other processes' counts are in their own diagnostics).
    ///
    /// Producers still writing move the end: it is the end as of each check. Messages
    /// produced before the job started are read only by a subscription that starts at the
    /// beginning ([`StartPolicy::Earliest`](crate::mq::StartPolicy::Earliest)): with the
    /// default start policy a new consumer group starts at the end of the stream, and the
    /// job is caught up at once without them.
    ///
    /// It returns within `timeout` — or 250 ms, the time one check may always take (so
    /// `Duration::ZERO` checks once) — whatever Redis does: each wait on
    /// Redis is bounded by the time left and by
    /// [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout). While
    /// Redis is unreachable (restarting, loading its data, frozen) it keeps checking, as
    /// the job keeps retrying; `Duration::MAX` waits without a deadline.
    ///
    /// # Errors
    /// [`Error::Connect`] (naming the address) when the time ran out while the last check
    /// could not reach Redis or got no reply in time; [`Error::Redis`] for an unexpected
    /// reply.
    pub fn await_caught_up(&self, timeout: Duration) -> Result<bool, Error> {
        let end = deadline(timeout);
        loop {
            let unreachable = match self.check_caught_up(end) {
                Ok(true) => return Ok(true),
                Ok(false) => None,
                // Redis restarting, loading or frozen: the job keeps retrying, so does the
                // wait, until its time is up.
                Err(e @ Error::Connect { .. }) => Some(e),
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if now >= end || self.cannot_progress() {
                return unreachable.map_or(Ok(false), Err);
            }
            std::thread::sleep((end - now).min(Duration::from_millis(20)));
        }
    }

    /// One [`JobShared::caught_up`](super::JobShared::caught_up) check, every wait bounded by the response timeout and
    /// the time left until `end`. Errors reaching Redis (refused, timed out, reset, still
    /// loading its data set) are [`Error::Connect`].
    fn check_caught_up(&self, end: Instant) -> Result<bool, Error> {
        let left = end.saturating_duration_since(Instant::now());
        let budget = self.shared.response_timeout.min(left).max(MIN_CHECK);
        // The check runs on a thread of its own so that the wait ends by `end` whatever
        // Redis does: a connection handshake can take its timeout once per round trip.
        // A check still running then ends by its own timeouts and is ignored.
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::clone(&self.shared);
        std::thread::spawn(move || {
            let _ = tx.send(shared.caught_up(budget, end));
        });
        let waited = rx.recv_timeout(left.max(MIN_CHECK)).unwrap_or_else(|_| {
            Err(Error::from(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no reply before the wait's deadline",
            ))))
        });
        waited.map_err(|e| match e {
            Error::Redis { source: e, .. }
                if e.is_timeout()
                    || e.is_io_error()
                    || e.is_connection_refusal()
                    || e.is_connection_dropped()
                    || e.kind() == redis::ErrorKind::BusyLoadingError =>
            {
                crate::mq::connect_error(&self.shared.endpoint, e, budget)
            }
            other => other,
        })
    }

    /// Logs a warning when `wait` returned `true` while no partition of the job has
    /// processed a record in this process: the usual cause is input produced before the
    /// job started, which a new consumer group with the default start policy skips.
    fn warn_if_nothing_read(&self, wait: &str) {
        let nothing = self
            .shared
            .progress
            .lock()
            .is_ok_and(|p| p.iter().all(|pr| pr.records == 0));
        if nothing {
            tracing::warn!(
                "{wait}: done, but no partition of the job has processed a record; messages \
                 produced before the job started are read only with StartPolicy::Earliest \
                 (the default FrontierOrLatest starts a new consumer group at the end of the \
                 stream)"
            );
        }
    }

    /// Every subtask has stopped, or every partition has (e.g. a schema mismatch under
    /// [`SchemaMismatchPolicy::Fail`](crate::redis::SchemaMismatchPolicy::Fail)).
    fn cannot_progress(&self) -> bool {
        if self.shared.running.load(Ordering::SeqCst) == 0 {
            return true;
        }
        self.shared
            .progress
            .lock()
            .is_ok_and(|p| !p.is_empty() && p.iter().all(|pr| pr.stopped.is_some()))
    }

    /// Waits until the job is done with a finite input, at most `timeout`: caught up as
    /// in [`await_caught_up`](Self::await_caught_up), and every partition with event-time
    /// work has been idle-flushed (every window and event-time timer has fired and
    /// committed), checked again after the flush so that input arriving meanwhile is not
    /// missed. A partition has such work when records went through it since its last idle
    /// flush (whatever its watermark, even `i64::MIN`), or when it was taken holding
    /// windows or event-time timers a previous run left unfired (a restart with no new
    /// input waits for that flush); see [`PartitionProgress::awaiting_flush`](super::PartitionProgress::awaiting_flush). Partitions
    /// that never received a message have nothing to flush — so produce the input before
    /// calling it (or check the record counts in [`diagnostics`](Self::diagnostics)): on a
    /// topic nothing was written to yet it returns `true` at once (and logs a `tracing`
    /// warning when no partition processed a record: input produced before the job
    /// started is read only with `StartPolicy::Earliest`). `false` on timeout or when the
    /// job cannot progress.
    ///
    /// Needs [`RedisRuntimeConfig::watermark_idle_timeout`](crate::redis::RedisRuntimeConfig::watermark_idle_timeout): the flush comes that long
    /// after a partition's last message.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `watermark_idle_timeout`) when the job has no idle
    /// timeout (nothing would ever flush); [`Error::Connect`] when a check cannot reach
    /// Redis in time (it returns within `timeout` or 250 ms, as
    /// [`await_caught_up`](Self::await_caught_up)).
    pub fn await_flushed(&self, timeout: Duration) -> Result<bool, Error> {
        if self.shared.idle_timeout.is_none() {
            return Err(Error::InvalidConfig {
                field: "watermark_idle_timeout",
                reason: "await_flushed waits for idle flushes: set \
                         RedisRuntimeConfig::watermark_idle_timeout (e.g. 500 ms)"
                    .into(),
            });
        }
        let end = deadline(timeout);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if !self.await_caught_up(left)? {
                return Ok(false);
            }
            let flushed = self
                .shared
                .progress
                .lock()
                .is_ok_and(|p| p.iter().all(|pr| !pr.awaiting_flush));
            // A failed re-check counts as not yet: the next round's wait reports it.
            if flushed && self.check_caught_up(end).unwrap_or(false) {
                self.warn_if_nothing_read("await_flushed");
                return Ok(true);
            }
            let now = Instant::now();
            if now >= end || self.cannot_progress() {
                return Ok(false);
            }
            std::thread::sleep((end - now).min(Duration::from_millis(20)));
        }
    }
}

/// `now + timeout`, or a deadline a century away when that does not fit in an `Instant`
/// (`Duration::MAX` means "no deadline").
fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}
