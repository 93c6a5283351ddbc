//! The keyed window operator: assigners, triggers, allowed lateness, late side output and
//! session merging.

use super::changes::KeyChanges;
use super::timers::TimerQueue;
use super::{guard, user_error, Counters, Operator, OperatorId, Shared};
use crate::api::{AggregateFunction, Collector, Numeric, RejectedElement, Sink};
use crate::time::trigger::TimerRequest;
use crate::time::{TimeWindow, Trigger, TriggerContext, TriggerResult, WindowAssigner};
use crate::{BoxError, Error};
use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::rc::Rc;

/// What a window computes from its elements: an accumulator per (key, window) and the
/// records emitted when it fires.
pub trait WindowFunction<K, T> {
    /// Per-window state.
    type Acc: Clone + 'static;
    /// Emitted records.
    type Out;

    /// An empty accumulator.
    fn create(&mut self) -> Self::Acc;
    /// Adds one element.
    fn add(&mut self, acc: &mut Self::Acc, value: T);
    /// Adds one element of a merging window (session), with its arrival number within
    /// its key: later elements have higher numbers, so a function that keeps elements can
    /// keep them in arrival order across [`merge`](Self::merge). The default is
    /// [`add`](Self::add).
    fn add_in_order(&mut self, acc: &mut Self::Acc, value: T, arrival: u64) {
        let _ = arrival;
        self.add(acc, value);
    }
    /// Folds `other` into `into` (session windows merging).
    fn merge(&mut self, into: &mut Self::Acc, other: Self::Acc);
    /// Emits the window's result for `key`.
    ///
    /// # Errors
    /// A failing user function.
    fn emit(
        &mut self,
        key: &K,
        window: &TimeWindow,
        acc: &Self::Acc,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError>;
}

/// `reduce(f)`: the window's elements folded pairwise; emits `T`.
#[derive(Clone)]
pub struct ReduceWindow<F>(pub F);

impl<K, T: Clone + 'static, F: FnMut(T, T) -> T> WindowFunction<K, T> for ReduceWindow<F> {
    type Acc = Option<T>;
    type Out = T;

    fn create(&mut self) -> Option<T> {
        None
    }
    fn add(&mut self, acc: &mut Option<T>, value: T) {
        *acc = Some(match acc.take() {
            Some(a) => (self.0)(a, value),
            None => value,
        });
    }
    fn merge(&mut self, into: &mut Option<T>, other: Option<T>) {
        if let Some(o) = other {
            <Self as WindowFunction<K, T>>::add(self, into, o);
        }
    }
    fn emit(
        &mut self,
        _: &K,
        _: &TimeWindow,
        acc: &Option<T>,
        out: &mut Collector<'_, T>,
    ) -> Result<(), BoxError> {
        if let Some(a) = acc {
            out.collect(a.clone());
        }
        Ok(())
    }
}

/// `aggregate(agg)` / `aggregate_with(agg, f)`: an [`AggregateFunction`] whose result is
/// passed with the key and window to `f`.
pub struct AggregateWindow<A, W, R> {
    agg: A,
    with: W,
    _out: PhantomData<fn() -> R>,
}

impl<A: Clone, W: Clone, R> Clone for AggregateWindow<A, W, R> {
    fn clone(&self) -> Self {
        AggregateWindow {
            agg: self.agg.clone(),
            with: self.with.clone(),
            _out: PhantomData,
        }
    }
}

impl<A, W, R> AggregateWindow<A, W, R> {
    /// Aggregates with `agg`, then maps `(key, window, result)` with `with`.
    pub fn new(agg: A, with: W) -> Self {
        AggregateWindow {
            agg,
            with,
            _out: PhantomData,
        }
    }
}

impl<K, T, A, W, R> WindowFunction<K, T> for AggregateWindow<A, W, R>
where
    A: AggregateFunction<T>,
    W: FnMut(&K, &TimeWindow, A::Out) -> R,
{
    type Acc = A::Acc;
    type Out = R;

    fn create(&mut self) -> A::Acc {
        self.agg.create_accumulator()
    }
    fn add(&mut self, acc: &mut A::Acc, value: T) {
        self.agg.add(acc, value);
    }
    fn merge(&mut self, into: &mut A::Acc, other: A::Acc) {
        let a = std::mem::replace(into, self.agg.create_accumulator());
        *into = self.agg.merge(a, other);
    }
    fn emit(
        &mut self,
        key: &K,
        window: &TimeWindow,
        acc: &A::Acc,
        out: &mut Collector<'_, R>,
    ) -> Result<(), BoxError> {
        let result = self.agg.get_result(acc);
        out.collect((self.with)(key, window, result));
        Ok(())
    }
}

/// `apply(f)`: all of the window's elements (in arrival order) at once.
pub struct ApplyWindow<F, R> {
    f: F,
    _out: PhantomData<fn() -> R>,
}

impl<F: Clone, R> Clone for ApplyWindow<F, R> {
    fn clone(&self) -> Self {
        ApplyWindow {
            f: self.f.clone(),
            _out: PhantomData,
        }
    }
}

impl<F, R> ApplyWindow<F, R> {
    /// Calls `f(key, window, elements, out)` when the window fires.
    pub fn new(f: F) -> Self {
        ApplyWindow {
            f,
            _out: PhantomData,
        }
    }
}

/// The elements of an `apply` window in arrival order; for merging windows with their
/// arrival numbers, so merged panes interleave in arrival order.
#[doc(hidden)]
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Arrivals<T> {
    items: Vec<T>,
    /// One arrival number per item, or empty (non-merging windows: `items` are already
    /// in arrival order).
    #[serde(default)]
    arrivals: Vec<u64>,
}

impl<T> Arrivals<T> {
    fn numbered(&self) -> bool {
        self.arrivals.len() == self.items.len()
    }

    /// Merges `other` into `self`, by arrival number when both are numbered.
    fn merge(&mut self, other: Arrivals<T>) {
        if !self.numbered() || !other.numbered() {
            self.items.extend(other.items);
            self.arrivals.clear();
            return;
        }
        let n = self.items.len() + other.items.len();
        let (mut items, mut arrivals) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut a = std::mem::take(&mut self.items)
            .into_iter()
            .zip(std::mem::take(&mut self.arrivals))
            .peekable();
        let mut b = other.items.into_iter().zip(other.arrivals).peekable();
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.1 <= y.1 => a.next(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, None) => break,
            };
            let (item, arrival) = next.expect("peeked");
            items.push(item);
            arrivals.push(arrival);
        }
        self.items = items;
        self.arrivals = arrivals;
    }
}

impl<K, T: Clone + 'static, F, R> WindowFunction<K, T> for ApplyWindow<F, R>
where
    F: FnMut(&K, &TimeWindow, &[T], &mut Collector<'_, R>) -> Result<(), BoxError>,
{
    type Acc = Arrivals<T>;
    type Out = R;

    fn create(&mut self) -> Arrivals<T> {
        Arrivals {
            items: Vec::new(),
            arrivals: Vec::new(),
        }
    }
    fn add(&mut self, acc: &mut Arrivals<T>, value: T) {
        acc.items.push(value);
        acc.arrivals.clear();
    }
    fn add_in_order(&mut self, acc: &mut Arrivals<T>, value: T, arrival: u64) {
        if acc.items.len() == acc.arrivals.len() {
            acc.arrivals.push(arrival);
        }
        acc.items.push(value);
    }
    fn merge(&mut self, into: &mut Arrivals<T>, other: Arrivals<T>) {
        into.merge(other);
    }
    fn emit(
        &mut self,
        key: &K,
        window: &TimeWindow,
        acc: &Arrivals<T>,
        out: &mut Collector<'_, R>,
    ) -> Result<(), BoxError> {
        (self.f)(key, window, &acc.items, out)
    }
}

/// `sum()`: emits `(key, window, sum)`.
#[derive(Clone, Copy, Debug)]
pub struct SumWindow;

impl<K: Clone, T: Numeric> WindowFunction<K, T> for SumWindow {
    type Acc = T;
    type Out = (K, TimeWindow, T);

    fn create(&mut self) -> T {
        T::default()
    }
    fn add(&mut self, acc: &mut T, value: T) {
        *acc = *acc + value;
    }
    fn merge(&mut self, into: &mut T, other: T) {
        *into = *into + other;
    }
    fn emit(
        &mut self,
        key: &K,
        window: &TimeWindow,
        acc: &T,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        out.collect((key.clone(), *window, *acc));
        Ok(())
    }
}

/// `sum_by(f)`: sums `f(element)`; emits `(key, window, sum)`.
pub struct SumByWindow<F, V> {
    f: F,
    _v: PhantomData<fn() -> V>,
}

impl<F, V> SumByWindow<F, V> {
    /// Sums the field `f` extracts.
    pub fn new(f: F) -> Self {
        SumByWindow { f, _v: PhantomData }
    }
}

impl<F: Clone, V> Clone for SumByWindow<F, V> {
    fn clone(&self) -> Self {
        SumByWindow::new(self.f.clone())
    }
}

impl<K: Clone, T, V: Numeric, F: FnMut(&T) -> V> WindowFunction<K, T> for SumByWindow<F, V> {
    type Acc = V;
    type Out = (K, TimeWindow, V);

    fn create(&mut self) -> V {
        V::default()
    }
    fn add(&mut self, acc: &mut V, value: T) {
        *acc = *acc + (self.f)(&value);
    }
    fn merge(&mut self, into: &mut V, other: V) {
        *into = *into + other;
    }
    fn emit(
        &mut self,
        key: &K,
        window: &TimeWindow,
        acc: &V,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        out.collect((key.clone(), *window, *acc));
        Ok(())
    }
}

/// `count()`: emits `(key, window, number of elements)`.
#[derive(Clone, Copy, Debug)]
pub struct CountWindow;

impl<K: Clone, T> WindowFunction<K, T> for CountWindow {
    type Acc = u64;
    type Out = (K, TimeWindow, u64);

    fn create(&mut self) -> u64 {
        0
    }
    fn add(&mut self, acc: &mut u64, _value: T) {
        *acc += 1;
    }
    fn merge(&mut self, into: &mut u64, other: u64) {
        *into += other;
    }
    fn emit(
        &mut self,
        key: &K,
        window: &TimeWindow,
        acc: &u64,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        out.collect((key.clone(), *window, *acc));
        Ok(())
    }
}

/// Where a window operator sends elements whose window bounds do not fit in `i64`
/// ([`RejectedElement`]): [`NoRejectedOutput`] or a sink ([`RejectedTo`]).
#[doc(hidden)]
pub trait RejectedOutput<T> {
    /// Opens the output's sink.
    ///
    /// # Errors
    /// The sink failed to open.
    fn open(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
    /// Sends `rejected` to the sink; `None` when there is no sink.
    fn send(&mut self, rejected: RejectedElement<T>) -> Option<Result<(), BoxError>>;
    /// Closes the output's sink.
    ///
    /// # Errors
    /// The sink failed to close.
    fn close(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
}

/// No rejected-element output: the engine's default applies (memory: count in
/// `JobSummary::window_bounds_rejected` and a `tracing` warning; Redis: dead letter).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRejectedOutput;

impl<T> RejectedOutput<T> for NoRejectedOutput {
    fn send(&mut self, _: RejectedElement<T>) -> Option<Result<(), BoxError>> {
        None
    }
}

/// A sink receiving rejected elements.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct RejectedTo<S>(pub S);

impl<T, S: Sink<RejectedElement<T>>> RejectedOutput<T> for RejectedTo<S> {
    fn open(&mut self) -> Result<(), BoxError> {
        self.0.open()
    }
    fn send(&mut self, rejected: RejectedElement<T>) -> Option<Result<(), BoxError>> {
        Some(self.0.invoke(rejected))
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.0.close()
    }
}

/// One (key, window) pane. Serialized as JSON when the Redis engine keeps it.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Bucket<Acc, Tr> {
    pub(crate) window: TimeWindow,
    acc: Acc,
    trigger: Tr,
    /// Elements were added since the pane was created or purged.
    has_content: bool,
    /// Elements were added since the last emission: emitted at cleanup if still set.
    pending: bool,
    /// Event-time timers registered for this pane (trigger timers and the cleanup time).
    pub(crate) timers: Vec<i64>,
    /// Merging windows: the arrival number of the pane's latest element (numbers count
    /// up per key while the key has panes).
    #[serde(default)]
    last_arrival: u64,
}

/// The window operator's state: panes per key and the event-time timer queue.
///
/// The Redis engine keeps it in one hash per (partition, operator): field = the key as
/// JSON, value = the key's panes as JSON (window, accumulator, trigger state, flags and
/// registered event-time timers); the timer queue is rebuilt from the panes on load.
#[derive(Clone)]
pub struct WindowState<K, Acc, Tr, C> {
    pub(crate) keys: HashMap<K, Vec<Bucket<Acc, Tr>>>,
    pub(crate) timers: TimerQueue<(K, TimeWindow)>,
    /// Keys whose panes changed since the engine last wrote them back.
    pub(crate) changes: C,
    /// Most windows fired by timers per record (0 = unlimited); due windows beyond it
    /// fire before the next record.
    pub(crate) max_fires: usize,
}

impl<K, Acc, Tr, C: Default> Default for WindowState<K, Acc, Tr, C> {
    fn default() -> Self {
        WindowState {
            keys: HashMap::new(),
            timers: TimerQueue::default(),
            changes: C::default(),
            max_fires: 0,
        }
    }
}

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

/// The parts of the operator a pane callback needs, borrowed apart from the state.
struct Emitter<'a, K, T, WF: WindowFunction<K, T>> {
    id: &'a OperatorId,
    function: &'a mut WF,
    out: &'a mut Vec<WF::Out>,
    marks: &'a mut Vec<(usize, i64)>,
    counters: &'a Counters,
    _k: PhantomData<fn(&K, T)>,
}

impl<K, T, WF: WindowFunction<K, T>> Emitter<'_, K, T, WF> {
    fn emit<Tr>(&mut self, key: &K, b: &mut Bucket<WF::Acc, Tr>) -> Result<(), Error> {
        if !b.has_content {
            return Ok(());
        }
        let (function, out, window, acc) = (&mut *self.function, &mut *self.out, &b.window, &b.acc);
        guard(self.id, || {
            function.emit(key, window, acc, &mut Collector { buffer: out })
        })?
        .map_err(|e| user_error(self.id, e))?;
        self.marks.push((self.out.len(), b.window.max_timestamp()));
        b.pending = false;
        self.counters.add_firing();
        Ok(())
    }

    fn apply<Tr>(
        &mut self,
        key: &K,
        b: &mut Bucket<WF::Acc, Tr>,
        r: TriggerResult,
    ) -> Result<(), Error> {
        if r.is_fire() {
            self.emit(key, b)?;
        }
        if r.is_purge() {
            b.acc = guard(self.id, || self.function.create())?;
            b.has_content = false;
            b.pending = false;
        }
        Ok(())
    }
}

/// Borrows the emitting parts of a [`WindowOperator`] apart from its other fields.
macro_rules! emitter {
    ($op:ident) => {
        Emitter {
            id: &$op.id,
            function: &mut $op.function,
            out: &mut $op.out,
            marks: &mut $op.marks,
            counters: &$op.counters,
            _k: PhantomData,
        }
    };
}

fn register<K: Clone, Acc, Tr>(
    timers: &mut TimerQueue<(K, TimeWindow)>,
    requests: &mut Vec<TimerRequest>,
    key: &K,
    b: &mut Bucket<Acc, Tr>,
) {
    for r in requests.drain(..) {
        if let TimerRequest::EventTime(t) = r {
            if !b.timers.contains(&t) {
                b.timers.push(t);
                timers.push(t, (key.clone(), b.window));
            }
        }
    }
}

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
    fn new_bucket(&mut self, window: TimeWindow) -> Result<Bucket<WF::Acc, Tr>, Error> {
        Ok(Bucket {
            window,
            acc: guard(&self.id, || self.function.create())?,
            trigger: self.trigger.clone(),
            has_content: false,
            pending: false,
            timers: Vec::new(),
            last_arrival: 0,
        })
    }

    /// Pushes buffered results downstream, each with its window's timestamp.
    fn drain(&mut self) -> Result<(), Error> {
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
                operator: self.id.to_string(),
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
    fn process_record(&mut self, value: T, timestamp: i64) -> Result<bool, Error> {
        self.fired = 0;
        if self.carry {
            // Windows left due by the per-record cap: up to the cap fire before this
            // record, and every due window of this record's key.
            self.fire_timers(self.watermark)?;
            self.drain()?;
        }
        let key = guard(&self.id, || (self.key_fn)(&value))?;
        if self.carry {
            self.fire_key_due(&key)?;
            self.drain()?;
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
            self.process_merging(key, value, timestamp)?;
        } else {
            self.process_aligned(key, value, timestamp)?;
        }
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
        if !keys.contains_key(&key) {
            keys.insert(key.clone(), Vec::new());
        }
        let panes = keys.get_mut(&key).expect("inserted above");
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
                    self.requests
                        .push(TimerRequest::EventTime(window.cleanup_time(self.lateness)));
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
        let new_window = self.windows[0];
        let state = Rc::clone(&self.state);
        let mut state = state.borrow_mut();
        let WindowState {
            keys,
            timers,
            changes,
            ..
        } = &mut *state;
        let empty = Vec::new();
        let panes = keys.get(&key).unwrap_or(&empty);
        let arrival = panes.iter().map(|b| b.last_arrival).max().unwrap_or(0) + 1;
        // Windows of one key never intersect each other, so one pass finds every pane the
        // new window merges with; grow the cover until no more join.
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
                break;
            }
        }
        if merged.is_late(self.lateness, watermark) {
            drop(state);
            return self.late_element(value);
        }
        changes.mark(&key);
        if !keys.contains_key(&key) {
            keys.insert(key.clone(), Vec::new());
        }
        let panes = keys.get_mut(&key).expect("inserted above");
        joined.sort_unstable();
        let mut parts: Vec<Bucket<WF::Acc, Tr>> =
            joined.iter().rev().map(|&i| panes.swap_remove(i)).collect();
        parts.sort_by_key(|b| b.window.start());
        let mut ctx_requests = std::mem::take(&mut self.requests);
        let mut bucket = if parts.is_empty() {
            ctx_requests.push(TimerRequest::EventTime(merged.cleanup_time(self.lateness)));
            self.new_bucket(merged)?
        } else {
            let mut base = parts.remove(0);
            let extended = base.window != merged || !parts.is_empty();
            if extended {
                base.window = merged;
                base.timers.clear();
                ctx_requests.push(TimerRequest::EventTime(merged.cleanup_time(self.lateness)));
                let mut others = std::mem::take(&mut parts);
                if others.is_empty() {
                    others.push(self.new_bucket(merged)?);
                }
                for other in others {
                    let mut ctx = TriggerContext {
                        watermark,
                        processing_time: timestamp,
                        timers: &mut ctx_requests,
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
            }
            base
        };
        self.requests = ctx_requests;
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

    /// Fires the event-time timers due at `watermark`: all of them at the final
    /// watermark, else at most `max_fires` (when set); the rest stay due and fire before
    /// the next record ([`Self::carry_over`]).
    fn fire_timers(&mut self, watermark: i64) -> Result<(), Error> {
        let state = Rc::clone(&self.state);
        let mut st = state.borrow_mut();
        let limit = if st.max_fires == 0 || watermark == i64::MAX {
            usize::MAX
        } else {
            st.max_fires
        };
        self.carry = false;
        loop {
            if self.fired >= limit {
                self.carry = st.timers.has_due(watermark);
                break;
            }
            let Some((time, (key, window))) = st.timers.pop_due(watermark) else {
                break;
            };
            self.fired += 1;
            self.fire_one(&mut st, time, key, window, watermark)?;
        }
        Ok(())
    }

    /// With windows left due by the cap: fires the due timers of `key`'s panes before an
    /// element of `key` is added, so no element joins a window that is already due (the
    /// results stay those of an uncapped run; other keys' due windows keep waiting).
    fn fire_key_due(&mut self, key: &K) -> Result<(), Error> {
        let watermark = self.watermark;
        let state = Rc::clone(&self.state);
        let mut st = state.borrow_mut();
        let Some(panes) = st.keys.get(key) else {
            return Ok(());
        };
        let mut due: Vec<(i64, TimeWindow)> = panes
            .iter()
            .flat_map(|b| {
                b.timers
                    .iter()
                    .filter(|&&t| t <= watermark)
                    .map(move |&t| (t, b.window))
            })
            .collect();
        due.sort_by_key(|(t, w)| (*t, w.start(), w.end()));
        for (time, window) in due {
            self.fire_one(&mut st, time, key.clone(), window, watermark)?;
        }
        Ok(())
    }

    /// Runs event-time timer `time` of `key`'s pane `window` (if the pane still has it).
    fn fire_one(
        &mut self,
        st: &mut WindowState<K, WF::Acc, Tr, C>,
        time: i64,
        key: K,
        window: TimeWindow,
        watermark: i64,
    ) -> Result<(), Error> {
        let WindowState {
            keys,
            timers,
            changes,
            ..
        } = st;
        let Some(panes) = keys.get_mut(&key) else {
            return Ok(());
        };
        changes.mark(&key);
        let Some(idx) = panes
            .iter()
            .position(|b| b.window == window && b.timers.contains(&time))
        else {
            return Ok(()); // the pane merged away, was cleaned up or already fired it
        };
        let b = &mut panes[idx];
        b.timers.retain(|&t| t != time);
        let mut ctx = TriggerContext {
            watermark,
            processing_time: watermark,
            timers: &mut self.requests,
        };
        let r = guard(&self.id, || {
            b.trigger.on_event_time(time, &window, &mut ctx)
        })?;
        register(timers, &mut self.requests, &key, b);
        let mut em = emitter!(self);
        em.apply(&key, b, r)?;
        if time == window.cleanup_time(self.lateness) {
            // Cleanup: contents never emitted are emitted once (DESIGN invariant 2).
            if b.pending {
                em.emit(&key, b)?;
            }
            panes.swap_remove(idx);
            if panes.is_empty() {
                keys.remove(&key);
            }
        }
        Ok(())
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
