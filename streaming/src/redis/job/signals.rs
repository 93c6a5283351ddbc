//! A running job's lifecycle signals: the cancel and its deadline, the subtasks and
//! background tasks running, and the change signal that wakes the client's waits.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// See the module docs.
pub(crate) struct JobSignals {
    cancelled: AtomicBool,
    /// Subtasks started and not ended.
    running: AtomicUsize,
    /// Background tasks started and not ended (the registry, checkpoints and leader
    /// election, topic forwarders: see `task::spawn_task`).
    tasks: AtomicUsize,
    /// Bumped after every change a wait of the client checks (a commit, a take, a let-go,
    /// a stop, an error, a subtask's end, the cancel): the waits sleep on it instead of
    /// polling. Its value is a change counter and means nothing else.
    changes: watch::Sender<u64>,
    /// Set with `cancelled` (which the subtask loops read): what
    /// [`cancelled_signal`](Self::cancelled_signal) waits on, apart from `changes` so that
    /// commits do not wake every subtask.
    cancel_signal: watch::Sender<bool>,
    /// One response timeout after the cancel (set by it): by then every subtask and
    /// background task of the job has ended, whatever Redis does.
    stop_deadline: OnceLock<Instant>,
    /// Bumped by the cancel and by each subtask's end: what
    /// [`stopping_signal`](Self::stopping_signal) waits on (commits do not wake it).
    stopping_changes: watch::Sender<u64>,
}

impl Default for JobSignals {
    fn default() -> Self {
        JobSignals {
            cancelled: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            tasks: AtomicUsize::new(0),
            changes: watch::Sender::new(0),
            cancel_signal: watch::Sender::new(false),
            stop_deadline: OnceLock::new(),
            stopping_changes: watch::Sender::new(0),
        }
    }
}

impl JobSignals {
    /// Asks every subtask to stop (they finish their batch, hand their partitions over
    /// and end) and wakes whatever waits for that. Returns at once; `true` on the first
    /// call, which sets the [`stop_deadline`](Self::stop_deadline) `response_timeout`
    /// from now.
    pub(crate) fn cancel(&self, response_timeout: Duration) -> bool {
        let first = !self.cancelled.swap(true, Ordering::SeqCst);
        // Set before the signal, so that whoever it wakes finds the deadline.
        let _ = (self.stop_deadline).get_or_init(|| Instant::now() + response_timeout);
        self.cancel_signal.send_replace(true);
        self.stopping_changes
            .send_modify(|n| *n = n.wrapping_add(1));
        self.signal_change();
        first
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// One response timeout after the cancel (`None` before it): the instant by which
    /// every subtask and background task of the job ends, whatever Redis does. What a
    /// task does after the cancel (a last commit, leaving the registry, releasing the
    /// leader lease, forwarding what the outboxes hold) is best effort within it.
    pub(crate) fn stop_deadline(&self) -> Option<Instant> {
        self.stop_deadline.get().copied()
    }

    /// Returns at the [`stop_deadline`](Self::stop_deadline): a task still running then
    /// is dropped where it stands.
    pub(crate) async fn stop_deadline_passed(&self) {
        self.cancelled_signal().await;
        if let Some(at) = self.stop_deadline() {
            tokio::time::sleep_until(at).await;
        }
    }

    /// Returns once the job is cancelled or none of its subtasks runs any more (they all
    /// stopped on errors): when its background tasks stop.
    pub(crate) async fn stopping_signal(&self) {
        let mut changes = self.stopping_changes.subscribe();
        if changes.wait_for(|_| self.stopping()).await.is_err() {
            // The sender lives as long as `self`: not reached.
            std::future::pending::<()>().await;
        }
    }

    /// Whether the job is cancelled or none of its subtasks runs any more.
    pub(crate) fn stopping(&self) -> bool {
        self.is_cancelled() || self.running() == 0
    }

    /// Returns once the job is cancelled ([`cancel`](Self::cancel)).
    pub(crate) async fn cancelled_signal(&self) {
        let mut cancelled = self.cancel_signal.subscribe();
        if cancelled.wait_for(|c| *c).await.is_err() {
            // The sender lives as long as `self`: not reached.
            std::future::pending::<()>().await;
        }
    }

    /// Wakes the client's waits: something they check may have changed. Called after the
    /// change is visible (progress recorded, records out of `in_flight`, a subtask gone).
    pub(crate) fn signal_change(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver of the change signal ([`signal_change`](Self::signal_change)); changes
    /// before this call count as seen.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Subtasks started and not ended.
    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Background tasks started and not ended.
    pub(crate) fn tasks_running(&self) -> usize {
        self.tasks.load(Ordering::SeqCst)
    }

    pub(crate) fn task_started(&self) {
        self.tasks.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn task_ended(&self) {
        self.tasks.fetch_sub(1, Ordering::SeqCst);
        self.signal_change();
    }

    pub(crate) fn subtask_started(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn subtask_ended(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.stopping_changes
            .send_modify(|n| *n = n.wrapping_add(1));
        self.signal_change();
    }
}
