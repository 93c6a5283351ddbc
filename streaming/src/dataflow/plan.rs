//! How a built pipeline becomes a chain of operators.
//!
//! A pipeline is a [`Plan`]: a root (the source, which also knows its engine) followed by
//! [`Stage`]s. [`BuildPlan::build`] connects the stages' operators in front of a downstream
//! operator and hands back the root with the built chain; the engine then drives the chain
//! (the memory engine pulls its source through it once; the Redis engine builds one chain
//! per owned partition). Stateful stages get their state from the engine's
//! [`Runtime`](super::Runtime) through [`StoreFactory`](super::StoreFactory), so each
//! engine decides which state types it can keep.

use super::runtime::SideOutputFactory;
use crate::api::{RejectedElement, Sink};
use crate::ops::{NoRejectedOutput, Operator, RejectedOutput, RejectedTo, SideOutput};
use crate::sealed::Sealed;
use crate::time::StreamTime;
use crate::Error;

/// A window's rejected-element output as an engine builds it: none stays none; a sink is
/// wrapped by the engine's [`SideOutputFactory`], so on the Redis engine rejected elements
/// are delivered with the batch that produced them, like late data.
#[doc(hidden)]
pub trait BuildRejectedOutput<T, R>: Sealed {
    /// The output the window operator writes to.
    type Output: RejectedOutput<T>;
    /// Wraps the output for the engine `rt`.
    fn build(self, rt: &R) -> Self::Output;
}

impl Sealed for NoRejectedOutput {}
impl<S> Sealed for RejectedTo<S> {}

impl<T, R> BuildRejectedOutput<T, R> for NoRejectedOutput {
    type Output = NoRejectedOutput;
    fn build(self, _: &R) -> Self::Output {
        self
    }
}

impl<T, R, S> BuildRejectedOutput<T, R> for RejectedTo<S>
where
    S: Sink<RejectedElement<T>>,
    R: SideOutputFactory<RejectedElement<T>, S>,
{
    type Output = RejectedTo<SideOutput<RejectedElement<T>, S>>;
    fn build(self, rt: &R) -> Self::Output {
        RejectedTo(rt.side_output(self.0))
    }
}

/// A pipeline up to some point: the element type it produces and its root. What it
/// needs to be built depends on the engine ([`BuildPlan`]).
pub trait Plan: Sealed {
    /// The element type produced at this point.
    type Out;
    /// The pipeline's root: its source, which knows the engine that runs it.
    type Root;
    /// The element type the root feeds into the chain.
    type Head;
    /// Whether the records carry chosen event time here:
    /// [`EventTime`](crate::time::EventTime) or [`NoEventTime`](crate::time::NoEventTime).
    /// A root states what its source gives; every stage keeps it except a timestamp
    /// assigner, which makes it `EventTime`.
    type Time: StreamTime;

    /// The root, to pick the engine before building.
    fn root(&self) -> &Self::Root;
}

/// A [`Plan`] that engine runtime `R` can build in front of any downstream operator that
/// accepts its output.
pub trait BuildPlan<R>: Plan {
    /// Builds the operators of this plan in front of `downstream`; returns the root and the
    /// chain it feeds (nothing runs yet).
    ///
    /// # Errors
    /// Creating or restoring an operator's state failed.
    fn build<O: Operator<Self::Out>>(
        self,
        rt: &R,
        downstream: O,
    ) -> Result<(Self::Root, impl Operator<Self::Head> + use<Self, R, O>), Error>;
}

/// One operator of a pipeline, not yet connected to its downstream: what it emits.
pub trait Stage<In>: Sealed {
    /// The element type the operator emits.
    type Out;
    /// The stream's time after this operator when it is `Up` before: `Up` for every
    /// operator but a timestamp assigner.
    type Time<Up: StreamTime>: StreamTime;
}

/// A [`Stage`] that engine runtime `R` can build.
pub trait BuildStage<In, R>: Stage<In> {
    /// The operator, connected to downstream `N`.
    type Op<N: Operator<Self::Out>>: Operator<In>;

    /// Connects the operator to `next`.
    ///
    /// # Errors
    /// Creating or restoring its state failed.
    fn build<N: Operator<Self::Out>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error>;
}

/// A plan followed by one more stage.
#[derive(Clone)]
pub struct Then<P, S> {
    pub(crate) plan: P,
    pub(crate) stage: S,
}

impl<P, S> Sealed for Then<P, S> {}

impl<P: Plan, S: Stage<P::Out>> Plan for Then<P, S> {
    type Out = S::Out;
    type Root = P::Root;
    type Head = P::Head;
    type Time = S::Time<P::Time>;

    fn root(&self) -> &P::Root {
        self.plan.root()
    }
}

impl<R, P: BuildPlan<R>, S: BuildStage<P::Out, R>> BuildPlan<R> for Then<P, S> {
    #[inline]
    fn build<O: Operator<S::Out>>(
        self,
        rt: &R,
        downstream: O,
    ) -> Result<(P::Root, impl Operator<P::Head> + use<P, S, R, O>), Error> {
        let op = self.stage.build(rt, downstream)?;
        self.plan.build(rt, op)
    }
}
