//! The memory engine's runtime: what its stages are built with.

use super::CheckpointCoordinator;
use crate::dataflow::{Runtime, SideOutputFactory, StoreFactory};
use crate::ops::{Counters, NoChanges, Operator, OperatorId, Shared, SideOutput, WatermarkState};
use crate::sealed::Sealed;
use crate::time::RecordClock;
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// What a stage may use while its operator is built on the memory engine: the checkpoint
/// coordinator (to register keyed state) and the run's counters. State lives in the
/// process only, so nothing tracks its changes; processing time is the highest record
/// timestamp.
pub struct MemoryRuntime {
    pub(crate) coordinator: Option<CheckpointCoordinator>,
    pub(crate) counters: Rc<Counters>,
}

impl Sealed for MemoryRuntime {}

impl<T, L> SideOutputFactory<T, L> for MemoryRuntime {
    fn side_output(&self, sink: L) -> SideOutput<T, L> {
        SideOutput::direct(sink)
    }
}

impl<S: Clone + 'static> StoreFactory<S> for MemoryRuntime {
    /// A new state store for `operator`, registered for checkpoints when they are enabled
    /// (and then possibly restored from the newest one).
    fn store(&self, operator: &OperatorId, init: S) -> Result<Shared<S>, Error> {
        let store = Rc::new(RefCell::new(init));
        if let Some(c) = &self.coordinator {
            c.register(operator.as_str(), &store)?;
        }
        Ok(store)
    }
}

impl Runtime for MemoryRuntime {
    type Changes<K: std::hash::Hash + Eq + Clone + 'static> = NoChanges;
    type ProcessChanges<K: std::hash::Hash + Eq + Clone + 'static> = NoChanges;
    type Clock = RecordClock;

    fn watermark_state(&self, _operator: &OperatorId) -> Shared<WatermarkState<NoChanges>> {
        Rc::new(RefCell::new(WatermarkState::default()))
    }

    fn counters(&self) -> Rc<Counters> {
        Rc::clone(&self.counters)
    }
}

/// Runs `body` between `open` and the end of input, and always closes `op`.
pub(crate) fn drive<T, O: Operator<T>>(
    op: &mut O,
    body: impl FnOnce(&mut O) -> Result<(), Error>,
) -> Result<(), Error> {
    let result = op
        .open()
        .and_then(|()| body(op))
        .and_then(|()| op.on_watermark(crate::time::MAX_WATERMARK))
        .and_then(|()| op.finish());
    let closed = op.close();
    result.and(closed)
}
