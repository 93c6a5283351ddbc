//! The partitions a job's process has met: one entry per partition, registered once when a
//! subtask opens it, holding its progress, the subtask that holds it and where the group
//! was when it was taken. A batch updates its own partition's entry through its
//! [`PartitionHandle`], without a job-wide lock or a search.

pub(crate) use super::addr::PartitionAddr;
use super::progress::PartitionProgress;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// What the job knows of one partition in this process.
#[derive(Debug)]
pub(crate) struct PartitionEntry {
    pub(crate) progress: PartitionProgress,
    /// The consumer name of the subtask that took the partition last: only it clears
    /// [`PartitionProgress::owned`] when it lets go.
    pub(crate) holder: Option<String>,
    /// Offset mode: the group's read position when the partition was taken — what is
    /// committed before the first commit of this run.
    pub(crate) taken_at: Option<String>,
}

/// One partition's entry, shared by the subtask holding the partition and the job's
/// client. Cloning it clones the handle, not the entry.
#[derive(Clone, Debug)]
pub(crate) struct PartitionHandle {
    addr: PartitionAddr,
    entry: Arc<Mutex<PartitionEntry>>,
}

impl PartitionHandle {
    fn new(addr: PartitionAddr) -> Self {
        let progress = PartitionProgress {
            topic: addr.topic.to_string(),
            group: addr.group.to_string(),
            partition: addr.partition,
            ..PartitionProgress::default()
        };
        PartitionHandle {
            addr,
            entry: Arc::new(Mutex::new(PartitionEntry {
                progress,
                holder: None,
                taken_at: None,
            })),
        }
    }

    /// The partition.
    pub(crate) fn addr(&self) -> &PartitionAddr {
        &self.addr
    }

    /// Its entry, locked (a poisoned lock is taken over: the entry holds counters only).
    pub(crate) fn lock(&self) -> MutexGuard<'_, PartitionEntry> {
        self.entry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `error` as the partition's last error, now.
    pub(crate) fn failed(&self, error: &str, at: SystemTime) {
        let mut e = self.lock();
        e.progress.last_error = Some(error.to_string());
        e.progress.last_error_at = Some(at);
    }
}

/// Every partition's entry, in the order they were registered.
#[derive(Default)]
pub(crate) struct PartitionBoard {
    all: Mutex<Vec<PartitionHandle>>,
}

impl PartitionBoard {
    /// The handle of `addr`'s entry, registered now if it is new.
    pub(crate) fn register(&self, addr: &PartitionAddr) -> PartitionHandle {
        let mut all = self.all.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = all.iter().find(|h| h.addr == *addr) {
            return h.clone();
        }
        let h = PartitionHandle::new(addr.clone());
        all.push(h.clone());
        h
    }

    /// The handle of partition `partition` of (`topic`, `group`), if registered.
    pub(crate) fn find(&self, topic: &str, group: &str, partition: u32) -> Option<PartitionHandle> {
        let all = self.all.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .find(|h| h.addr.is(topic, group, partition))
            .cloned()
    }

    /// Every registered handle.
    pub(crate) fn handles(&self) -> Vec<PartitionHandle> {
        self.all.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every partition's progress (a copy), in registration order.
    pub(crate) fn progress(&self) -> Vec<PartitionProgress> {
        self.handles()
            .iter()
            .map(|h| h.lock().progress.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_registered_once_and_its_handles_share_one_entry() {
        let board = PartitionBoard::default();
        let a = board.register(&PartitionAddr::new("t", "g", 0));
        let again = board.register(&PartitionAddr::new("t", "g", 0));
        let other_group = board.register(&PartitionAddr::new("t", "h", 0));
        a.lock().progress.batches += 2;
        assert_eq!(again.lock().progress.batches, 2);
        assert_eq!(other_group.lock().progress.batches, 0);
        let all = board.progress();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].topic.as_str(), all[0].group.as_str()), ("t", "g"));
        assert_eq!(all[1].group, "h");
        assert!(board.find("t", "h", 0).is_some());
        assert!(board.find("t", "h", 1).is_none());
    }
}
