//! The keyed window operator: assigners, triggers, allowed lateness, late side output and
//! session merging.

mod firing;
mod functions;
mod rejected;
pub(crate) mod state;

pub(crate) use functions::{
    AggregatingFunction, ApplyingFunction, ReducingFunction, SummingFunction,
};
pub use functions::{ApplyBody, WindowFunction};
pub use rejected::{NoRejectedOutput, RejectedOutput, RejectedTo};
#[cfg(feature = "redis")]
pub(crate) use state::PaneDigests;
pub use state::WindowState;
pub(crate) use state::{Bucket, KeyPanes};

use super::changes::KeyChanges;
use super::{effects, guard, user_error, Counters, Operator, OperatorId, Shared};
use crate::api::{RejectedElement, Sink};
use crate::time::trigger::TriggerTimerRequest;
use crate::time::{TimeWindow, Trigger, TriggerContext, WindowAssigner};
use crate::Error;
use hashbrown::hash_map::RawEntryMut;
use state::{emitter, register};
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
pub struct WindowOperator<KF, K, T, A, Tr, WF: WindowFunction<K, T>, L, E, C: KeyChanges<K>, N> {
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
    requests: Vec<TriggerTimerRequest>,
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
    C: KeyChanges<K>,
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

// The element path: assigning an element to its key's panes (aligned windows, or
// merging session windows), late and rejected elements.
impl<KF, K, T, A, Tr, WF, L, E, C, N> WindowOperator<KF, K, T, A, Tr, WF, L, E, C, N>
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
    pub(super) fn new_bucket(&mut self, window: TimeWindow) -> Result<Bucket<WF::Acc, Tr>, Error> {
        Ok(Bucket {
            window,
            acc: guard(&self.id, || self.function.create())?,
            trigger: self.trigger.clone(),
            has_content: false,
            pending: false,
            timers: smallvec::SmallVec::new(),
            last_arrival: 0,
        })
    }

    /// Pushes buffered results downstream, each with its window's timestamp.
    pub(super) fn drain(&mut self) -> Result<(), Error> {
        if self.out.is_empty() {
            self.marks.clear();
            return Ok(());
        }
        let mut outputs = self.out.drain(..);
        let mut done = 0;
        for (end, ts) in self.marks.drain(..) {
            for _ in done..end {
                let v = outputs.next().expect("mark within buffer");
                self.next.process(v, ts)?;
            }
            done = end;
        }
        Ok(())
    }

    fn late_element(&mut self, value: T) -> Result<(), Error> {
        self.counters.add_late();
        guard(&self.id, || self.late.invoke(value))?.map_err(|e| user_error(&self.id, e))
    }

    /// A record whose window bounds do not fit in `i64`: to the rejected-element output
    /// when the pipeline set one; else counted and logged, or — where the engine asks
    /// for it (Redis: the record is dead-lettered) — returned as [`Error::WindowBounds`].
    #[cold]
    fn rejected_element(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let operator = self.id.to_string();
        self.counters.add_window_bounds_rejected();
        let rejected = RejectedElement {
            element: value,
            timestamp,
            operator,
        };
        match guard(&self.id, || self.rejected.send(rejected))? {
            Some(sent) => sent.map_err(|e| user_error(&self.id, e)),
            None if self.counters.window_bounds_fail_record => Err(Error::WindowBounds {
                operator: self.id.clone(),
                timestamp,
            }),
            None => {
                tracing::warn!(
                    operator = %self.id,
                    timestamp,
                    "record rejected: its window bounds do not fit in i64 milliseconds"
                );
                Ok(())
            }
        }
    }

    /// Handles one record; `Ok(true)` when it was rejected (window bounds overflow).
    ///
    /// A failure after windows fired or the record joined a window leaves their state
    /// changed (see `effects`); a failure of the key function or of the record's bounds
    /// leaves nothing.
    pub(super) fn process_record(&mut self, value: T, timestamp: i64) -> Result<bool, Error> {
        self.fired = 0;
        if self.carry {
            // Windows left due by the per-record cap: up to the cap fire before this
            // record, and every due window of this record's key.
            self.fire_timers(self.watermark)
                .and_then(|()| self.drain())
                .map_err(effects::left_behind)?;
        }
        let key = guard(&self.id, || (self.key_fn)(&value))?;
        if self.carry {
            self.fire_key_due(&key)
                .and_then(|()| self.drain())
                .map_err(effects::left_behind)?;
        }
        self.windows.clear();
        let windows = &mut self.windows;
        if self
            .assigner
            .assign_windows(timestamp, |w| windows.push(w))
            .is_err()
        {
            return self.rejected_element(value, timestamp).map(|()| true);
        }
        if self.windows.is_empty() {
            // Between two windows (sliding windows with `slide > size`): late elements go
            // to the late output as usual, the others are dropped and counted.
            if timestamp.saturating_add(self.lateness) <= self.watermark {
                return self.late_element(value).map(|()| false);
            }
            self.counters.add_gap_dropped();
            return Ok(false);
        }
        if self.assigner.is_merging() {
            self.process_merging(key, value, timestamp)
        } else {
            self.process_aligned(key, value, timestamp)
        }
        .map_err(effects::left_behind)?;
        Ok(false)
    }

    fn process_aligned(&mut self, key: K, value: T, timestamp: i64) -> Result<(), Error> {
        let watermark = self.watermark;
        let live = self
            .windows
            .iter()
            .filter(|w| !w.is_late(self.lateness, watermark))
            .count();
        if live == 0 {
            return self.late_element(value);
        }
        let state = Rc::clone(&self.state);
        let mut state = state.borrow_mut();
        let WindowState {
            keys,
            timers,
            changes,
            ..
        } = &mut *state;
        changes.mark(&key);
        // One lookup of the key; a key without panes in memory may be stored (or its
        // stored panes not decode).
        let entry = match keys.raw_entry_mut().from_key(&key) {
            RawEntryMut::Occupied(o) => {
                let entry = o.into_mut();
                if entry.panes.is_empty() {
                    changes.missing(&key)?;
                }
                entry
            }
            RawEntryMut::Vacant(v) => {
                changes.missing(&key)?;
                v.insert(key.clone(), KeyPanes::default()).1
            }
        };
        let panes = &mut entry.panes;
        let mut value = Some(value);
        let mut remaining = live;
        for i in 0..self.windows.len() {
            let window = self.windows[i];
            if window.is_late(self.lateness, watermark) {
                continue;
            }
            remaining -= 1;
            let idx = match panes.iter().position(|b| b.window == window) {
                Some(idx) => idx,
                None => {
                    let mut b = self.new_bucket(window)?;
                    self.requests.push(TriggerTimerRequest::EventTime(
                        window.cleanup_time(self.lateness),
                    ));
                    register(timers, &mut self.requests, &key, &mut b);
                    panes.push(b);
                    panes.len() - 1
                }
            };
            let b = &mut panes[idx];
            let v = if remaining == 0 {
                value.take().expect("last use")
            } else {
                value.clone().expect("present")
            };
            let mut ctx = TriggerContext {
                watermark,
                processing_time: timestamp,
                timers: &mut self.requests,
            };
            let r = guard(&self.id, || {
                b.trigger.on_element(&v, timestamp, &window, &mut ctx)
            })?;
            guard(&self.id, || self.function.add(&mut b.acc, v))?;
            b.has_content = true;
            b.pending = true;
            register(timers, &mut self.requests, &key, b);
            let mut em = emitter!(self);
            em.apply(&key, b, r)?;
        }
        drop(state);
        self.drain()
    }

    fn process_merging(&mut self, key: K, value: T, timestamp: i64) -> Result<(), Error> {
        let watermark = self.watermark;
        let state = Rc::clone(&self.state);
        let mut state = state.borrow_mut();
        let WindowState {
            keys,
            timers,
            changes,
            ..
        } = &mut *state;
        let panes = keys.get(&key).map_or(&[][..], |e| &e.panes[..]);
        if panes.is_empty() {
            changes.missing(&key)?;
        }
        let arrival = panes.iter().map(|b| b.last_arrival).max().unwrap_or(0) + 1;
        let (merged, mut joined) = merge_cover(panes, self.windows[0]);
        if merged.is_late(self.lateness, watermark) {
            drop(state);
            return self.late_element(value);
        }
        changes.mark(&key);
        let panes = match keys.raw_entry_mut().from_key(&key) {
            RawEntryMut::Occupied(o) => &mut o.into_mut().panes,
            RawEntryMut::Vacant(v) => &mut v.insert(key.clone(), KeyPanes::default()).1.panes,
        };
        joined.sort_unstable();
        let mut parts: Vec<Bucket<WF::Acc, Tr>> =
            joined.iter().rev().map(|&i| panes.swap_remove(i)).collect();
        parts.sort_by_key(|b| b.window.start());
        let mut bucket = self.merged_bucket(parts, merged, timestamp)?;
        register(timers, &mut self.requests, &key, &mut bucket);
        let mut ctx = TriggerContext {
            watermark,
            processing_time: timestamp,
            timers: &mut self.requests,
        };
        let r = guard(&self.id, || {
            bucket
                .trigger
                .on_element(&value, timestamp, &merged, &mut ctx)
        })?;
        guard(&self.id, || {
            self.function.add_in_order(&mut bucket.acc, value, arrival)
        })?;
        bucket.has_content = true;
        bucket.pending = true;
        bucket.last_arrival = arrival;
        register(timers, &mut self.requests, &key, &mut bucket);
        let mut em = emitter!(self);
        em.apply(&key, &mut bucket, r)?;
        panes.push(bucket);
        drop(state);
        self.drain()
    }

    /// The pane of window `merged`: a new one when no pane joined, else the earliest of
    /// `parts` (sorted by start) with the others folded in (accumulators and triggers
    /// merged); a pane whose window grew gets the cleanup timer of `merged` (requested in
    /// `self.requests`, registered by the caller).
    fn merged_bucket(
        &mut self,
        mut parts: Vec<Bucket<WF::Acc, Tr>>,
        merged: TimeWindow,
        timestamp: i64,
    ) -> Result<Bucket<WF::Acc, Tr>, Error> {
        let cleanup = TriggerTimerRequest::EventTime(merged.cleanup_time(self.lateness));
        if parts.is_empty() {
            self.requests.push(cleanup);
            return self.new_bucket(merged);
        }
        let mut base = parts.remove(0);
        if base.window == merged && parts.is_empty() {
            return Ok(base);
        }
        base.window = merged;
        base.timers.clear();
        self.requests.push(cleanup);
        if parts.is_empty() {
            parts.push(self.new_bucket(merged)?);
        }
        let mut requests = std::mem::take(&mut self.requests);
        for other in parts {
            let mut ctx = TriggerContext {
                watermark: self.watermark,
                processing_time: timestamp,
                timers: &mut requests,
            };
            let Bucket {
                acc,
                trigger,
                has_content,
                pending,
                ..
            } = other;
            guard(&self.id, || self.function.merge(&mut base.acc, acc))?;
            guard(&self.id, || {
                base.trigger.on_merge(trigger, &merged, &mut ctx)
            })?;
            base.has_content |= has_content;
            base.pending |= pending;
        }
        self.requests = requests;
        Ok(base)
    }
}

/// The cover of `new_window` and every pane of `panes` it merges with (windows that
/// intersect or touch), and those panes' indices. Windows of one key never intersect each
/// other, so one pass finds every pane the cover reaches; it grows until no more join.
fn merge_cover<Acc, Tr>(
    panes: &[Bucket<Acc, Tr>],
    new_window: TimeWindow,
) -> (TimeWindow, Vec<usize>) {
    let mut merged = new_window;
    let mut joined: Vec<usize> = Vec::new();
    loop {
        let before = joined.len();
        for (i, b) in panes.iter().enumerate() {
            if !joined.contains(&i) && b.window.intersects(&merged) {
                joined.push(i);
                merged = merged.cover(&b.window);
            }
        }
        if joined.len() == before {
            return (merged, joined);
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
        for (key, mut entry) in keys {
            for b in &mut entry.panes {
                if b.pending {
                    let mut em = emitter!(self);
                    em.emit(&key, b)?;
                }
            }
        }
        self.drain()?;
        // The side outputs' one batch on the memory engine ends here too (the Redis
        // engine flushes them with each batch it delivers).
        guard(&self.id, || self.late.flush())?.map_err(|e| user_error(&self.id, e))?;
        guard(&self.id, || self.rejected.flush())?.map_err(|e| user_error(&self.id, e))?;
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
