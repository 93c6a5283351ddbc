//! What the job's checkpoint coordinator, its leader election and its subtasks share.

use super::CheckpointKeys;
use crate::mq::lease::Lease;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use tokio::sync::watch;

/// The checkpoint state of a running job (in `JobShared`).
pub(crate) struct CheckpointShared {
    pub(crate) keys: CheckpointKeys,
    /// A checkpoint is running in this process (single flight).
    pub(crate) running: AtomicBool,
    /// The id of the checkpoint this process opened last: its subtasks look for open
    /// checkpoints at once when it changes, instead of at their next poll.
    pub(crate) opened: watch::Sender<u64>,
    /// The latest complete checkpoint this process completed or listed (0: none).
    pub(crate) latest: AtomicU64,
    /// The leader lease this process holds, if it leads.
    pub(crate) lease: Mutex<Option<Lease>>,
    /// The leader's instance id as last seen.
    pub(crate) leader_instance: Mutex<Option<String>>,
}

impl CheckpointShared {
    pub(crate) fn new(keys: CheckpointKeys) -> Self {
        CheckpointShared {
            keys,
            running: AtomicBool::new(false),
            opened: watch::Sender::new(0),
            latest: AtomicU64::new(0),
            lease: Mutex::default(),
            leader_instance: Mutex::default(),
        }
    }

    /// The leader lease held, if this process leads.
    pub(crate) fn lease(&self) -> Option<Lease> {
        self.lease.lock().ok().and_then(|l| l.clone())
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.lease().is_some()
    }

    pub(crate) fn leader_instance(&self) -> Option<String> {
        self.leader_instance.lock().ok().and_then(|l| l.clone())
    }

    /// Notes `id` as the latest complete checkpoint seen, if it is newer.
    pub(crate) fn saw_complete(&self, id: u64) {
        self.latest.fetch_max(id, Ordering::SeqCst);
    }

    pub(crate) fn latest_id(&self) -> Option<u64> {
        Some(self.latest.load(Ordering::SeqCst)).filter(|id| *id > 0)
    }
}
