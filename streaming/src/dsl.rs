//! Helpers the `pipeline!` expansion calls. Not part of the public API.

use crate::api::state::DeclareStates;
use crate::api::{Collector, KeyedContext, TimerContext};
use crate::dataflow::{
    CombineRoots, DataStream, IntervalJoin, KeyedProcessOutput, KeyedStream, Plan,
};
use crate::ops::process::ProcessFn;
use crate::time::{EventTime, Offers};
use crate::BoxError;
use std::hash::Hash;

pub use crate::api::state::DeclaredState;

/// The value standing in for a pipeline that failed to compile: its type is the type a
/// valid pipeline would have, so the surrounding code type-checks and one mistake gives one
/// error. Never runs (the crate does not compile).
#[doc(hidden)]
pub fn placeholder<T>() -> T {
    unreachable!("`pipeline!` reported a compile error")
}

/// The pipeline's result when a configuration argument failed.
#[doc(hidden)]
#[cold]
pub fn config_error<T, E: Into<crate::Error>>(error: E) -> Result<T, crate::Error> {
    Err(error.into())
}

/// How the expansion passes a configuration argument (a window assigner, trigger or
/// watermark generator), chosen by the argument's type, not its name: a `Result` is
/// unwrapped and its error becomes the pipeline's result, any other value is passed as it
/// is. The expansion writes `(&arg).__config_kind().config(arg)` with both kind traits in
/// scope; method lookup finds [`FallibleConfigKind`] (for `Result<T, E>`) before it adds
/// the `&` that [`InfallibleConfigKind`] (for `&T`) needs.
#[doc(hidden)]
pub struct FallibleConfig;

/// The kind of a configuration argument that is not a `Result`: see [`FallibleConfig`].
#[doc(hidden)]
pub struct InfallibleConfig;

/// Classifies a `Result` argument as [`FallibleConfig`].
#[doc(hidden)]
pub trait FallibleConfigKind {
    /// The argument's kind.
    #[inline]
    fn __config_kind(&self) -> FallibleConfig {
        FallibleConfig
    }
}

impl<T, E> FallibleConfigKind for Result<T, E> {}

/// Classifies any other argument as [`InfallibleConfig`].
#[doc(hidden)]
pub trait InfallibleConfigKind {
    /// The argument's kind.
    #[inline]
    fn __config_kind(&self) -> InfallibleConfig {
        InfallibleConfig
    }
}

impl<T> InfallibleConfigKind for &T {}

impl FallibleConfig {
    /// The value, or the error as the crate's.
    #[inline]
    pub fn config<T, E: Into<crate::Error>>(self, arg: Result<T, E>) -> Result<T, crate::Error> {
        arg.map_err(Into::into)
    }
}

impl InfallibleConfig {
    /// The value.
    #[inline]
    pub fn config<T>(self, arg: T) -> Result<T, crate::Error> {
        Ok(arg)
    }
}

/// `state(..).process(on_element)`: the declared states `states` (nested pairs of
/// descriptors in declaration order) get their slots when the pipeline is built; the
/// closure names them as [`DeclaredState`]s.
#[doc(hidden)]
pub fn process_with_states<P, KF, K, O, F, S>(
    keyed: KeyedStream<P, KF, K>,
    states: S,
    on_element: F,
) -> KeyedProcessOutput<P, KF, K, ProcessFn<F, O>, S>
where
    P: Plan,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
    F: FnMut(P::Out, &mut KeyedContext<'_, K>, &mut Collector<'_, O>) -> Result<(), BoxError>,
    S: DeclareStates<K>,
{
    keyed.process_declared(ProcessFn::new(on_element), states)
}

/// `state(..).process(on_element).on_timer(on_timer)`: a keyed process function from two
/// closures, with the declared states `states` (`()` without `state(..)`).
#[doc(hidden)]
pub fn process_with_timers<P, KF, K, O, F, G, S>(
    keyed: KeyedStream<P, KF, K>,
    states: S,
    on_element: F,
    on_timer: G,
) -> KeyedProcessOutput<P, KF, K, ProcessFn<F, O, G>, S>
where
    P: Plan,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
    F: FnMut(P::Out, &mut KeyedContext<'_, K>, &mut Collector<'_, O>) -> Result<(), BoxError>,
    G: FnMut(i64, &mut TimerContext<'_, K>, &mut Collector<'_, O>) -> Result<(), BoxError>,
    S: DeclareStates<K>,
{
    keyed.process_declared(ProcessFn::with_timers(on_element, on_timer), states)
}

/// `interval_join(other.key_by(key))` in `pipeline!`: the expansion hands the other input
/// and its key function over apart, so that the key function is checked against this
/// stream's key type `K` and a key of another type is one error at the key function's
/// result.
#[doc(hidden)]
pub trait IntervalJoinBy<P: Plan, KF, K> {
    /// `self.interval_join(other.key_by(key))`.
    fn interval_join_by<Q, KG>(
        self,
        other: DataStream<Q>,
        key: KG,
    ) -> IntervalJoin<P, Q, KF, KG, K>
    where
        Q: Plan<Time = P::Time>,
        KG: FnMut(&Q::Out) -> K,
        P::Time: Offers<EventTime>,
        P::Root: CombineRoots<Q::Root>;
}

impl<P, KF, K> IntervalJoinBy<P, KF, K> for KeyedStream<P, KF, K>
where
    P: Plan,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
{
    fn interval_join_by<Q, KG>(self, other: DataStream<Q>, key: KG) -> IntervalJoin<P, Q, KF, KG, K>
    where
        Q: Plan<Time = P::Time>,
        KG: FnMut(&Q::Out) -> K,
        P::Time: Offers<EventTime>,
        P::Root: CombineRoots<Q::Root>,
    {
        self.interval_join(other.key_by(key))
    }
}

/// The message-queue sources of the DSL: implemented by the environments of engines with a
/// message queue ([`RedisEnv`](crate::redis::RedisEnv)), for the stream type `S` they start.
/// Called through [`from_mq_topic`], [`from_mq_topic_with_id`] and
/// [`from_mq_topic_with_options`] so that an environment without them gets one error, at the
/// environment, naming the operator.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`from_mq_topic` is not supported by `{Self}`: it needs an engine with a message queue",
    label = "this engine has no `from_mq_topic` source",
    note = "`from_mq_topic` runs on the redis engine; the memory engine reads `from_elements`, `from_collection` or `add_source`"
)]
pub trait FromMqTopic<S> {
    /// Reads `topic` as consumer group `group`.
    #[allow(clippy::wrong_self_convention)] // named after the DSL operator
    fn from_mq_topic(&self, topic: &str, group: &str) -> S;
    /// Reads `topic` as consumer group `group`, with source id `source_id`.
    #[allow(clippy::wrong_self_convention)] // named after the DSL operator
    fn from_mq_topic_with_id(&self, source_id: &str, topic: &str, group: &str) -> S;
    /// Reads `topic` as consumer group `group` with subscription `options`.
    #[allow(clippy::wrong_self_convention)] // named after the DSL operator
    fn from_mq_topic_with_options(
        &self,
        topic: &str,
        group: &str,
        options: MqSubscriptionOptions,
    ) -> S;
}

/// The options of `from_mq_topic_with_options`: the queue's subscription options. Without
/// feature `redis` no environment has a message queue and no value is accepted.
#[cfg(feature = "redis")]
type MqSubscriptionOptions = crate::mq::SubscriptionOptions;
#[cfg(not(feature = "redis"))]
type MqSubscriptionOptions = std::convert::Infallible;

/// The stream a message-queue source starts on the Redis engine.
#[cfg(feature = "redis")]
type MqStream = crate::dataflow::DataStream<crate::redis::env::MqTopicSource>;

#[cfg(feature = "redis")]
impl FromMqTopic<MqStream> for crate::redis::RedisEnv {
    fn from_mq_topic(&self, topic: &str, group: &str) -> MqStream {
        crate::redis::RedisEnv::from_mq_topic(self, topic, group)
    }
    fn from_mq_topic_with_id(&self, source_id: &str, topic: &str, group: &str) -> MqStream {
        crate::redis::RedisEnv::from_mq_topic_with_id(self, source_id, topic, group)
    }
    fn from_mq_topic_with_options(
        &self,
        topic: &str,
        group: &str,
        options: MqSubscriptionOptions,
    ) -> MqStream {
        crate::redis::RedisEnv::from_mq_topic_with_options(self, topic, group, options)
    }
}

/// An environment given by reference (`env: &RedisEnv` in a helper function) starts the
/// same sources as the environment itself.
impl<E: FromMqTopic<S> + ?Sized, S> FromMqTopic<S> for &E {
    fn from_mq_topic(&self, topic: &str, group: &str) -> S {
        E::from_mq_topic(self, topic, group)
    }
    fn from_mq_topic_with_id(&self, source_id: &str, topic: &str, group: &str) -> S {
        E::from_mq_topic_with_id(self, source_id, topic, group)
    }
    fn from_mq_topic_with_options(
        &self,
        topic: &str,
        group: &str,
        options: MqSubscriptionOptions,
    ) -> S {
        E::from_mq_topic_with_options(self, topic, group, options)
    }
}

/// The expansion of `env.from_mq_topic(topic, group)`.
#[doc(hidden)]
pub fn from_mq_topic<E: FromMqTopic<S>, S>(env: &E, topic: &str, group: &str) -> S {
    env.from_mq_topic(topic, group)
}

/// The expansion of `env.from_mq_topic_with_id(source_id, topic, group)`.
#[doc(hidden)]
pub fn from_mq_topic_with_id<E: FromMqTopic<S>, S>(
    env: &E,
    source_id: &str,
    topic: &str,
    group: &str,
) -> S {
    env.from_mq_topic_with_id(source_id, topic, group)
}

/// The expansion of `env.from_mq_topic_with_options(topic, group, options)`.
#[doc(hidden)]
pub fn from_mq_topic_with_options<E: FromMqTopic<S>, S>(
    env: &E,
    topic: &str,
    group: &str,
    options: MqSubscriptionOptions,
) -> S {
    env.from_mq_topic_with_options(topic, group, options)
}

/// The operator ids a pipeline text gets, without running it (for tests and tools).
#[doc(hidden)]
pub use streaming_macros::__pipeline_ids as pipeline_ids;
