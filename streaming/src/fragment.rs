//! Pipelines written once, as functions, and run anywhere: in a service on the Redis
//! engine, on the memory engine, and under the test driver
//! ([`testing::TestDriver`](crate::testing::TestDriver)).
//!
//! A **fragment** is the part of a pipeline between its source and its sink: a function
//! from an [`Input<T>`] (a stream of `T` that some source will feed) to
//! `impl `[`Fragment`]`<T, Out = U>`. Write its body with the builder API or with
//! [`pipeline!`](crate::pipeline) without a source and a sink (the macro's fragment form),
//! and splice it into a pipeline with [`DataStream::transform`]:
//!
//! ```
//! use std::time::Duration;
//! use streaming::fragment::{Fragment, Input};
//! use streaming::time::{AscendingTimestamps, NoEventTime, TumblingEventTimeWindows};
//! use streaming::{pipeline, MemoryEnv};
//!
//! type Line = (&'static str, i64);
//!
//! /// Each word's count per second of event time (the fragment chooses it: the line's
//! /// second field, so its input needs no event time).
//! fn word_counts(lines: Input<Line, NoEventTime>) -> impl Fragment<Line, NoEventTime, Out = (String, i64, u64)> {
//!     pipeline! {
//!         lines
//!             .assign_timestamps_and_watermarks_with(|l: &(&str, i64), _| l.1, AscendingTimestamps)
//!             .flat_map(|l: (&str, i64)| l.0.split(' ').map(str::to_string).collect::<Vec<_>>())
//!             .key_by(|w: &String| w.clone())
//!             .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
//!             .count()
//!             .map(|(w, window, n)| (w, window.start(), n))
//!     }
//! }
//!
//! let env = MemoryEnv::new();
//! let out = env
//!     .from_collection([("to be", 0), ("or not", 400), ("to be", 1_200)])
//!     .transform(word_counts)
//!     .collect_vec()?;
//! assert_eq!(out.len(), 6);
//! assert!(out.contains(&("to".to_string(), 1_000, 1)));
//! # Ok::<(), streaming::Error>(())
//! ```
//!
//! Rules:
//! - `Input<T>` carries event time: the fragment may use event-time windows and timers on
//!   it, and it follows only a stream with event time (a Redis topic, a timestamped memory
//!   source, a stream after `assign_timestamps_and_watermarks_with`); its return type is
//!   `impl Fragment<T, Out = U>`. A fragment that needs no event time from its input (it
//!   assigns timestamps itself, or uses none) takes `Input<T, NoEventTime>`, returns
//!   `impl Fragment<T, NoEventTime, Out = U>`, and follows any stream.
//! - A fragment runs on every engine, so it must satisfy every engine: its functions and
//!   sinks are `Clone + Send + 'static` (one copy runs per partition on the Redis engine),
//!   and with feature `redis` its keyed state, window keys and accumulators are serde
//!   `Serialize + DeserializeOwned`. A fragment that misses one is a compile error at the
//!   function's return type.
//! - Its operators' ids continue the ids of the stream it is spliced into (same source id,
//!   next positions), exactly as if its text were written inline, so keyed state and
//!   checkpoints do not depend on whether a pipeline uses fragments.
//! - Extra arguments (options, a late-data sink) are ordinary parameters: `.transform(|s|
//!   delays(s, opts, late.clone()))`.
//! - A configuration error inside the fragment (e.g. a window size of 0) is returned by the
//!   pipeline's terminal operation, like the same error in an inline pipeline.
//!
//! A fragment of **two inputs** is a function from two `Input`s to
//! `impl `[`TwoInputFragment`]`<A, B, Out = U>` whose body combines the first input with
//! the second (`union`, `connect`, `interval_join`, window joins), spliced behind two
//! streams with [`DataStream::transform_with`] and run in unit tests by
//! [`testing::TwoInputTestDriver`](crate::testing::TwoInputTestDriver); see
//! [`TwoInputFragment`] for its rules.

mod two_inputs;

use crate::dataflow::{BuildPlan, DataStream, InFragment, Plan, Spliced};
use crate::memory::{DrivenClock, MemoryRuntime};
use crate::sealed::Sealed;
use crate::time::{EventTime, Offers, StreamTime};
use crate::Error;

pub use crate::dataflow::FragmentInput;
pub use two_inputs::TwoInputFragment;
#[doc(hidden)]
pub use two_inputs::TwoInputFragmentPlan;

/// The stream a fragment function starts from: records of type `T` fed by the pipeline the
/// fragment is spliced into. By default they carry event time (`Tm` =
/// [`EventTime`]), so the fragment may use event-time windows and timers, and
/// [`transform`](DataStream::transform) accepts only a stream with event time (a Redis
/// topic, a timestamped memory source, or one after a timestamp assigner). A fragment
/// that needs no event time takes `Input<T, NoEventTime>`
/// ([`NoEventTime`](crate::time::NoEventTime)) and follows any stream.
pub type Input<T, Tm = EventTime> = DataStream<FragmentInput<T, Tm>>;

/// What a fragment function returns: a stream built from an [`Input<In, Tm>`] (or the
/// [`pipeline!`](crate::pipeline) fragment form's `Result` of one), producing
/// [`Out`](Fragment::Out). Implemented by this crate for `DataStream<P>` and
/// `Result<DataStream<P>, Error>` whose plan can run on every engine; name it as
/// `impl Fragment<In, Out = U>` (input with event time) or
/// `impl Fragment<In, NoEventTime, Out = U>` (for an `Input<In, NoEventTime>`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a pipeline fragment starting from `Input<{In}, {Tm}>` that runs on every engine",
    label = "not a fragment of `Input<{In}, {Tm}>`",
    note = "a fragment is a stream built from the function's `Input<{In}, {Tm}>` parameter (no source, no sink)",
    note = "its functions and sinks must be `Clone + Send + 'static`; with feature `redis`, keyed state, window keys and accumulators must be serde `Serialize + DeserializeOwned`"
)]
pub trait Fragment<In, Tm: StreamTime = EventTime>: Sealed {
    /// The element type the fragment produces.
    type Out;

    /// The fragment's plan.
    #[doc(hidden)]
    type Plan: FragmentPlan<In, Tm, Out = Self::Out>;

    /// The fragment's stream, or the configuration error that stopped building it.
    #[doc(hidden)]
    fn into_stream(self) -> Result<DataStream<Self::Plan>, Error>;
}

/// A plan rooted at a [`FragmentInput<In, Tm>`] that every engine can build, also inside
/// a two-input fragment. Not public API.
#[doc(hidden)]
pub trait FragmentPlan<In, Tm>:
    Plan<Root = FragmentInput<In, Tm>, Head = In>
    + BuildPlan<MemoryRuntime>
    + BuildPlan<MemoryRuntime<DrivenClock>>
    + BuildOnRedis
    + BuildInFragment
    + Clone
    + Send
    + 'static
{
}

impl<In, Tm, P> FragmentPlan<In, Tm> for P where
    P: Plan<Root = FragmentInput<In, Tm>, Head = In>
        + BuildPlan<MemoryRuntime>
        + BuildPlan<MemoryRuntime<DrivenClock>>
        + BuildOnRedis
        + BuildInFragment
        + Clone
        + Send
        + 'static
{
}

/// A plan the Redis engine can build (every plan without feature `redis`). Not public API.
#[doc(hidden)]
#[cfg(feature = "redis")]
pub trait BuildOnRedis: BuildPlan<crate::redis::RedisRuntime> {}

#[cfg(feature = "redis")]
impl<P: BuildPlan<crate::redis::RedisRuntime>> BuildOnRedis for P {}

/// A plan the Redis engine can build (every plan without feature `redis`). Not public API.
#[doc(hidden)]
#[cfg(not(feature = "redis"))]
pub trait BuildOnRedis {}

#[cfg(not(feature = "redis"))]
impl<P> BuildOnRedis for P {}

/// A plan every engine can build inside a two-input fragment. Not public API.
#[doc(hidden)]
pub trait BuildInFragment:
    BuildPlan<InFragment<MemoryRuntime>>
    + BuildPlan<InFragment<MemoryRuntime<DrivenClock>>>
    + BuildInFragmentOnRedis
{
}

impl<P> BuildInFragment for P where
    P: BuildPlan<InFragment<MemoryRuntime>>
        + BuildPlan<InFragment<MemoryRuntime<DrivenClock>>>
        + BuildInFragmentOnRedis
{
}

/// A plan the Redis engine can build inside a two-input fragment (every plan without
/// feature `redis`). Not public API.
#[doc(hidden)]
#[cfg(feature = "redis")]
pub trait BuildInFragmentOnRedis: BuildPlan<InFragment<crate::redis::RedisRuntime>> {}

#[cfg(feature = "redis")]
impl<P: BuildPlan<InFragment<crate::redis::RedisRuntime>>> BuildInFragmentOnRedis for P {}

/// A plan the Redis engine can build inside a two-input fragment (every plan without
/// feature `redis`). Not public API.
#[doc(hidden)]
#[cfg(not(feature = "redis"))]
pub trait BuildInFragmentOnRedis {}

#[cfg(not(feature = "redis"))]
impl<P> BuildInFragmentOnRedis for P {}

impl<P> Sealed for DataStream<P> {}

impl<In, Tm, P> Fragment<In, Tm> for DataStream<P>
where
    Tm: StreamTime,
    P: FragmentPlan<In, Tm>,
{
    type Out = P::Out;
    type Plan = P;

    fn into_stream(self) -> Result<DataStream<P>, Error> {
        Ok(self)
    }
}

impl<P> Sealed for Result<DataStream<P>, Error> {}

impl<In, Tm, P> Fragment<In, Tm> for Result<DataStream<P>, Error>
where
    Tm: StreamTime,
    P: FragmentPlan<In, Tm>,
{
    type Out = P::Out;
    type Plan = P;

    fn into_stream(self) -> Result<DataStream<P>, Error> {
        self
    }
}

impl<P: Plan> DataStream<P> {
    /// Continues the pipeline with `fragment`, a function from [`Input`] to a
    /// [`Fragment`] (see [the `fragment` module](crate::fragment)): its operators follow
    /// this stream's, with the ids they would have written inline.
    ///
    /// A fragment whose input carries event time (`Input<T>`) follows only a stream with
    /// event time: otherwise a compile error says how to choose it.
    ///
    /// # Errors
    /// None here: a configuration error of the fragment is returned by the pipeline's
    /// terminal operation.
    pub fn transform<F, G, Tm>(self, fragment: G) -> DataStream<Spliced<P, F::Plan>>
    where
        G: FnOnce(Input<P::Out, Tm>) -> F,
        F: Fragment<P::Out, Tm>,
        Tm: StreamTime,
        P::Time: Offers<Tm>,
    {
        let input = self.fragment_input();
        let built = fragment(input).into_stream();
        self.splice(built)
    }
}
