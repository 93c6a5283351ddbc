//! The keyed interval join ([`KeyedStream::interval_join`]): each element of the first
//! input meets the second input's elements of the same key whose event time lies within
//! bounds relative to its own.

use super::plan::{BuildStage, Plan, Stage, Then};
use super::runtime::{Runtime, SideOutputFactory};
use super::stages::KeyedProcessStage;
use super::types::{CountLateOnly, DataStream, KeyedProcessOutput, KeyedStream};
use super::union::{CoInput, CoProcess, CombineRoots, Connected, KeyedCoProcessFunction};
use crate::api::{Collector, KeyedContext, Sink, TimerContext};
use crate::ops::{JoinOutput, Operator, OperatorId, SideOutput, SplitLate};
use crate::sealed::Sealed;
use crate::time::{EventTime, Offers, StreamTime};
use crate::{BoxError, Error};
use std::hash::Hash;

mod buffers;

pub use buffers::JoinBuffers;
use buffers::Reach;

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
    #[inline]
    fn seconds_met(self, t: i64) -> (i64, i64) {
        (t.saturating_add(self.lower), t.saturating_add(self.upper))
    }

    /// The times (inclusive) of the first-input elements a second-input element at `t`
    /// meets.
    #[inline]
    fn firsts_met(self, t: i64) -> (i64, i64) {
        (t.saturating_sub(self.upper), t.saturating_sub(self.lower))
    }

    /// The watermark at which a first-input element at `t` can meet nothing more: one
    /// past `t + upper` (or past `t` itself when `upper` is negative), as a second-input
    /// element at the watermark is still on time.
    #[inline]
    fn first_expires(self, t: i64) -> i64 {
        t.saturating_add(self.upper.max(0)).saturating_add(1)
    }

    /// The watermark at which a second-input element at `t` can meet nothing more: one
    /// past `t - lower` (or past `t`).
    #[inline]
    fn second_expires(self, t: i64) -> i64 {
        t.saturating_add(self.lower.saturating_neg().max(0))
            .saturating_add(1)
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
    /// then dropped by an event-time timer. An element behind the watermark when it
    /// arrives (`t < watermark`; one at the watermark is on time) is late: like Flink, the
    /// join drops it, counts it in the run's late
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
    /// Sends the first input's late elements (those behind the watermark when they
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

impl<A: Clone, B: Clone, F: Clone> Clone for IntervalJoinFunction<A, B, F> {
    fn clone(&self) -> Self {
        IntervalJoinFunction {
            bounds: self.bounds,
            join: self.join.clone(),
            buffers: self.buffers.clone(),
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

/// Whether an element at `timestamp` is late for the join: behind the watermark, so the
/// elements it could meet may be gone (Flink's `IntervalJoinOperator.isLate`). An element
/// at the watermark is on time: a watermark of `max - out_of_orderness` is reached by the
/// latest element itself, and another of the same millisecond must still join.
fn is_late<K: Hash + Eq + Clone + 'static>(ctx: &KeyedContext<'_, K>, timestamp: i64) -> bool {
    timestamp < ctx.current_watermark()
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
        let t = ctx.timestamp();
        if is_late(ctx, t) {
            out.collect(JoinOutput::LateFirst(value));
            return Ok(());
        }
        let (low, high) = self.bounds.seconds_met(t);
        let expires = self.bounds.first_expires(t);
        let reach = Reach { low, high, expires };
        let join = &mut self.join;
        (self.buffers).arrive_first(ctx, (value, reach), out, |a, b| {
            JoinOutput::Joined(join(a, b))
        })
    }

    fn process_element2(
        &mut self,
        value: B,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, JoinOutput<O, A, B>>,
    ) -> Result<(), BoxError> {
        let t = ctx.timestamp();
        if is_late(ctx, t) {
            out.collect(JoinOutput::LateSecond(value));
            return Ok(());
        }
        let (low, high) = self.bounds.firsts_met(t);
        let expires = self.bounds.second_expires(t);
        let reach = Reach { low, high, expires };
        let join = &mut self.join;
        (self.buffers).arrive_second(ctx, (value, reach), out, |b, a| {
            JoinOutput::Joined(join(a, b))
        })
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        _out: &mut Collector<'_, JoinOutput<O, A, B>>,
    ) -> Result<(), BoxError> {
        let bounds = self.bounds;
        self.buffers.expire(
            ctx,
            timestamp,
            |t| bounds.first_expires(t),
            |t| bounds.second_expires(t),
        )
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
        assert_eq!((b.first_expires(10), b.second_expires(10)), (14, 13));
        let before = Bounds {
            lower: -5,
            upper: -1,
        };
        assert_eq!(
            (before.first_expires(10), before.second_expires(10)),
            (11, 16)
        );
    }
}
