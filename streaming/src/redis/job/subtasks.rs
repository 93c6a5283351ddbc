//! A job's running subtasks in this process: per pipeline the consumer names of its live
//! subtasks and how to start more, each subtask's stop flag, and the parallelism now.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Starts one more subtask of a pipeline: (subtask index, the consumer names started
/// together, of which the subtask's is at its index). The subtask runs on a thread of its
/// own, which nobody joins: its end is counted in
/// [`JobSignals::subtask_ended`](super::signals::JobSignals::subtask_ended).
pub(crate) type Spawner = Box<dyn Fn(u32, Vec<String>) + Send>;

/// A pipeline's running subtasks and how to start more.
struct PipelineSubtasks {
    /// Consumer names of its live subtasks, in subtask order.
    live: Vec<String>,
    spawn: Spawner,
}

/// See the module docs.
pub(crate) struct SubtaskRegistry {
    /// This process's own count of consumer names drawn (used when Redis cannot draw one).
    next_seq: AtomicU64,
    /// Per pipeline, its live subtasks (what
    /// [`JobClient::scale_parallelism`](super::JobClient::scale_parallelism) changes).
    pipelines: Mutex<Vec<PipelineSubtasks>>,
    /// Stop flags of the running subtasks, by consumer name (set when scaled away).
    stops: Mutex<HashMap<String, Arc<AtomicBool>>>,
    /// Subtasks per pipeline now.
    live_parallelism: AtomicU64,
}

impl SubtaskRegistry {
    /// No subtasks yet; `parallelism` subtasks per pipeline to come.
    pub(crate) fn new(parallelism: u32) -> Self {
        SubtaskRegistry {
            next_seq: AtomicU64::new(0),
            pipelines: Mutex::default(),
            stops: Mutex::default(),
            live_parallelism: AtomicU64::new(u64::from(parallelism)),
        }
    }

    /// The next number of this process's own count of consumer names.
    pub(crate) fn next_local_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::SeqCst)
    }

    /// Subtasks per pipeline now.
    pub(crate) fn live_parallelism(&self) -> u32 {
        u32::try_from(self.live_parallelism.load(Ordering::SeqCst)).unwrap_or(u32::MAX)
    }

    /// Registers a started pipeline: its subtasks' consumer names and its spawner.
    pub(crate) fn add_pipeline(&self, live: Vec<String>, spawn: Spawner) {
        if let Ok(mut p) = self.pipelines.lock() {
            p.push(PipelineSubtasks { live, spawn });
        }
    }

    /// Registers a starting subtask's stop flag.
    pub(crate) fn register(&self, consumer: &str) {
        if let Ok(mut s) = self.stops.lock() {
            s.insert(consumer.to_string(), Arc::new(AtomicBool::new(false)));
        }
    }

    /// Whether lease value `lease` (`"{fencing token} {owner}"`) names one of this
    /// process's running subtasks as the owner.
    pub(crate) fn holds(&self, lease: &str) -> bool {
        let owner = lease.split_once(' ').map_or(lease, |(_, owner)| owner);
        self.stops.lock().is_ok_and(|s| s.contains_key(owner))
    }

    /// The stop flag of the subtask named `consumer`.
    pub(crate) fn stop_of(&self, consumer: &str) -> Option<Arc<AtomicBool>> {
        self.stops.lock().ok()?.get(consumer).cloned()
    }

    /// Forgets an ended subtask's stop flag.
    pub(crate) fn left(&self, consumer: &str) {
        if let Ok(mut s) = self.stops.lock() {
            s.remove(consumer);
        }
    }

    /// Brings every pipeline to `n` subtasks: starts new ones (consumer names from
    /// `new_name`), or tells the last ones to hand their partitions over and stop.
    pub(crate) fn scale(&self, n: u32, mut new_name: impl FnMut() -> String) {
        let Ok(mut pipelines) = self.pipelines.lock() else {
            return;
        };
        for pipeline in pipelines.iter_mut() {
            while pipeline.live.len() > n as usize {
                if let Some(name) = pipeline.live.pop() {
                    if let Some(stop) = self.stop_of(&name) {
                        stop.store(true, Ordering::SeqCst);
                    }
                }
            }
            let first = pipeline.live.len();
            let names: Vec<String> = (first..n as usize).map(|_| new_name()).collect();
            for (i, name) in names.iter().enumerate() {
                (pipeline.spawn)(i as u32, names.clone());
                pipeline.live.push(name.clone());
            }
        }
        self.live_parallelism.store(u64::from(n), Ordering::SeqCst);
    }
}
