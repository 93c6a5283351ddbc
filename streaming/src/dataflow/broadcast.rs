//! Broadcast state: [`DataStream::broadcast`] makes a [`BroadcastStream`], which a keyed
//! stream connects to ([`KeyedStream::connect`]) for a [`KeyedBroadcastProcessFunction`].
//!
//! The plan is a two-input plan like `connect` (the keyed stream first), keyed by
//! [`BroadcastKey`]: an element of the keyed stream by its own key, every broadcast
//! element by the one broadcast key, under which the broadcast map is kept. The engine of
//! the inputs decides how the broadcast input reaches every partition
//! ([`CombineBroadcast`]).

use super::plan::{BuildStage, Plan, Stage, Then};
use super::runtime::{Runtime, StoreFactory};
use super::types::{DataStream, KeyedStream};
use super::union::{AsFirst, AsSecond, CoInput, CombineRoots, Connected, Union};
use crate::api::{
    BroadcastContext, BroadcastKey, BroadcastStateDescriptor, Collector,
    KeyedBroadcastProcessFunction, KeyedContext, KeyedProcessFunction, ReadOnlyBroadcastContext,
    TimerContext,
};
use crate::ops::{forward_lifecycle, KeyedProcess, Operator, OperatorId, ProcessState, Shared};
use crate::sealed::Sealed;
use crate::time::StreamTime;
use crate::{BoxError, Error};
use std::hash::Hash;
use std::marker::PhantomData;

/// How the engine of a keyed stream's source runs a broadcast input whose source is
/// `Other`: every partition of the keyed stream must see every broadcast element.
#[diagnostic::on_unimplemented(
    message = "a stream of `{Other}` cannot be broadcast to a stream of `{Self}`",
    label = "this engine does not run broadcast inputs",
    note = "both inputs must come from sources of one engine: on the memory engine collection and user sources (not `from_collection_partitioned`), on the Redis engine topics of one `RedisEnv` (`from_mq_topic`; the broadcast topic has one partition)"
)]
pub trait CombineBroadcast<Other>: CombineRoots<Other> {
    /// The combined root of a keyed stream's root and a broadcast input's root.
    fn combine_broadcast(&self, other: &Other) -> Self::Root;
}

/// A stream to broadcast to every partition of a keyed stream
/// ([`DataStream::broadcast`]), with the map its elements write.
#[must_use = "a broadcast stream does nothing until a keyed stream connects to it"]
pub struct BroadcastStream<P, BK, BV> {
    stream: DataStream<P>,
    state: BroadcastStateDescriptor<BK, BV>,
}

impl<P: Plan> DataStream<P> {
    /// This stream as a broadcast input (Flink `DataStream.broadcast(descriptor)`): a
    /// keyed stream [`connect`](KeyedStream::connect)s to it, and each of its elements
    /// reaches every partition of the keyed stream, where
    /// [`KeyedBroadcastProcessFunction::process_broadcast_element`] writes the map
    /// `state` (one per partition, the same everywhere). Meant for low-volume streams:
    /// rules, configuration, reference data.
    pub fn broadcast<BK, BV>(
        self,
        state: BroadcastStateDescriptor<BK, BV>,
    ) -> BroadcastStream<P, BK, BV> {
        BroadcastStream {
            stream: self,
            state,
        }
    }
}

/// A keyed stream connected to a broadcast stream ([`KeyedStream::connect`]).
#[must_use = "connected streams do nothing until a function and a terminal operation run them"]
pub struct BroadcastConnectedStream<P, Q, KF, K, BK, BV> {
    keyed: KeyedStream<P, KF, K>,
    broadcast: BroadcastStream<Q, BK, BV>,
}

impl<P, KF, K> KeyedStream<P, KF, K>
where
    P: Plan,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
{
    /// This keyed stream and a broadcast stream (Flink `KeyedStream.connect(BroadcastStream)`),
    /// for a [`KeyedBroadcastProcessFunction`]
    /// ([`process`](BroadcastConnectedStream::process)).
    ///
    /// Both inputs agree on event time. The watermark is the lowest of both inputs', as
    /// for `connect`. Operators after it continue this stream's operator ids.
    pub fn connect<Q, BK, BV>(
        self,
        broadcast: BroadcastStream<Q, BK, BV>,
    ) -> BroadcastConnectedStream<P, Q, KF, K, BK, BV>
    where
        Q: Plan<Time = P::Time>,
        P::Root: CombineBroadcast<Q::Root>,
    {
        BroadcastConnectedStream {
            keyed: self,
            broadcast,
        }
    }
}

/// The key function of a broadcast process: a keyed element's key, or the broadcast key.
fn broadcast_key<A, B, K>(
    mut key_fn: impl FnMut(&A) -> K + Clone,
) -> impl FnMut(&CoInput<A, B>) -> BroadcastKey<K> + Clone {
    move |element| match element {
        CoInput::First(a) => BroadcastKey::Of(key_fn(a)),
        CoInput::Second(_) => BroadcastKey::Broadcast,
    }
}

impl<P, Q, KF, K, BK, BV> BroadcastConnectedStream<P, Q, KF, K, BK, BV>
where
    P: Plan,
    Q: Plan<Time = P::Time>,
    P::Root: CombineBroadcast<Q::Root>,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K + Clone,
{
    /// Runs `function`: each keyed element with its key's state and timers and the
    /// broadcast map read-only, each broadcast element (on every partition) with the map
    /// to write.
    #[allow(clippy::type_complexity)]
    pub fn process<F>(
        self,
        function: F,
    ) -> DataStream<
        Then<
            Connected<P, Q>,
            BroadcastProcessStage<
                impl FnMut(&CoInput<P::Out, Q::Out>) -> BroadcastKey<K> + Clone,
                K,
                F,
                BK,
                BV,
            >,
        >,
    >
    where
        F: KeyedBroadcastProcessFunction<K, P::Out, Q::Out, BK, BV>,
    {
        let BroadcastConnectedStream { keyed, broadcast } = self;
        let (first, second) = (keyed.stream, broadcast.stream);
        let root = first.plan.root().combine_broadcast(second.plan.root());
        let combined: DataStream<Connected<P, Q>> = DataStream {
            plan: Union {
                first: first.plan,
                second: second.plan,
                root,
                _convert: PhantomData::<fn() -> (AsFirst<Q::Out>, AsSecond<P::Out>)>,
            },
            source_id: first.source_id,
            position: first.position + 1,
            failed: first.failed.or(second.failed),
        };
        let id = combined.next_id("broadcast_process");
        combined.then(BroadcastProcessStage {
            id,
            key_fn: broadcast_key::<P::Out, Q::Out, K>(keyed.key_fn),
            function,
            state: broadcast.state,
            timed: P::Time::IS_EVENT_TIME,
            _k: PhantomData,
        })
    }
}

/// The keyed process of a broadcast connection, before it is built.
#[doc(hidden)]
pub struct BroadcastProcessStage<KF, K, F, BK, BV> {
    id: OperatorId,
    key_fn: KF,
    function: F,
    state: BroadcastStateDescriptor<BK, BV>,
    timed: bool,
    _k: PhantomData<fn() -> K>,
}

impl<KF: Clone, K, F: Clone, BK, BV> Clone for BroadcastProcessStage<KF, K, F, BK, BV> {
    fn clone(&self) -> Self {
        BroadcastProcessStage {
            id: self.id.clone(),
            key_fn: self.key_fn.clone(),
            function: self.function.clone(),
            state: self.state.clone(),
            timed: self.timed,
            _k: PhantomData,
        }
    }
}

impl<KF, K, F, BK, BV> Sealed for BroadcastProcessStage<KF, K, F, BK, BV> {}

impl<A, B, KF, K, F, BK, BV> Stage<CoInput<A, B>> for BroadcastProcessStage<KF, K, F, BK, BV>
where
    F: KeyedBroadcastProcessFunction<K, A, B, BK, BV>,
{
    type Out = F::Out;
    type Time<Up: StreamTime> = Up;
}

/// The process state of a broadcast process on engine `R`.
type BroadcastProcessState<K, R> =
    ProcessState<BroadcastKey<K>, <R as Runtime>::ProcessChanges<BroadcastKey<K>>>;

impl<A, B, KF, K, F, BK, BV, R> BuildStage<CoInput<A, B>, R>
    for BroadcastProcessStage<KF, K, F, BK, BV>
where
    R: Runtime + StoreFactory<BroadcastProcessState<K, R>>,
    K: Hash + Eq + Clone + 'static,
    BK: Hash + Eq + Clone + 'static,
    BV: Clone + 'static,
    KF: FnMut(&CoInput<A, B>) -> BroadcastKey<K>,
    F: KeyedBroadcastProcessFunction<K, A, B, BK, BV>,
{
    type Op<N: Operator<F::Out>> = TouchBroadcast<
        KeyedProcess<
            KF,
            BroadcastKey<K>,
            CoInput<A, B>,
            Broadcasting<F, K, BK, BV>,
            R::ProcessChanges<BroadcastKey<K>>,
            R::Clock,
            N,
        >,
        BroadcastProcessState<K, R>,
        K,
    >;

    fn build<N: Operator<F::Out>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, ProcessState::new(&self.id))?;
        let function = Broadcasting {
            function: self.function,
            state: self.state,
            key: BroadcastKey::Broadcast,
            _k: PhantomData,
        };
        let process = KeyedProcess::new(
            self.id,
            self.key_fn,
            function,
            self.timed,
            state.clone(),
            next,
        );
        Ok(TouchBroadcast {
            process,
            state,
            key: BroadcastKey::Broadcast,
        })
    }
}

/// A broadcast process: before each element, the engine is told the element's call reads
/// the broadcast key's state too (the Redis engine then has it in memory, or fetches it
/// and runs the batch again).
#[doc(hidden)]
pub struct TouchBroadcast<O, S, K> {
    process: O,
    state: Shared<S>,
    key: BroadcastKey<K>,
}

impl<T, O, P, K> Operator<T> for TouchBroadcast<O, ProcessState<BroadcastKey<K>, P>, K>
where
    O: Operator<T>,
    K: Hash + Eq + Clone + 'static,
    P: crate::ops::ProcessTracking<BroadcastKey<K>>,
{
    forward_lifecycle!(process; open, on_watermark, on_processing_time, finish, close);

    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        self.state.borrow_mut().touch(&self.key)?;
        self.process.process(value, timestamp)
    }
}

/// A [`KeyedBroadcastProcessFunction`] as the keyed process function of the combined
/// input.
#[doc(hidden)]
pub struct Broadcasting<F, K, BK, BV> {
    function: F,
    state: BroadcastStateDescriptor<BK, BV>,
    key: BroadcastKey<K>,
    _k: PhantomData<fn() -> K>,
}

/// The keyed stream's key of a call, which is never the broadcast key there.
fn stream_key<'a, K>(ctx: &KeyedContext<'a, BroadcastKey<K>>) -> Result<&'a K, Error> {
    match ctx.key_ref() {
        BroadcastKey::Of(key) => Ok(key),
        BroadcastKey::Broadcast => Err(Error::Engine {
            op: "broadcast process",
            reason: "a keyed element or timer came with the broadcast key".into(),
        }),
    }
}

impl<A, B, K, F, BK, BV> KeyedProcessFunction<BroadcastKey<K>, CoInput<A, B>>
    for Broadcasting<F, K, BK, BV>
where
    K: Hash + Eq + Clone + 'static,
    F: KeyedBroadcastProcessFunction<K, A, B, BK, BV>,
{
    type Out = F::Out;

    fn process_element(
        &mut self,
        value: CoInput<A, B>,
        ctx: &mut KeyedContext<'_, BroadcastKey<K>>,
        out: &mut Collector<'_, F::Out>,
    ) -> Result<(), BoxError> {
        match value {
            CoInput::First(a) => {
                let key = stream_key(ctx)?;
                let mut read_only = ReadOnlyBroadcastContext {
                    inner: ctx,
                    key,
                    broadcast_key: &self.key,
                    state: &self.state,
                };
                self.function.process_element(a, &mut read_only, out)
            }
            CoInput::Second(b) => {
                let mut writing = BroadcastContext {
                    inner: ctx,
                    state: &self.state,
                };
                self.function
                    .process_broadcast_element(b, &mut writing, out)
            }
        }
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, BroadcastKey<K>>,
        out: &mut Collector<'_, F::Out>,
    ) -> Result<(), BoxError> {
        let ctx = &mut ctx.inner;
        let key = stream_key(ctx)?;
        let mut read_only = ReadOnlyBroadcastContext {
            inner: ctx,
            key,
            broadcast_key: &self.key,
            state: &self.state,
        };
        self.function.on_timer(timestamp, &mut read_only, out)
    }
}

impl<F: Clone, K: Clone, BK, BV> Clone for Broadcasting<F, K, BK, BV> {
    fn clone(&self) -> Self {
        Broadcasting {
            function: self.function.clone(),
            state: self.state.clone(),
            key: self.key.clone(),
            _k: PhantomData,
        }
    }
}
