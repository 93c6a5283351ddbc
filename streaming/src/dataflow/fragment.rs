//! The plan pieces of a pipeline written as a function: the input such a function starts
//! from ([`FragmentInput`]) and the plan that splices its stages behind another plan
//! ([`Spliced`]).

use super::plan::{BuildPlan, Plan};
use super::types::DataStream;
use crate::ops::{ChainEnd, Operator};
use crate::sealed::Sealed;
use crate::time::{EventTime, StreamTime};
use crate::Error;
use std::marker::PhantomData;

/// The root of a pipeline fragment: a stream of `T` that some other pipeline feeds, whose
/// records carry event time ([`EventTime`], the default) or may not
/// ([`NoEventTime`](crate::time::NoEventTime)). It belongs to no engine;
/// [`DataStream::transform`](crate::DataStream::transform) splices the fragment's stages
/// behind the stream it is applied to, which decides the engine.
pub struct FragmentInput<T, Tm = EventTime> {
    /// The second input of a two-input fragment (else its only or first input).
    pub(super) second: bool,
    _t: PhantomData<fn() -> (T, Tm)>,
}

impl<T, Tm> FragmentInput<T, Tm> {
    /// The input of a fragment built on its own (by a test driver), or the first input of
    /// a two-input fragment.
    pub(crate) fn new() -> Self {
        FragmentInput {
            second: false,
            _t: PhantomData,
        }
    }

    /// The second input of a two-input fragment built on its own (by a test driver).
    pub(crate) fn new_second() -> Self {
        FragmentInput {
            second: true,
            _t: PhantomData,
        }
    }
}

impl<T, Tm> Clone for FragmentInput<T, Tm> {
    fn clone(&self) -> Self {
        FragmentInput {
            second: self.second,
            _t: PhantomData,
        }
    }
}

impl<T, Tm> std::fmt::Debug for FragmentInput<T, Tm> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FragmentInput<{}>", std::any::type_name::<T>())
    }
}

impl<T, Tm> Sealed for FragmentInput<T, Tm> {}

impl<T, Tm: StreamTime> Plan for FragmentInput<T, Tm> {
    type Out = T;
    type Root = Self;
    type Head = T;
    type Time = Tm;

    fn root(&self) -> &Self {
        self
    }
}

/// A fragment's input passes records on as they come: building it builds nothing.
impl<T, Tm: StreamTime, R> BuildPlan<R> for FragmentInput<T, Tm> {
    #[inline]
    fn build<O: Operator<T>>(
        self,
        _rt: &R,
        downstream: O,
    ) -> Result<(Self, impl Operator<T> + use<T, Tm, R, O>), Error> {
        Ok((self, downstream))
    }
}

/// Plan `P` followed by the stages of fragment `F` (a plan rooted at a [`FragmentInput`]
/// of `P`'s output). Its event time is the fragment's: after a fragment whose input has no
/// event time, the stream has none unless the fragment assigned it. `F` is `None` when the function that wrote it failed (an invalid
/// window size, …); the stream then carries that error to its terminal operation, which
/// returns it without building anything.
#[derive(Clone)]
pub struct Spliced<P, F> {
    plan: P,
    fragment: Option<F>,
}

impl<P, F> Sealed for Spliced<P, F> {}

impl<P, F, Tm> Plan for Spliced<P, F>
where
    P: Plan,
    F: Plan<Root = FragmentInput<P::Out, Tm>, Head = P::Out>,
    Tm: StreamTime,
{
    type Out = F::Out;
    type Root = P::Root;
    type Head = P::Head;
    type Time = F::Time;

    fn root(&self) -> &P::Root {
        self.plan.root()
    }
}

impl<R, P, F, Tm> BuildPlan<R> for Spliced<P, F>
where
    P: BuildPlan<R>,
    F: BuildPlan<R> + Plan<Root = FragmentInput<P::Out, Tm>, Head = P::Out>,
    Tm: StreamTime,
{
    #[inline]
    fn build<O: Operator<F::Out>>(
        self,
        rt: &R,
        downstream: O,
    ) -> Result<(P::Root, impl Operator<P::Head> + use<P, F, R, O, Tm>), Error> {
        let Some(fragment) = self.fragment else {
            // Unreachable through the public API: a stream whose fragment failed returns
            // the failure from its terminal operation before building.
            return Err(Error::Engine {
                op: "build",
                reason: "a pipeline fragment failed to build earlier".into(),
            });
        };
        let (_input, chain) = fragment.build(rt, downstream)?;
        self.plan.build(rt, chain)
    }
}

impl<P: Plan> DataStream<P> {
    /// A fragment input fed by this stream: its operators continue this stream's operator
    /// ids (same source id, next position).
    pub(crate) fn fragment_input<Tm>(&self) -> DataStream<FragmentInput<P::Out, Tm>> {
        DataStream {
            plan: FragmentInput::new(),
            source_id: self.source_id.clone(),
            position: self.position,
            failed: None,
        }
    }

    /// This stream followed by `fragment`, the stream (or the error) a function built
    /// from [`fragment_input`](Self::fragment_input).
    pub(crate) fn splice<F, Tm>(
        self,
        fragment: Result<DataStream<F>, Error>,
    ) -> DataStream<Spliced<P, F>>
    where
        F: Plan<Root = FragmentInput<P::Out, Tm>, Head = P::Out>,
        Tm: StreamTime,
    {
        let (fragment, position, failed) = match fragment {
            Ok(f) => (Some(f.plan), f.position, f.failed),
            Err(e) => (None, self.position, Some(e)),
        };
        DataStream {
            plan: Spliced {
                plan: self.plan,
                fragment,
            },
            source_id: self.source_id,
            position,
            failed: self.failed.or(failed),
        }
    }
}

/// The plan standing in for a `pipeline!` fragment that failed to compile: its type fits
/// any fragment signature, so one mistake gives one error. Never built.
#[doc(hidden)]
pub struct PlaceholderPlan<In, Out> {
    input: FragmentInput<In>,
    _out: PhantomData<fn() -> Out>,
}

impl<In, Out> Clone for PlaceholderPlan<In, Out> {
    fn clone(&self) -> Self {
        PlaceholderPlan {
            input: self.input.clone(),
            _out: PhantomData,
        }
    }
}

impl<In, Out> Sealed for PlaceholderPlan<In, Out> {}

impl<In, Out> Plan for PlaceholderPlan<In, Out> {
    type Out = Out;
    type Root = FragmentInput<In>;
    type Head = In;
    type Time = EventTime;

    fn root(&self) -> &FragmentInput<In> {
        &self.input
    }
}

/// The chain of a [`PlaceholderPlan`]: none (the plan is never built).
type NoChain<In> = ChainEnd<fn(In, i64) -> Result<(), Error>>;

impl<In, Out, R> BuildPlan<R> for PlaceholderPlan<In, Out> {
    fn build<O: Operator<Out>>(
        self,
        _rt: &R,
        _downstream: O,
    ) -> Result<(FragmentInput<In>, impl Operator<In> + use<In, Out, R, O>), Error> {
        Err::<(_, NoChain<In>), _>(Error::Engine {
            op: "build",
            reason: "a `pipeline!` fragment that failed to compile".into(),
        })
    }
}
