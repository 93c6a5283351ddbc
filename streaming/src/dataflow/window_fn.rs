//! The window functions of a [`WindowedStream`](super::WindowedStream) as the user gave
//! them, and how each becomes the window operator's function.

use crate::api::{AggregateFunction, Numeric};
use crate::ops::{
    AggregatingFunction, ApplyBody, ApplyingFunction, Itself, One, ReducingFunction,
    SummingFunction, WindowFunction,
};
use crate::sealed::Sealed;
use crate::time::TimeWindow;
use std::marker::PhantomData;

/// The window function of a [`WindowedStream`](super::WindowedStream) as the user gave it, turned into the
/// operator's [`WindowFunction`] when the stage is built. The stage keeps the user's
/// pieces (and is `Clone` when they are), so a pipeline can be built once per partition
/// ([`MemoryEnv::from_collection_partitioned`](crate::MemoryEnv::from_collection_partitioned)).
pub trait MakeWindowFunction<K, T>: Sealed {
    /// The function the window operator runs.
    type Function: WindowFunction<K, T>;

    /// Makes it.
    fn make(self) -> Self::Function;
}

/// The window function of [`WindowedStream::reduce`](crate::WindowedStream::reduce).
#[derive(Clone, Copy, Debug)]
pub struct ReduceSpec<F>(pub(crate) F);

impl<F> Sealed for ReduceSpec<F> {}
impl<K, T: Clone + 'static, F: FnMut(T, T) -> T> MakeWindowFunction<K, T> for ReduceSpec<F> {
    type Function = ReducingFunction<F>;
    fn make(self) -> ReducingFunction<F> {
        ReducingFunction(self.0)
    }
}

/// The window function of [`WindowedStream::aggregate`](crate::WindowedStream::aggregate) and
/// [`WindowedStream::aggregate_with`](crate::WindowedStream::aggregate_with).
pub struct AggregateSpec<AF, W, R> {
    agg: AF,
    with: W,
    _r: PhantomData<fn() -> R>,
}

impl<AF, W, R> AggregateSpec<AF, W, R> {
    pub(crate) fn new(agg: AF, with: W) -> Self {
        AggregateSpec {
            agg,
            with,
            _r: PhantomData,
        }
    }
}

impl<AF: Clone, W: Clone, R> Clone for AggregateSpec<AF, W, R> {
    fn clone(&self) -> Self {
        AggregateSpec::new(self.agg.clone(), self.with.clone())
    }
}

impl<AF, W, R> Sealed for AggregateSpec<AF, W, R> {}
impl<K, T, AF, W, R> MakeWindowFunction<K, T> for AggregateSpec<AF, W, R>
where
    AF: AggregateFunction<T>,
    W: FnMut(&K, &TimeWindow, AF::Out) -> R,
{
    type Function = AggregatingFunction<AF, W, R>;
    fn make(self) -> AggregatingFunction<AF, W, R> {
        AggregatingFunction::new(self.agg, self.with)
    }
}

/// The window function of [`WindowedStream::apply`](crate::WindowedStream::apply).
pub struct ApplySpec<F, R> {
    pub(super) f: F,
    pub(super) _r: PhantomData<fn() -> R>,
}

impl<F, R> ApplySpec<F, R> {
    /// The window function `f`.
    pub(super) fn new(f: F) -> Self {
        ApplySpec { f, _r: PhantomData }
    }
}

impl<F: Clone, R> Clone for ApplySpec<F, R> {
    fn clone(&self) -> Self {
        ApplySpec {
            f: self.f.clone(),
            _r: PhantomData,
        }
    }
}

impl<F, R> Sealed for ApplySpec<F, R> {}
impl<K, T: Clone + 'static, F, R> MakeWindowFunction<K, T> for ApplySpec<F, R>
where
    F: ApplyBody<K, T, R>,
{
    type Function = ApplyingFunction<F, R>;
    fn make(self) -> ApplyingFunction<F, R> {
        ApplyingFunction::new(self.f)
    }
}

/// The window function of [`WindowedStream::sum`](crate::WindowedStream::sum).
#[derive(Clone, Copy, Debug, Default)]
pub struct SumSpec;

impl Sealed for SumSpec {}
impl<K: Clone, T: Numeric> MakeWindowFunction<K, T> for SumSpec {
    type Function = SummingFunction<Itself>;
    fn make(self) -> SummingFunction<Itself> {
        SummingFunction(Itself)
    }
}

/// The window function of [`WindowedStream::sum_by`](crate::WindowedStream::sum_by).
pub struct SumBySpec<F, V> {
    pub(super) f: F,
    pub(super) _v: PhantomData<fn() -> V>,
}

impl<F: Clone, V> Clone for SumBySpec<F, V> {
    fn clone(&self) -> Self {
        SumBySpec {
            f: self.f.clone(),
            _v: PhantomData,
        }
    }
}

impl<F, V> Sealed for SumBySpec<F, V> {}
impl<K: Clone, T, V: Numeric, F: FnMut(&T) -> V> MakeWindowFunction<K, T> for SumBySpec<F, V> {
    type Function = SummingFunction<F>;
    fn make(self) -> SummingFunction<F> {
        SummingFunction(self.f)
    }
}

/// The window function of [`WindowedStream::count`](crate::WindowedStream::count).
#[derive(Clone, Copy, Debug, Default)]
pub struct CountSpec;

impl Sealed for CountSpec {}
impl<K: Clone, T> MakeWindowFunction<K, T> for CountSpec {
    type Function = SummingFunction<One>;
    fn make(self) -> SummingFunction<One> {
        SummingFunction(One)
    }
}
