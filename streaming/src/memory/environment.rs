//! [`MemoryEnv`] itself: what a memory-engine pipeline's sources share (checkpointing,
//! the failing-record policy, source numbering) and the runtime each run is built with. Its
//! sources are in `env.rs` and `partition.rs`.

use super::failures::OnRecordError;
use super::{CheckpointCoordinator, MemoryRuntime};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

#[derive(Default)]
struct EnvInner {
    coordinator: RefCell<Option<CheckpointCoordinator>>,
    sources: Cell<u32>,
    on_record_error: Cell<OnRecordError>,
}

/// The in-memory execution environment.
///
/// Cheap to clone: clones share checkpointing. Not `Send`: the engine is single-threaded.
///
/// ```
/// use streaming::MemoryEnv;
/// let env = MemoryEnv::new();
/// let out = env
///     .from_elements(["a b", "c", "d e"])
///     .flat_map(|line| line.split(' ').map(str::to_string).collect::<Vec<_>>())
///     .filter(|w| w != "c")
///     .map(|w| w.to_uppercase())
///     .collect_vec()?;
/// assert_eq!(out, ["A", "B", "D", "E"]);
/// # Ok::<(), streaming::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct MemoryEnv {
    inner: Rc<EnvInner>,
}

impl std::fmt::Debug for MemoryEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryEnv")
            .field("checkpointing", &self.inner.coordinator.borrow().is_some())
            .field("on_record_error", &self.inner.on_record_error.get())
            .finish()
    }
}

impl MemoryEnv {
    /// A new environment with checkpointing off.
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns on in-memory checkpoints of keyed state; see [`CheckpointCoordinator`].
    /// Pipelines started afterwards register their state with it. Calling it again keeps
    /// the existing coordinator.
    pub fn enable_checkpointing(&self) -> &Self {
        self.inner
            .coordinator
            .borrow_mut()
            .get_or_insert_with(CheckpointCoordinator::default);
        self
    }

    /// The checkpoint coordinator; `None` while checkpointing is off.
    pub fn checkpoint_coordinator(&self) -> Option<CheckpointCoordinator> {
        self.inner.coordinator.borrow().clone()
    }

    /// Sets what a pipeline started afterwards does with a source record that fails (see
    /// [`OnRecordError`]; default [`OnRecordError::Retry`] with 3 retries, like the Redis
    /// engine): dead-letter it and go on, or stop the run
    /// ([`OnRecordError::StopRun`]). Clones of the environment share the setting.
    ///
    /// ```
    /// use streaming::memory::OnRecordError;
    /// use streaming::MemoryEnv;
    /// let env = MemoryEnv::new();
    /// let parse = |s: &str| s.parse::<u32>();
    /// // Default: the bad record is dead-lettered, the run goes on.
    /// let out = env.from_elements(["1", "x", "3"]).try_map(parse).collect_vec()?;
    /// assert_eq!(out, [1, 3]);
    /// // Stop the run at the first failure.
    /// env.on_record_error(OnRecordError::StopRun);
    /// let stopped = env.from_elements(["1", "x", "3"]).try_map(parse).collect_vec();
    /// assert!(stopped.is_err());
    /// # Ok::<(), streaming::Error>(())
    /// ```
    pub fn on_record_error(&self, policy: OnRecordError) -> &Self {
        self.inner.on_record_error.set(policy);
        self
    }

    /// What a failing source record does (see [`on_record_error`](Self::on_record_error)).
    pub fn record_error_policy(&self) -> OnRecordError {
        self.inner.on_record_error.get()
    }

    pub(crate) fn runtime(&self) -> MemoryRuntime {
        MemoryRuntime::new(self.checkpoint_coordinator(), self.record_error_policy())
    }

    pub(crate) fn next_source_id(&self) -> String {
        let n = self.inner.sources.get();
        self.inner.sources.set(n + 1);
        format!("source-{n}")
    }
}
