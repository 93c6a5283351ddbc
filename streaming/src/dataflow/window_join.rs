//! Window joins and co-groups: connected streams, keyed and cut into windows
//! ([`KeyedConnectedStreams::window`]), whose window function sees each window's elements
//! of both inputs ([`WindowedStream::co_group`], [`WindowedStream::join`]).

use super::plan::Plan;
use super::types::{CountLateOnly, WindowOutput, WindowedStream};
use super::union::{CoInput, CombineRoots, KeyedConnectedStreams};
use super::window_fn::ApplySpec;
use crate::api::{Collector, Sink};
use crate::ops::ApplyBody;
use crate::time::{Offers, TimeWindow, Trigger, WindowAssigner};
use crate::BoxError;
use std::hash::Hash;

impl<P, Q, KF, K> KeyedConnectedStreams<P, Q, KF, K>
where
    P: Plan,
    Q: Plan<Time = P::Time>,
    P::Root: CombineRoots<Q::Root>,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&CoInput<P::Out, Q::Out>) -> K,
{
    /// Cuts both inputs' elements of each key into the windows of `assigner` (Flink
    /// `join(..).where(..).equalTo(..).window(..)` and `coGroup`): end it with
    /// [`join`](WindowedStream::join) or [`co_group`](WindowedStream::co_group); triggers,
    /// allowed lateness and the late side output work as on any windowed stream, on the
    /// elements of both inputs ([`CoInput`]s).
    pub fn window<A: WindowAssigner>(
        self,
        assigner: A,
    ) -> WindowedStream<super::union::Connected<P, Q>, KF, K, A, A::DefaultTrigger, CountLateOnly>
    where
        P::Time: Offers<A::Time>,
    {
        self.keyed.window(assigner)
    }
}

impl<P, KF, K, A, Tr, L, E, X, Y> WindowedStream<P, KF, K, A, Tr, L, E>
where
    P: Plan<Out = CoInput<X, Y>>,
    X: Clone + 'static,
    Y: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&CoInput<X, Y>) -> K,
    A: WindowAssigner,
    Tr: Trigger<CoInput<X, Y>>,
    L: Sink<CoInput<X, Y>>,
{
    /// Calls `f(key, window, first, second, out)` per firing with the window's elements of
    /// each input, each in arrival order (Flink `coGroup`): also when one side is empty.
    #[allow(clippy::type_complexity)]
    pub fn co_group<R, F>(
        self,
        f: F,
    ) -> WindowOutput<P, KF, K, A, Tr, ApplySpec<CoGroupBody<F>, R>, L, E>
    where
        F: FnMut(&K, &TimeWindow, &[X], &[Y], &mut Collector<'_, R>) -> Result<(), BoxError>,
    {
        self.apply_body(CoGroupBody(f))
    }

    /// Emits `f(x, y)` for every pair of a first-input element `x` and a second-input
    /// element `y` in the same window of the same key (Flink `JoinedStreams.apply`, an
    /// inner join), per firing, pairs in arrival order of `x` then `y`.
    #[allow(clippy::type_complexity)]
    pub fn join<R, F>(self, f: F) -> WindowOutput<P, KF, K, A, Tr, ApplySpec<JoinBody<F>, R>, L, E>
    where
        F: FnMut(&X, &Y) -> R,
    {
        self.apply_body(JoinBody(f))
    }

    /// The window function `body`, with the operator id of `apply` (the state of windows
    /// opened before keeps its place).
    fn apply_body<B, R>(self, body: B) -> WindowOutput<P, KF, K, A, Tr, ApplySpec<B, R>, L, E>
    where
        B: ApplyBody<K, CoInput<X, Y>, R>,
    {
        self.function("window-apply", ApplySpec::new(body))
    }
}

/// The window function of [`WindowedStream::co_group`]: splits a firing's elements by
/// input.
#[doc(hidden)]
#[derive(Clone)]
pub struct CoGroupBody<F>(F);

impl<K, X: Clone, Y: Clone, R, F> ApplyBody<K, CoInput<X, Y>, R> for CoGroupBody<F>
where
    F: FnMut(&K, &TimeWindow, &[X], &[Y], &mut Collector<'_, R>) -> Result<(), BoxError>,
{
    fn call(
        &mut self,
        key: &K,
        window: &TimeWindow,
        elements: &[CoInput<X, Y>],
        out: &mut Collector<'_, R>,
    ) -> Result<(), BoxError> {
        let (mut first, mut second) = (Vec::new(), Vec::new());
        for element in elements {
            match element {
                CoInput::First(x) => first.push(x.clone()),
                CoInput::Second(y) => second.push(y.clone()),
            }
        }
        (self.0)(key, window, &first, &second, out)
    }
}

/// The window function of [`WindowedStream::join`]: every pair of the two inputs'
/// elements of a firing.
#[doc(hidden)]
#[derive(Clone)]
pub struct JoinBody<F>(F);

impl<K, X, Y, R, F> ApplyBody<K, CoInput<X, Y>, R> for JoinBody<F>
where
    F: FnMut(&X, &Y) -> R,
{
    fn call(
        &mut self,
        _key: &K,
        _window: &TimeWindow,
        elements: &[CoInput<X, Y>],
        out: &mut Collector<'_, R>,
    ) -> Result<(), BoxError> {
        for x in elements.iter().filter_map(|e| match e {
            CoInput::First(x) => Some(x),
            CoInput::Second(_) => None,
        }) {
            for y in elements.iter().filter_map(|e| match e {
                CoInput::Second(y) => Some(y),
                CoInput::First(_) => None,
            }) {
                out.collect((self.0)(x, y));
            }
        }
        Ok(())
    }
}
