//! The memory engine's runtime: what its stages are built with.

use super::failures::{OnRecordError, RecordFailures};
use super::CheckpointCoordinator;
use crate::dataflow::{Runtime, SideOutputFactory, StoreFactory};
use crate::ops::{
    effects, forward_lifecycle, Counters, NoChanges, Operator, OperatorId, Shared, SideOutput,
    WatermarkState,
};
use crate::sealed::Sealed;
use crate::time::{Clock, RecordClock};
use crate::Error;
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

/// The keyed-state stores of a run, by operator id, for a test driver to read.
pub(crate) type StoreRegistry = Rc<RefCell<Vec<(OperatorId, Rc<dyn Any>)>>>;

/// What a stage may use while its operator is built on the memory engine: the checkpoint
/// coordinator (to register keyed state) and the run's counters. State lives in the
/// process only, so nothing tracks its changes. Processing time comes from clock `C`: the
/// highest record timestamp ([`RecordClock`]), or only what a test driver sets
/// ([`DrivenClock`]).
pub struct MemoryRuntime<C = RecordClock> {
    pub(crate) coordinator: Option<CheckpointCoordinator>,
    pub(crate) counters: Rc<Counters>,
    pub(crate) on_record_error: OnRecordError,
    /// Where every store is also registered (a test driver's run).
    pub(crate) stores: Option<StoreRegistry>,
    pub(crate) _clock: PhantomData<C>,
}

impl<C> MemoryRuntime<C> {
    /// A runtime whose failed records follow `on_record_error`.
    pub(crate) fn with_clock(
        coordinator: Option<CheckpointCoordinator>,
        on_record_error: OnRecordError,
    ) -> Self {
        let dead_letters = on_record_error != OnRecordError::StopRun;
        MemoryRuntime {
            coordinator,
            counters: Rc::new(Counters {
                // Dead-lettered like any failed record, as on the Redis engine.
                window_bounds_fail_record: dead_letters,
                undo_failed_records: dead_letters,
                ..Counters::default()
            }),
            on_record_error,
            stores: None,
            _clock: PhantomData,
        }
    }

    /// The failure handling of a run's record loop.
    pub(crate) fn failures<'a, T>(&self) -> RecordFailures<'a, T> {
        RecordFailures::new(self.on_record_error, Rc::clone(&self.counters))
    }
}

impl MemoryRuntime {
    /// A runtime whose failed records follow `on_record_error`.
    pub(crate) fn new(
        coordinator: Option<CheckpointCoordinator>,
        on_record_error: OnRecordError,
    ) -> Self {
        Self::with_clock(coordinator, on_record_error)
    }
}

impl MemoryRuntime<DrivenClock> {
    /// The runtime of a test driver's run: no checkpoints, processing time set by the
    /// driver, failed records handled by `on_record_error`.
    pub(crate) fn driven(on_record_error: OnRecordError) -> Self {
        Self::with_clock(None, on_record_error)
    }
}

/// Processing time of a test driver's run: records do not move it (a record's processing
/// time is the last one the driver set); the driver advances it explicitly.
#[derive(Clone, Copy, Debug, Default)]
pub struct DrivenClock;

impl Clock for DrivenClock {
    #[inline(always)]
    fn processing_time(_record_timestamp: i64) -> i64 {
        i64::MIN
    }
}

impl<C> Sealed for MemoryRuntime<C> {}

impl<C, T, L> SideOutputFactory<T, L> for MemoryRuntime<C> {
    fn side_output(&self, sink: L) -> SideOutput<T, L> {
        SideOutput::direct(sink)
    }
}

impl<C: Clock, S: Clone + 'static> StoreFactory<S> for MemoryRuntime<C> {
    /// A new state store for `operator`, registered for checkpoints when they are enabled
    /// (and then possibly restored from the newest one).
    fn store(&self, operator: &OperatorId, init: S) -> Result<Shared<S>, Error> {
        let store = Rc::new(RefCell::new(init));
        if let Some(c) = &self.coordinator {
            c.register(operator.as_str(), &store)?;
        }
        if let Some(stores) = &self.stores {
            let any: Rc<dyn Any> = Rc::clone(&store) as Rc<dyn Any>;
            stores.borrow_mut().push((operator.clone(), any));
        }
        Ok(store)
    }
}

impl<C: Clock> Runtime for MemoryRuntime<C> {
    type Changes<K: std::hash::Hash + Eq + Clone + 'static> = NoChanges;
    type ProcessChanges<K: std::hash::Hash + Eq + Clone + 'static> = NoChanges;
    type Clock = C;

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
    // A run inside a user function of another leaves the outer record's notes as they were.
    let outer = effects::replace((false, false));
    let result = op
        .open()
        .and_then(|()| body(op))
        .and_then(|()| op.on_watermark(crate::time::MAX_WATERMARK))
        .and_then(|()| op.finish());
    let closed = op.close();
    effects::replace(outer);
    result.and(closed)
}

/// Runs `records` (each with its timestamp, ms) through `op` as one input ([`drive`]); a
/// record that fails is handled by `failures`.
pub(crate) fn drive_records<T, O: Operator<T>>(
    op: &mut O,
    records: impl IntoIterator<Item = (T, i64)>,
    failures: &mut RecordFailures<'_, T>,
) -> Result<(), Error> {
    drive(op, |op| {
        for (value, timestamp) in records {
            failures.feed(op, value, timestamp)?;
        }
        Ok(())
    })
}

/// The run's main sink: its failure is the sink's, not the record's (see [`effects`]).
pub(crate) struct Delivered<O>(pub(crate) O);

impl<T, O: Operator<T>> Operator<T> for Delivered<O> {
    forward_lifecycle!(0; open, on_watermark, finish, close);

    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        self.0
            .process(value, timestamp)
            .inspect_err(|_| effects::note_sink_failed())
    }
}
