//! Streams with several inputs: [`DataStream::union`] (one element type) and
//! [`DataStream::connect`] ([`ConnectedStreams`]: two element types, one function per input).
//!
//! Both build one plan with two inputs ([`Union`]); the engine of the inputs' sources decides
//! how they run ([`CombineRoots`]).

use super::plan::Plan;
use super::types::{DataStream, KeyedProcessOutput};
use crate::api::{Collector, KeyedContext, KeyedProcessFunction, TimerContext};
use crate::ops::Convert;
use crate::sealed::Sealed;
use crate::BoxError;
use std::hash::Hash;
use std::marker::PhantomData;

/// One element of [`ConnectedStreams`]: from the first input or from the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CoInput<A, B> {
    /// An element of the stream `connect` was called on.
    First(A),
    /// An element of the stream passed to `connect`.
    Second(B),
}

/// How the engine of the first input's source runs a plan with a second input whose source
/// is `Other`: implemented by the roots of engines that run several inputs (the memory
/// engine's single-chain sources, the Redis engine's topics).
#[diagnostic::on_unimplemented(
    message = "a stream of `{Self}` cannot be combined with a stream of `{Other}`",
    label = "these inputs cannot run in one pipeline",
    note = "both inputs must come from sources of one engine; the memory engine combines its collection and user sources (not `from_collection_partitioned`); the Redis engine combines topics of one `RedisEnv` (`from_mq_topic`)"
)]
pub trait CombineRoots<Other>: Sealed {
    /// The root of the combined plan.
    type Root;
    /// What that root feeds into the built chain.
    type Head;
    /// The combined root of two inputs' roots (before building).
    fn combine(&self, other: &Other) -> Self::Root;
}

/// The items [`ConnectedStreams::co_flat_map`] gets from one element: those of the first
/// input's function or of the second's (no buffer per element).
#[doc(hidden)]
pub enum CoItems<I1, I2> {
    First(I1),
    Second(I2),
}

impl<U, I1: Iterator<Item = U>, I2: Iterator<Item = U>> Iterator for CoItems<I1, I2> {
    type Item = U;

    #[inline]
    fn next(&mut self) -> Option<U> {
        match self {
            CoItems::First(items) => items.next(),
            CoItems::Second(items) => items.next(),
        }
    }
}

/// Converts a union input's elements: unchanged.
#[doc(hidden)]
pub struct AsIs;

/// Converts the first input of connected streams of `A` and `B`: `CoInput::First`.
#[doc(hidden)]
pub struct AsFirst<B>(PhantomData<fn() -> B>);

/// Converts the second input of connected streams of `A` and `B`: `CoInput::Second`.
#[doc(hidden)]
pub struct AsSecond<A>(PhantomData<fn() -> A>);

impl<T> Convert<T> for AsIs {
    type Out = T;
    #[inline(always)]
    fn convert(value: T) -> T {
        value
    }
}

impl<A, B> Convert<A> for AsFirst<B> {
    type Out = CoInput<A, B>;
    #[inline(always)]
    fn convert(value: A) -> CoInput<A, B> {
        CoInput::First(value)
    }
}

impl<A, B> Convert<B> for AsSecond<A> {
    type Out = CoInput<A, B>;
    #[inline(always)]
    fn convert(value: B) -> CoInput<A, B> {
        CoInput::Second(value)
    }
}

/// A plan with two inputs `A` and `B`, whose elements become this plan's through `CA` and
/// `CB` ([`AsIs`] for a union, [`AsFirst`]/[`AsSecond`] for connected streams).
pub struct Union<A: Plan, B: Plan, CA, CB>
where
    A::Root: CombineRoots<B::Root>,
{
    pub(crate) first: A,
    pub(crate) second: B,
    pub(crate) root: <A::Root as CombineRoots<B::Root>>::Root,
    pub(crate) _convert: PhantomData<fn() -> (CA, CB)>,
}

impl<A: Plan, B: Plan, CA, CB> Sealed for Union<A, B, CA, CB> where A::Root: CombineRoots<B::Root> {}

/// A Redis pipeline is cloned once per partition.
impl<A, B, CA, CB> Clone for Union<A, B, CA, CB>
where
    A: Plan + Clone,
    B: Plan + Clone,
    A::Root: CombineRoots<B::Root>,
    <A::Root as CombineRoots<B::Root>>::Root: Clone,
{
    fn clone(&self) -> Self {
        Union {
            first: self.first.clone(),
            second: self.second.clone(),
            root: self.root.clone(),
            _convert: PhantomData,
        }
    }
}

impl<A, B, CA, CB> Plan for Union<A, B, CA, CB>
where
    A: Plan,
    B: Plan<Time = A::Time>,
    A::Root: CombineRoots<B::Root>,
    CA: Convert<A::Out>,
    CB: Convert<B::Out, Out = CA::Out>,
{
    type Out = CA::Out;
    type Root = <A::Root as CombineRoots<B::Root>>::Root;
    type Head = <A::Root as CombineRoots<B::Root>>::Head;
    type Time = A::Time;

    fn root(&self) -> &Self::Root {
        &self.root
    }
}

impl<P: Plan> DataStream<P> {
    /// Two streams as one, before the elements are converted by `CA`/`CB`.
    fn combine<Q: Plan, CA, CB>(self, other: DataStream<Q>) -> DataStream<Union<P, Q, CA, CB>>
    where
        P::Root: CombineRoots<Q::Root>,
    {
        let root = self.plan.root().combine(other.plan.root());
        DataStream {
            plan: Union {
                first: self.plan,
                second: other.plan,
                root,
                _convert: PhantomData,
            },
            source_id: self.source_id,
            position: self.position + 1,
            failed: self.failed.or(other.failed),
        }
    }

    /// The elements of this stream and of `other` as one stream (Flink `DataStream.union`).
    ///
    /// Both streams must have the same element type and agree on event time (both carry
    /// it, or neither does). Each input keeps its own order; how the two interleave is up
    /// to the engine (the memory engine runs this stream's input to its end, then
    /// `other`'s; the Redis engine runs each batch's entries of this stream's topic, then
    /// those of `other`'s). The watermark after the union is the lowest of the inputs' watermarks;
    /// an input that has ended no longer holds it back. Operators after the union continue
    /// this stream's operator ids; `other`'s operators keep theirs.
    ///
    /// Runs on the memory engine, with inputs from its single-chain sources (not
    /// `from_collection_partitioned`), and on the Redis engine, with topics of one
    /// `RedisEnv` that have the same partition count (a start with inputs of different
    /// counts fails naming them); another pair of inputs does not compile.
    ///
    /// ```
    /// use streaming::MemoryEnv;
    /// let env = MemoryEnv::new();
    /// let odd = env.from_collection(vec![1, 3]);
    /// let even = env.from_collection(vec![2, 4]).map(|x| x * 10);
    /// assert_eq!(odd.union(even).collect_vec()?, [1, 3, 20, 40]);
    /// # Ok::<(), streaming::Error>(())
    /// ```
    pub fn union<Q>(self, other: DataStream<Q>) -> DataStream<Union<P, Q, AsIs, AsIs>>
    where
        Q: Plan<Out = P::Out, Time = P::Time>,
        P::Root: CombineRoots<Q::Root>,
    {
        self.combine(other)
    }

    /// This stream and `other`, of another element type, as a pair (Flink
    /// `DataStream.connect`): [`ConnectedStreams::co_map`] and
    /// [`co_flat_map`](ConnectedStreams::co_flat_map) run one function per input;
    /// [`key_by`](ConnectedStreams::key_by) keys both inputs, for a
    /// [`KeyedCoProcessFunction`] whose keyed state and timers both inputs share.
    ///
    /// Inputs, event time, order and watermark are as for [`union`](Self::union).
    pub fn connect<Q>(self, other: DataStream<Q>) -> ConnectedStreams<P, Q>
    where
        Q: Plan<Time = P::Time>,
        P::Root: CombineRoots<Q::Root>,
    {
        ConnectedStreams {
            stream: self.combine(other),
        }
    }
}

/// The plan of [`ConnectedStreams`]: both inputs' elements as [`CoInput`]s.
pub type Connected<P, Q> = Union<P, Q, AsFirst<<Q as Plan>::Out>, AsSecond<<P as Plan>::Out>>;

/// Two streams of different element types, connected ([`DataStream::connect`]).
#[must_use = "connected streams do nothing until a function and a terminal operation run them"]
pub struct ConnectedStreams<P: Plan, Q: Plan>
where
    P::Root: CombineRoots<Q::Root>,
{
    stream: DataStream<Connected<P, Q>>,
}

impl<P, Q> ConnectedStreams<P, Q>
where
    P: Plan,
    Q: Plan<Time = P::Time>,
    P::Root: CombineRoots<Q::Root>,
{
    /// Both inputs as one stream of [`CoInput`]s, for any operator of [`DataStream`].
    pub fn tagged(self) -> DataStream<Connected<P, Q>> {
        self.stream
    }

    /// Transforms the first input's elements with `first` and the second's with `second`
    /// (Flink `CoMapFunction`).
    ///
    /// ```
    /// use streaming::MemoryEnv;
    /// let env = MemoryEnv::new();
    /// let counts = env.from_collection(vec![3u32, 4]);
    /// let words = env.from_collection(vec!["ab", "c"]);
    /// let lines = counts
    ///     .connect(words)
    ///     .co_map(|n| format!("count {n}"), |w| format!("word {w}"))
    ///     .collect_vec()?;
    /// assert_eq!(lines, ["count 3", "count 4", "word ab", "word c"]);
    /// # Ok::<(), streaming::Error>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn co_map<U, F1, F2>(
        self,
        mut first: F1,
        mut second: F2,
    ) -> DataStream<
        super::plan::Then<
            Connected<P, Q>,
            super::stages::MapStage<impl FnMut(CoInput<P::Out, Q::Out>) -> U + Clone, U>,
        >,
    >
    where
        F1: FnMut(P::Out) -> U + Clone,
        F2: FnMut(Q::Out) -> U + Clone,
    {
        self.stream.map(move |element| match element {
            CoInput::First(a) => first(a),
            CoInput::Second(b) => second(b),
        })
    }

    /// Replaces the first input's elements with the items `first` returns and the second's
    /// with those of `second` (Flink `CoFlatMapFunction`); each item keeps its element's
    /// timestamp.
    #[allow(clippy::type_complexity)]
    pub fn co_flat_map<U, I1, I2, F1, F2>(
        self,
        mut first: F1,
        mut second: F2,
    ) -> DataStream<
        super::plan::Then<
            Connected<P, Q>,
            super::stages::FlatMapStage<
                impl FnMut(CoInput<P::Out, Q::Out>) -> CoItems<I1::IntoIter, I2::IntoIter> + Clone,
                CoItems<I1::IntoIter, I2::IntoIter>,
            >,
        >,
    >
    where
        I1: IntoIterator<Item = U>,
        I2: IntoIterator<Item = U>,
        F1: FnMut(P::Out) -> I1 + Clone,
        F2: FnMut(Q::Out) -> I2 + Clone,
    {
        self.stream.flat_map(move |element| match element {
            CoInput::First(a) => CoItems::First(first(a).into_iter()),
            CoInput::Second(b) => CoItems::Second(second(b).into_iter()),
        })
    }

    /// Keys the first input by `first` and the second by `second` (one key type), for
    /// [`KeyedConnectedStreams::process`].
    #[allow(clippy::type_complexity)]
    pub fn key_by<K, KF1, KF2>(
        self,
        first: KF1,
        second: KF2,
    ) -> KeyedConnectedStreams<P, Q, impl FnMut(&CoInput<P::Out, Q::Out>) -> K + Clone, K>
    where
        K: Hash + Eq + Clone + 'static,
        KF1: FnMut(&P::Out) -> K + Clone,
        KF2: FnMut(&Q::Out) -> K + Clone,
    {
        let (mut first, mut second) = (first, second);
        KeyedConnectedStreams {
            keyed: self
                .stream
                .key_by(move |element: &CoInput<P::Out, Q::Out>| match element {
                    CoInput::First(a) => first(a),
                    CoInput::Second(b) => second(b),
                }),
        }
    }
}

/// Connected streams keyed by one key type ([`ConnectedStreams::key_by`]).
#[must_use = "keyed connected streams do nothing until a function and a terminal operation run them"]
pub struct KeyedConnectedStreams<P: Plan, Q: Plan, KF, K>
where
    P::Root: CombineRoots<Q::Root>,
{
    pub(super) keyed: super::types::KeyedStream<Connected<P, Q>, KF, K>,
}

impl<P, Q, KF, K> KeyedConnectedStreams<P, Q, KF, K>
where
    P: Plan,
    Q: Plan<Time = P::Time>,
    P::Root: CombineRoots<Q::Root>,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&CoInput<P::Out, Q::Out>) -> K,
{
    /// Runs `function` per element of either input with the key's context (Flink
    /// `KeyedCoProcessFunction`): keyed state and timers belong to the key, whichever input
    /// the element came from.
    pub fn process<F>(self, function: F) -> KeyedProcessOutput<Connected<P, Q>, KF, K, CoProcess<F>>
    where
        F: KeyedCoProcessFunction<K, P::Out, Q::Out>,
    {
        self.keyed.process_function(CoProcess(function))
    }
}

/// A keyed process function over two inputs (Flink `KeyedCoProcessFunction`): one method
/// per input, timers and keyed state shared by both.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a keyed co-process function of key `{K}`, first input `{A}` and second input `{B}`",
    label = "expected an `impl KeyedCoProcessFunction<{K}, {A}, {B}>`",
    note = "`process` on keyed connected streams takes a function of their key type and of both inputs' element types, in the order of `connect`"
)]
pub trait KeyedCoProcessFunction<K, A, B> {
    /// The output record type.
    type Out;

    /// Handles one element of the first input, of the key `ctx.current_key()`.
    ///
    /// # Errors
    /// An error (or a panic) fails the element's source record, as in
    /// [`KeyedProcessFunction::process_element`].
    fn process_element1(
        &mut self,
        value: A,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError>;

    /// Handles one element of the second input.
    ///
    /// # Errors
    /// As [`process_element1`](Self::process_element1).
    fn process_element2(
        &mut self,
        value: B,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError>;

    /// Called when a timer registered through either context is due. The default does
    /// nothing.
    ///
    /// # Errors
    /// As [`process_element1`](Self::process_element1).
    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        out: &mut Collector<'_, Self::Out>,
    ) -> Result<(), BoxError> {
        let _ = (timestamp, ctx, out);
        Ok(())
    }
}

/// A [`KeyedCoProcessFunction`] as the keyed process function of the [`CoInput`] stream.
#[derive(Clone, Debug)]
pub struct CoProcess<F>(F);

impl<K, A, B, F: KeyedCoProcessFunction<K, A, B>> KeyedProcessFunction<K, CoInput<A, B>>
    for CoProcess<F>
{
    type Out = F::Out;

    fn process_element(
        &mut self,
        value: CoInput<A, B>,
        ctx: &mut KeyedContext<'_, K>,
        out: &mut Collector<'_, F::Out>,
    ) -> Result<(), BoxError> {
        match value {
            CoInput::First(a) => self.0.process_element1(a, ctx, out),
            CoInput::Second(b) => self.0.process_element2(b, ctx, out),
        }
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, K>,
        out: &mut Collector<'_, F::Out>,
    ) -> Result<(), BoxError> {
        self.0.on_timer(timestamp, ctx, out)
    }
}
