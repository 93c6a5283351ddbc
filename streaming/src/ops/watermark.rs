//! Timestamp assignment and watermark generation.

use super::changes::KeyChanges;
use super::{forward_lifecycle, guard, Counters, Operator, OperatorId, Shared};
use crate::time::{
    TimestampAssigner, WatermarkGenerator, WatermarkOutput, MAX_WATERMARK, MIN_WATERMARK,
};
use crate::Error;
use std::rc::Rc;

/// The watermark an `AssignWatermarks` operator has emitted, kept as operator state.
///
/// The Redis engine persists it with the partition's other state (so a restarted or
/// rolled-back partition continues from the committed watermark instead of `i64::MIN`),
/// reads it for `diagnostics()` and for the idle flush, and resets it to `i64::MIN` when an
/// idle flush ends a watermark epoch. The memory engine keeps it in memory only.
///
/// `C` is the engine's `KeyChanges` over the single key `()`: whether the watermark
/// changed since the engine last wrote it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatermarkState<C> {
    /// The last watermark emitted downstream (ms); `i64::MIN` before the first.
    pub(crate) watermark: i64,
    /// Whether the generator has marked its input idle.
    pub(crate) idle: bool,
    pub(crate) changes: C,
}

impl<C: Default> Default for WatermarkState<C> {
    fn default() -> Self {
        WatermarkState {
            watermark: MIN_WATERMARK,
            idle: false,
            changes: C::default(),
        }
    }
}

impl<C: KeyChanges<()>> WatermarkState<C> {
    fn set(&mut self, watermark: i64, idle: bool) {
        if self.watermark != watermark || self.idle != idle {
            self.watermark = watermark;
            self.idle = idle;
            self.changes.mark(&());
        }
    }

    /// Starts a new watermark epoch (after an idle flush): back to `i64::MIN`.
    #[cfg(feature = "redis")]
    pub(crate) fn reset_epoch(&mut self) {
        self.set(MIN_WATERMARK, false);
    }
}

/// Keeps each record's current timestamp (the assigner of
/// `assign_timestamps_and_watermarks(generator)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordTimestamp;

impl<T> TimestampAssigner<T> for RecordTimestamp {
    #[inline]
    fn extract_timestamp(&mut self, _element: &T, record_timestamp: i64) -> i64 {
        record_timestamp
    }
}

/// Assigns event time with a [`TimestampAssigner`] and owns the watermark from here on:
/// per element it calls the generator's `on_event` then `on_periodic_emit`, forwards the
/// element, then forwards the watermark if it rose. Watermarks from upstream are dropped,
/// except the end-of-input watermark (Flink's `TimestampsAndWatermarksOperator`).
///
/// An element a window downstream rejects (its window bounds do not fit in `i64`) does
/// not move the watermark: the generator and its output go back to their state before
/// that element (from a copy taken before `on_event` whenever the pipeline has a window),
/// so the generator must be `Clone`. On the memory engine an element that fails (here or
/// downstream) and is dead-lettered does not move it either (a copy is taken before every
/// element then): on the Redis engine the batch runs again without it. Flink's operator feeds the generator after emitting
/// the element; feeding it first and undoing a rejection is the same without cloning the
/// element.
///
/// The emitted watermark lives in a [`WatermarkState`]; when the operator starts with a
/// restored watermark above `i64::MIN` (Redis engine, after a restart or a rollback) it
/// raises its output to it and forwards it downstream before its first element, so
/// windows and timers judge lateness as before the restart.
pub struct AssignWatermarks<TA, G, C, N> {
    id: OperatorId,
    assigner: TA,
    generator: G,
    /// Whether incoming records carry chosen event time (else the assigner sees
    /// `i64::MIN` as their timestamp).
    timed: bool,
    output: WatermarkOutput,
    emitted: i64,
    restored: bool,
    state: Shared<WatermarkState<C>>,
    counters: Rc<Counters>,
    next: N,
}

impl<TA, G, C, N> AssignWatermarks<TA, G, C, N> {
    /// An assigner operator with id `id` feeding `next`, keeping its watermark in `state`;
    /// `counters` are those of the chain's window operators. `timed`: whether incoming
    /// records carry chosen event time; when not, the assigner sees `i64::MIN` as a
    /// record's timestamp.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: OperatorId,
        assigner: TA,
        generator: G,
        timed: bool,
        state: Shared<WatermarkState<C>>,
        counters: Rc<Counters>,
        next: N,
    ) -> Self {
        AssignWatermarks {
            id,
            assigner,
            generator,
            timed,
            output: WatermarkOutput::default(),
            emitted: MIN_WATERMARK,
            restored: false,
            state,
            counters,
            next,
        }
    }

    /// Puts the generator and its output back to `before` (their copies from before the
    /// element), when there is a copy.
    #[cold]
    fn undo(&mut self, before: Option<(G, WatermarkOutput)>) {
        if let Some((generator, output)) = before {
            self.generator = generator;
            self.output = output;
        }
    }

    /// Forwards the restored watermark once, before anything else reaches `next`.
    #[inline]
    fn restore<T>(&mut self) -> Result<(), Error>
    where
        N: Operator<T>,
    {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let stored = self.state.borrow().watermark;
        if stored > self.emitted {
            self.output.raise(stored);
            self.emitted = stored;
            self.next.on_watermark(stored)?;
        }
        Ok(())
    }
}

impl<T, TA, G, C, N> Operator<T> for AssignWatermarks<TA, G, C, N>
where
    TA: TimestampAssigner<T>,
    G: WatermarkGenerator<T> + Clone,
    C: KeyChanges<()>,
    N: Operator<T>,
{
    forward_lifecycle!(next; open, on_processing_time, finish, close);

    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        self.restore()?;
        let undo_failed = self.counters.undo_failed_records;
        let keep = undo_failed || self.counters.may_reject_records.get();
        let previous = if self.timed { timestamp } else { MIN_WATERMARK };
        let (assigner, generator, output) =
            (&mut self.assigner, &mut self.generator, &mut self.output);
        let (ts, before) = guard(&self.id, || {
            let ts = assigner.extract_timestamp(&value, previous);
            (ts, keep.then(|| (generator.clone(), *output)))
        })?;
        let fed = guard(&self.id, || {
            generator.on_event(&value, ts, output);
            generator.on_periodic_emit(output);
        });
        if let Err(e) = fed {
            self.undo(before);
            return Err(e);
        }
        // The element is judged against the watermark in force before it. A rejection
        // flagged further up (another record of the same input) is kept for the operator
        // there.
        let upstream = self.counters.record_rejected.replace(false);
        let pushed = self.next.process(value, ts);
        let rejected = self.counters.record_rejected.get();
        if rejected || (undo_failed && pushed.is_err()) {
            self.undo(before);
        }
        self.counters.record_rejected.set(upstream || rejected);
        pushed?;
        let current = self.output.current();
        let idle = self.output.is_idle();
        if current > self.emitted {
            self.emitted = current;
            self.state.borrow_mut().set(current, idle);
            // The record went through and the watermark moved: a failure of what fires on
            // it leaves that behind (see `effects`).
            self.next
                .on_watermark(current)
                .map_err(super::effects::left_behind)?;
        } else if idle != self.state.borrow().idle {
            self.state.borrow_mut().set(self.emitted, idle);
        }
        // Windows firing on that watermark may have flagged their results; not this record.
        self.counters.record_rejected.set(upstream || rejected);
        Ok(())
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        self.restore()?;
        if watermark == MAX_WATERMARK && self.emitted < MAX_WATERMARK {
            self.emitted = MAX_WATERMARK;
            self.state.borrow_mut().set(MAX_WATERMARK, false);
            return self.next.on_watermark(MAX_WATERMARK);
        }
        Ok(())
    }
}
