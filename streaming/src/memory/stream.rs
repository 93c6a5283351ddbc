//! The builder API of the in-memory engine: [`DataStream`], [`KeyedStream`],
//! [`WindowedStream`].

use super::plan::{
    BuildRejectedOutput, Plan, Runtime, SideOutputFactory, Stage, StoreFactory, Then,
};
use crate::api::{
    AggregateFunction, Collector, KeyedContext, KeyedProcessFunction, Numeric, RejectedElement,
    Sink,
};
use crate::ops::keyed::{KeyedTable, ProcessState};
use crate::ops::window::WindowState;
use crate::ops::{
    AggregateWindow, ApplyWindow, AssignWatermarks, CountWindow, Filter, FlatMap, KeyedProcess,
    KeyedReduce, KeyedSum, KeyedSumBy, Map, NoRejectedOutput, Operator, OperatorId, ProcessFn,
    RecordTimestamp, ReduceWindow, RejectedTo, SideOutput, SinkOp, SumByWindow, SumWindow, TryMap,
    WatermarkStore, WindowFunction, WindowOperator,
};
use crate::time::{TimeWindow, TimestampAssigner, Trigger, WatermarkGenerator, WindowAssigner};
use crate::{BoxError, Error};
use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// The stream a window function on a [`WindowedStream`] returns.
pub type WindowOutput<P, KF, K, A, Tr, WF, L, E> =
    DataStream<Then<P, WindowStage<KF, K, A, Tr, WF, L, E>>>;

/// The stream [`KeyedStream::process`] returns.
pub type KeyedProcessOutput<P, KF, K, PF> = DataStream<Then<P, KeyedProcessStage<KF, K, PF>>>;

/// What a finished pipeline run reports besides its output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobSummary {
    /// Elements that arrived after every window they belong to was past its allowed
    /// lateness; each went to the late side output (or only to this count when the
    /// pipeline set none).
    pub late_elements: u64,
    /// Window emissions (firings and final emissions at cleanup).
    pub window_firings: u64,
    /// Elements that fell between windows (sliding windows with `slide > size`) and were
    /// not late: they belong to no window and are dropped (late ones count as
    /// `late_elements`).
    pub window_gap_dropped: u64,
    /// Elements rejected because a window they belong to has bounds outside `i64`
    /// milliseconds; each went to the window's rejected-element output
    /// ([`WindowedStream::side_output_rejected`]) or, without one, only to this count and a
    /// `tracing` warning. The pipeline goes on with the next element.
    pub window_bounds_rejected: u64,
}

/// A stream of `P::Out` records. Each method adds one operator; a
/// terminal operation runs the pipeline.
#[must_use = "a stream does nothing until a terminal operation (sink, print, collect_vec) runs it"]
pub struct DataStream<P> {
    plan: P,
    source_id: std::rc::Rc<str>,
    position: u32,
}

/// A stream partitioned by key: stateful operators see one key at a time.
#[must_use = "a keyed stream does nothing until a terminal operation runs it"]
pub struct KeyedStream<P, KF, K> {
    stream: DataStream<P>,
    key_fn: KF,
    _key: PhantomData<fn() -> K>,
}

/// A keyed stream cut into windows, before its window function.
#[must_use = "a windowed stream does nothing until a window function and a terminal operation run it"]
pub struct WindowedStream<P, KF, K, A, Tr, L, E = NoRejectedOutput> {
    keyed: KeyedStream<P, KF, K>,
    assigner: A,
    trigger: Tr,
    lateness: i64,
    late: L,
    rejected: E,
}

/// The late output of a window without [`WindowedStream::side_output_late_data`]: late
/// elements are only counted in [`JobSummary::late_elements`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CountLateOnly;

impl<T> Sink<T> for CountLateOnly {
    fn invoke(&mut self, _value: T) -> Result<(), BoxError> {
        Ok(())
    }
}

macro_rules! stage {
    ($(#[$doc:meta])* $name:ident<$($g:ident),*> { $($field:ident: $ty:ty),* }) => {
        $(#[$doc])*
        pub struct $name<$($g),*> {
            id: OperatorId,
            $($field: $ty,)*
        }

        impl<$($g),*> Clone for $name<$($g),*>
        where
            $($ty: Clone,)*
        {
            fn clone(&self) -> Self {
                $name {
                    id: self.id.clone(),
                    $($field: self.$field.clone(),)*
                }
            }
        }
    };
}

stage!(
    /// The stage of [`DataStream::map`].
    MapStage<F, U> { f: F, _u: PhantomData<fn() -> U> }
);
stage!(
    /// The stage of [`DataStream::try_map`].
    TryMapStage<F, U, E> { f: F, _u: PhantomData<fn() -> (U, E)> }
);
stage!(
    /// The stage of [`DataStream::filter`].
    FilterStage<F> { f: F }
);
stage!(
    /// The stage of [`DataStream::flat_map`].
    FlatMapStage<F, I> { f: F, _i: PhantomData<fn() -> I> }
);
stage!(
    /// The stage of [`DataStream::assign_timestamps_and_watermarks`].
    WatermarkStage<TA, G> { assigner: TA, generator: G }
);
stage!(
    /// The stage of [`KeyedStream::reduce`].
    KeyedReduceStage<KF, K, F> { key_fn: KF, f: F, _k: PhantomData<fn() -> K> }
);
stage!(
    /// The stage of [`KeyedStream::sum`].
    KeyedSumStage<KF, K> { key_fn: KF, _k: PhantomData<fn() -> K> }
);
stage!(
    /// The stage of [`KeyedStream::sum_by`].
    KeyedSumByStage<KF, K, F, V> { key_fn: KF, f: F, _k: PhantomData<fn() -> (K, V)> }
);
stage!(
    /// The stage of [`KeyedStream::process`].
    KeyedProcessStage<KF, K, PF> { key_fn: KF, function: PF, _k: PhantomData<fn() -> K> }
);
stage!(
    /// The stage of a window function on a [`WindowedStream`].
    WindowStage<KF, K, A, Tr, WF, L, E> {
        key_fn: KF, assigner: A, trigger: Tr, lateness: i64, function: WF, late: L,
        rejected: E, _k: PhantomData<fn() -> K>
    }
);

impl<R, T, U, F: FnMut(T) -> U> Stage<T, R> for MapStage<F, U> {
    type Out = U;
    type Op<N: Operator<U>> = Map<F, U, N>;
    fn build<N: Operator<U>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(Map::new(self.id, self.f, next))
    }
}

impl<R, T, U, E: Into<BoxError>, F: FnMut(T) -> Result<U, E>> Stage<T, R> for TryMapStage<F, U, E> {
    type Out = U;
    type Op<N: Operator<U>> = TryMap<F, U, E, N>;
    fn build<N: Operator<U>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(TryMap::new(self.id, self.f, next))
    }
}

impl<R, T, F: FnMut(&T) -> bool> Stage<T, R> for FilterStage<F> {
    type Out = T;
    type Op<N: Operator<T>> = Filter<F, N>;
    fn build<N: Operator<T>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(Filter::new(self.id, self.f, next))
    }
}

impl<R, T, I: IntoIterator, F: FnMut(T) -> I> Stage<T, R> for FlatMapStage<F, I> {
    type Out = I::Item;
    type Op<N: Operator<I::Item>> = FlatMap<F, I, N>;
    fn build<N: Operator<I::Item>>(self, _rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        Ok(FlatMap::new(self.id, self.f, next))
    }
}

impl<R, T, TA, G> Stage<T, R> for WatermarkStage<TA, G>
where
    R: WatermarkStore,
    TA: TimestampAssigner<T>,
    G: WatermarkGenerator<T> + Clone,
{
    type Out = T;
    type Op<N: Operator<T>> = AssignWatermarks<TA, G, N>;
    fn build<N: Operator<T>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.watermark_state(&self.id);
        Ok(AssignWatermarks::new(
            self.id,
            self.assigner,
            self.generator,
            state,
            rt.window_counters(),
            next,
        ))
    }
}

impl<R, T, K, KF, F> Stage<T, R> for KeyedReduceStage<KF, K, F>
where
    R: StoreFactory<KeyedTable<K, Option<T>>>,
    T: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    F: FnMut(T, T) -> T,
{
    type Out = T;
    type Op<N: Operator<T>> = KeyedReduce<KF, K, T, F, N>;
    fn build<N: Operator<T>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, KeyedTable::default())?;
        Ok(KeyedReduce::new(self.id, self.key_fn, self.f, state, next))
    }
}

impl<R, T, K, KF> Stage<T, R> for KeyedSumStage<KF, K>
where
    R: StoreFactory<KeyedTable<K, T>>,
    T: Numeric,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
{
    type Out = (K, T);
    type Op<N: Operator<(K, T)>> = KeyedSum<KF, K, T, N>;
    fn build<N: Operator<(K, T)>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, KeyedTable::default())?;
        Ok(KeyedSum::new(self.id, self.key_fn, state, next))
    }
}

impl<R, T, K, KF, F, V> Stage<T, R> for KeyedSumByStage<KF, K, F, V>
where
    R: StoreFactory<KeyedTable<K, V>>,
    V: Numeric,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    F: FnMut(&T) -> V,
{
    type Out = (K, V);
    type Op<N: Operator<(K, V)>> = KeyedSumBy<KF, K, F, V, N>;
    fn build<N: Operator<(K, V)>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, KeyedTable::default())?;
        Ok(KeyedSumBy::new(self.id, self.key_fn, self.f, state, next))
    }
}

impl<R, T, K, KF, PF> Stage<T, R> for KeyedProcessStage<KF, K, PF>
where
    R: StoreFactory<ProcessState<K>>,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    PF: KeyedProcessFunction<K, T>,
{
    type Out = PF::Out;
    type Op<N: Operator<PF::Out>> = KeyedProcess<KF, K, T, PF, N>;
    fn build<N: Operator<PF::Out>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(&self.id, ProcessState::new(&self.id))?;
        Ok(KeyedProcess::new(
            self.id,
            self.key_fn,
            self.function,
            state,
            next,
        ))
    }
}

impl<R, T, K, KF, A, Tr, MF, L, E> Stage<T, R> for WindowStage<KF, K, A, Tr, MF, L, E>
where
    R: StoreFactory<WindowState<K, <MF::Function as WindowFunction<K, T>>::Acc, Tr>>,
    T: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&T) -> K,
    A: WindowAssigner,
    Tr: Trigger<T>,
    MF: MakeWindowFunction<K, T>,
    L: Sink<T>,
    E: BuildRejectedOutput<T, R>,
    R: SideOutputFactory<T, L>,
{
    type Out = <MF::Function as WindowFunction<K, T>>::Out;
    type Op<N: Operator<Self::Out>> =
        WindowOperator<KF, K, T, A, Tr, MF::Function, SideOutput<T, L>, E::Output, N>;
    fn build<N: Operator<Self::Out>>(self, rt: &R, next: N) -> Result<Self::Op<N>, Error> {
        let state = rt.store(
            &self.id,
            WindowState::<K, <MF::Function as WindowFunction<K, T>>::Acc, Tr>::default(),
        )?;
        Ok(WindowOperator::new(
            self.id,
            self.key_fn,
            self.assigner,
            self.trigger,
            self.lateness,
            self.function.make(),
            rt.side_output(self.late),
            self.rejected.build(rt),
            state,
            rt.counters(),
            next,
        ))
    }
}

impl<P: Plan> DataStream<P> {
    pub(crate) fn new(plan: P, source_id: String) -> Self {
        DataStream {
            plan,
            source_id: source_id.into(),
            position: 0,
        }
    }

    fn next_id(&self, kind: &str) -> OperatorId {
        OperatorId::new(&self.source_id, self.position + 1, kind)
    }

    fn then<S: Stage<P::Out>>(self, stage: S) -> DataStream<Then<P, S>> {
        DataStream {
            plan: Then {
                plan: self.plan,
                stage,
            },
            source_id: self.source_id,
            position: self.position + 1,
        }
    }

    /// The id the next operator added to this stream gets (for logs and tests).
    pub fn next_operator_id(&self, kind: &str) -> String {
        self.next_id(kind).to_string()
    }

    /// Transforms every element with `f`.
    pub fn map<U, F: FnMut(P::Out) -> U>(self, f: F) -> DataStream<Then<P, MapStage<F, U>>> {
        let id = self.next_id("map");
        self.then(MapStage {
            id,
            f,
            _u: PhantomData,
        })
    }

    /// Transforms every element with a fallible `f`.
    ///
    /// The first `Err` stops the pipeline: the terminal operation returns
    /// [`Error::UserFunction`] naming this operator.
    pub fn try_map<U, E, F>(self, f: F) -> DataStream<Then<P, TryMapStage<F, U, E>>>
    where
        E: Into<BoxError>,
        F: FnMut(P::Out) -> Result<U, E>,
    {
        let id = self.next_id("try_map");
        self.then(TryMapStage {
            id,
            f,
            _u: PhantomData,
        })
    }

    /// Keeps the elements for which `f` returns `true`.
    pub fn filter<F: FnMut(&P::Out) -> bool>(self, f: F) -> DataStream<Then<P, FilterStage<F>>> {
        let id = self.next_id("filter");
        self.then(FilterStage { id, f })
    }

    /// Replaces every element with the items `f` returns (any `IntoIterator`: a `Vec`, an
    /// array, an `Option`, an iterator), each with the element's timestamp.
    pub fn flat_map<I: IntoIterator, F: FnMut(P::Out) -> I>(
        self,
        f: F,
    ) -> DataStream<Then<P, FlatMapStage<F, I>>> {
        let id = self.next_id("flat_map");
        self.then(FlatMapStage {
            id,
            f,
            _i: PhantomData,
        })
    }

    /// Lets `generator` own the watermark from here on, keeping record timestamps.
    ///
    /// Per element: `on_event`, then `on_periodic_emit`, then the element goes on, then the
    /// watermark if it rose (so an element is judged against the watermark before it). An
    /// element a window rejects (window bounds outside `i64`) leaves the generator and the
    /// watermark as they were before it; the generator is `Clone` for that.
    pub fn assign_timestamps_and_watermarks<G: WatermarkGenerator<P::Out> + Clone>(
        self,
        generator: G,
    ) -> DataStream<Then<P, WatermarkStage<RecordTimestamp, G>>> {
        self.assign_timestamps_and_watermarks_with(RecordTimestamp, generator)
    }

    /// Sets each element's event time with `assigner` (e.g. `|f: &Flight, _| f.departure_ms`)
    /// and lets `generator` own the watermark from here on.
    pub fn assign_timestamps_and_watermarks_with<TA, G>(
        self,
        assigner: TA,
        generator: G,
    ) -> DataStream<Then<P, WatermarkStage<TA, G>>>
    where
        TA: TimestampAssigner<P::Out>,
        G: WatermarkGenerator<P::Out> + Clone,
    {
        let id = self.next_id("watermarks");
        self.then(WatermarkStage {
            id,
            assigner,
            generator,
        })
    }

    /// Partitions the stream by the key `key_fn` extracts.
    pub fn key_by<K, KF>(self, key_fn: KF) -> KeyedStream<P, KF, K>
    where
        K: Hash + Eq + Clone + 'static,
        KF: FnMut(&P::Out) -> K,
    {
        let mut stream = self;
        stream.position += 1;
        KeyedStream {
            stream,
            key_fn,
            _key: PhantomData,
        }
    }

    /// Runs the pipeline into `sink`: `open`, `invoke` per record, `close`.
    ///
    /// What "runs" means depends on the engine of the pipeline's source (see [`Execute`]):
    /// the memory engine runs it to the end of its input now and returns a [`JobSummary`];
    /// a Redis pipeline ([`RedisEnv::from_mq_topic`](crate::redis::RedisEnv::from_mq_topic))
    /// is registered with its environment and starts with
    /// [`RedisEnv::execute_async`](crate::redis::RedisEnv::execute_async).
    ///
    /// A closure works as a sink, but its argument type is not inferred through the
    /// [`Sink`] trait: annotate it (`|x: u64| …`) or use [`for_each`](Self::for_each).
    ///
    /// # Errors
    /// Memory engine: the first error of the source, an operator (user function error or
    /// panic, naming the operator) or the sink. The sink and the source are closed in every
    /// case. Redis engine: see [`RedisEnv`](crate::redis::RedisEnv)'s registration rules.
    pub fn sink<S, O>(self, sink: S) -> O
    where
        P::Root: Execute<P, S, Output = O>,
    {
        let id = self.next_id("sink");
        <P::Root as Execute<P, S>>::execute(self.plan, sink, id)
    }

    /// Runs the pipeline, calling `f` for every record (like [`sink`](Self::sink) with a
    /// closure, but the closure's argument type is inferred).
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn for_each<F: FnMut(P::Out)>(self, f: F) -> <P::Root as Execute<P, F>>::Output
    where
        P::Root: Execute<P, F>,
    {
        self.sink(f)
    }

    /// Runs the pipeline and logs every record through `tracing` at INFO (target
    /// `streaming::print`), as `{record:?}`.
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn print(self) -> <P::Root as Execute<P, PrintSink>>::Output
    where
        P::Out: Debug,
        P::Root: Execute<P, PrintSink>,
    {
        self.sink(PrintSink { prefix: None })
    }

    /// Like [`print`](Self::print), each line as `{prefix}> {record:?}`.
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn print_with_prefix(self, prefix: &str) -> <P::Root as Execute<P, PrintSink>>::Output
    where
        P::Out: Debug,
        P::Root: Execute<P, PrintSink>,
    {
        self.sink(PrintSink {
            prefix: Some(prefix.into()),
        })
    }

    /// Runs the pipeline and returns its output in order (memory engine only).
    ///
    /// # Errors
    /// As [`sink`](Self::sink).
    pub fn collect_vec(self) -> Result<Vec<P::Out>, Error>
    where
        P::Root: MemoryRoot<Item = P::Head>,
        P: RunMemory<<<P as Plan>::Root as MemoryRoot>::Runner>,
    {
        let mut out = Vec::new();
        let id = self.next_id("sink");
        self.plan.run_memory(SinkOp::new(id, |v| out.push(v)))?;
        Ok(out)
    }
}

/// The sink of [`DataStream::print`]: logs `{record:?}` (or `{prefix}> {record:?}`) at INFO,
/// target `streaming::print`.
#[derive(Clone, Debug)]
pub struct PrintSink {
    prefix: Option<Arc<str>>,
}

impl<T: Debug> Sink<T> for PrintSink {
    fn invoke(&mut self, v: T) -> Result<(), BoxError> {
        match &self.prefix {
            None => tracing::info!(target: "streaming::print", "{v:?}"),
            Some(prefix) => tracing::info!(target: "streaming::print", "{prefix}> {v:?}"),
        }
        Ok(())
    }
}

/// How a terminal operation runs a pipeline: implemented by each engine's roots (sources).
///
/// Memory roots ([`MemoryEnv`](crate::MemoryEnv)'s sources) run the pipeline at once and
/// return `Result<JobSummary, Error>`; the Redis root registers the pipeline with its
/// [`RedisEnv`](crate::redis::RedisEnv) and returns `Result<(), Error>`.
#[diagnostic::on_unimplemented(
    message = "this pipeline cannot run on the engine of its source `{Self}` with this sink",
    label = "the pipeline or its sink does not fit the engine",
    note = "memory engine: the sink must implement `Sink` of the stream's element type",
    note = "Redis engine: user functions and the sink must be `Clone + Send + 'static` (one copy runs per partition); keyed state keys and values must be serde `Serialize + DeserializeOwned`; window keys, accumulators and custom triggers too"
)]
pub trait Execute<P, S> {
    /// What the terminal operation returns.
    type Output;

    /// Runs (or registers) `plan` with `sink` as its end; `sink_id` is the sink's operator id.
    fn execute(plan: P, sink: S, sink_id: OperatorId) -> Self::Output;
}

/// A root of the memory engine: it drives a built chain to the end of its input.
#[diagnostic::on_unimplemented(
    message = "`collect_vec` and iteration run on the memory engine only, and this pipeline's source is `{Self}`",
    label = "not a memory-engine source",
    note = "on the Redis engine end the pipeline with a sink, e.g. `.sink(streaming::redis::CollectSink::new())`, then start it with `RedisEnv::execute_async`"
)]
pub trait MemoryRoot {
    /// The element type the root feeds into the chain.
    type Item;

    /// How the root runs a plan: [`SingleChain`] (one chain) or [`PerPartition`].
    #[doc(hidden)]
    type Runner;

    /// The runtime stages are built with (checkpoint coordinator, counters).
    #[doc(hidden)]
    fn runtime(&self) -> Runtime;

    /// Opens the chain, pushes every record, the end-of-input watermark and `finish`
    /// through it, and closes it.
    ///
    /// # Errors
    /// The first error of the source or the chain.
    #[doc(hidden)]
    fn drive<O: Operator<Self::Item>>(self, op: O) -> Result<(), Error>;
}

impl<M, P, S> Execute<P, S> for M
where
    M: MemoryRoot,
    P: Plan<Root = M, Head = M::Item> + RunMemory<M::Runner>,
    S: Sink<P::Out>,
{
    type Output = Result<JobSummary, Error>;

    fn execute(plan: P, sink: S, sink_id: OperatorId) -> Result<JobSummary, Error> {
        plan.run_memory(SinkOp::new(sink_id, sink))
    }
}

/// [`MemoryRoot::Runner`] of roots that drive one chain (every memory source but the
/// partitioned one).
#[doc(hidden)]
#[derive(Debug)]
pub enum SingleChain {}

/// [`MemoryRoot::Runner`] of
/// [`MemoryEnv::from_collection_partitioned`](crate::MemoryEnv::from_collection_partitioned):
/// one chain per partition, built from a clone of the plan.
#[doc(hidden)]
#[derive(Debug)]
pub enum PerPartition {}

/// How the memory engine runs a plan whose root has runner `R` (see
/// [`MemoryRoot::Runner`]).
#[diagnostic::on_unimplemented(
    message = "this pipeline cannot run on the memory engine with its source",
    label = "cannot run this pipeline",
    note = "a partitioned source (`from_collection_partitioned`) builds one copy of the pipeline per partition: every function, window function and late-data sink of the pipeline must be `Clone` (capture references or `Rc`s, not `&mut`)"
)]
#[doc(hidden)]
pub trait RunMemory<R>: Plan {
    /// Builds the chain(s) in front of `op` and runs them to the end of the input.
    ///
    /// # Errors
    /// The first error of the source or a chain.
    fn run_memory<O: Operator<Self::Out>>(self, op: O) -> Result<JobSummary, Error>;
}

impl<P> RunMemory<SingleChain> for P
where
    P: Plan,
    P::Root: MemoryRoot<Item = P::Head>,
{
    fn run_memory<O: Operator<P::Out>>(self, op: O) -> Result<JobSummary, Error> {
        let rt = self.root().runtime();
        let (root, chain) = self.build(&rt, op)?;
        root.drive(chain)?;
        Ok(rt.summary())
    }
}

/// Runs the pipeline, then yields its records followed by the error that stopped it, if
/// any. The output is buffered: for large outputs prefer
/// [`DataStream::sink`]. Memory engine only.
impl<P: Plan> IntoIterator for DataStream<P>
where
    P::Root: MemoryRoot<Item = P::Head>,
    P: RunMemory<<<P as Plan>::Root as MemoryRoot>::Runner>,
{
    type Item = Result<P::Out, Error>;
    type IntoIter = std::vec::IntoIter<Result<P::Out, Error>>;

    fn into_iter(self) -> Self::IntoIter {
        let mut out = Vec::new();
        let id = self.next_id("sink");
        if let Err(e) = self.plan.run_memory(SinkOp::new(id, |v| out.push(Ok(v)))) {
            out.push(Err(e));
        }
        out.into_iter()
    }
}

impl<P, KF, K> KeyedStream<P, KF, K>
where
    P: Plan,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
{
    fn keyed_id(&self, kind: &str) -> OperatorId {
        self.stream.next_id(kind)
    }

    /// Transforms every element (Flink `KeyedStream.map`: the result is not keyed).
    pub fn map<U, F: FnMut(P::Out) -> U>(self, f: F) -> DataStream<Then<P, MapStage<F, U>>> {
        self.stream.map(f)
    }

    /// Rolling reduce per key: emits the reduced value after every element.
    pub fn reduce<F>(self, f: F) -> DataStream<Then<P, KeyedReduceStage<KF, K, F>>>
    where
        P::Out: Clone + 'static,
        F: FnMut(P::Out, P::Out) -> P::Out,
    {
        let id = self.keyed_id("reduce");
        self.stream.then(KeyedReduceStage {
            id,
            key_fn: self.key_fn,
            f,
            _k: PhantomData,
        })
    }

    /// Rolling sum per key: emits `(key, sum so far)` after every element. Only numeric
    /// element types have it (a compile error otherwise: see [`Numeric`]).
    pub fn sum(self) -> DataStream<Then<P, KeyedSumStage<KF, K>>>
    where
        P::Out: Numeric,
    {
        let id = self.keyed_id("sum");
        self.stream.then(KeyedSumStage {
            id,
            key_fn: self.key_fn,
            _k: PhantomData,
        })
    }

    /// Rolling sum per key of the number `f` extracts from each element (e.g.
    /// `|o: &Order| o.amount`): emits `(key, sum so far)` after every element. Only numeric
    /// values have it (see [`Numeric`]); integer overflow panics in debug builds like `+`
    /// (the record fails).
    pub fn sum_by<V, F>(self, f: F) -> DataStream<Then<P, KeyedSumByStage<KF, K, F, V>>>
    where
        V: Numeric,
        F: FnMut(&P::Out) -> V,
    {
        let id = self.keyed_id("sum-by");
        self.stream.then(KeyedSumByStage {
            id,
            key_fn: self.key_fn,
            f,
            _k: PhantomData,
        })
    }

    /// Rolling minimum per key by `f`: emits, after every element, the element with the
    /// smallest `f(element)` so far (on ties the one that arrived first; Flink `minBy`).
    /// Comparison is `PartialOrd`: a `NaN` that arrives first stays the result (nothing
    /// compares past it) and a later one is never chosen, so filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn min_by<V, F>(
        self,
        f: F,
    ) -> DataStream<
        Then<
            P,
            KeyedReduceStage<
                KF,
                K,
                impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, V, F>,
            >,
        >,
    >
    where
        P::Out: Clone + 'static,
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        let mut f = f;
        let id = self.keyed_id("min-by");
        self.stream.then(KeyedReduceStage {
            id,
            key_fn: self.key_fn,
            f: move |a, b| if f(&b) < f(&a) { b } else { a },
            _k: PhantomData,
        })
    }

    /// Rolling maximum per key by `f`: emits, after every element, the element with the
    /// largest `f(element)` so far (on ties the one that arrived first; Flink `maxBy`).
    /// Comparison is `PartialOrd`: a `NaN` that arrives first stays the result (nothing
    /// compares past it) and a later one is never chosen, so filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn max_by<V, F>(
        self,
        f: F,
    ) -> DataStream<
        Then<
            P,
            KeyedReduceStage<
                KF,
                K,
                impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, V, F>,
            >,
        >,
    >
    where
        P::Out: Clone + 'static,
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        let mut f = f;
        let id = self.keyed_id("max-by");
        self.stream.then(KeyedReduceStage {
            id,
            key_fn: self.key_fn,
            f: move |a, b| if f(&b) > f(&a) { b } else { a },
            _k: PhantomData,
        })
    }

    /// Runs `f(element, ctx, out)` per element with the key's context: key, timestamp,
    /// watermark, processing time, timers and keyed state. For `on_timer`
    /// callbacks use [`process_function`](Self::process_function).
    pub fn process<O, F>(self, f: F) -> KeyedProcessOutput<P, KF, K, ProcessFn<F, O>>
    where
        F: FnMut(P::Out, &mut KeyedContext<'_, K>, &mut Collector<'_, O>) -> Result<(), BoxError>,
    {
        self.process_function(ProcessFn::new(f))
    }

    /// Runs a [`KeyedProcessFunction`], with timer callbacks.
    pub fn process_function<PF>(self, function: PF) -> KeyedProcessOutput<P, KF, K, PF>
    where
        PF: KeyedProcessFunction<K, P::Out>,
    {
        let id = self.keyed_id("process");
        self.stream.then(KeyedProcessStage {
            id,
            key_fn: self.key_fn,
            function,
            _k: PhantomData,
        })
    }

    /// Cuts each key's elements into the windows of `assigner`, with its default trigger,
    /// no allowed lateness and no late side output.
    pub fn window<A: WindowAssigner>(
        self,
        assigner: A,
    ) -> WindowedStream<P, KF, K, A, A::DefaultTrigger, CountLateOnly> {
        let trigger = assigner.default_trigger();
        WindowedStream {
            keyed: self,
            assigner,
            trigger,
            lateness: 0,
            late: CountLateOnly,
            rejected: NoRejectedOutput,
        }
    }
}

/// Configuration, also before a trigger is set (an assigner without a default trigger,
/// [`GlobalWindows`](crate::time::GlobalWindows), needs `.trigger(..)`).
impl<P, KF, K, A, Tr, L, E> WindowedStream<P, KF, K, A, Tr, L, E>
where
    P: Plan,
    A: WindowAssigner,
{
    /// Keeps windows for `lateness` after their end (Flink `allowedLateness`): a late
    /// element within it fires the window again with the updated result. Durations beyond
    /// `i64::MAX` ms saturate (never clean up).
    pub fn allowed_lateness(mut self, lateness: Duration) -> Self {
        self.lateness = i64::try_from(lateness.as_millis()).unwrap_or(i64::MAX);
        self
    }

    /// Replaces the assigner's default trigger.
    pub fn trigger<Tr2: Trigger<P::Out>>(
        self,
        trigger: Tr2,
    ) -> WindowedStream<P, KF, K, A, Tr2, L, E> {
        WindowedStream {
            keyed: self.keyed,
            assigner: self.assigner,
            trigger,
            lateness: self.lateness,
            late: self.late,
            rejected: self.rejected,
        }
    }

    /// Sends late elements (those past every window's allowed lateness) to `sink` — a typed
    /// side output (Flink `sideOutputLateData`). It opens and closes with the pipeline.
    pub fn side_output_late_data<L2: Sink<P::Out>>(
        self,
        sink: L2,
    ) -> WindowedStream<P, KF, K, A, Tr, L2, E> {
        WindowedStream {
            keyed: self.keyed,
            assigner: self.assigner,
            trigger: self.trigger,
            lateness: self.lateness,
            late: sink,
            rejected: self.rejected,
        }
    }

    /// Sends elements whose window bounds do not fit in `i64` milliseconds (a timestamp
    /// near `i64::MIN` or `i64::MAX`) to `sink` as [`RejectedElement`]s — a typed error
    /// side output. Such an element joins no window and the pipeline goes on. Without this
    /// output the memory engine counts it in [`JobSummary::window_bounds_rejected`] and
    /// logs a `tracing` warning; the Redis engine dead-letters the record.
    pub fn side_output_rejected<E2: Sink<RejectedElement<P::Out>>>(
        self,
        sink: E2,
    ) -> WindowedStream<P, KF, K, A, Tr, L, RejectedTo<E2>> {
        WindowedStream {
            keyed: self.keyed,
            assigner: self.assigner,
            trigger: self.trigger,
            lateness: self.lateness,
            late: self.late,
            rejected: RejectedTo(sink),
        }
    }
}

/// Window functions: they need a trigger.
impl<P, KF, K, A, Tr, L, E> WindowedStream<P, KF, K, A, Tr, L, E>
where
    P: Plan,
    P::Out: Clone + 'static,
    K: Hash + Eq + Clone + 'static,
    KF: FnMut(&P::Out) -> K,
    A: WindowAssigner,
    Tr: Trigger<P::Out>,
    L: Sink<P::Out>,
    E: BuildRejectedOutput<P::Out, Runtime>,
{
    fn function<MF: MakeWindowFunction<K, P::Out>>(
        self,
        kind: &str,
        function: MF,
    ) -> WindowOutput<P, KF, K, A, Tr, MF, L, E> {
        let id = self.keyed.keyed_id(kind);
        let KeyedStream { stream, key_fn, .. } = self.keyed;
        stream.then(WindowStage {
            id,
            key_fn,
            assigner: self.assigner,
            trigger: self.trigger,
            lateness: self.lateness,
            function,
            late: self.late,
            rejected: self.rejected,
            _k: PhantomData,
        })
    }

    /// Folds each window's elements pairwise; emits `T` per firing.
    pub fn reduce<F: FnMut(P::Out, P::Out) -> P::Out>(
        self,
        f: F,
    ) -> WindowOutput<P, KF, K, A, Tr, WindowReduce<F>, L, E> {
        self.function("window-reduce", WindowReduce(f))
    }

    /// Aggregates incrementally with `agg`; emits `agg.get_result` per firing.
    #[allow(clippy::type_complexity)]
    pub fn aggregate<AF: AggregateFunction<P::Out>>(
        self,
        agg: AF,
    ) -> WindowOutput<
        P,
        KF,
        K,
        A,
        Tr,
        WindowAggregate<AF, fn(&K, &TimeWindow, AF::Out) -> AF::Out, AF::Out>,
        L,
        E,
    > {
        fn result<K, R>(_: &K, _: &TimeWindow, r: R) -> R {
            r
        }
        self.function(
            "window-aggregate",
            WindowAggregate::new(agg, result as fn(&K, &TimeWindow, AF::Out) -> AF::Out),
        )
    }

    /// Aggregates incrementally with `agg`; emits `with(key, window, result)` per firing
    /// (Flink `aggregate(aggFunction, windowFunction)`).
    #[allow(clippy::type_complexity)]
    pub fn aggregate_with<AF, W, R>(
        self,
        agg: AF,
        with: W,
    ) -> WindowOutput<P, KF, K, A, Tr, WindowAggregate<AF, W, R>, L, E>
    where
        AF: AggregateFunction<P::Out>,
        W: FnMut(&K, &TimeWindow, AF::Out) -> R,
    {
        self.function("window-aggregate", WindowAggregate::new(agg, with))
    }

    /// Calls `f(key, window, elements, out)` per firing with all of the window's elements
    /// in arrival order (Flink `apply`). Keeps every element until the window is cleaned up.
    pub fn apply<R, F>(self, f: F) -> WindowOutput<P, KF, K, A, Tr, WindowApply<F, R>, L, E>
    where
        F: FnMut(&K, &TimeWindow, &[P::Out], &mut Collector<'_, R>) -> Result<(), BoxError>,
    {
        self.function("window-apply", WindowApply { f, _r: PhantomData })
    }

    /// Sums each window; emits `(key, window, sum)` per firing. Only numeric element types
    /// have it (a compile error otherwise: see [`Numeric`]).
    pub fn sum(self) -> WindowOutput<P, KF, K, A, Tr, WindowSum, L, E>
    where
        P::Out: Numeric,
    {
        self.function("window-sum", WindowSum)
    }

    /// Sums the number `f` extracts from each element (e.g. `|o: &Order| o.amount`);
    /// emits `(key, window, sum)` per firing.
    pub fn sum_by<V, F>(self, f: F) -> WindowOutput<P, KF, K, A, Tr, WindowSumBy<F, V>, L, E>
    where
        V: Numeric,
        F: FnMut(&P::Out) -> V,
    {
        self.function("window-sum-by", WindowSumBy { f, _v: PhantomData })
    }

    /// Emits, per firing, the window's element with the smallest `f(element)` (on ties
    /// the one that arrived first; for merged session windows, the one of the earlier
    /// session; Flink `minBy`). Comparison is `PartialOrd`: filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn min_by<V, F>(
        self,
        f: F,
    ) -> WindowOutput<
        P,
        KF,
        K,
        A,
        Tr,
        WindowReduce<
            impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, A, Tr, L, E, V, F>,
        >,
        L,
        E,
    >
    where
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        let mut f = f;
        self.function(
            "window-min-by",
            WindowReduce(move |a, b| if f(&b) < f(&a) { b } else { a }),
        )
    }

    /// Emits, per firing, the window's element with the largest `f(element)` (on ties
    /// the one that arrived first; for merged session windows, the one of the earlier
    /// session; Flink `maxBy`). Comparison is `PartialOrd`: filter `NaN`s out before.
    #[allow(clippy::type_complexity)]
    pub fn max_by<V, F>(
        self,
        f: F,
    ) -> WindowOutput<
        P,
        KF,
        K,
        A,
        Tr,
        WindowReduce<
            impl FnMut(P::Out, P::Out) -> P::Out + Clone + use<P, KF, K, A, Tr, L, E, V, F>,
        >,
        L,
        E,
    >
    where
        V: PartialOrd,
        F: FnMut(&P::Out) -> V + Clone,
    {
        let mut f = f;
        self.function(
            "window-max-by",
            WindowReduce(move |a, b| if f(&b) > f(&a) { b } else { a }),
        )
    }

    /// Counts each window's elements; emits `(key, window, count)` per firing.
    pub fn count(self) -> WindowOutput<P, KF, K, A, Tr, WindowCount, L, E> {
        self.function("window-count", WindowCount)
    }
}

/// The window function of a [`WindowedStream`] as the user gave it, turned into the
/// operator's [`WindowFunction`] when the stage is built. The stage keeps the user's
/// pieces (and is `Clone` when they are), so a pipeline can be built once per partition
/// ([`MemoryEnv::from_collection_partitioned`](crate::MemoryEnv::from_collection_partitioned)).
pub trait MakeWindowFunction<K, T> {
    /// The function the window operator runs.
    type Function: WindowFunction<K, T>;

    /// Makes it.
    fn make(self) -> Self::Function;
}

/// The window function of [`WindowedStream::reduce`].
#[derive(Clone, Copy, Debug)]
pub struct WindowReduce<F>(F);

impl<K, T: Clone + 'static, F: FnMut(T, T) -> T> MakeWindowFunction<K, T> for WindowReduce<F> {
    type Function = ReduceWindow<F>;
    fn make(self) -> ReduceWindow<F> {
        ReduceWindow(self.0)
    }
}

/// The window function of [`WindowedStream::aggregate`] and
/// [`WindowedStream::aggregate_with`].
pub struct WindowAggregate<AF, W, R> {
    agg: AF,
    with: W,
    _r: PhantomData<fn() -> R>,
}

impl<AF, W, R> WindowAggregate<AF, W, R> {
    fn new(agg: AF, with: W) -> Self {
        WindowAggregate {
            agg,
            with,
            _r: PhantomData,
        }
    }
}

impl<AF: Clone, W: Clone, R> Clone for WindowAggregate<AF, W, R> {
    fn clone(&self) -> Self {
        WindowAggregate::new(self.agg.clone(), self.with.clone())
    }
}

impl<K, T, AF, W, R> MakeWindowFunction<K, T> for WindowAggregate<AF, W, R>
where
    AF: AggregateFunction<T>,
    W: FnMut(&K, &TimeWindow, AF::Out) -> R,
{
    type Function = AggregateWindow<AF, W, R>;
    fn make(self) -> AggregateWindow<AF, W, R> {
        AggregateWindow::new(self.agg, self.with)
    }
}

/// The window function of [`WindowedStream::apply`].
pub struct WindowApply<F, R> {
    f: F,
    _r: PhantomData<fn() -> R>,
}

impl<F: Clone, R> Clone for WindowApply<F, R> {
    fn clone(&self) -> Self {
        WindowApply {
            f: self.f.clone(),
            _r: PhantomData,
        }
    }
}

impl<K, T: Clone + 'static, F, R> MakeWindowFunction<K, T> for WindowApply<F, R>
where
    F: FnMut(&K, &TimeWindow, &[T], &mut Collector<'_, R>) -> Result<(), BoxError>,
{
    type Function = ApplyWindow<F, R>;
    fn make(self) -> ApplyWindow<F, R> {
        ApplyWindow::new(self.f)
    }
}

/// The window function of [`WindowedStream::sum`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowSum;

impl<K: Clone, T: Numeric> MakeWindowFunction<K, T> for WindowSum {
    type Function = SumWindow;
    fn make(self) -> SumWindow {
        SumWindow
    }
}

/// The window function of [`WindowedStream::sum_by`].
pub struct WindowSumBy<F, V> {
    f: F,
    _v: PhantomData<fn() -> V>,
}

impl<F: Clone, V> Clone for WindowSumBy<F, V> {
    fn clone(&self) -> Self {
        WindowSumBy {
            f: self.f.clone(),
            _v: PhantomData,
        }
    }
}

impl<K: Clone, T, V: Numeric, F: FnMut(&T) -> V> MakeWindowFunction<K, T> for WindowSumBy<F, V> {
    type Function = SumByWindow<F, V>;
    fn make(self) -> SumByWindow<F, V> {
        SumByWindow::new(self.f)
    }
}

/// The window function of [`WindowedStream::count`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowCount;

impl<K: Clone, T> MakeWindowFunction<K, T> for WindowCount {
    type Function = CountWindow;
    fn make(self) -> CountWindow {
        CountWindow
    }
}
