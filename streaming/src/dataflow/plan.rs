//! How a built pipeline becomes a chain of operators.
//!
//! A pipeline is a [`Plan`]: a root (the source, which also knows its engine) followed by
//! [`Stage`]s. [`BuildPlan::build`] connects the stages' operators in front of a downstream
//! operator and hands back the root with the built chain; the engine then drives the chain
//! (the memory engine pulls its source through it once; the Redis engine builds one chain
//! per owned partition). Stateful stages get their state from the engine's runtime through
//! [`StoreFactory`], so each engine decides which state types it can keep.

use crate::api::{RejectedElement, Sink};
use crate::ops::{
    Counters, NoRejectedOutput, Operator, OperatorId, RejectedOutput, RejectedTo, SideOutput,
};
use crate::sealed::Sealed;
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// Creates the state store of a stateful operator. Each engine's runtime implements it for
/// the state types it can keep: the memory engine's for every `Clone + 'static` state, the
/// Redis engine's only for state it can persist (serde `Serialize + DeserializeOwned`).
#[diagnostic::on_unimplemented(
    message = "this operator's state cannot be kept by `{Self}`",
    label = "state type `{S}` is not supported here",
    note = "on the Redis engine keyed state lives in Redis as JSON: keys and values must be serde `Serialize + DeserializeOwned`",
    note = "for windows on the Redis engine that includes the key, the accumulator (e.g. `reduce`'s element type, an `AggregateFunction`'s `Acc`) and a custom trigger"
)]
pub trait StoreFactory<S>: Sealed {
    /// A new store for `operator`'s state, starting from `init` (or from what the engine
    /// restores for it).
    ///
    /// # Errors
    /// Restoring the state failed.
    fn store(&self, operator: &OperatorId, init: S) -> Result<Rc<RefCell<S>>, Error>;

    /// The counters window operators report to.
    #[doc(hidden)]
    fn counters(&self) -> Rc<Counters>;
}

/// Wraps a side-output sink (a window's late data) for the engine: the memory runtime
/// delivers each record at once; the Redis runtime buffers them and delivers them with the
/// batch that produced them, so a rolled-back batch delivers nothing.
pub trait SideOutputFactory<T, L>: Sealed {
    /// The side output writing to `sink`.
    fn side_output(&self, sink: L) -> SideOutput<T, L>;
}

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
