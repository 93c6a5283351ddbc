//! User-facing building blocks: functions, collectors, sources, sinks and keyed state.

mod broadcast;
pub(crate) mod context;
mod functions;
mod sink;
mod source;
pub(crate) mod state;
mod two_phase;

#[doc(hidden)]
pub use broadcast::BroadcastKey;
pub use broadcast::{
    BroadcastContext, BroadcastStateDescriptor, KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastContext, ReadOnlyBroadcastState,
};
pub use context::{KeyedContext, StateRef, TimeDomain, TimerContext};
pub use functions::{AggregateFunction, Collector, KeyedProcessFunction, Numeric};
pub use sink::{
    CollectSink, CommitWrite, CommitWrites, RejectedElement, Sink, SinkScope, TopicOutput,
};
pub use source::{Source, SourceContext};
pub use state::{
    JsonCodec, ListState, ListStateDescriptor, MapState, MapStateDescriptor, SetState,
    SetStateDescriptor, StateDescriptor, ValueState, ValueStateDescriptor,
};
pub use two_phase::TxnScope;
#[doc(hidden)]
pub use two_phase::{LocalFuture, TwoPhaseHooks};
