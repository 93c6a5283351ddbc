//! One stage per builder operator: what the operator needs, kept until an engine builds it.

use super::plan::{BuildRejectedOutput, BuildStage, Stage};
use super::runtime::{Runtime, SideOutputFactory, StoreFactory};
use super::window_fn::MakeWindowFunction;
use crate::api::state::DeclareStates;
use crate::api::{KeyedProcessFunction, Numeric, Sink};
use crate::ops::{
    AssignWatermarks, Filter, FlatMap, Itself, KeyedProcess, KeyedReduce, KeyedSum, KeyedTable,
    Map, Operator, OperatorId, ProcessState, SideOutput, TryMap, WindowFunction, WindowOperator,
    WindowState,
};
use crate::sealed::Sealed;
use crate::time::{
    EventTime, StreamTime, TimestampAssigner, Trigger, WatermarkGenerator, WindowAssigner,
};
use crate::{BoxError, Error};
use std::cmp::Ordering;
use std::hash::Hash;
use std::marker::PhantomData;

/// The reduce function of `min_by` / `max_by`: keeps the later element `b` only when
/// `f(b)` compares `wanted` (`Less`: min, `Greater`: max) to `f(a)`, so ties and
/// incomparable values (`NaN`) keep the earlier element.
pub(super) fn keep_by<T, V, F>(mut f: F, wanted: Ordering) -> impl FnMut(T, T) -> T + Clone
where
    V: PartialOrd,
    F: FnMut(&T) -> V + Clone,
{
    move |a, b| {
        if f(&b).partial_cmp(&f(&a)) == Some(wanted) {
            b
        } else {
            a
        }
    }
}

macro_rules! stage {
    ($(#[$doc:meta])* $name:ident<$($g:ident),*> { $($field:ident: $ty:ty),* }) => {
        $(#[$doc])*
        pub struct $name<$($g),*> {
            pub(super) id: OperatorId,
            $(pub(super) $field: $ty,)*
        }

        impl<$($g),*> Sealed for $name<$($g),*> {}

        impl<$($g),*> Clone for $name<$($g),*>
        where
            $($ty: Clone,)*
        {
            fn clone(&self) -> Self {
                $name {
                    id: self.id.clone(),
                    $($field: self.$field.clone(),)*
                }
            }
        }
    };
}

stage!(
    /// The stage of [`DataStream::map`](crate::DataStream::map).
    MapStage<F, U> { f: F, _u: PhantomData<fn() -> U> }
);
stage!(
    /// The stage of [`DataStream::try_map`](crate::DataStream::try_map).
    TryMapStage<F, U, E> { f: F, _u: PhantomData<fn() -> (U, E)> }
);
stage!(
    /// The stage of [`DataStream::filter`](crate::DataStream::filter).
    FilterStage<F> { f: F }
);
stage!(
    /// The stage of [`DataStream::flat_map`](crate::DataStream::flat_map).
    FlatMapStage<F, I> { f: F, _i: PhantomData<fn() -> I> }
);
stage!(
    /// The stage of [`DataStream::assign_timestamps_and_watermarks`](crate::DataStream::assign_timestamps_and_watermarks).
    WatermarkStage<TA, G> { assigner: TA, generator: G, timed: bool }
);
stage!(
    /// The stage of [`KeyedStream::reduce`](crate::KeyedStream::reduce).
    KeyedReduceStage<KF, K, F> { key_fn: KF, f: F, _k: PhantomData<fn() -> K> }
);
stage!(
    /// The stage of [`KeyedStream::sum`](crate::KeyedStream::sum).
    KeyedSumStage<KF, K> { key_fn: KF, _k: PhantomData<fn() -> K> }
);
stage!(
    /// The stage of [`KeyedStream::sum_by`](crate::KeyedStream::sum_by).
    KeyedSumByStage<KF, K, F, V> { key_fn: KF, f: F, _k: PhantomData<fn() -> (K, V)> }
);
stage!(
    /// The stage of [`KeyedStream::process`](crate::KeyedStream::process), with the states declared for it (`pipeline!`'s
    /// `.state(..)`; none from the builder).
    KeyedProcessStage<KF, K, PF, S> {
        key_fn: KF, function: PF, states: S, timed: bool, _k: PhantomData<fn() -> K>
    }
);
stage!(
    /// The stage of a window function on a [`WindowedStream`](crate::WindowedStream).
    WindowStage<KF, K, A, Tr, WF, L, E> {
        key_fn: KF, assigner: A, trigger: Tr, lateness: i64, function: WF, late: L,
        rejected: E, _k: PhantomData<fn() -> K>
    }
);

impl<T, U, F: FnMut(T) -> U> Stage<T> for MapStage<F, U> {
    type Out = U;
    type Time<Up: StreamTime> = Up;
}

impl<R, T, U, F: FnMut(T) -> U> BuildStage<T, R> for MapStage<F, U> {
    type Op<N: Operator<U>> = Map<F, U, N>;
    fn build<N: Operator<U>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(Map::new(self.id, self.f, next))
    }
}

impl<T, U, E: Into<BoxError>, F: FnMut(T) -> Result<U, E>> Stage<T> for TryMapStage<F, U, E> {
    type Out = U;
    type Time<Up: StreamTime> = Up;
}

impl<R, T, U, E: Into<BoxError>, F: FnMut(T) -> Result<U, E>> BuildStage<T, R>
    for TryMapStage<F, U, E>
{
    type Op<N: Operator<U>> = TryMap<F, U, E, N>;
    fn build<N: Operator<U>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(TryMap::new(self.id, self.f, next))
    }
}

impl<T, F: FnMut(&T) -> bool> Stage<T> for FilterStage<F> {
    type Out = T;
    type Time<Up: StreamTime> = Up;
}

impl<R, T, F: FnMut(&T) -> bool> BuildStage<T, R> for FilterStage<F> {
    type Op<N: Operator<T>> = Filter<F, N>;
    fn build<N: Operator<T>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(Filter::new(self.id, self.f, next))
    }
}

impl<T, I: IntoIterator, F: FnMut(T) -> I> Stage<T> for FlatMapStage<F, I> {
    type Out = I::Item;
    type Time<Up: StreamTime> = Up;
}

impl<R, T, I: IntoIterator, F: FnMut(T) -> I> BuildStage<T, R> for FlatMapStage<F, I> {
    type Op<N: Operator<I::Item>> = FlatMap<F, I, N>;
    fn build<N: Operator<I::Item>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(FlatMap::new(self.id, self.f, next))
    }
}

impl<T, TA, G> Stage<T> for WatermarkStage<TA, G>
where
    TA: TimestampAssigner<T>,
    G: WatermarkGenerator<T> + Clone,
{
    type Out = T;
    type Time<Up: StreamTime> = EventTime;
}

impl<R, T, TA, G> BuildStage<T, R> for WatermarkStage<TA, G>
where
    R: Runtime,
    TA: TimestampAssigner<T>,
    G: WatermarkGenerator<T> + Clone,
{
    type Op<N: Operator<T>> = AssignWatermarks<TA, G, R::Changes<()>, N>;
    fn build<N: Operator<T>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.watermark_state(&self.id);
        Ok(AssignWatermarks::new(
            self.id,
            self.assigner,
            self.generator,
            self.timed,
            state,
            rt.counters(),
            next,
        ))
    }
}

impl<T, K, KF, F> Stage<T> for KeyedReduceStage<KF, K, F>
where
    T: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    F: FnMut(T, T) -> T,
{
    type Out = T;
    type Time<Up: StreamTime> = Up;
}

impl<R, T, K, KF, F> BuildStage<T, R> for KeyedReduceStage<KF, K, F>
where
    R: Runtime,
    R: StoreFactory<KeyedTable<K, Option<T>, <R as Runtime>::Changes<K>>>,
    T: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    F: FnMut(T, T) -> T,
{
    type Op<N: Operator<T>> = KeyedReduce<KF, K, T, F, R::Changes<K>, N>;
    fn build<N: Operator<T>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, KeyedTable::default())?;
        Ok(KeyedReduce::new(self.id, self.key_fn, self.f, state, next))
    }
}

impl<T, K, KF> Stage<T> for KeyedSumStage<KF, K>
where
    T: Numeric,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
{
    type Out = (K, T);
    type Time<Up: StreamTime> = Up;
}

impl<R, T, K, KF> BuildStage<T, R> for KeyedSumStage<KF, K>
where
    R: Runtime,
    R: StoreFactory<KeyedTable<K, T, <R as Runtime>::Changes<K>>>,
    T: Numeric,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
{
    type Op<N: Operator<(K, T)>> = KeyedSum<KF, K, Itself, T, R::Changes<K>, N>;
    fn build<N: Operator<(K, T)>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, KeyedTable::default())?;
        Ok(KeyedSum::new(self.id, self.key_fn, Itself, state, next))
    }
}

impl<T, K, KF, F, V> Stage<T> for KeyedSumByStage<KF, K, F, V>
where
    V: Numeric,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    F: FnMut(&T) -> V,
{
    type Out = (K, V);
    type Time<Up: StreamTime> = Up;
}

impl<R, T, K, KF, F, V> BuildStage<T, R> for KeyedSumByStage<KF, K, F, V>
where
    R: Runtime,
    R: StoreFactory<KeyedTable<K, V, <R as Runtime>::Changes<K>>>,
    V: Numeric,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    F: FnMut(&T) -> V,
{
    type Op<N: Operator<(K, V)>> = KeyedSum<KF, K, F, V, R::Changes<K>, N>;
    fn build<N: Operator<(K, V)>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, KeyedTable::default())?;
        Ok(KeyedSum::new(self.id, self.key_fn, self.f, state, next))
    }
}

impl<T, K, KF, PF, S> Stage<T> for KeyedProcessStage<KF, K, PF, S>
where
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    PF: KeyedProcessFunction<K, T>,
{
    type Out = PF::Out;
    type Time<Up: StreamTime> = Up;
}

impl<R, T, K, KF, PF, S> BuildStage<T, R> for KeyedProcessStage<KF, K, PF, S>
where
    R: Runtime,
    R: StoreFactory<ProcessState<K, <R as Runtime>::ProcessChanges<K>>>,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    PF: KeyedProcessFunction<K, T>,
    S: DeclareStates<K>,
{
    type Op<N: Operator<PF::Out>> = KeyedProcess<KF, K, T, PF, R::ProcessChanges<K>, R::Clock, N>;
    fn build<N: Operator<PF::Out>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, ProcessState::new(&self.id))?;
        // After the store: a restored state keeps its slots, found again by name.
        state.borrow_mut().declare(&self.states)?;
        Ok(KeyedProcess::new(
            self.id,
            self.key_fn,
            self.function,
            self.timed,
            state,
            next,
        ))
    }
}

/// The accumulator of the window function `MF` makes.
type WindowAcc<MF, K, T> =
    <<MF as MakeWindowFunction<K, T>>::Function as WindowFunction<K, T>>::Acc;

impl<T, K, KF, A, Tr, MF, L, E> Stage<T> for WindowStage<KF, K, A, Tr, MF, L, E>
where
    T: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    A: WindowAssigner,
    Tr: Trigger<T>,
    MF: MakeWindowFunction<K, T>,
    L: Sink<T>,
{
    type Out = <MF::Function as WindowFunction<K, T>>::Out;
    type Time<Up: StreamTime> = Up;
}

impl<R, T, K, KF, A, Tr, MF, L, E> BuildStage<T, R> for WindowStage<KF, K, A, Tr, MF, L, E>
where
    R: Runtime,
    R: StoreFactory<WindowState<K, WindowAcc<MF, K, T>, Tr, <R as Runtime>::Changes<K>>>,
    T: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    A: WindowAssigner,
    Tr: Trigger<T>,
    MF: MakeWindowFunction<K, T>,
    L: Sink<T>,
    E: BuildRejectedOutput<T, R>,
    R: SideOutputFactory<T, L>,
{
    type Op<N: Operator<Self::Out>> = WindowOperator<
        KF,
        K,
        T,
        A,
        Tr,
        MF::Function,
        SideOutput<T, L>,
        E::Output,
        R::Changes<K>,
        N,
    >;
    fn build<N: Operator<Self::Out>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, WindowState::default())?;
        Ok(WindowOperator::new(
            self.id,
            self.key_fn,
            self.assigner,
            self.trigger,
            self.lateness,
            self.function.make(),
            rt.side_output(self.late),
            self.rejected.build(rt),
            state,
            rt.counters(),
            next,
        ))
    }
}
