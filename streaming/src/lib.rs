//! # streaming
//!
//! Stream processing with Flink's event-time semantics. One operator library, two engines:
//! the in-memory engine ([`MemoryEnv`]: bounded input, single thread, deterministic) and a
//! Redis Streams engine ([`redis::RedisEnv`]: partitioned topics, per-partition operator
//! chains, keyed state in Redis committed atomically with each batch).
//!
//! ```
//! use std::time::Duration;
//! use streaming::time::TumblingEventTimeWindows;
//! use streaming::MemoryEnv;
//!
//! let env = MemoryEnv::new();
//! // Lines with their event time (ms).
//! let lines = [("to be", 0), ("or not", 1_000), ("to be", 2_500)];
//! let counts = env
//!     .from_timestamped_collection(lines)
//!     .flat_map(|line| line.split(' '))
//!     .key_by(|word| *word)
//!     .window(TumblingEventTimeWindows::of(Duration::from_secs(2))?)
//!     .count()
//!     .map(|(word, window, n)| (window.start(), word, n))
//!     .collect_vec()?;
//! assert_eq!(
//!     counts,
//!     [(0, "to", 1), (0, "be", 1), (0, "or", 1), (0, "not", 1), (2_000, "to", 1), (2_000, "be", 1)]
//! );
//! # Ok::<(), streaming::Error>(())
//! ```
//!
#![doc = include_str!("../docs/quick-start.md")]
//!
//! # What a user touches
//!
//! - at the crate root: the environments' builder API ([`MemoryEnv`] and its streams
//!   [`DataStream`], [`KeyedStream`], [`WindowedStream`]; [`JobSummary`]), the [`pipeline!`]
//!   macro, [`Error`] with its [`ErrorKind`], and [`OperatorId`], by which errors and state
//!   name operators;
//! - [`api`]: the traits user code implements (sources, sinks, aggregate and keyed process
//!   functions), collectors, timer contexts and keyed state;
//! - [`time`]: windows, assigners, triggers and watermark generators, shared by both engines;
//! - [`fragment`]: pipelines written once as functions (`Input<T>` → `impl Fragment<T>`),
//!   spliced into a pipeline on any engine with [`DataStream::transform`], and of two
//!   inputs (`impl TwoInputFragment<A, B>`) with [`DataStream::transform_with`];
//! - [`testing`]: the test drivers, which run a fragment of one or two inputs record by
//!   record in a unit test;
//! - [`memory`]: the in-memory engine's checkpoints and semantics;
//! - [`redis`]: the Redis engine: [`redis::RedisEnv`] (same builder API; the sink registers
//!   the pipeline, `blocking_start` starts it), its configuration, the job client and
//!   diagnostics, sinks; windows, timers and keyed state kept in Redis per partition;
//! - [`mq`]: the Redis Streams message queue (topics, consumer groups, retry, dead letters)
//!   the Redis engine reads from;
//! - [`guide`]: testing pipelines, a service skeleton, the event-time semantics both
//!   engines follow, how the Redis engine runs a job (metrics, scaling out, exactly-once
//!   outputs), and the admin CLI.
//!
//! # Cargo features
//!
//! - `redis` (default): the Redis engine ([`redis`]) and the message queue ([`mq`]), with
//!   their dependencies `redis` and `tokio`. Without it (`default-features = false`) the
//!   crate is the memory engine, the DSL and everything engine-neutral; [`mq`] then holds
//!   only [`mq::partition_for_key`], and [`Error`] has no [`Error::Redis`] or
//!   [`Error::Connect`] variant (the other variants carry plain types and stay).
//!
//! Every fallible call returns [`Error`], which names the failing operator or setting;
//! [`Error::kind`] says what it is about and [`Error::is_retryable`] whether trying again
//! may succeed.
//!
//! # How the crate is layered
//!
//! Each layer uses only the layers below it, and no two layers use each other, directly
//! or through a third. `builder` and `operators` are internal layers, not modules you can
//! open: the builder is [`DataStream`], [`KeyedStream`] and [`WindowedStream`] at the
//! crate root, and the operators are what their methods build.
//!
//! ```text
//!        memory            redis            engines: they run a plan
//!           \             /     \
//!            \           /       mq         the Redis Streams message queue (a leaf)
//!             builder ---+                  the engine-neutral builder and plan
//!                |
//!            operators                      the fused operators both engines run
//!              /   \
//!            api    |                       user functions, sources, sinks, keyed state
//!              \   /
//!              time                         windows, triggers, watermarks (a leaf)
//! ```
//!
//! `Error` and `OperatorId` sit below everything. An engine gives the operators what
//! differs between engines — the clock, the state stores, the watermark store and how
//! changes are tracked — through the runtime it builds a plan with, so operators are
//! generic code shared by both engines and no layer below the engines names one.
//!
//! # DSL reference
//!
//! [`pipeline!`] takes a pipeline written like the builder chain and checks it at compile
//! time, then expands it to that builder chain — one concrete type of nested generic
//! operators, with no `dyn`, `Box` or per-record allocation by the framework.
//!
//! ```
//! use std::time::Duration;
//! use streaming::time::{AscendingTimestamps, TumblingEventTimeWindows};
//! use streaming::{pipeline, MemoryEnv};
//!
//! let env = MemoryEnv::new();
//! let lines = [("to be or", 0i64), ("not to be", 1_500)];
//! let mut counts = pipeline! {
//!     env.from_collection(lines)
//!         .assign_timestamps_and_watermarks_with(|l: &(&str, i64), _| l.1, AscendingTimestamps)
//!         .flat_map(|l: (&str, i64)| l.0.split(' ').map(|w| (w.to_string(), 1u64)).collect::<Vec<_>>())
//!         .key_by(|p: &(String, u64)| p.0.clone())
//!         .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
//!         .allowed_lateness(Duration::from_secs(5))
//!         .reduce(|a, b| (a.0, a.1 + b.1))
//!         .collect_vec()
//! }?;
//! counts.sort();
//! assert_eq!(counts[0], ("be".to_string(), 1));
//! # Ok::<(), streaming::Error>(())
//! ```
//!
//! **Grammar.** A `pipeline!` body is `let` statements naming streams, then the pipeline
//! as its last expression: `env.source(..)` then operators `.name(args)` and one sink at the
//! end (no trailing `;`). `env` is any expression before the first operator call: a
//! variable, a field path (`self.env`), a call (`MemoryEnv::new()`), or `(any
//! expression)`. The macro's value is what the sink returns: `Result<Vec<T>, Error>` for
//! `collect_vec()`, `Result<JobSummary, Error>` for `sink`/`for_each`/`print`/`print_with_prefix`
//! on the memory engine, `Result<(), Error>` (registered) on the Redis engine.
//!
//! **Several inputs.** `let name = chain;` names a stream — from a source
//! (`env.from_mq_topic(..).map(..)`) or continuing a stream named before (`let keyed =
//! payments.key_by(..);`) — for the operators that take a second stream: `union(other)`,
//! `connect(other)` and `interval_join(other)`, whose argument is a name or a chain on one
//! (`interval_join(payments.key_by(|p: &Payment| p.customer))`), checked like the pipeline
//! (a stream built with the builder before the macro works too, checked by rustc only).
//! The pipeline may also start at a name. Each name is used once (a stream goes into one
//! operator), every name is used, and only the last expression has a sink. Operator ids of
//! a named stream are those of its own source; after `union`, `connect` or a join they
//! continue the pipeline's, as in the builder. Broadcast state is written the same way:
//! `let rules = env.source(..).broadcast(DESCRIPTOR);` then
//! `.key_by(..).connect(rules).process(function)` with a `KeyedBroadcastProcessFunction`.
//!
//! ```
//! use streaming::{pipeline, MemoryEnv};
//!
//! let env = MemoryEnv::new();
//! let paid = pipeline! {
//!     // (customer, amount) paid at its event time (ms)
//!     let payments = env.from_timestamped_collection([(("ada", 30u64), 60_000), (("bob", 5), 900_000)]);
//!     // (order id, customer) placed at its event time
//!     env.from_timestamped_collection([((7u32, "ada"), 0), ((8, "bob"), 0)])
//!         .key_by(|o: &(u32, &str)| o.1)
//!         .interval_join(payments.key_by(|p: &(&str, u64)| p.0))
//!         .between(0, 600_000) // paid within 10 minutes
//!         .process(|o: &(u32, &str), p: &(&str, u64)| (o.0, p.1))
//!         .collect_vec()
//! }?;
//! assert_eq!(paid, [(7, 30)]);
//! # Ok::<(), streaming::Error>(())
//! ```
//!
//! **Stages.** Every operator applies to a stage and produces one: a stream, a keyed
//! stream (after `key_by`), a keyed stream with declared state (after `state(..)`), the
//! output of `process` (which `on_timer` may follow), a windowed stream (after `window`,
//! configured by `trigger`, `allowed_lateness`, `side_output_late_data`, ended by a window
//! function); with a second input: connected streams (after `connect`, ended by `co_map`,
//! `co_flat_map` or keyed by `key_by` with a key function per input), keyed connected
//! streams (ended by `process` with a `KeyedCoProcessFunction`, or cut by `window` into
//! windowed connected streams, ended by `join` or `co_group`), an interval join (after
//! `interval_join`, bounded by `between`, ended by `process`), a broadcast stream (after
//! `broadcast(descriptor)`, the argument of a keyed stream's `connect`) and a keyed stream
//! connected to a broadcast stream (ended by `process` with a
//! `KeyedBroadcastProcessFunction`). The table below lists them;
//! using an operator on another stage is a compile error at the operator that says what is
//! missing (e.g. "add `.key_by(..)` before it").
//!
//! **Compile-time checks**, each reported at the offending token, independent ones together
//! (an unknown operator hides the stage checks after it): unknown
//! operators (with "did you mean"), arity, stage, one source and one sink, operators after
//! the sink, literal source ids outside `[A-Za-z0-9_.-]+`, literal window sizes, slides and
//! gaps under 1 ms and offsets not smaller than the size/slide, `CountTrigger::of(0)` (for
//! constructors written with the crate's names), literal join bounds with `lower > upper`,
//! state declarations (kind, default, duplicate names), and operators no single engine
//! supports together. With a second input: a named stream used twice, never used or
//! with a sink; a second stream at the wrong stage (`interval_join` of a stream not keyed),
//! of another engine, or without the event time the operator needs (`interval_join` of a
//! stream whose timestamps were never chosen, at that stream; `union` and `connect` of a
//! stream with event time and one without), where the macro can see the sources. A second
//! key function of another key type than the first is one error at its result (rustc's);
//! a `KeyedCoProcessFunction` or `KeyedBroadcastProcessFunction` of other input, key or
//! map types is an error at the function. Broadcast state: `broadcast()` without its
//! descriptor (arity), a keyed stream's `connect` of a stream that is not broadcast (at
//! the argument) and a broadcast stream connected to a stream that is not keyed (at
//! `connect`).
//! Type errors (a closure of the wrong element type, `sum` of a
//! non-numeric element, a filter not returning `bool`) are rustc's, at the user's closure or
//! operator. After a macro error the expansion is a placeholder of the pipeline's result
//! type, so one mistake gives one error. A closure of `map`, `try_map`, `filter`,
//! `flat_map` or `key_by` whose annotated argument type is not the element type gives one
//! error, at that type ("expected `&OrderEvent`, found `&Message`"): the macro calls it
//! from a closure of its own that satisfies the operator. Rustc cannot do that for a
//! closure that may return a borrow of its argument (an argument type with a reference
//! inside, e.g. `|l: &str| l.split(' ')`), nor for the other operators' functions: there,
//! after a type error rustc may add a second, follow-on error (E0599 "trait bounds were
//! not satisfied") at a later operator or the sink — fix the first one. A sink of another
//! element type is one error at the sink naming the element type arriving.
//!
//! **Fallible configuration.** One rule for every constructor of the crate: a constructor
//! that can reject its arguments (a window size of 0, a sink name with braces, a
//! connection string that does not parse) returns `Result<_, Error>` with
//! [`Error::InvalidConfig`] naming the field; it never panics. Inside `pipeline!` such
//! values need no `?`: the window assigner of `window`, the trigger of `trigger`, the
//! watermark generator of `assign_timestamps_and_watermarks*` and the sink of `sink`,
//! `side_output_late_data` and `side_output_rejected` are evaluated before the pipeline
//! runs and told apart by their type, not their name: a `Result`
//! (`TumblingEventTimeWindows::of`, `CountTrigger::of`, `BoundedOutOfOrderness::new`,
//! `RedisListSink::new`, … or a function of your own) is unwrapped and its error returned
//! as the pipeline's result; any other value is used as it is. The builder API takes
//! values, so there a fallible constructor gets its `?`. So a renamed constructor
//! (`use streaming::time::TumblingEventTimeWindows as Tumbling;`), a type alias, or a
//! trigger wrapping a fallible one (`PurgingTrigger::of(CountTrigger::of(2))`: the one
//! argument of a trigger call is classified too) works like the crate's names. A trailing
//! `?` on any argument does the same for that argument. The compile-time checks of literal
//! configuration know the crate's constructors by the name written in the call: a renamed
//! one is not checked at compile time, and a bad literal there is its
//! [`Error::InvalidConfig`] when the pipeline is built.
//!
//! **State.** `state(name: ValueState<T> = default, name: ListState<T>, name: MapState<K, V>,
//! name: SetState<T>)` right before `process` declares that operator's keyed state. The
//! descriptors are handed to the operator, which gives each state its slot when the
//! pipeline is built; in the closures of `process` and `on_timer` (written as closures
//! there) each name is bound to its declaration, used as `ctx.state(name)?`, so a record's
//! state access is one lookup of its key. Names are unique per operator.
//!
//! **Stable ids.** Every operator that takes a position gets the id
//! `{source_id}/{position}:{kind}` (see [`OperatorId`]): positions count operators
//! after the source from 1 (`key_by`, `union` and `connect` take a position but have no
//! id, `interval_join` takes two — the builder connects both inputs and keys them; `window`,
//! `trigger`, `allowed_lateness`, `side_output_late_data`, `state`, `on_timer`, `between`,
//! `broadcast` and the join's late side outputs take none), the kind
//! is the table's id kind, and the source id is the literal of `add_source_with_id`,
//! `from_collection_with_id` or `from_mq_topic_with_id`, `{topic}.{group}` for
//! `from_mq_topic` (or `source-{n}`, numbered per environment at run time). Keyed state is stored under the
//! operator id and the state name, e.g. (`flights/4:process`, `count`). An id depends only
//! on the text up to its operator, so changing a later operator keeps it, and a restart
//! with the same pipeline text finds its state. The ids are exactly the builder's for the
//! same chain.
//!
//! **Engines.** Each operator lists the engines that support it (the table's `engines`
//! column); a pipeline compiles on an environment when every operator it uses is supported
//! there, and the same pipeline text compiles against [`MemoryEnv`] and
//! [`redis::RedisEnv`] when it uses only operators both support. The source picks the
//! engine: bounded sources (`from_elements`, `from_collection*`,
//! `from_timestamped_collection*`, `add_source*`, `add_timestamped_source*`) are the
//! memory engine's, `from_mq_topic`, `from_mq_topic_with_id` and
//! `from_mq_topic_with_options` the Redis engine's (on another environment they are an
//! error at the environment; a bounded source on a `RedisEnv` is rustc's "no method named
//! `from_collection` found for struct `RedisEnv`"). After a Redis source, an operator the
//! Redis engine does not support — `collect_vec` — is a compile error at the operator:
//! "`collect_vec` is not supported on the Redis engine yet"; windows and all windowed-stream
//! operators run on both engines. On the Redis engine the macro's value is what the
//! sink returns there, `Result<(), Error>`: the pipeline is registered, and
//! [`redis::RedisEnv::blocking_start`] starts it. Its `state(..)` declarations are
//! `persistent` descriptors (values stored as JSON, so state types must be
//! `Serialize + DeserializeOwned`); on the memory engine they are `new` descriptors. Either
//! way the closures capture nothing for them, so they stay `'static` where the Redis
//! engine needs it. The default source id of `from_mq_topic` is
//! `{topic}.{group}` (characters outside `[A-Za-z0-9_.-]` become `_`), the builder's.
//!
//! **Debugging.** `STREAMING_PIPELINE_DEBUG=1 cargo build` prints every expansion with its
//! stages and operator ids on stderr (changing the variable rebuilds the crates that use
//! `pipeline!`).
//!
//! # Operators
#![doc = streaming_macros::__dsl_reference!()]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Declares items that exist only with feature `redis` (tokio's `cfg_rt!` idiom): each gets
/// `#[cfg(feature = "redis")]` and, in the docs, a note saying it needs the feature.
macro_rules! cfg_redis {
    ($($item:item)*) => {
        $(
            #[cfg(feature = "redis")]
            #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
            $item
        )*
    };
}

// The builder, the memory engine and the pipeline macro.
pub use dataflow::{
    BoundedIntervalJoin, BroadcastConnectedStream, BroadcastStream, CoInput, ConnectedStreams,
    DataStream, IntervalJoin, KeyedCoProcessFunction, KeyedConnectedStreams, KeyedStream,
    WindowedStream,
};
pub use memory::{JobSummary, MemoryEnv};
pub use streaming_macros::pipeline;

// Errors and the ids they name operators by.
pub use error::{BoxError, Error, ErrorKind};
pub use operator_id::OperatorId;

// What user code implements and uses: functions, sources, sinks, keyed state.
pub mod api;
// Windows, assigners, triggers and watermark generators.
pub mod time;
// Pipelines written as functions, and the test driver that runs them.
pub mod fragment;
pub mod testing;
// The in-memory engine.
pub mod memory;
// The Redis engine (feature `redis`).
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
// The Redis Streams message queue the Redis engine reads from; without feature `redis`,
// only its partition function.
pub mod mq;

/// The guide: testing pipelines, a service skeleton, the event-time semantics both engines
/// follow (and where they differ from Flink), pipelines with several inputs (union,
/// connect, joins), how the Redis engine runs a job and the
/// metrics it reports, scaling out, exactly-once outputs, the admin CLI, and security (TLS,
/// least-privilege Redis users, secrets). The crate's
/// front page has the quick start.
///
#[doc = include_str!("../docs/testing.md")]
#[doc = ""]
#[doc = include_str!("../docs/service.md")]
#[doc = ""]
#[doc = include_str!("../docs/semantics.md")]
#[doc = ""]
#[doc = include_str!("../docs/several-inputs.md")]
#[doc = ""]
#[doc = include_str!("../docs/redis-engine.md")]
#[doc = ""]
#[doc = include_str!("../docs/metrics.md")]
#[doc = ""]
#[doc = include_str!("../docs/scaling-out.md")]
#[doc = ""]
#[doc = include_str!("../docs/exactly-once.md")]
#[doc = ""]
#[doc = include_str!("../docs/admin-cli.md")]
#[doc = ""]
#[doc = include_str!("../docs/security.md")]
pub mod guide {}

mod dataflow;
mod dsl;
mod error;
mod operator_id;
mod ops;
// The options tables' macro (feature `redis`: only the queue and the Redis engine have
// options structs).
#[cfg(feature = "redis")]
mod options;
mod sealed;

/// Not public API: what the `pipeline!` expansion calls and the types the builder's
/// signatures name (plan, stages, engine roots and runtimes, operators). Anything here
/// may change in any release.
#[doc(hidden)]
pub mod __private {
    pub use crate::dsl::*;

    pub use crate::dataflow::{
        AggregateSpec, ApplySpec, BuildPlan, BuildRejectedOutput, BuildStage, CountLateOnly,
        CountSpec, Execute, FilterStage, FlatMapStage, KeyedProcessOutput, KeyedProcessStage,
        KeyedReduceStage, KeyedSumByStage, KeyedSumStage, MakeWindowFunction, MapStage,
        PlaceholderPlan, Plan, PrintSink, ReduceSpec, Runtime, SideOutputFactory, Spliced, Stage,
        StoreFactory, SumBySpec, SumSpec, Then, TryMapStage, WatermarkStage, WindowOutput,
        WindowStage,
    };
    pub use crate::dataflow::{
        AsFirst, AsIs, AsSecond, CoGroupBody, CoItems, CoProcess, CombineRoots, Connected,
        IntervalJoinFunction, IntervalJoinState, JoinBody, JoinBuffers, SplitLateStage, Union,
    };
    pub use crate::dataflow::{
        BroadcastProcessStage, Broadcasting, CombineBroadcast, TouchBroadcast,
    };
    pub use crate::dataflow::{FragmentInputs, InBandStage, InFragment, SplicedTwo};
    pub use crate::memory::env::{CollectionSource, UserSource};
    pub use crate::memory::failures::RecordFailures;
    pub use crate::memory::partition::PartitionedSource;
    pub use crate::memory::run::{MemoryRoot, PerPartition, RunMemory, SingleChain};
    pub use crate::memory::runtime::MemoryRuntime;
    pub use crate::memory::union::UnionRoot;
    pub use crate::ops::{
        ApplyBody, Convert, Counters, JoinOutput, KeyedTable, NoRejectedOutput, NoTimers, OnTimer,
        Operator, ProcessFn, ProcessState, RecordTimestamp, RejectedOutput, RejectedTo, SideOutput,
        SplitLate, WatermarkState, WindowFunction, WindowState,
    };
    pub use crate::ops::{Event, Fed, InBand};
    #[cfg(feature = "redis")]
    pub use crate::redis::{
        env::MqTopicSource, env::RedisPortable, state::persist::Persist,
        state::runtime::RedisRuntime,
    };
}

/// The README's examples run as doctests.
#[doc = include_str!("../../README.md")]
#[cfg(all(doctest, feature = "redis"))]
pub struct ReadmeDoctests;
