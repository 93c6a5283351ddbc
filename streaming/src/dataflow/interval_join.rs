//! The keyed interval join ([`KeyedStream::interval_join`]): each element of the first
//! input meets the second input's elements of the same key whose event time lies within
//! bounds relative to its own.

use super::plan::{BuildStage, Plan, Stage, Then};
use super::runtime::{Runtime, SideOutputFactory};
use super::stages::KeyedProcessStage;
use super::types::{CountLateOnly, DataStream, KeyedProcessOutput, KeyedStream};
use super::union::{CoInput, CoProcess, CombineRoots, Connected, KeyedCoProcessFunction};
use crate::api::{
    Collector, KeyedContext, ListStateDescriptor, Sink, TimerContext, ValueStateDescriptor,
};
use crate::ops::{JoinOutput, Operator, OperatorId, SideOutput, SplitLate};
use crate::sealed::Sealed;
use crate::time::{EventTime, Offers, StreamTime};
use crate::{BoxError, Error};
use std::hash::Hash;

/// Two keyed streams to join by event time, before their bounds
/// ([`KeyedStream::interval_join`]).
#[must_use = "an interval join does nothing until `between`, `process` and a terminal operation run it"]
pub struct IntervalJoin<P: Plan, Q: Plan, KF, KG, K> {
    first: KeyedStream<P, KF, K>,
    second: KeyedStream<Q, KG, K>,
}

/// An interval join with its bounds ([`IntervalJoin::between`]) and where its late
/// elements go (`L1` for the first input's, `L2` for the second's; by default they are
/// only counted).
#[must_use = "an interval join does nothing until `process` and a terminal operation run it"]
pub struct BoundedIntervalJoin<P: Plan, Q: Plan, KF, KG, K, L1 = CountLateOnly, L2 = CountLateOnly>
{
    join: IntervalJoin<P, Q, KF, KG, K>,
    bounds: Bounds,
    late_firsts: L1,
    late_seconds: L2,
}

/// The join's bounds (ms, relative to a first-input element's event time), inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bounds {
    lower: i64,
    upper: i64,
}

impl Bounds {
    /// The times (inclusive) of the second-input elements a first-input element at `t`
    /// meets.
    fn seconds_met(self, t: i64) -> (i64, i64) {
        (t.saturating_add(self.lower), t.saturating_add(self.upper))
    }

    /// The times (inclusive) of the first-input elements a second-input element at `t`
    /// meets.
    fn firsts_met(self, t: i64) -> (i64, i64) {
        (t.saturating_sub(self.upper), t.saturating_sub(self.lower))
    }

    /// When a first-input element at `t` can meet nothing more: the watermark passed
    /// `t + upper` (or `t` itself when `upper` is negative).
    fn first_expires(self, t: i64) -> i64 {
        t.saturating_add(self.upper.max(0))
    }

    /// When a second-input element at `t` can meet nothing more: `t - lower` (or `t`).
    fn second_expires(self, t: i64) -> i64 {
        t.saturating_add(self.lower.saturating_neg().max(0))
    }
}

impl<P, KF, K> KeyedStream<P, KF, K>
where
    P: Plan,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
{
    /// Joins this keyed stream with `other`, keyed by the same key type, by event time
    /// (Flink `KeyedStream.intervalJoin`): after [`between`](IntervalJoin::between)`(lower,
    /// upper)`, an element `a` of this stream at time `ta` and an element `b` of `other` of
    /// the same key at time `tb` are joined when `ta + lower <= tb <= ta + upper` (both bounds
    /// inclusive; use `upper - 1` or `lower + 1` for an exclusive bound, times being whole
    /// milliseconds).
    ///
    /// Both streams must carry event time (a compile error otherwise). Each element is
    /// kept in the key's state until the watermark passes the last time it could still
    /// meet an element of the other input (`ta + max(upper, 0)`, `tb + max(-lower, 0)`),
    /// then dropped by an event-time timer. An element at or behind the watermark when
    /// it arrives is late: like Flink, the join drops it, counts it in the run's late
    /// elements ([`JobSummary::late_elements`](crate::JobSummary::late_elements)) and, when
    /// asked, sends it to a side output
    /// ([`side_output_late_firsts`](BoundedIntervalJoin::side_output_late_firsts),
    /// [`side_output_late_seconds`](BoundedIntervalJoin::side_output_late_seconds)). A joined
    /// pair is emitted when its second element arrives, with that element's timestamp
    /// (Flink gives the larger of the two timestamps).
    ///
    /// Runs where [`union`](crate::DataStream::union) runs (the memory engine, and the Redis
    /// engine for topics of one partition count).
    pub fn interval_join<Q, KG>(self, other: KeyedStream<Q, KG, K>) -> IntervalJoin<P, Q, KF, KG, K>
    where
        Q: Plan<Time = P::Time>,
        KG: FnMut(&Q::Out) -> K,
        P::Time: Offers<EventTime>,
        P::Root: CombineRoots<Q::Root>,
    {
        IntervalJoin {
            first: self,
            second: other,
        }
    }
}

impl<P: Plan, Q: Plan, KF, KG, K> IntervalJoin<P, Q, KF, KG, K> {
    /// The join's bounds: milliseconds relative to a first-input element's event time
    /// (negative for "before").
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] with field `lower` when `lower > upper` (nothing could ever
    /// be joined).
    pub fn between(
        self,
        lower: i64,
        upper: i64,
    ) -> Result<BoundedIntervalJoin<P, Q, KF, KG, K>, Error> {
        if lower > upper {
            return Err(Error::InvalidConfig {
                field: "lower",
                reason: format!("the lower bound {lower} ms is above the upper bound {upper} ms"),
            });
        }
        Ok(BoundedIntervalJoin {
            join: self,
            bounds: Bounds { lower, upper },
            late_firsts: CountLateOnly,
            late_seconds: CountLateOnly,
        })
    }
}

impl<P: Plan, Q: Plan, KF, KG, K, L1, L2> BoundedIntervalJoin<P, Q, KF, KG, K, L1, L2> {
    /// Sends the first input's late elements (those at or behind the watermark when they
    /// arrive, which join nothing) to `sink` — a typed side output (Flink
    /// `sideOutputLeftLateData`). It opens and closes with the pipeline.
    pub fn side_output_late_firsts<S: Sink<P::Out>>(
        self,
        sink: S,
    ) -> BoundedIntervalJoin<P, Q, KF, KG, K, S, L2> {
        BoundedIntervalJoin {
            join: self.join,
            bounds: self.bounds,
            late_firsts: sink,
            late_seconds: self.late_seconds,
        }
    }

    /// Like [`side_output_late_firsts`](Self::side_output_late_firsts) for the second
    /// input's late elements (Flink `sideOutputRightLateData`).
    pub fn side_output_late_seconds<S: Sink<Q::Out>>(
        self,
        sink: S,
    ) -> BoundedIntervalJoin<P, Q, KF, KG, K, L1, S> {
        BoundedIntervalJoin {
            join: self.join,
            bounds: self.bounds,
            late_firsts: self.late_firsts,
            late_seconds: sink,
        }
    }
}

impl<P, Q, KF, KG, K, L1, L2> BoundedIntervalJoin<P, Q, KF, KG, K, L1, L2>
where
    P: Plan,
    Q: Plan<Time = P::Time>,
    P::Root: CombineRoots<Q::Root>,
    P::Out: Clone + 'static,
    Q::Out: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K + Clone,
    KG: FnMut(&Q::Out) -> K + Clone,
    L1: Sink<P::Out>,
    L2: Sink<Q::Out>,
{
    /// Emits `join(a, b)` for every pair that meets (Flink `ProcessJoinFunction`, as a
    /// closure).
    #[allow(clippy::type_complexity)]
    pub fn process<O, F>(
        self,
        join: F,
    ) -> DataStream<
        Then<
            Then<
                Connected<P, Q>,
                KeyedProcessStage<
                    impl FnMut(&CoInput<P::Out, Q::Out>) -> K + Clone,
                    K,
                    CoProcess<IntervalJoinFunction<P::Out, Q::Out, F>>,
                    (),
                >,
            >,
            SplitLateStage<L1, L2>,
        >,
    >
    where
        F: FnMut(&P::Out, &Q::Out) -> O,
        P::Root: IntervalJoinState<P::Out, Q::Out>,
    {
        let IntervalJoin { first, second } = self.join;
        let joined: KeyedProcessOutput<_, _, K, _> = first
            .stream
            .connect(second.stream)
            .key_by(first.key_fn, second.key_fn)
            .process(IntervalJoinFunction {
                bounds: self.bounds,
                join,
                buffers: <P::Root as IntervalJoinState<P::Out, Q::Out>>::buffers(),
            });
        // The split belongs to the join: it shares its position, so the ids of the
        // operators after the join are those of any other keyed process.
        let id = OperatorId::new(&joined.source_id, joined.position, "interval_join.late");
        joined.replace_plan(|plan| Then {
            plan,
            stage: SplitLateStage {
                id,
                firsts: self.late_firsts,
                seconds: self.late_seconds,
            },
        })
    }
}

/// The last stage of an interval join: joined results go on, late elements go to their
/// input's side output ([`JoinOutput`]).
pub struct SplitLateStage<L1, L2> {
    id: OperatorId,
    firsts: L1,
    seconds: L2,
}

impl<L1: Clone, L2: Clone> Clone for SplitLateStage<L1, L2> {
    fn clone(&self) -> Self {
        SplitLateStage {
            id: self.id.clone(),
            firsts: self.firsts.clone(),
            seconds: self.seconds.clone(),
        }
    }
}

impl<L1, L2> Sealed for SplitLateStage<L1, L2> {}

impl<O, A, B, L1, L2> Stage<JoinOutput<O, A, B>> for SplitLateStage<L1, L2> {
    type Out = O;
    type Time<Up: StreamTime> = Up;
}

impl<O, A, B, L1, L2, R> BuildStage<JoinOutput<O, A, B>, R> for SplitLateStage<L1, L2>
where
    L1: Sink<A>,
    L2: Sink<B>,
    R: Runtime + SideOutputFactory<A, L1> + SideOutputFactory<B, L2>,
{
    type Op<N: Operator<O>> = SplitLate<SideOutput<A, L1>, SideOutput<B, L2>, N>;

    fn build<N: Operator<O>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(SplitLate::new(
            self.id,
            rt.side_output(self.firsts),
            rt.side_output(self.seconds),
            rt.counters(),
            next,
        ))
    }
}

/// The keyed co-process function of an interval join: both inputs' elements buffered per
/// key with their event times, joined as they arrive, dropped by timers.
pub struct IntervalJoinFunction<A, B, F> {
    bounds: Bounds,
    join: F,
    buffers: JoinBuffers<A, B>,
}

impl<A, B, F: Clone> Clone for IntervalJoinFunction<A, B, F> {
    fn clone(&self) -> Self {
        IntervalJoinFunction {
            bounds: self.bounds,
            join: self.join.clone(),
            buffers: self.buffers.clone(),
        }
    }
}

/// The states of an interval join's buffers: per key, each input's elements with their
/// event times (ms), named `interval_join.first` and `interval_join.second`.
#[doc(hidden)]
pub struct JoinBuffers<A, B> {
    first: ListStateDescriptor<(A, i64)>,
    second: ListStateDescriptor<(B, i64)>,
}

impl<A, B> Clone for JoinBuffers<A, B> {
    fn clone(&self) -> Self {
        JoinBuffers {
            first: self.first.clone(),
            second: self.second.clone(),
        }
    }
}

impl<A, B> JoinBuffers<A, B> {
    /// Buffers the engine keeps in memory.
    pub(crate) const fn in_memory() -> Self {
        JoinBuffers {
            first: ListStateDescriptor::new("interval_join.first"),
            second: ListStateDescriptor::new("interval_join.second"),
        }
    }
}

impl<A, B> JoinBuffers<A, B>
where
    A: serde::Serialize + serde::de::DeserializeOwned,
    B: serde::Serialize + serde::de::DeserializeOwned,
{
    /// Buffers an engine keeps outside the process (as JSON).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) const fn persistent() -> Self {
        JoinBuffers {
            first: ListStateDescriptor::persistent("interval_join.first"),
            second: ListStateDescriptor::persistent("interval_join.second"),
        }
    }
}

/// How the engine of a pipeline's source keeps an interval join's buffered elements of
/// types `A` and `B`: the memory engine in memory, the Redis engine in Redis (the elements
/// must then be serde `Serialize + DeserializeOwned`).
#[diagnostic::on_unimplemented(
    message = "the elements of an interval join on the engine of `{Self}` cannot be kept in its state",
    label = "the join's inputs",
    note = "on the Redis engine both inputs' element types must be serde `Serialize + DeserializeOwned`: the join buffers them in Redis"
)]
pub trait IntervalJoinState<A, B>: Sealed {
    /// The buffers' state descriptors.
    #[doc(hidden)]
    fn buffers() -> JoinBuffers<A, B>;
}

/// How an element of one input (`T`, the other input's `U`) arrives at the join.
struct Arrival<T, U, M, X, L> {
    /// What the join emits for a late element of this input.
    late: L,
    own: ListStateDescriptor<(T, i64)>,
    other: ListStateDescriptor<(U, i64)>,
    /// The other input's times (inclusive) an element at `t` meets.
    met: M,
    /// When an element at `t` can meet nothing more.
    expires: X,
}

impl<T, U, M, X, L> Arrival<T, U, M, X, L>
where
    T: Clone + 'static,
    U: Clone + 'static,
    M: Fn(i64) -> (i64, i64),
    X: Fn(i64) -> i64,
{
    /// A late `value` is emitted as `late(value)`; otherwise `pair(value, other)` is
    /// emitted for each buffered element of the other input it meets, then `value` joins
    /// its own input's buffer and the key's cleanup is scheduled by its expiry.
    fn arrive<K: Hash + Eq + Clone + 'static, Out>(
        self,
        ctx: &mut KeyedContext<'_, K>,
        value: T,
        out: &mut Collector<'_, Out>,
        mut pair: impl FnMut(&T, &U) -> Out,
    ) -> Result<(), BoxError>
    where
        L: FnOnce(T) -> Out,
    {
        let t = ctx.timestamp();
        if is_late(ctx, t) {
            out.collect((self.late)(value));
            return Ok(());
        }
        let (low, high) = (self.met)(t);
        for (other, time) in ctx.state(&self.other)?.get() {
            if low <= *time && *time <= high {
                out.collect(pair(&value, other));
            }
        }
        ctx.state(&self.own)?.add((value, t));
        schedule_cleanup(ctx, (self.expires)(t))
    }
}

/// The time of the key's one pending cleanup timer (ms), when it has one.
const CLEANUP: ValueStateDescriptor<i64> =
    ValueStateDescriptor::persistent("interval_join.cleanup", i64::MAX);

/// Makes sure the key's buffers are cleaned up by `expires`: the key keeps one cleanup
/// timer, at the earliest time one of its elements expires (a timer per element would
/// cost a timer-queue insertion per element; elements mostly arrive in time order, so
/// most find the key's timer already early enough). The timer's run drops what expired
/// and moves the timer to the next expiry.
fn schedule_cleanup<K: Hash + Eq + Clone + 'static>(
    ctx: &mut KeyedContext<'_, K>,
    expires: i64,
) -> Result<(), BoxError> {
    let pending = ctx.state(&CLEANUP)?.get().copied();
    if pending.is_some_and(|pending| pending <= expires) {
        return Ok(());
    }
    if let Some(pending) = pending {
        ctx.delete_event_time_timer(pending);
    }
    ctx.register_event_time_timer(expires)?;
    ctx.state(&CLEANUP)?.update(expires);
    Ok(())
}

/// Whether an element at `timestamp` is late for the join: at or behind the watermark
/// (which says no element at or before it is still to come), so the elements it could
/// meet may be gone.
fn is_late<K: Hash + Eq + Clone + 'static>(ctx: &KeyedContext<'_, K>, timestamp: i64) -> bool {
    let watermark = ctx.current_watermark();
    watermark != i64::MIN && timestamp <= watermark
}

impl<K, A, B, O, F> KeyedCoProcessFunction<K, A, B> for IntervalJoinFunction<A, B, F>
where
    K: Hash + Eq + Clone + 'static,
    A: Clone + 'static,
    B: Clone + 'static,
    F: FnMut(&A, &B) -> O,
{
    type Out = JoinOutput<O, A, B>;

    fn process_element1(
        &mut self,
        value: A,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, JoinOutput<O, A, B>>,
    ) -> Result<(), BoxError> {
        let (bounds, join) = (self.bounds, &mut self.join);
        let arrival = Arrival {
            late: JoinOutput::LateFirst,
            own: self.buffers.first.clone(),
            other: self.buffers.second.clone(),
            met: |t| bounds.seconds_met(t),
            expires: |t| bounds.first_expires(t),
        };
        arrival.arrive(ctx, value, out, |a, b| JoinOutput::Joined(join(a, b)))
    }

    fn process_element2(
        &mut self,
        value: B,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, JoinOutput<O, A, B>>,
    ) -> Result<(), BoxError> {
        let (bounds, join) = (self.bounds, &mut self.join);
        let arrival = Arrival {
            late: JoinOutput::LateSecond,
            own: self.buffers.second.clone(),
            other: self.buffers.first.clone(),
            met: |t| bounds.firsts_met(t),
            expires: |t| bounds.second_expires(t),
        };
        arrival.arrive(ctx, value, out, |b, a| JoinOutput::Joined(join(a, b)))
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        _out: &mut Collector<'_, JoinOutput<O, A, B>>,
    ) -> Result<(), BoxError> {
        let bounds = self.bounds;
        // Everything the watermark passed goes at once (at the end of input: all of it).
        let timestamp = timestamp.max(ctx.current_watermark());
        let mut first = ctx.state(&self.buffers.first)?;
        first.retain(|(_, t)| bounds.first_expires(*t) > timestamp);
        let first_next = first
            .get()
            .iter()
            .map(|(_, t)| bounds.first_expires(*t))
            .min();
        let mut second = ctx.state(&self.buffers.second)?;
        second.retain(|(_, t)| bounds.second_expires(*t) > timestamp);
        let second_next = second
            .get()
            .iter()
            .map(|(_, t)| bounds.second_expires(*t))
            .min();
        match first_next.into_iter().chain(second_next).min() {
            Some(time) => {
                ctx.register_event_time_timer(time)?;
                ctx.state(&CLEANUP)?.update(time);
            }
            None => ctx.state(&CLEANUP)?.clear(),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Bounds;

    #[test]
    fn bounds_are_inclusive_and_expiry_never_precedes_the_element() {
        let b = Bounds {
            lower: -2,
            upper: 3,
        };
        assert_eq!((b.seconds_met(10), b.firsts_met(10)), ((8, 13), (7, 12)));
        assert_eq!((b.first_expires(10), b.second_expires(10)), (13, 12));
        let before = Bounds {
            lower: -5,
            upper: -1,
        };
        assert_eq!(
            (before.first_expires(10), before.second_expires(10)),
            (10, 15)
        );
    }
}
