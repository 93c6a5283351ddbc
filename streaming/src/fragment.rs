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
//! use streaming::time::{AscendingTimestamps, TumblingEventTimeWindows};
//! use streaming::{pipeline, MemoryEnv};
//!
//! /// Each word's count per second of event time.
//! fn word_counts(lines: Input<(&'static str, i64)>) -> impl Fragment<(&'static str, i64), Out = (String, i64, u64)> {
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

use crate::dataflow::{BuildPlan, DataStream, Plan, Spliced};
use crate::memory::{DrivenClock, MemoryRuntime};
use crate::sealed::Sealed;
use crate::Error;

pub use crate::dataflow::FragmentInput;

/// The stream a fragment function starts from: records of type `T` fed by the pipeline the
/// fragment is spliced into.
pub type Input<T> = DataStream<FragmentInput<T>>;

/// What a fragment function returns: a stream built from an [`Input<In>`] (or the
/// [`pipeline!`](crate::pipeline) fragment form's `Result` of one), producing
/// [`Out`](Fragment::Out). Implemented by this crate for `DataStream<P>` and
/// `Result<DataStream<P>, Error>` whose plan can run on every engine; name it as
/// `impl Fragment<In, Out = U>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a pipeline fragment starting from `Input<{In}>` that runs on every engine",
    label = "not a fragment of `Input<{In}>`",
    note = "a fragment is a stream built from the function's `Input<{In}>` parameter (no source, no sink)",
    note = "its functions and sinks must be `Clone + Send + 'static`; with feature `redis`, keyed state, window keys and accumulators must be serde `Serialize + DeserializeOwned`"
)]
pub trait Fragment<In>: Sealed {
    /// The element type the fragment produces.
    type Out;

    /// The fragment's plan.
    #[doc(hidden)]
    type Plan: FragmentPlan<In, Out = Self::Out>;

    /// The fragment's stream, or the configuration error that stopped building it.
    #[doc(hidden)]
    fn into_stream(self) -> Result<DataStream<Self::Plan>, Error>;
}

/// A plan rooted at a [`FragmentInput<In>`] that every engine can build. Not public API.
#[doc(hidden)]
pub trait FragmentPlan<In>:
    Plan<Root = FragmentInput<In>, Head = In>
    + BuildPlan<MemoryRuntime>
    + BuildPlan<MemoryRuntime<DrivenClock>>
    + BuildOnRedis
    + Clone
    + Send
    + 'static
{
}

impl<In, P> FragmentPlan<In> for P where
    P: Plan<Root = FragmentInput<In>, Head = In>
        + BuildPlan<MemoryRuntime>
        + BuildPlan<MemoryRuntime<DrivenClock>>
        + BuildOnRedis
        + Clone
        + Send
        + 'static
{
}

/// A plan the Redis engine can build (every plan without feature `redis`). Not public API.
#[doc(hidden)]
#[cfg(feature = "redis")]
pub trait BuildOnRedis: BuildPlan<crate::redis::runtime::RedisRuntime> {}

#[cfg(feature = "redis")]
impl<P: BuildPlan<crate::redis::runtime::RedisRuntime>> BuildOnRedis for P {}

/// A plan the Redis engine can build (every plan without feature `redis`). Not public API.
#[doc(hidden)]
#[cfg(not(feature = "redis"))]
pub trait BuildOnRedis {}

#[cfg(not(feature = "redis"))]
impl<P> BuildOnRedis for P {}

impl<P> Sealed for DataStream<P> {}

impl<In, P: FragmentPlan<In>> Fragment<In> for DataStream<P> {
    type Out = P::Out;
    type Plan = P;

    fn into_stream(self) -> Result<DataStream<P>, Error> {
        Ok(self)
    }
}

impl<P> Sealed for Result<DataStream<P>, Error> {}

impl<In, P: FragmentPlan<In>> Fragment<In> for Result<DataStream<P>, Error> {
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
    /// # Errors
    /// None here: a configuration error of the fragment is returned by the pipeline's
    /// terminal operation.
    pub fn transform<F, G>(self, fragment: G) -> DataStream<Spliced<P, F::Plan>>
    where
        G: FnOnce(Input<P::Out>) -> F,
        F: Fragment<P::Out>,
    {
        let input = self.fragment_input();
        let built = fragment(input).into_stream();
        self.splice(built)
    }
}
