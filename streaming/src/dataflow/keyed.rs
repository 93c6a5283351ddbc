//! [`KeyedStream`]: a stream partitioned by key and its keyed operators.

use super::plan::{Plan, Then};
use super::stages::*;
use super::types::{CountLateOnly, DataStream, KeyedProcessOutput, KeyedStream, WindowedStream};
use crate::api::state::DeclareStates;
use crate::api::{Collector, KeyedContext, KeyedProcessFunction, Numeric};
use crate::ops::{NoRejectedOutput, OperatorId, ProcessFn};
use crate::time::{Offers, StreamTime, WindowAssigner};
use crate::BoxError;
use std::cmp::Ordering;
use std::hash::Hash;
use std::marker::PhantomData;

/// The stream a rolling reduce by `F` returns.
type RollingOutput<P, KF, K, F> = DataStream<Then<P, KeyedReduceStage<KF, K, F>>>;

impl<P, KF, K> KeyedStream<P, KF, K>
where
    P: Plan,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
{
    pub(crate) fn keyed_id(&self, kind: &str) -> OperatorId {
        self.stream.next_id(kind)
    }

    /// Transforms every element (Flink `KeyedStream.map`: the result is not keyed).
    pub fn map<U, F: FnMut(P::Out) -> U>(self, f: F) -> DataStream<Then<P, MapStage<F, U>>> {
        self.stream.map(f)
    }

    /// Rolling reduce per key: emits the reduced value after every element.
    pub fn reduce<F>(self, f: F) -> DataStream<Then<P, KeyedReduceStage<KF, K, F>>>
    where
        P::Out: Clone + 'static,
        F: FnMut(P::Out, P::Out) -> P::Out,
    {
        let id = self.keyed_id("reduce");
        self.stream.then(KeyedReduceStage {
            id,
            key_fn: self.key_fn,
            f,
            _k: PhantomData,
        })
    }

    /// Rolling sum per key: emits `(key, sum so far)` after every element. Only numeric
    /// element types have it (a compile error otherwise: see [`Numeric`]).
    pub fn sum(self) -> DataStream<Then<P, KeyedSumStage<KF, K>>>
    where
        P::Out: Numeric,
    {
        let id = self.keyed_id("sum");
        self.stream.then(KeyedSumStage {
            id,
            key_fn: self.key_fn,
            _k: PhantomData,
        })
    }

    /// Rolling sum per key of the number `f` extracts from each element (e.g.
    /// `|o: &Order| o.amount`): emits `(key, sum so far)` after every element. Only numeric
    /// values have it (see [`Numeric`]); integer overflow panics in debug builds like `+`
    /// (the record fails).
    pub fn sum_by<V, F>(self, f: F) -> DataStream<Then<P, KeyedSumByStage<KF, K, F, V>>>
    where
        V: Numeric,
        F: FnMut(&P::Out) -> V,
    {
        let id = self.keyed_id("sum-by");
        self.stream.then(KeyedSumByStage {
            id,
            key_fn: self.key_fn,
            f,
            _k: PhantomData,
        })
    }

    /// Rolling minimum per key by `f`: emits, after every element, the element with the
    /// smallest `f(element)` so far (on ties the one that arrived first; Flink `minBy`).
    /// Comparison is `PartialOrd`: a `NaN` that arrives first stays the result (nothing
    /// compares past it) and a later one is never chosen, so filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn min_by<V, F>(
        self,
        f: F,
    ) -> RollingOutput<P, KF, K, impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, V, F>>
    where
        P::Out: Clone + 'static,
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        self.keep_by("min-by", f, Ordering::Less)
    }

    /// Rolling maximum per key by `f`: emits, after every element, the element with the
    /// largest `f(element)` so far (on ties the one that arrived first; Flink `maxBy`).
    /// Comparison is `PartialOrd`: a `NaN` that arrives first stays the result (nothing
    /// compares past it) and a later one is never chosen, so filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn max_by<V, F>(
        self,
        f: F,
    ) -> RollingOutput<P, KF, K, impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, V, F>>
    where
        P::Out: Clone + 'static,
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        self.keep_by("max-by", f, Ordering::Greater)
    }

    /// The rolling reduce of `min_by` (`wins` = `Less`) and `max_by` (`Greater`), named
    /// `name` in its operator id.
    #[allow(clippy::type_complexity)]
    fn keep_by<V, F>(
        self,
        name: &str,
        f: F,
        wins: Ordering,
    ) -> RollingOutput<P, KF, K, impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, V, F>>
    where
        P::Out: Clone + 'static,
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        let id = self.keyed_id(name);
        self.stream.then(KeyedReduceStage {
            id,
            key_fn: self.key_fn,
            f: keep_by(f, wins),
            _k: PhantomData,
        })
    }

    /// Runs `f(element, ctx, out)` per element with the key's context: key, timestamp,
    /// watermark, processing time, timers and keyed state. For `on_timer`
    /// callbacks use [`process_function`](Self::process_function).
    pub fn process<O, F>(self, f: F) -> KeyedProcessOutput<P, KF, K, ProcessFn<F, O>>
    where
        F: FnMut(P::Out, &mut KeyedContext<'_, K>, &mut Collector<'_, O>) -> Result<(), BoxError>,
    {
        self.process_function(ProcessFn::new(f))
    }

    /// Runs a [`KeyedProcessFunction`], with timer callbacks.
    pub fn process_function<PF>(self, function: PF) -> KeyedProcessOutput<P, KF, K, PF>
    where
        PF: KeyedProcessFunction<K, P::Out>,
    {
        self.process_declared(function, ())
    }

    /// Runs a [`KeyedProcessFunction`] whose states `states` (a tuple of descriptors) get
    /// their slots when the pipeline is built (`pipeline!`'s `.state(..)`).
    pub(crate) fn process_declared<PF, S>(
        self,
        function: PF,
        states: S,
    ) -> KeyedProcessOutput<P, KF, K, PF, S>
    where
        PF: KeyedProcessFunction<K, P::Out>,
        S: DeclareStates<K>,
    {
        let id = self.keyed_id("process");
        self.stream.then(KeyedProcessStage {
            id,
            key_fn: self.key_fn,
            function,
            states,
            timed: P::Time::IS_EVENT_TIME,
            _k: PhantomData,
        })
    }

    /// Cuts each key's elements into the windows of `assigner`, with its default trigger,
    /// no allowed lateness and no late side output.
    ///
    /// An event-time assigner ([`WindowAssigner::Time`] = [`EventTime`](crate::time::EventTime):
    /// tumbling, sliding, session windows) needs a stream with chosen event time; on one
    /// without ([`NoEventTime`](crate::time::NoEventTime), a memory source without
    /// timestamps) this is a compile error naming the fix.
    /// [`GlobalWindows`](crate::time::GlobalWindows) runs on any stream.
    pub fn window<A: WindowAssigner>(
        self,
        assigner: A,
    ) -> WindowedStream<P, KF, K, A, A::DefaultTrigger, CountLateOnly>
    where
        P::Time: Offers<A::Time>,
    {
        let trigger = assigner.default_trigger();
        WindowedStream {
            keyed: self,
            assigner,
            trigger,
            lateness: 0,
            late: CountLateOnly,
            rejected: NoRejectedOutput,
        }
    }
}
