//! How a built pipeline becomes a chain of operators.

use super::CheckpointCoordinator;
use crate::ops::{Counters, Operator, OperatorId, Shared};
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// What a stage may use while its operator is built: the checkpoint coordinator (to
/// register keyed state) and the run's counters.
pub struct Runtime {
    pub(crate) coordinator: Option<CheckpointCoordinator>,
    pub(crate) counters: Rc<Counters>,
}

impl Runtime {
    /// A new state store for `operator`, registered for checkpoints when they are enabled
    /// (and then possibly restored from the newest one).
    pub(crate) fn store<S: Clone + 'static>(
        &self,
        operator: &OperatorId,
        init: S,
    ) -> Result<Shared<S>, Error> {
        let store = Rc::new(RefCell::new(init));
        if let Some(c) = &self.coordinator {
            c.register(operator.as_str(), &store)?;
        }
        Ok(store)
    }
}

/// A pipeline up to some point: it can run with any downstream operator that accepts its
/// output.
pub trait Plan {
    /// The element type produced at this point.
    type Out;

    /// Builds the operators of this plan in front of `downstream` and runs the source
    /// through them: open, every record, the end-of-input watermark, finish, close.
    ///
    /// # Errors
    /// The first error of a source, operator or sink.
    fn run<O: Operator<Self::Out>>(self, rt: &Runtime, downstream: O) -> Result<(), Error>;
}

/// One operator of a pipeline, not yet connected to its downstream.
pub trait Stage<In> {
    /// The element type the operator emits.
    type Out;
    /// The operator, connected to downstream `N`.
    type Op<N: Operator<Self::Out>>: Operator<In>;

    /// Connects the operator to `next`.
    ///
    /// # Errors
    /// Restoring its state from a checkpoint failed.
    fn build<N: Operator<Self::Out>>(self, rt: &Runtime, next: N) -> Result<Self::Op<N>, Error>;
}

/// A plan followed by one more stage.
pub struct Then<P, S> {
    pub(crate) plan: P,
    pub(crate) stage: S,
}

impl<P: Plan, S: Stage<P::Out>> Plan for Then<P, S> {
    type Out = S::Out;

    #[inline]
    fn run<O: Operator<S::Out>>(self, rt: &Runtime, downstream: O) -> Result<(), Error> {
        let op = self.stage.build(rt, downstream)?;
        self.plan.run(rt, op)
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
