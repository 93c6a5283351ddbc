//! How a built pipeline becomes a chain of operators.
//!
//! A pipeline is a [`Plan`]: a root (the source, which also knows its engine) followed by
//! [`Stage`]s. [`Plan::build`] connects the stages' operators in front of a downstream
//! operator and hands back the root with the built chain; the engine then drives the chain
//! (the memory engine pulls its source through it once; the Redis engine builds one chain
//! per owned partition). Stateful stages get their state from the runtime through
//! [`StoreFactory`], so each engine decides which state types it can keep.

use super::CheckpointCoordinator;
use crate::api::{RejectedElement, Sink};
use crate::ops::{
    Counters, NoRejectedOutput, Operator, OperatorId, RejectedOutput, RejectedTo, Shared,
    SideOutput,
};
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// What a stage may use while its operator is built on the memory engine: the checkpoint
/// coordinator (to register keyed state) and the run's counters.
pub struct Runtime {
    pub(crate) coordinator: Option<CheckpointCoordinator>,
    pub(crate) counters: Rc<Counters>,
}

/// Creates the state store of a stateful operator. Each engine's runtime implements it for
/// the state types it can keep: the memory [`Runtime`] for every `Clone + 'static` state,
/// the Redis runtime only for state it can persist ([`Persist`](crate::redis::Persist)).
#[diagnostic::on_unimplemented(
    message = "this operator's state cannot be kept by `{Self}`",
    label = "state type `{S}` is not supported here",
    note = "on the Redis engine keyed state lives in Redis as JSON: keys and values must be serde `Serialize + DeserializeOwned`",
    note = "for windows on the Redis engine that includes the key, the accumulator (e.g. `reduce`'s element type, an `AggregateFunction`'s `Acc`) and a custom trigger"
)]
pub trait StoreFactory<S> {
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

/// Wraps a side-output sink (a window's late data) for the engine: the memory [`Runtime`]
/// delivers each record at once; the Redis runtime buffers them and delivers them with the
/// batch that produced them, so a rolled-back batch delivers nothing.
pub trait SideOutputFactory<T, L> {
    /// The side output writing to `sink`.
    fn side_output(&self, sink: L) -> SideOutput<T, L>;
}

/// A window's rejected-element output as an engine builds it: none stays none; a sink is
/// wrapped by the engine's [`SideOutputFactory`], so on the Redis engine rejected elements
/// are delivered with the batch that produced them, like late data.
#[doc(hidden)]
pub trait BuildRejectedOutput<T, R> {
    /// The output the window operator writes to.
    type Output: RejectedOutput<T>;
    /// Wraps the output for the engine `rt`.
    fn build(self, rt: &R) -> Self::Output;
}

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

impl<T, L> SideOutputFactory<T, L> for Runtime {
    fn side_output(&self, sink: L) -> SideOutput<T, L> {
        SideOutput::direct(sink)
    }
}

impl Runtime {
    /// The run's counters as a [`JobSummary`](super::JobSummary).
    pub(crate) fn summary(&self) -> super::JobSummary {
        super::JobSummary {
            late_elements: self.counters.late_elements.get(),
            window_firings: self.counters.window_firings.get(),
            window_gap_dropped: self.counters.window_gap_dropped.get(),
            window_bounds_rejected: self.counters.window_bounds_rejected.get(),
        }
    }
}

impl<S: Clone + 'static> StoreFactory<S> for Runtime {
    /// A new state store for `operator`, registered for checkpoints when they are enabled
    /// (and then possibly restored from the newest one).
    fn store(&self, operator: &OperatorId, init: S) -> Result<Shared<S>, Error> {
        let store = Rc::new(RefCell::new(init));
        if let Some(c) = &self.coordinator {
            c.register(operator.as_str(), &store)?;
        }
        Ok(store)
    }

    fn counters(&self) -> Rc<Counters> {
        Rc::clone(&self.counters)
    }
}

/// A pipeline up to some point, for runtime `R` (the memory engine's [`Runtime`] by
/// default): it can be built in front of any downstream operator that accepts its output.
pub trait Plan<R = Runtime> {
    /// The element type produced at this point.
    type Out;
    /// The pipeline's root: its source, which knows the engine that runs it.
    type Root;
    /// The element type the root feeds into the chain.
    type Head;

    /// The root, to pick the engine before building.
    fn root(&self) -> &Self::Root;

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

/// One operator of a pipeline, not yet connected to its downstream.
pub trait Stage<In, R = Runtime> {
    /// The element type the operator emits.
    type Out;
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

impl<R, P: Plan<R>, S: Stage<P::Out, R>> Plan<R> for Then<P, S> {
    type Out = S::Out;
    type Root = P::Root;
    type Head = P::Head;

    fn root(&self) -> &P::Root {
        self.plan.root()
    }

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

/// Runs `body` between `open` and the end of input, and always closes `op`.
pub(crate) fn drive<T, O: Operator<T>>(
    op: &mut O,
    body: impl FnOnce(&mut O) -> Result<(), Error>,
) -> Result<(), Error> {
    let result = op
        .open()
        .and_then(|()| body(op))
        .and_then(|()| op.on_watermark(crate::time::MAX_WATERMARK))
        .and_then(|()| op.finish());
    let closed = op.close();
    result.and(closed)
}
