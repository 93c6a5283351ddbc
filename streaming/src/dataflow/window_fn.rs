//! The window functions of a [`WindowedStream`](super::WindowedStream) as the user gave
//! them, and how each becomes the window operator's function.

use crate::api::{AggregateFunction, Collector, Numeric};
use crate::ops::{
    AggregateWindow, ApplyWindow, CountWindow, ReduceWindow, SumByWindow, SumWindow, WindowFunction,
};
use crate::sealed::Sealed;
use crate::time::TimeWindow;
use crate::BoxError;
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
pub struct WindowReduce<F>(pub(crate) F);

impl<F> Sealed for WindowReduce<F> {}
impl<K, T: Clone + 'static, F: FnMut(T, T) -> T> MakeWindowFunction<K, T> for WindowReduce<F> {
    type Function = ReduceWindow<F>;
    fn make(self) -> ReduceWindow<F> {
        ReduceWindow(self.0)
    }
}

/// The window function of [`WindowedStream::aggregate`](crate::WindowedStream::aggregate) and
/// [`WindowedStream::aggregate_with`](crate::WindowedStream::aggregate_with).
pub struct WindowAggregate<AF, W, R> {
    agg: AF,
    with: W,
    _r: PhantomData<fn() -> R>,
}

impl<AF, W, R> WindowAggregate<AF, W, R> {
    pub(crate) fn new(agg: AF, with: W) -> Self {
        WindowAggregate {
            agg,
            with,
            _r: PhantomData,
        }
    }
}

impl<AF: Clone, W: Clone, R> Clone for WindowAggregate<AF, W, R> {
    fn clone(&self) -> Self {
        WindowAggregate::new(self.agg.clone(), self.with.clone())
    }
}

impl<AF, W, R> Sealed for WindowAggregate<AF, W, R> {}
impl<K, T, AF, W, R> MakeWindowFunction<K, T> for WindowAggregate<AF, W, R>
where
    AF: AggregateFunction<T>,
    W: FnMut(&K, &TimeWindow, AF::Out) -> R,
{
    type Function = AggregateWindow<AF, W, R>;
    fn make(self) -> AggregateWindow<AF, W, R> {
        AggregateWindow::new(self.agg, self.with)
    }
}

/// The window function of [`WindowedStream::apply`](crate::WindowedStream::apply).
pub struct WindowApply<F, R> {
    pub(super) f: F,
    pub(super) _r: PhantomData<fn() -> R>,
}

impl<F: Clone, R> Clone for WindowApply<F, R> {
    fn clone(&self) -> Self {
        WindowApply {
            f: self.f.clone(),
            _r: PhantomData,
        }
    }
}

impl<F, R> Sealed for WindowApply<F, R> {}
impl<K, T: Clone + 'static, F, R> MakeWindowFunction<K, T> for WindowApply<F, R>
where
    F: FnMut(&K, &TimeWindow, &[T], &mut Collector<'_, R>) -> Result<(), BoxError>,
{
    type Function = ApplyWindow<F, R>;
    fn make(self) -> ApplyWindow<F, R> {
        ApplyWindow::new(self.f)
    }
}

/// The window function of [`WindowedStream::sum`](crate::WindowedStream::sum).
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowSum;

impl Sealed for WindowSum {}
impl<K: Clone, T: Numeric> MakeWindowFunction<K, T> for WindowSum {
    type Function = SumWindow;
    fn make(self) -> SumWindow {
        SumWindow
    }
}

/// The window function of [`WindowedStream::sum_by`](crate::WindowedStream::sum_by).
pub struct WindowSumBy<F, V> {
    pub(super) f: F,
    pub(super) _v: PhantomData<fn() -> V>,
}

impl<F: Clone, V> Clone for WindowSumBy<F, V> {
    fn clone(&self) -> Self {
        WindowSumBy {
            f: self.f.clone(),
            _v: PhantomData,
        }
    }
}

impl<F, V> Sealed for WindowSumBy<F, V> {}
impl<K: Clone, T, V: Numeric, F: FnMut(&T) -> V> MakeWindowFunction<K, T> for WindowSumBy<F, V> {
    type Function = SumByWindow<F, V>;
    fn make(self) -> SumByWindow<F, V> {
        SumByWindow::new(self.f)
    }
}

/// The window function of [`WindowedStream::count`](crate::WindowedStream::count).
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowCount;

impl Sealed for WindowCount {}
impl<K: Clone, T> MakeWindowFunction<K, T> for WindowCount {
    type Function = CountWindow;
    fn make(self) -> CountWindow {
        CountWindow
    }
}
