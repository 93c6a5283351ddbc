//! Window functions: what a window computes from its elements (`reduce`, `aggregate`,
//! `apply`, and `sum`, `sum_by`, `count` as one sum).

use crate::api::{AggregateFunction, Collector, Numeric};
use crate::ops::sum::Summand;
use crate::time::TimeWindow;
use crate::BoxError;
use std::marker::PhantomData;

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
pub struct ReducingFunction<F>(pub F);

impl<K, T: Clone + 'static, F: FnMut(T, T) -> T> WindowFunction<K, T> for ReducingFunction<F> {
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
pub struct AggregatingFunction<A, W, R> {
    agg: A,
    with: W,
    _out: PhantomData<fn() -> R>,
}

impl<A: Clone, W: Clone, R> Clone for AggregatingFunction<A, W, R> {
    fn clone(&self) -> Self {
        AggregatingFunction {
            agg: self.agg.clone(),
            with: self.with.clone(),
            _out: PhantomData,
        }
    }
}

impl<A, W, R> AggregatingFunction<A, W, R> {
    /// Aggregates with `agg`, then maps `(key, window, result)` with `with`.
    pub fn new(agg: A, with: W) -> Self {
        AggregatingFunction {
            agg,
            with,
            _out: PhantomData,
        }
    }
}

impl<K, T, A, W, R> WindowFunction<K, T> for AggregatingFunction<A, W, R>
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
pub struct ApplyingFunction<F, R> {
    f: F,
    _out: PhantomData<fn() -> R>,
}

impl<F: Clone, R> Clone for ApplyingFunction<F, R> {
    fn clone(&self) -> Self {
        ApplyingFunction {
            f: self.f.clone(),
            _out: PhantomData,
        }
    }
}

impl<F, R> ApplyingFunction<F, R> {
    /// Calls `f(key, window, elements, out)` when the window fires.
    pub fn new(f: F) -> Self {
        ApplyingFunction {
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

/// What an `apply` window calls when it fires: `call(key, window, elements, out)`. A
/// closure of that shape is one; the window joins have their own (nameable, so cloneable
/// when their function is).
#[doc(hidden)]
pub trait ApplyBody<K, T, R> {
    /// Emits the window's results for its `elements` in arrival order.
    ///
    /// # Errors
    /// A failing user function.
    fn call(
        &mut self,
        key: &K,
        window: &TimeWindow,
        elements: &[T],
        out: &mut Collector<'_, R>,
    ) -> Result<(), BoxError>;
}

impl<K, T, R, F> ApplyBody<K, T, R> for F
where
    F: FnMut(&K, &TimeWindow, &[T], &mut Collector<'_, R>) -> Result<(), BoxError>,
{
    #[inline]
    fn call(
        &mut self,
        key: &K,
        window: &TimeWindow,
        elements: &[T],
        out: &mut Collector<'_, R>,
    ) -> Result<(), BoxError> {
        self(key, window, elements, out)
    }
}

impl<K, T: Clone + 'static, F, R> WindowFunction<K, T> for ApplyingFunction<F, R>
where
    F: ApplyBody<K, T, R>,
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
        self.f.call(key, window, &acc.items, out)
    }
}

/// `sum()`, `sum_by(f)` and `count()`: sums what `X` adds per element (the element,
/// `f(element)`, one); emits `(key, window, sum)`.
#[derive(Clone, Copy, Debug)]
pub struct SummingFunction<X>(pub X);

impl<K: Clone, T, X> WindowFunction<K, T> for SummingFunction<X>
where
    X: Summand<T>,
    X::Value: Numeric,
{
    type Acc = X::Value;
    type Out = (K, TimeWindow, X::Value);

    fn create(&mut self) -> X::Value {
        X::Value::default()
    }
    fn add(&mut self, acc: &mut X::Value, value: T) {
        *acc = *acc + self.0.value(value);
    }
    fn merge(&mut self, into: &mut X::Value, other: X::Value) {
        *into = *into + other;
    }
    fn emit(
        &mut self,
        key: &K,
        window: &TimeWindow,
        acc: &X::Value,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        out.collect((key.clone(), *window, *acc));
        Ok(())
    }
}
