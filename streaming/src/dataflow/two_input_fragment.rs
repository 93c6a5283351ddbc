//! The plan pieces of a pipeline written as a function of two inputs: the root its
//! inputs combine into ([`FragmentInputs`]), the runtime its operators are built with
//! ([`InFragment`]), and the plan that splices it behind two streams ([`SplicedTwo`]).
//!
//! A two-input fragment is built on its own, in front of the rest of the pipeline, with
//! its own union of its two inputs ([`TwoInputChain`]). Spliced behind two streams, it
//! sits behind the engine's union of those streams: each stream's chain ends in an
//! [`InBand`] that hands every call on it (records, watermarks, processing time, end of
//! input) to the fragment as a record, so the fragment's operators of each input see that
//! input's watermark, as if the fragment's text were inline.

use super::fragment::FragmentInput;
use super::interval_join::{IntervalJoinState, JoinBuffers};
use super::plan::{BuildPlan, BuildStage, Plan, Stage, Then};
use super::runtime::{Runtime, SideOutputFactory, StoreFactory};
use super::types::DataStream;
use super::union::{AsIs, CombineRoots, Union};
use crate::ops::{
    Convert, Counters, Fed, FedInBand, InBand, Merge, MergeInput, Operator, OperatorId, SideOutput,
    TwoInputChain, WatermarkState,
};
use crate::sealed::Sealed;
use crate::time::{EventTime, StreamTime};
use crate::Error;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

/// The root of a two-input fragment's plan: its first input (of `A`) combined with its
/// second (of `B`) by a union, a connect or a join.
pub struct FragmentInputs<A, B, Tm = EventTime> {
    /// The first input was combined with the second, not the other way round.
    in_order: bool,
    _t: PhantomData<Elements<A, B, Tm>>,
}

/// What a [`FragmentInputs`] is about: its inputs' element types and event time.
type Elements<A, B, Tm> = fn() -> (A, B, Tm);

impl<A, B, Tm> FragmentInputs<A, B, Tm> {
    /// The fragment's inputs are combined first with second.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (field `fragment`) when the second input was combined with
    /// the first.
    pub(crate) fn check_order(&self) -> Result<(), Error> {
        if self.in_order {
            return Ok(());
        }
        Err(Error::InvalidConfig {
            field: "fragment",
            reason: "a two-input fragment combines its second input with its first: combine the first with the second (`first.union(second)`, `first.connect(second)`, `first.key_by(..).interval_join(second.key_by(..))`) so that each input's records take that input's place".into(),
        })
    }
}

impl<A, B, Tm> Clone for FragmentInputs<A, B, Tm> {
    fn clone(&self) -> Self {
        FragmentInputs {
            in_order: self.in_order,
            _t: PhantomData,
        }
    }
}

impl<A, B, Tm> std::fmt::Debug for FragmentInputs<A, B, Tm> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FragmentInputs<{}, {}>",
            std::any::type_name::<A>(),
            std::any::type_name::<B>()
        )
    }
}

impl<A, B, Tm> Sealed for FragmentInputs<A, B, Tm> {}

/// A two-input fragment's inputs combine into one root.
impl<A, B, Tm> CombineRoots<FragmentInput<B, Tm>> for FragmentInput<A, Tm> {
    type Root = FragmentInputs<A, B, Tm>;
    type Head = Fed<A, B>;

    fn combine(&self, other: &FragmentInput<B, Tm>) -> FragmentInputs<A, B, Tm> {
        FragmentInputs {
            in_order: !self.second && other.second,
            _t: PhantomData,
        }
    }
}

/// A fragment runs on every engine, so its interval joins keep their buffers as the
/// Redis engine can (as JSON; the memory engine keeps them in memory either way).
#[cfg(feature = "redis")]
impl<T, Tm, A, B> IntervalJoinState<A, B> for FragmentInput<T, Tm>
where
    A: serde::Serialize + serde::de::DeserializeOwned,
    B: serde::Serialize + serde::de::DeserializeOwned,
{
    fn buffers() -> JoinBuffers<A, B> {
        JoinBuffers::persistent()
    }
}

/// Without the Redis engine, a fragment's interval joins keep their buffers in memory.
#[cfg(not(feature = "redis"))]
impl<T, Tm, A, B> IntervalJoinState<A, B> for FragmentInput<T, Tm> {
    fn buffers() -> JoinBuffers<A, B> {
        JoinBuffers::in_memory()
    }
}

/// The runtime the operators of a two-input fragment are built with: the engine's
/// runtime `R` (its stores, side outputs, clock and counters), under a type of its own so
/// that the fragment's union of its two inputs is built as a fragment's, not as the
/// engine's union of its sources.
#[repr(transparent)]
pub struct InFragment<R>(R);

impl<R> InFragment<R> {
    /// `rt` as the runtime of a fragment's operators.
    pub(crate) fn of(rt: &R) -> &Self {
        // SAFETY: `InFragment<R>` is `repr(transparent)` over `R`: same layout and
        // alignment, and the reference keeps `rt`'s lifetime.
        unsafe { &*(rt as *const R).cast::<Self>() }
    }
}

impl<R> Sealed for InFragment<R> {}

impl<R: Runtime> Runtime for InFragment<R> {
    type Changes<K: std::hash::Hash + Eq + Clone + 'static> = R::Changes<K>;
    type ProcessChanges<K: std::hash::Hash + Eq + Clone + 'static> = R::ProcessChanges<K>;
    type Clock = R::Clock;

    fn watermark_state(
        &self,
        operator: &OperatorId,
    ) -> Rc<RefCell<WatermarkState<Self::Changes<()>>>> {
        self.0.watermark_state(operator)
    }

    fn counters(&self) -> Rc<Counters> {
        self.0.counters()
    }
}

impl<S, R: StoreFactory<S>> StoreFactory<S> for InFragment<R> {
    fn store(&self, operator: &OperatorId, init: S) -> Result<Rc<RefCell<S>>, Error> {
        self.0.store(operator, init)
    }
}

impl<T, L, R: SideOutputFactory<T, L>> SideOutputFactory<T, L> for InFragment<R> {
    fn side_output(&self, sink: L) -> SideOutput<T, L> {
        self.0.side_output(sink)
    }
}

/// A two-input fragment's union of its inputs: both inputs' operators end in one
/// [`Merge`] (the watermark is the lowest of the inputs'), and the built chain takes each
/// input's calls as [`Fed`] events.
impl<R, PA, PB, CA, CB, A, B, Tm> BuildPlan<InFragment<R>> for Union<PA, PB, CA, CB>
where
    PA: BuildPlan<InFragment<R>> + Plan<Root = FragmentInput<A, Tm>, Head = A>,
    PB: BuildPlan<InFragment<R>> + Plan<Root = FragmentInput<B, Tm>, Head = B, Time = PA::Time>,
    CA: Convert<PA::Out>,
    CB: Convert<PB::Out, Out = CA::Out>,
    Tm: StreamTime,
{
    fn build<O: Operator<CA::Out>>(
        self,
        rt: &InFragment<R>,
        downstream: O,
    ) -> Result<
        (
            FragmentInputs<A, B, Tm>,
            impl Operator<Fed<A, B>> + use<R, PA, PB, CA, CB, A, B, Tm, O>,
        ),
        Error,
    > {
        self.root.check_order()?;
        let merge = Merge::shared(downstream, 2);
        let (_, first) = self.first.build(rt, MergeInput::<O, CA>::new(&merge, 0))?;
        let (_, second) = self.second.build(rt, MergeInput::<O, CB>::new(&merge, 1))?;
        Ok((self.root, TwoInputChain::new(first, second, merge)))
    }
}

/// The last stage of each input of a [`SplicedTwo`]: every call on the input's chain goes
/// on as a [`Fed`] record of that input (`SECOND`: of the second input; `Other` is the
/// other input's element type).
pub struct InBandStage<Other, const SECOND: bool>(PhantomData<fn() -> Other>);

impl<Other, const SECOND: bool> Clone for InBandStage<Other, SECOND> {
    fn clone(&self) -> Self {
        InBandStage(PhantomData)
    }
}

impl<Other, const SECOND: bool> Sealed for InBandStage<Other, SECOND> {}

impl<A, B> Stage<A> for InBandStage<B, false> {
    type Out = Fed<A, B>;
    type Time<Up: StreamTime> = Up;
}

impl<A, B> Stage<B> for InBandStage<A, true> {
    type Out = Fed<A, B>;
    type Time<Up: StreamTime> = Up;
}

impl<A, B, R> BuildStage<A, R> for InBandStage<B, false> {
    type Op<N: Operator<Fed<A, B>>> = InBand<N, B, false>;
    fn build<N: Operator<Fed<A, B>>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(InBand::new(next))
    }
}

impl<A, B, R> BuildStage<B, R> for InBandStage<A, true> {
    type Op<N: Operator<Fed<A, B>>> = InBand<N, A, true>;
    fn build<N: Operator<Fed<A, B>>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(InBand::new(next))
    }
}

/// The engine's union of the two streams a [`SplicedTwo`] follows, each ending in its
/// [`InBandStage`].
type InBandUnion<P, Q> = Union<
    Then<P, InBandStage<<Q as Plan>::Out, false>>,
    Then<Q, InBandStage<<P as Plan>::Out, true>>,
    AsIs,
    AsIs,
>;

/// Plans `P` and `Q` followed by the two-input fragment `F` (a plan rooted at
/// [`FragmentInputs`] of their outputs). `F` is `None` when the function that wrote it
/// failed; the stream then carries that error to its terminal operation.
pub struct SplicedTwo<P: Plan, Q: Plan, F>
where
    P::Root: CombineRoots<Q::Root>,
{
    inputs: InBandUnion<P, Q>,
    fragment: Option<F>,
}

impl<P: Plan, Q: Plan, F> Sealed for SplicedTwo<P, Q, F> where P::Root: CombineRoots<Q::Root> {}

/// A Redis pipeline is cloned once per partition.
impl<P, Q, F> Clone for SplicedTwo<P, Q, F>
where
    P: Plan + Clone,
    Q: Plan + Clone,
    F: Clone,
    P::Root: CombineRoots<Q::Root>,
    <P::Root as CombineRoots<Q::Root>>::Root: Clone,
{
    fn clone(&self) -> Self {
        let inputs = &self.inputs;
        SplicedTwo {
            inputs: Union {
                first: inputs.first.clone(),
                second: inputs.second.clone(),
                root: inputs.root.clone(),
                _convert: PhantomData,
            },
            fragment: self.fragment.clone(),
        }
    }
}

impl<P, Q, F, Tm> Plan for SplicedTwo<P, Q, F>
where
    P: Plan,
    Q: Plan<Time = P::Time>,
    P::Root: CombineRoots<Q::Root>,
    F: Plan<Root = FragmentInputs<P::Out, Q::Out, Tm>, Head = Fed<P::Out, Q::Out>>,
    Tm: StreamTime,
{
    type Out = F::Out;
    type Root = <P::Root as CombineRoots<Q::Root>>::Root;
    type Head = <P::Root as CombineRoots<Q::Root>>::Head;
    type Time = F::Time;

    fn root(&self) -> &Self::Root {
        &self.inputs.root
    }
}

impl<R, P, Q, F, Tm> BuildPlan<R> for SplicedTwo<P, Q, F>
where
    P: Plan,
    Q: Plan<Time = P::Time>,
    P::Root: CombineRoots<Q::Root>,
    InBandUnion<P, Q>: BuildPlan<R>
        + Plan<
            Out = Fed<P::Out, Q::Out>,
            Root = <P::Root as CombineRoots<Q::Root>>::Root,
            Head = <P::Root as CombineRoots<Q::Root>>::Head,
        >,
    F: BuildPlan<InFragment<R>>
        + Plan<Root = FragmentInputs<P::Out, Q::Out, Tm>, Head = Fed<P::Out, Q::Out>>,
    Tm: StreamTime,
{
    fn build<O: Operator<F::Out>>(
        self,
        rt: &R,
        downstream: O,
    ) -> Result<
        (
            Self::Root,
            impl Operator<Self::Head> + use<R, P, Q, F, Tm, O>,
        ),
        Error,
    > {
        let Some(fragment) = self.fragment else {
            // Unreachable through the public API: a stream whose fragment failed returns
            // the failure from its terminal operation before building.
            return Err(Error::Engine {
                op: "build",
                reason: "a pipeline fragment failed to build earlier".into(),
            });
        };
        let (_inputs, chain) = fragment.build(InFragment::of(rt), downstream)?;
        self.inputs.build(rt, FedInBand::new(chain))
    }
}

impl<P: Plan> DataStream<P> {
    /// The second input of a two-input fragment fed by this stream: its operators
    /// continue this stream's operator ids.
    pub(crate) fn second_fragment_input<Tm>(&self) -> DataStream<FragmentInput<P::Out, Tm>> {
        DataStream {
            plan: FragmentInput::new_second(),
            source_id: self.source_id.clone(),
            position: self.position,
            failed: None,
        }
    }

    /// This stream and `other` followed by `fragment`, the stream (or the error) a
    /// function built from [`fragment_input`](Self::fragment_input) and `other`'s
    /// [`second_fragment_input`](Self::second_fragment_input).
    pub(crate) fn splice_two<Q, F, Tm>(
        self,
        other: DataStream<Q>,
        fragment: Result<DataStream<F>, Error>,
    ) -> DataStream<SplicedTwo<P, Q, F>>
    where
        Q: Plan,
        P::Root: CombineRoots<Q::Root>,
        F: Plan<Root = FragmentInputs<P::Out, Q::Out, Tm>>,
    {
        let fragment = fragment.and_then(|f| f.plan.root().check_order().map(|()| f));
        let (fragment, position, failed) = match fragment {
            Ok(f) => (Some(f.plan), f.position, f.failed),
            Err(e) => (None, self.position, Some(e)),
        };
        let root = self.plan.root().combine(other.plan.root());
        DataStream {
            plan: SplicedTwo {
                inputs: Union {
                    first: Then {
                        plan: self.plan,
                        stage: InBandStage(PhantomData),
                    },
                    second: Then {
                        plan: other.plan,
                        stage: InBandStage(PhantomData),
                    },
                    root,
                    _convert: PhantomData,
                },
                fragment,
            },
            source_id: self.source_id,
            position,
            failed: self.failed.or(other.failed).or(failed),
        }
    }
}
