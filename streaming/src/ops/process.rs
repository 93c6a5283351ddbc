//! Keyed process functions: their state (user state and timers) and the operator running
//! them.

use super::changes::ProcessTracking;
use super::timers::TimerQueue;
use super::{effects, forward_lifecycle, guard, user_error, Operator, OperatorId, Shared};
use crate::api::context::{ContextParts, KeyedTimerRequest, TimeDomain};
use crate::api::state::{DeclareStates, KeyedStateBackend};
use crate::api::{Collector, KeyedContext, KeyedProcessFunction, TimerContext};
use crate::time::{Clock, MIN_WATERMARK};
use crate::{BoxError, Error};
use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;

pub use super::process_fn::{NoTimers, OnTimer, ProcessFn};

/// The state of a keyed process operator: user state, pending timers and what the engine
/// tracks of them (`P`: nothing on the memory engine).
///
/// The Redis engine keeps the timers of each key in the operator's `__timers` hash (field
/// = the key as JSON, value = `[[time, "EventTime" | "ProcessingTime"], ...]`), written
/// with the batch that changed them, so pending timers survive a restart.
#[derive(Clone)]
pub struct ProcessState<K, P> {
    pub(crate) backend: KeyedStateBackend<K>,
    pub(crate) event_timers: TimerQueue<K>,
    pub(crate) processing_timers: TimerQueue<K>,
    /// Timers per key, in registration order (dedup on (time, domain)).
    pub(crate) registered: HashMap<K, Vec<(i64, TimeDomain)>>,
    /// The states' and timers' changes since the engine last wrote them back.
    pub(crate) tracking: P,
    /// Most pending event-time timers (0 = unbounded).
    pub(crate) max_event_timers: usize,
    /// Whether the last failed call of [`with_context`](Self::with_context) changed a state.
    pub(crate) changed: bool,
}

impl<K: Hash + Eq + Clone + 'static, P: ProcessTracking<K>> ProcessState<K, P> {
    /// Empty state of `operator`.
    pub(crate) fn new(operator: &OperatorId) -> Self {
        let mut backend = KeyedStateBackend::new(operator.to_string());
        if P::TRACKS_ELEMENTS {
            backend.track_elements();
        }
        ProcessState {
            backend,
            event_timers: TimerQueue::default(),
            processing_timers: TimerQueue::default(),
            registered: HashMap::new(),
            tracking: P::default(),
            max_event_timers: 0,
            changed: false,
        }
    }

    /// Gives the states declared with the operator their slots.
    ///
    /// # Errors
    /// As [`DeclareStates::declare`].
    pub(crate) fn declare(&mut self, states: &impl DeclareStates<K>) -> Result<(), Error> {
        self.backend.clear_declared();
        states.declare(&mut self.backend)
    }
}

/// The times a keyed context shows: the element's (or timer's) timestamp, the watermark and
/// processing time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ContextTimes {
    pub(crate) timestamp: i64,
    pub(crate) watermark: i64,
    pub(crate) processing_time: i64,
    /// Whether the stream's records carry chosen event time.
    pub(crate) event_time: bool,
}

impl<K: Hash + Eq + Clone + 'static, P: ProcessTracking<K>> ProcessState<K, P> {
    /// Runs `f` with the context of `key`, then notes the states it changed (also when it
    /// failed: the Redis engine then rolls the batch back anyway). When `failed` rejects
    /// `f`'s result, [`changed`](Self::changed) says whether `f` changed a state (known only
    /// then: on the memory engine nothing else reads the change mask, so the compiler drops
    /// it from the path of a call that succeeds).
    ///
    /// # Errors
    /// The engine's, when `key`'s stored state does not decode (`f` does not run).
    #[inline]
    pub(crate) fn with_context<R>(
        &mut self,
        key: &K,
        times: ContextTimes,
        timers: &mut Vec<KeyedTimerRequest>,
        f: impl FnOnce(&mut KeyedContext<'_, K>) -> R,
        failed: impl FnOnce(&R) -> bool,
    ) -> Result<R, Error> {
        self.tracking.touch(key)?;
        let mut ctx = KeyedContext::new(self.context_parts(key, times, timers));
        let result = f(&mut ctx);
        let changed = ctx.changed();
        self.note_changes(changed, key);
        if failed(&result) {
            self.changed = changed != 0;
        }
        Ok(result)
    }

    /// Tells the engine that the call about to run uses `key`'s state too (another key
    /// than its own: a broadcast process function reads the broadcast state's key).
    ///
    /// # Errors
    /// As [`with_context`](Self::with_context): `key`'s stored state does not decode.
    #[inline]
    pub(crate) fn touch(&mut self, key: &K) -> Result<(), Error> {
        self.tracking.touch(key)
    }

    /// [`with_context`](Self::with_context) for a timer of `domain`.
    ///
    /// # Errors
    /// As [`with_context`](Self::with_context).
    #[inline]
    pub(crate) fn with_timer_context<R>(
        &mut self,
        key: &K,
        times: ContextTimes,
        domain: TimeDomain,
        timers: &mut Vec<KeyedTimerRequest>,
        f: impl FnOnce(&mut TimerContext<'_, K>) -> R,
    ) -> Result<R, Error> {
        self.tracking.touch(key)?;
        let inner = KeyedContext::new(self.context_parts(key, times, timers));
        let mut ctx = TimerContext { inner, domain };
        let result = f(&mut ctx);
        let changed = ctx.inner.changed();
        self.note_changes(changed, key);
        Ok(result)
    }

    #[inline]
    fn context_parts<'a>(
        &'a mut self,
        key: &'a K,
        times: ContextTimes,
        timers: &'a mut Vec<KeyedTimerRequest>,
    ) -> ContextParts<'a, K> {
        ContextParts {
            key,
            timestamp: times.timestamp,
            watermark: times.watermark,
            processing_time: times.processing_time,
            event_time: times.event_time,
            timers,
            state: &mut self.backend,
            opener: &mut self.tracking,
        }
    }

    #[inline]
    fn note_changes(&mut self, changed: u64, key: &K) {
        if changed != 0 {
            self.tracking.mark_states(changed, key);
        }
    }
}

impl<K: Hash + Eq + Clone, P: ProcessTracking<K>> ProcessState<K, P> {
    /// Queues timer (`time`, `domain`) of `key` unless it is already queued.
    pub(crate) fn add_timer(&mut self, key: &K, time: i64, domain: TimeDomain) {
        let list = self.registered.entry(key.clone()).or_default();
        if list.contains(&(time, domain)) {
            return;
        }
        list.push((time, domain));
        match domain {
            TimeDomain::EventTime => self.event_timers.push(time, key.clone()),
            TimeDomain::ProcessingTime => self.processing_timers.push(time, key.clone()),
        }
        self.tracking.mark_timers(key);
    }

    /// Removes timer (`time`, `domain`) of `key` if it is queued.
    pub(crate) fn delete_timer(&mut self, key: &K, time: i64, domain: TimeDomain) {
        let Some(list) = self.registered.get_mut(key) else {
            return;
        };
        let before = list.len();
        list.retain(|&t| t != (time, domain));
        if list.len() == before {
            return;
        }
        if list.is_empty() {
            self.registered.remove(key);
        }
        match domain {
            TimeDomain::EventTime => self.event_timers.remove(time, key),
            TimeDomain::ProcessingTime => self.processing_timers.remove(time, key),
        };
        self.tracking.mark_timers(key);
    }

    fn fired(&mut self, key: &K, time: i64, domain: TimeDomain) {
        if let Some(list) = self.registered.get_mut(key) {
            list.retain(|&t| t != (time, domain));
            if list.is_empty() {
                self.registered.remove(key);
            }
        }
        self.tracking.mark_timers(key);
    }
}

/// Runs a [`KeyedProcessFunction`] with keyed state and timers.
///
/// Timers are deduplicated on (key, time, domain). Event-time timers fire when the watermark
/// reaches them; processing time comes from the engine's [`Clock`] at every record (the
/// memory engine's advances with the record timestamps, so a bounded run is deterministic),
/// and due processing-time timers fire before the record that moved it. At end of input
/// every remaining timer fires, event time first, each domain in time order.
pub struct KeyedProcess<KF, K, T, PF: KeyedProcessFunction<K, T>, P, Cl, N> {
    id: OperatorId,
    key_fn: KF,
    function: PF,
    state: Shared<ProcessState<K, P>>,
    watermark: i64,
    processing_time: i64,
    /// Whether the stream's records carry chosen event time (event-time timers allowed).
    event_time: bool,
    requests: Vec<KeyedTimerRequest>,
    out: Vec<PF::Out>,
    next: N,
    _in: PhantomData<fn(T, Cl)>,
}

impl<KF, K, T, PF: KeyedProcessFunction<K, T>, P, Cl, N> KeyedProcess<KF, K, T, PF, P, Cl, N> {
    pub(crate) fn new(
        id: OperatorId,
        key_fn: KF,
        function: PF,
        event_time: bool,
        state: Shared<ProcessState<K, P>>,
        next: N,
    ) -> Self {
        KeyedProcess {
            id,
            key_fn,
            function,
            state,
            watermark: MIN_WATERMARK,
            processing_time: MIN_WATERMARK,
            event_time,
            requests: Vec::new(),
            out: Vec::new(),
            next,
            _in: PhantomData,
        }
    }

    /// The times a call at `timestamp` (ms) sees: the operator's watermark and processing
    /// time, and whether the stream has event time.
    #[inline(always)]
    fn times(&self, timestamp: i64) -> ContextTimes {
        ContextTimes {
            timestamp,
            watermark: self.watermark,
            processing_time: self.processing_time,
            event_time: self.event_time,
        }
    }
}

impl<KF, K, T, PF, P, Cl, N> KeyedProcess<KF, K, T, PF, P, Cl, N>
where
    KF: FnMut(&T) -> K,
    K: Hash + Eq + Clone + 'static,
    PF: KeyedProcessFunction<K, T>,
    P: ProcessTracking<K>,
    N: Operator<PF::Out>,
{
    /// Applies the timer registrations and deletions the function asked for, in order.
    ///
    /// # Errors
    /// [`Error::TimerQueueFull`] when an event-time timer would exceed the queue's bound:
    /// the record fails (retry / dead letter) instead of the timer being dropped.
    fn register(
        id: &OperatorId,
        state: &mut ProcessState<K, P>,
        key: &K,
        requests: &mut Vec<KeyedTimerRequest>,
    ) -> Result<(), Error> {
        let max = state.max_event_timers;
        let mut full = false;
        for request in requests.drain(..) {
            let (time, domain) = match request {
                KeyedTimerRequest::Delete(time, domain) => {
                    state.delete_timer(key, time, domain);
                    continue;
                }
                KeyedTimerRequest::Register(time, domain) => (time, domain),
            };
            if max > 0 && domain == TimeDomain::EventTime && state.event_timers.len() >= max {
                full = true;
                continue;
            }
            state.add_timer(key, time, domain);
        }
        if full {
            return Err(Error::TimerQueueFull {
                operator: id.clone(),
                max,
            });
        }
        Ok(())
    }

    /// The result of a call of the function; when it failed, the records it emitted are
    /// dropped with it.
    #[inline(always)]
    fn check(
        id: &OperatorId,
        called: Result<Result<(), BoxError>, Error>,
        out: &mut Vec<PF::Out>,
    ) -> Result<(), Error> {
        match called {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                out.clear();
                Err(user_error(id, e))
            }
            Err(e) => {
                out.clear();
                Err(e)
            }
        }
    }

    /// Moves processing time to `now` (later than it was) and fires the processing-time
    /// timers due by then; returns whether any fired. Out of line: the record path only
    /// compares the clock.
    #[inline(never)]
    fn advance_processing_time(&mut self, now: i64) -> Result<bool, Error> {
        self.processing_time = now;
        if self.state.borrow().processing_timers.len() > 0 {
            return self.fire(TimeDomain::ProcessingTime, now);
        }
        Ok(false)
    }

    /// Fires due timers of `domain` up to `upto`; returns whether any fired.
    fn fire(&mut self, domain: TimeDomain, upto: i64) -> Result<bool, Error> {
        let mut fired = false;
        loop {
            let state = Rc::clone(&self.state);
            let mut guard_st = state.borrow_mut();
            let st = &mut *guard_st;
            let due = match domain {
                TimeDomain::EventTime => st.event_timers.pop_due(upto),
                TimeDomain::ProcessingTime => st.processing_timers.pop_due(upto),
            };
            let Some((time, key)) = due else { break };
            fired = true;
            st.fired(&key, time, domain);
            let times = self.times(time);
            let mut out = Collector::new(&mut self.out);
            let function = &mut self.function;
            let called = st
                .with_timer_context(&key, times, domain, &mut self.requests, |ctx| {
                    guard(&self.id, || function.on_timer(time, ctx, &mut out))
                })
                .and_then(|called| called);
            let first = out.into_first();
            Self::check(&self.id, called, &mut self.out)?;
            Self::register(&self.id, st, &key, &mut self.requests)?;
            drop(guard_st);
            // The timer was taken off the queue: a failure leaves that behind.
            emit(first, &mut self.out, &mut self.next, time).map_err(effects::left_behind)?;
        }
        Ok(fired)
    }
}

impl<KF, K, T, PF, P, Cl, N> Operator<T> for KeyedProcess<KF, K, T, PF, P, Cl, N>
where
    KF: FnMut(&T) -> K,
    K: Hash + Eq + Clone + 'static,
    PF: KeyedProcessFunction<K, T>,
    P: ProcessTracking<K>,
    Cl: Clock,
    N: Operator<PF::Out>,
{
    forward_lifecycle!(next; open, close);

    /// What a failure leaves behind (see `effects`): the function's after it changed state
    /// or timers fired for the record; any after the function returned `Ok` (registering its
    /// timers, downstream): whether it changed state is known only when it fails.
    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let now = Cl::processing_time(timestamp);
        let mut fired = false;
        if now > self.processing_time {
            fired = self
                .advance_processing_time(now)
                .map_err(effects::left_behind)?;
        }
        let key = guard(&self.id, || (self.key_fn)(&value))?;
        let first;
        {
            let mut st = self.state.borrow_mut();
            let st = &mut *st;
            let times = self.times(timestamp);
            let mut out = Collector::new(&mut self.out);
            let function = &mut self.function;
            let called = st
                .with_context(
                    &key,
                    times,
                    &mut self.requests,
                    |ctx| guard(&self.id, || function.process_element(value, ctx, &mut out)),
                    |called| !matches!(called, Ok(Ok(()))),
                )
                .and_then(|called| called);
            first = out.into_first();
            Self::check(&self.id, called, &mut self.out)
                .map_err(|e| call_failed(e, fired || st.changed, &mut self.requests))?;
            if !self.requests.is_empty() {
                Self::register(&self.id, st, &key, &mut self.requests)
                    .map_err(effects::left_behind)?;
            }
        }
        emit(first, &mut self.out, &mut self.next, timestamp).map_err(effects::left_behind)
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        if watermark <= self.watermark {
            return Ok(());
        }
        self.watermark = watermark;
        self.fire(TimeDomain::EventTime, watermark)?;
        self.next.on_watermark(watermark)
    }

    fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
        if now > self.processing_time {
            self.processing_time = now;
            self.fire(TimeDomain::ProcessingTime, now)?;
        }
        self.next.on_processing_time(now)
    }

    fn finish(&mut self) -> Result<(), Error> {
        // Timers registered while draining fire too, until none is left.
        loop {
            let event = self.fire(TimeDomain::EventTime, i64::MAX)?;
            self.processing_time = i64::MAX;
            let processing = self.fire(TimeDomain::ProcessingTime, i64::MAX)?;
            if !event && !processing {
                break;
            }
        }
        self.next.finish()
    }
}

/// Pushes the records of one call downstream in order: `first`, then those buffered in
/// `rest` (empty when `first` is `None`). A failure drops the records not yet pushed.
#[inline(always)]
fn emit<O, N: Operator<O>>(
    first: Option<O>,
    rest: &mut Vec<O>,
    next: &mut N,
    timestamp: i64,
) -> Result<(), Error> {
    let Some(first) = first else {
        return Ok(());
    };
    if let Err(e) = next.process(first, timestamp) {
        rest.clear();
        return Err(e);
    }
    if rest.is_empty() {
        return Ok(());
    }
    emit_rest(rest, next, timestamp)
}

/// A failed call of the function: its timer requests are dropped with it; when it (or
/// timers that fired for its record) `changed` state, that stays behind (see `effects`).
#[cold]
#[inline(never)]
fn call_failed(e: Error, changed: bool, requests: &mut Vec<KeyedTimerRequest>) -> Error {
    requests.clear();
    if changed {
        effects::left_behind(e)
    } else {
        e
    }
}

#[inline(never)]
fn emit_rest<O, N: Operator<O>>(
    rest: &mut Vec<O>,
    next: &mut N,
    timestamp: i64,
) -> Result<(), Error> {
    for v in rest.drain(..) {
        next.process(v, timestamp)?;
    }
    Ok(())
}
