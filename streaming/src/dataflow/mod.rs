//! The engine-neutral builder: [`DataStream`], [`KeyedStream`], [`WindowedStream`], the
//! plan they build and how an engine runs it.
//!
//! A builder chain is a [`Plan`] (a root, the source, then one [`Stage`] per operator). The
//! source decides the engine: a terminal operation ([`DataStream::sink`] and friends) hands
//! the plan to the root's [`Execute`] implementation, which builds the operator chain with
//! the engine's [`Runtime`] ([`BuildPlan`], [`StoreFactory`]) and runs or registers it.

mod broadcast;
mod fragment;
mod interval_join;
mod keyed;
mod plan;
mod runtime;
mod stages;
mod stream;
mod two_input_fragment;
mod types;
mod union;
mod window_fn;
mod window_join;
mod windowed;

pub use broadcast::{
    BroadcastConnectedStream, BroadcastProcessStage, BroadcastStream, Broadcasting,
    CombineBroadcast, TouchBroadcast,
};
pub use fragment::{FragmentInput, PlaceholderPlan, Spliced};
pub use interval_join::{
    BoundedIntervalJoin, IntervalJoin, IntervalJoinFunction, IntervalJoinState, JoinBuffers,
    SplitLateStage,
};
pub use plan::{BuildPlan, BuildRejectedOutput, BuildStage, Plan, Stage, Then};
pub use runtime::{Runtime, SideOutputFactory, StoreFactory};
pub use stages::{
    FilterStage, FlatMapStage, KeyedProcessStage, KeyedReduceStage, KeyedSumByStage, KeyedSumStage,
    MapStage, TryMapStage, WatermarkStage, WindowStage,
};
pub use stream::{Execute, PrintSink};
pub use two_input_fragment::{FragmentInputs, InBandStage, InFragment, SplicedTwo};
pub use types::{
    CountLateOnly, DataStream, KeyedProcessOutput, KeyedStream, WindowOutput, WindowedStream,
};
pub use union::{
    AsFirst, AsIs, AsSecond, CoInput, CoItems, CoProcess, CombineRoots, Connected,
    ConnectedStreams, KeyedCoProcessFunction, KeyedConnectedStreams, Union,
};
pub use window_fn::{
    AggregateSpec, ApplySpec, CountSpec, MakeWindowFunction, ReduceSpec, SumBySpec, SumSpec,
};
pub use window_join::{CoGroupBody, JoinBody};
