//! [`WindowedStream`]: a keyed stream cut into windows, its configuration and its window
//! functions.

use super::plan::Plan;
use super::stages::{keep_by, WindowStage};
use super::types::{KeyedStream, WindowOutput, WindowedStream};
use super::window_fn::*;
use crate::api::{AggregateFunction, Collector, Numeric, RejectedElement, Sink};
use crate::ops::RejectedTo;
use crate::time::{Offers, TimeWindow, Trigger, WindowAssigner};
use crate::BoxError;
use std::cmp::Ordering;
use std::hash::Hash;
use std::marker::PhantomData;
use std::time::Duration;

/// The stream `min_by` / `max_by` return: a window reduce by the picking function `R`.
type PickOutput<P, KF, K, A, Tr, L, E, R> = WindowOutput<P, KF, K, A, Tr, ReduceSpec<R>, L, E>;

/// Configuration, also before a trigger is set (an assigner without a default trigger,
/// [`GlobalWindows`](crate::time::GlobalWindows), needs `.trigger(..)`).
impl<P, KF, K, A, Tr, L, E> WindowedStream<P, KF, K, A, Tr, L, E>
where
    P: Plan,
    A: WindowAssigner,
{
    /// Keeps windows for `lateness` after their end (Flink `allowedLateness`): a late
    /// element within it fires the window again with the updated result. Durations beyond
    /// `i64::MAX` ms saturate (never clean up).
    pub fn allowed_lateness(mut self, lateness: Duration) -> Self {
        self.lateness = i64::try_from(lateness.as_millis()).unwrap_or(i64::MAX);
        self
    }

    /// Replaces the assigner's default trigger. An event-time trigger
    /// ([`Trigger::Time`] = [`EventTime`](crate::time::EventTime)) needs a stream with
    /// chosen event time, like an event-time window (a compile error otherwise).
    pub fn trigger<Tr2: Trigger<P::Out>>(
        self,
        trigger: Tr2,
    ) -> WindowedStream<P, KF, K, A, Tr2, L, E>
    where
        P::Time: Offers<Tr2::Time>,
    {
        WindowedStream {
            keyed: self.keyed,
            assigner: self.assigner,
            trigger,
            lateness: self.lateness,
            late: self.late,
            rejected: self.rejected,
        }
    }

    /// Sends late elements (those past every window's allowed lateness) to `sink` — a typed
    /// side output (Flink `sideOutputLateData`). It opens and closes with the pipeline.
    pub fn side_output_late_data<L2: Sink<P::Out>>(
        self,
        sink: L2,
    ) -> WindowedStream<P, KF, K, A, Tr, L2, E> {
        WindowedStream {
            keyed: self.keyed,
            assigner: self.assigner,
            trigger: self.trigger,
            lateness: self.lateness,
            late: sink,
            rejected: self.rejected,
        }
    }

    /// Sends elements whose window bounds do not fit in `i64` milliseconds (a timestamp
    /// near `i64::MIN` or `i64::MAX`) to `sink` as [`RejectedElement`]s — a typed error
    /// side output. Such an element joins no window and the pipeline goes on. Without this
    /// output its source record fails with [`Error::WindowBounds`](crate::Error::WindowBounds)
    /// and is dead-lettered, on both engines (a memory run with
    /// [`OnRecordError::StopRun`](crate::memory::OnRecordError::StopRun) counts it in
    /// [`JobSummary::window_bounds_rejected`](crate::JobSummary::window_bounds_rejected) and
    /// logs a `tracing` warning instead).
    pub fn side_output_rejected<E2: Sink<RejectedElement<P::Out>>>(
        self,
        sink: E2,
    ) -> WindowedStream<P, KF, K, A, Tr, L, RejectedTo<E2>> {
        WindowedStream {
            keyed: self.keyed,
            assigner: self.assigner,
            trigger: self.trigger,
            lateness: self.lateness,
            late: self.late,
            rejected: RejectedTo(sink),
        }
    }
}

/// Window functions: they need a trigger.
impl<P, KF, K, A, Tr, L, E> WindowedStream<P, KF, K, A, Tr, L, E>
where
    P: Plan,
    P::Out: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
    A: WindowAssigner,
    Tr: Trigger<P::Out>,
    L: Sink<P::Out>,
{
    pub(super) fn function<MF: MakeWindowFunction<K, P::Out>>(
        self,
        kind: &str,
        function: MF,
    ) -> WindowOutput<P, KF, K, A, Tr, MF, L, E> {
        let id = self.keyed.keyed_id(kind);
        let KeyedStream { stream, key_fn, .. } = self.keyed;
        stream.then(WindowStage {
            id,
            key_fn,
            assigner: self.assigner,
            trigger: self.trigger,
            lateness: self.lateness,
            function,
            late: self.late,
            rejected: self.rejected,
            _k: PhantomData,
        })
    }

    /// Folds each window's elements pairwise; emits `T` per firing.
    pub fn reduce<F: FnMut(P::Out, P::Out) -> P::Out>(
        self,
        f: F,
    ) -> WindowOutput<P, KF, K, A, Tr, ReduceSpec<F>, L, E> {
        self.function("window-reduce", ReduceSpec(f))
    }

    /// Aggregates incrementally with `agg`; emits `agg.get_result` per firing.
    #[allow(clippy::type_complexity)]
    pub fn aggregate<AF: AggregateFunction<P::Out>>(
        self,
        agg: AF,
    ) -> WindowOutput<
        P,
        KF,
        K,
        A,
        Tr,
        AggregateSpec<AF, fn(&K, &TimeWindow, AF::Out) -> AF::Out, AF::Out>,
        L,
        E,
    > {
        fn result<K, R>(_: &K, _: &TimeWindow, r: R) -> R {
            r
        }
        self.function(
            "window-aggregate",
            AggregateSpec::new(agg, result as fn(&K, &TimeWindow, AF::Out) -> AF::Out),
        )
    }

    /// Aggregates incrementally with `agg`; emits `with(key, window, result)` per firing
    /// (Flink `aggregate(aggFunction, windowFunction)`).
    #[allow(clippy::type_complexity)]
    pub fn aggregate_with<AF, W, R>(
        self,
        agg: AF,
        with: W,
    ) -> WindowOutput<P, KF, K, A, Tr, AggregateSpec<AF, W, R>, L, E>
    where
        AF: AggregateFunction<P::Out>,
        W: FnMut(&K, &TimeWindow, AF::Out) -> R,
    {
        self.function("window-aggregate", AggregateSpec::new(agg, with))
    }

    /// Calls `f(key, window, elements, out)` per firing with all of the window's elements
    /// in arrival order (Flink `apply`). Keeps every element until the window is cleaned up.
    pub fn apply<R, F>(self, f: F) -> WindowOutput<P, KF, K, A, Tr, ApplySpec<F, R>, L, E>
    where
        F: FnMut(&K, &TimeWindow, &[P::Out], &mut Collector<'_, R>) -> Result<(), BoxError>,
    {
        self.function("window-apply", ApplySpec { f, _r: PhantomData })
    }

    /// Sums each window; emits `(key, window, sum)` per firing. Only numeric element types
    /// have it (a compile error otherwise: see [`Numeric`]).
    pub fn sum(self) -> WindowOutput<P, KF, K, A, Tr, SumSpec, L, E>
    where
        P::Out: Numeric,
    {
        self.function("window-sum", SumSpec)
    }

    /// Sums the number `f` extracts from each element (e.g. `|o: &Order| o.amount`);
    /// emits `(key, window, sum)` per firing.
    pub fn sum_by<V, F>(self, f: F) -> WindowOutput<P, KF, K, A, Tr, SumBySpec<F, V>, L, E>
    where
        V: Numeric,
        F: FnMut(&P::Out) -> V,
    {
        self.function("window-sum-by", SumBySpec { f, _v: PhantomData })
    }

    /// Emits, per firing, the window's element with the smallest `f(element)` (on ties
    /// the one that arrived first; for merged session windows, the one of the earlier
    /// session; Flink `minBy`). Comparison is `PartialOrd`: filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn min_by<V, F>(
        self,
        f: F,
    ) -> PickOutput<
        P,
        KF,
        K,
        A,
        Tr,
        L,
        E,
        impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, A, Tr, L, E, V, F>,
    >
    where
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        self.function("window-min-by", ReduceSpec(keep_by(f, Ordering::Less)))
    }

    /// Emits, per firing, the window's element with the largest `f(element)` (on ties
    /// the one that arrived first; for merged session windows, the one of the earlier
    /// session; Flink `maxBy`). Comparison is `PartialOrd`: filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn max_by<V, F>(
        self,
        f: F,
    ) -> PickOutput<
        P,
        KF,
        K,
        A,
        Tr,
        L,
        E,
        impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, A, Tr, L, E, V, F>,
    >
    where
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        self.function("window-max-by", ReduceSpec(keep_by(f, Ordering::Greater)))
    }

    /// Counts each window's elements; emits `(key, window, count)` per firing.
    pub fn count(self) -> WindowOutput<P, KF, K, A, Tr, CountSpec, L, E> {
        self.function("window-count", CountSpec)
    }
}
