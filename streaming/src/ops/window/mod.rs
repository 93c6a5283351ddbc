//! The keyed window operator: assigners, triggers, allowed lateness, late side output and
//! session merging.

mod firing;
mod functions;
mod records;
mod rejected;
pub(crate) mod state;

pub use functions::{
    AggregateWindow, ApplyWindow, Arrivals, CountWindow, ReduceWindow, SumByWindow, SumWindow,
    WindowFunction,
};
pub use rejected::{NoRejectedOutput, RejectedOutput, RejectedTo};
pub(crate) use state::Bucket;
pub use state::WindowState;

use super::changes::KeyChanges;
use super::{guard, user_error, Counters, Operator, OperatorId, Shared};
use crate::api::Sink;
use crate::time::trigger::TimerRequest;
use crate::time::{TimeWindow, Trigger, WindowAssigner};
use crate::Error;
use state::emitter;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;

/// Keyed windows: assigns each element to windows of its key, drives one trigger per
/// (key, window), emits through a [`WindowFunction`] and sends late elements to a side
/// output.
///
/// Results carry the window's `max_timestamp` as their timestamp. Processing-time timers
/// requested by triggers are not served by the in-memory engine: such windows
/// emit once at cleanup.
pub struct WindowOperator<KF, K, T, A, Tr, WF: WindowFunction<K, T>, L, E, C, N> {
    id: OperatorId,
    key_fn: KF,
    assigner: A,
    trigger: Tr,
    lateness: i64,
    function: WF,
    late: L,
    rejected: E,
    state: Shared<WindowState<K, WF::Acc, Tr, C>>,
    counters: Rc<Counters>,
    watermark: i64,
    /// Due timers were left by the `max_fires` cap.
    carry: bool,
    /// Timers fired since the current record arrived (the cap is per record).
    fired: usize,
    windows: Vec<TimeWindow>,
    requests: Vec<TimerRequest>,
    out: Vec<WF::Out>,
    /// (end index in `out`, timestamp) per emission.
    marks: Vec<(usize, i64)>,
    next: N,
    _in: PhantomData<fn(T)>,
}

impl<KF, K, T, A: WindowAssigner, Tr, WF, L, E, C, N>
    WindowOperator<KF, K, T, A, Tr, WF, L, E, C, N>
where
    WF: WindowFunction<K, T>,
{
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: OperatorId,
        key_fn: KF,
        assigner: A,
        trigger: Tr,
        lateness: i64,
        function: WF,
        late: L,
        rejected: E,
        state: Shared<WindowState<K, WF::Acc, Tr, C>>,
        counters: Rc<Counters>,
        next: N,
    ) -> Self {
        // Windows that do not end in event time (global windows) are never late and are
        // cleaned up only by the final watermark (`i64::MAX`): a lateness of `i64::MAX`
        // saturates their cleanup time there.
        let lateness = if assigner.is_event_time() {
            lateness
        } else {
            i64::MAX
        };
        counters.may_reject_records.set(true);
        WindowOperator {
            id,
            key_fn,
            assigner,
            trigger,
            lateness,
            function,
            late,
            rejected,
            state,
            counters,
            watermark: i64::MIN,
            carry: false,
            fired: 0,
            windows: Vec::new(),
            requests: Vec::new(),
            out: Vec::new(),
            marks: Vec::new(),
            next,
            _in: PhantomData,
        }
    }
}

impl<KF, K, T, A, Tr, WF, L, E, C, N> Operator<T>
    for WindowOperator<KF, K, T, A, Tr, WF, L, E, C, N>
where
    KF: FnMut(&T) -> K,
    K: Hash + Eq + Clone + 'static,
    T: Clone + 'static,
    A: WindowAssigner,
    Tr: Trigger<T>,
    WF: WindowFunction<K, T>,
    L: Sink<T>,
    E: RejectedOutput<T>,
    C: KeyChanges<K>,
    N: Operator<WF::Out>,
{
    fn open(&mut self) -> Result<(), Error> {
        guard(&self.id, || self.late.open())?.map_err(|e| user_error(&self.id, e))?;
        guard(&self.id, || self.rejected.open())?.map_err(|e| user_error(&self.id, e))?;
        self.next.open()
    }

    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        // Flag this record if it is rejected here. Results this window emits meanwhile may
        // be rejected by a window further down: that does not reject this record.
        let flagged = self.counters.record_rejected.get();
        let result = self.process_record(value, timestamp);
        let rejected = matches!(result, Ok(true));
        self.counters.record_rejected.set(flagged || rejected);
        result.map(|_| ())
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        if watermark <= self.watermark {
            return Ok(());
        }
        self.watermark = watermark;
        self.fire_timers(watermark)?;
        self.drain()?;
        self.next.on_watermark(watermark)
    }

    fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
        // Window triggers' processing-time timers are not served (as on the memory
        // engine): such windows emit when cleaned up.
        self.next.on_processing_time(now)
    }

    fn finish(&mut self) -> Result<(), Error> {
        // After the final watermark every pane has reached its cleanup time; emit anything
        // left by a trigger that registered no timer at all.
        let state = Rc::clone(&self.state);
        let mut state = state.borrow_mut();
        let keys = std::mem::take(&mut state.keys);
        drop(state);
        for (key, mut panes) in keys {
            for b in &mut panes {
                if b.pending {
                    let mut em = emitter!(self);
                    em.emit(&key, b)?;
                }
            }
        }
        self.drain()?;
        self.next.finish()
    }

    fn close(&mut self) -> Result<(), Error> {
        let late = guard(&self.id, || self.late.close())?.map_err(|e| user_error(&self.id, e));
        let rejected =
            guard(&self.id, || self.rejected.close())?.map_err(|e| user_error(&self.id, e));
        let next = self.next.close();
        late.and(rejected).and(next)
    }
}
