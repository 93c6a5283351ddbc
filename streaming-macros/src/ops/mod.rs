//! The operator table: one file per operator of the DSL.
//!
//! Each file declares one [`OpSpec`]: the operator's name, its arguments (and so its
//! arity), the stages it applies to and the stage each produces, the id kind the builder
//! gives it, the engines that support it and what it does to event time. The check phase
//! derives its arity, stage, engine and event-time errors from this table, so their
//! wording is uniform.
//!
//! A name has one row per meaning: `key_by` of a stream (one key function) and of
//! connected streams (one per input), `process` of a keyed stream (a closure), of keyed
//! connected streams (a `KeyedCoProcessFunction`), of a keyed stream connected to a
//! broadcast stream (a `KeyedBroadcastProcessFunction`) and of an interval join (a closure
//! of both elements); `connect` of a stream (any other stream) and of a keyed stream (a
//! broadcast stream). The rows of one name apply to different stages, which pick the row.

use std::fmt;

mod add_source;
mod add_source_with_id;
mod add_timestamped_source;
mod add_timestamped_source_with_id;
mod aggregate;
mod aggregate_with;
mod allowed_lateness;
mod apply;
mod assign_timestamps_and_watermarks;
mod assign_timestamps_and_watermarks_with;
mod between;
mod broadcast;
mod co_flat_map;
mod co_group;
mod co_map;
mod collect_vec;
mod connect;
mod connect_broadcast;
mod count;
mod examples;
mod filter;
mod flat_map;
mod for_each;
mod from_collection;
mod from_collection_partitioned;
mod from_collection_partitioned_with_id;
mod from_collection_with_id;
mod from_elements;
mod from_mq_topic;
mod from_mq_topic_with_id;
mod from_mq_topic_with_options;
mod from_timestamped_collection;
mod from_timestamped_collection_partitioned;
mod from_timestamped_collection_partitioned_with_id;
mod from_timestamped_collection_with_id;
mod interval_join;
mod join;
mod key_by;
mod key_by_connected;
mod map;
mod max_by;
mod min_by;
mod on_timer;
mod print;
mod print_with_prefix;
mod process;
mod process_broadcast;
mod process_connected;
mod process_function;
mod process_interval_join;
mod reduce;
mod side_output_late_data;
mod side_output_late_firsts;
mod side_output_late_seconds;
mod side_output_rejected;
mod sink;
mod state;
mod sum;
mod sum_by;
mod transform;
mod trigger;
mod try_map;
mod union;
mod window;
mod with_ingestion_time;

/// An execution engine of the `streaming` crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// `streaming::MemoryEnv`.
    Memory,
    /// `streaming::redis::RedisEnv`.
    Redis,
}

impl Engine {
    /// Every engine, in documentation order.
    pub(crate) const ALL: &'static [Engine] = &[Engine::Memory, Engine::Redis];

    /// The engine's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Engine::Memory => "memory",
            Engine::Redis => "redis",
        }
    }

    /// The engine's name at the start of a phrase: "the Redis engine".
    pub(crate) fn title(self) -> &'static str {
        match self {
            Engine::Memory => "memory",
            Engine::Redis => "Redis",
        }
    }
}

/// Where a pipeline is between two operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The environment, before the source.
    Env,
    /// A `DataStream`.
    Stream,
    /// A `KeyedStream` (after `key_by`).
    Keyed,
    /// A keyed stream with `state(..)` declared for the next `process`.
    KeyedState,
    /// The output of `process`: a stream that `on_timer` may still extend.
    Processed,
    /// A `WindowedStream` (after `window`).
    Windowed,
    /// `ConnectedStreams` (after `connect`).
    Connected,
    /// `KeyedConnectedStreams` (after `key_by` on connected streams).
    KeyedConnected,
    /// A `WindowedStream` of keyed connected streams (after their `window`), which a
    /// window join or co-group ends.
    CoWindowed,
    /// An `IntervalJoin` (after `interval_join`), before its bounds.
    IntervalJoin,
    /// A `BoundedIntervalJoin` (after `between`).
    BoundedJoin,
    /// A `BroadcastStream` (after `broadcast`): the argument of a keyed stream's `connect`.
    Broadcast,
    /// A `BroadcastConnectedStream` (a keyed stream after `connect` of a broadcast stream).
    BroadcastConnected,
    /// After the sink: the pipeline is complete.
    Done,
}

impl Stage {
    /// The stage as a noun phrase, for messages.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            Stage::Env => "the environment (no source yet)",
            Stage::Stream => "a stream",
            Stage::Processed => "the output of `process`",
            Stage::Keyed => "a keyed stream",
            Stage::KeyedState => "a keyed stream with declared state",
            Stage::Windowed => "a windowed stream",
            Stage::Connected => "connected streams",
            Stage::KeyedConnected => "keyed connected streams",
            Stage::CoWindowed => "windowed connected streams",
            Stage::IntervalJoin => "an interval join without its bounds",
            Stage::BoundedJoin => "an interval join with its bounds",
            Stage::Broadcast => "a broadcast stream",
            Stage::BroadcastConnected => "a keyed stream connected to a broadcast stream",
            Stage::Done => "a finished pipeline",
        }
    }

    /// Whether the stage exists only in a pipeline of several inputs.
    pub(crate) fn of_several_inputs(self) -> bool {
        matches!(
            self,
            Stage::Connected
                | Stage::KeyedConnected
                | Stage::CoWindowed
                | Stage::IntervalJoin
                | Stage::BoundedJoin
                | Stage::Broadcast
                | Stage::BroadcastConnected
        )
    }

    /// Whether an operator declared for `self` applies at `current`.
    pub(crate) fn accepts(self, current: Stage) -> bool {
        self == current || (self == Stage::Stream && current == Stage::Processed)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.noun())
    }
}

/// What an operator contributes to the operator ids (`{source_id}/{position}:{kind}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdKind {
    /// Takes no position (source, window configuration, state declaration).
    None,
    /// Takes a position but gets no id of its own (`key_by`).
    Position,
    /// Takes this many positions but gets no id of its own (`interval_join`: the builder
    /// connects both inputs and keys them).
    Positions(u32),
    /// An operator with this kind in its id.
    Kind(&'static str),
    /// A fragment (`transform`): its operators take positions the macro cannot count, so
    /// the ids after it are known at run time only.
    Fragment,
}

/// One way an operator applies: at stage `applies` it produces `produces`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Variant {
    /// The stage the operator is applied to.
    pub(crate) applies: Stage,
    /// The stage it produces.
    pub(crate) produces: Stage,
    /// Its contribution to operator ids.
    pub(crate) id: IdKind,
}

/// The kind of an argument: how it is parsed, checked and described.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArgKind {
    /// A Rust expression (closure, value, function path); the text describes it.
    Expr,
    /// A source id: a literal is checked against `[A-Za-z0-9_.-]+`.
    SourceId,
    /// A window assigner: literal sizes, slides, gaps and offsets are checked.
    Assigner,
    /// A trigger: a literal `CountTrigger::of(0)` is rejected.
    Trigger,
    /// A watermark generator.
    Generator,
    /// A sink (the pipeline's or a side output's).
    Sink,
    /// State declarations `name: ValueState<T> = default, name: ListState<T>, ..`.
    StateDecls,
    /// Another stream, which must be at this stage: a stream bound with `let` in the
    /// pipeline (or a chain of operators on one, or from a source), checked like the
    /// pipeline; or a stream built before the pipeline, which only rustc checks.
    Stream(Stage),
}

impl ArgKind {
    /// Whether the argument is a configuration value the expansion evaluates before the
    /// chain, classified by its type: a `Result` is unwrapped, its error is the pipeline's.
    pub(crate) fn is_config(self) -> bool {
        matches!(
            self,
            ArgKind::Assigner | ArgKind::Trigger | ArgKind::Generator | ArgKind::Sink
        )
    }
}

/// One argument of an operator.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArgSpec {
    /// How it is written in messages and docs, e.g. `|element| -> output`.
    pub(crate) shape: &'static str,
    /// Its kind.
    pub(crate) kind: ArgKind,
}

/// How an operator is expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expansion {
    /// A builder method call of the same name.
    Method,
    /// `state(..)`: descriptor bindings before the chain, no call.
    StateDecls,
    /// `on_timer(f)`: turns the preceding `process(g)` into a process function with timers.
    OnTimer,
    /// A source called through the `streaming::__private` function of the same name, whose
    /// trait bound gives an environment that lacks it one error naming the operator.
    EngineFunction,
    /// A builder method of the same name that returns a `Result` (`between`): its error
    /// ends the pipeline's block with it.
    FallibleMethod,
}

/// What an operator does to the event time of its stream, and what it needs of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Time {
    /// Keeps its input's event time, or its lack of one.
    Keeps,
    /// A source whose records have no event time (memory collections and user sources).
    Untimed,
    /// A source whose records carry their event time (timestamped collections and
    /// sources, topics).
    Timed,
    /// Chooses the records' event time (`with_ingestion_time`, the timestamp assigners).
    Chooses,
    /// After it, event time is known at run time only (`transform`).
    Unknown,
    /// Combines its stream with another one: both carry event time or neither does
    /// (`union`, `connect`).
    Agrees,
    /// Joins its stream with another one by event time: both must carry it
    /// (`interval_join`).
    Needs,
}

/// What an operator does in a pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Starts the pipeline.
    Source,
    /// Transforms or configures.
    Transform,
    /// Ends the pipeline.
    Sink,
}

/// One row of the operator table.
#[derive(Debug)]
pub(crate) struct OpSpec {
    /// The operator's name in the DSL (and the builder method it expands to).
    pub(crate) name: &'static str,
    /// Its role.
    pub(crate) role: Role,
    /// Its arguments; the arity is their number (except `StateDecls`: one or more).
    pub(crate) args: &'static [ArgSpec],
    /// The stages it applies to and what each produces.
    pub(crate) variants: &'static [Variant],
    /// The engines that support it.
    pub(crate) engines: &'static [Engine],
    /// What it does to event time.
    pub(crate) time: Time,
    /// How it expands.
    pub(crate) expansion: Expansion,
    /// One line of documentation.
    pub(crate) summary: &'static str,
    /// A doctested example: statements in a function returning
    /// `Result<(), streaming::Error>`, with `env` in scope: a `MemoryEnv`, or for an
    /// operator only the Redis engine runs a `RedisEnv` (that doctest is compiled, not run:
    /// it needs a server).
    pub(crate) example: &'static str,
}

impl OpSpec {
    /// The variant applying at `stage`, if any.
    pub(crate) fn variant_at(&self, stage: Stage) -> Option<&'static Variant> {
        self.variants.iter().find(|v| v.applies.accepts(stage))
    }

    /// Whether `other` is this row (`const` rows have no stable address: a row is its name
    /// and the stage its first variant applies to, which no other row of the name shares).
    pub(crate) fn is(&self, other: &OpSpec) -> bool {
        self.name == other.name && self.variants[0].applies == other.variants[0].applies
    }

    /// The stream argument's position and the stage it must be at, if it takes one.
    pub(crate) fn stream_argument(&self) -> Option<(usize, Stage)> {
        self.args
            .iter()
            .enumerate()
            .find_map(|(i, a)| match a.kind {
                ArgKind::Stream(stage) => Some((i, stage)),
                _ => None,
            })
    }

    /// Whether it belongs to pipelines of several inputs: it takes another stream, or
    /// applies only to the stages of several inputs, or makes a stream only another
    /// stream's operator takes (`broadcast`).
    pub(crate) fn of_several_inputs(&self) -> bool {
        self.stream_argument().is_some()
            || self.variants.iter().all(|v| v.applies.of_several_inputs())
            || self.variants.iter().all(|v| v.produces.of_several_inputs())
    }

    /// The signature as written in messages: `name(arg, arg)`.
    pub(crate) fn signature(&self) -> String {
        let args: Vec<_> = self.args.iter().map(|a| a.shape).collect();
        format!("{}({})", self.name, args.join(", "))
    }

    /// "1 argument", "no arguments", …
    pub(crate) fn arity_text(&self) -> String {
        match self.args {
            [ArgSpec {
                kind: ArgKind::StateDecls,
                ..
            }] => "one or more state declarations".into(),
            [] => "no arguments".into(),
            [_] => "1 argument".into(),
            a => format!("{} arguments", a.len()),
        }
    }
}

/// Every operator of the DSL.
pub(crate) const TABLE: &[&OpSpec] = &[
    &from_elements::SPEC,
    &from_collection::SPEC,
    &from_collection_with_id::SPEC,
    &from_collection_partitioned::SPEC,
    &from_collection_partitioned_with_id::SPEC,
    &from_timestamped_collection::SPEC,
    &from_timestamped_collection_with_id::SPEC,
    &from_timestamped_collection_partitioned::SPEC,
    &from_timestamped_collection_partitioned_with_id::SPEC,
    &add_source::SPEC,
    &add_source_with_id::SPEC,
    &add_timestamped_source::SPEC,
    &add_timestamped_source_with_id::SPEC,
    &from_mq_topic::SPEC,
    &from_mq_topic_with_id::SPEC,
    &from_mq_topic_with_options::SPEC,
    &map::SPEC,
    &try_map::SPEC,
    &filter::SPEC,
    &flat_map::SPEC,
    &transform::SPEC,
    &union::SPEC,
    &with_ingestion_time::SPEC,
    &assign_timestamps_and_watermarks::SPEC,
    &assign_timestamps_and_watermarks_with::SPEC,
    &key_by::SPEC,
    &state::SPEC,
    &process::SPEC,
    &process_function::SPEC,
    &on_timer::SPEC,
    &reduce::SPEC,
    &sum::SPEC,
    &sum_by::SPEC,
    &min_by::SPEC,
    &max_by::SPEC,
    &window::SPEC,
    &trigger::SPEC,
    &allowed_lateness::SPEC,
    &side_output_late_data::SPEC,
    &side_output_rejected::SPEC,
    &aggregate::SPEC,
    &aggregate_with::SPEC,
    &apply::SPEC,
    &count::SPEC,
    // Several inputs: after the rows of one input, whose names some of them share.
    &connect::SPEC,
    &co_map::SPEC,
    &co_flat_map::SPEC,
    &key_by_connected::SPEC,
    &process_connected::SPEC,
    &join::SPEC,
    &co_group::SPEC,
    &interval_join::SPEC,
    &between::SPEC,
    &side_output_late_firsts::SPEC,
    &side_output_late_seconds::SPEC,
    &process_interval_join::SPEC,
    &broadcast::SPEC,
    &connect_broadcast::SPEC,
    &process_broadcast::SPEC,
    &sink::SPEC,
    &for_each::SPEC,
    &print::SPEC,
    &print_with_prefix::SPEC,
    &collect_vec::SPEC,
];

/// The (first) operator named `name`: its role and whether it takes state declarations
/// are those of every row of the name.
pub(crate) fn lookup(name: &str) -> Option<&'static OpSpec> {
    TABLE.iter().copied().find(|op| op.name == name)
}

/// Every row of the operator named `name`.
pub(crate) fn rows(name: &str) -> impl Iterator<Item = &'static OpSpec> + '_ {
    TABLE.iter().copied().filter(move |op| op.name == name)
}

/// The row of the operator named `name` that applies at `stage`.
pub(crate) fn lookup_at(name: &str, stage: Stage) -> Option<&'static OpSpec> {
    rows(name).find(|op| op.variant_at(stage).is_some())
}

/// The closest operator name to a misspelt `name`, when one is close enough.
pub(crate) fn did_you_mean(name: &str) -> Option<&'static str> {
    TABLE
        .iter()
        .filter(|op| lookup(op.name).is_some_and(|first| first.is(op)))
        .map(|op| (edit_distance(name, op.name), op.name))
        .filter(|(d, candidate)| {
            *d <= (candidate.len().max(name.len()) / 3).max(1)
                || (name.len() >= 4 && candidate.starts_with(name))
        })
        // A name the typed one starts (`collect` → `collect_vec`) before a closer one.
        .min_by_key(|(d, candidate)| (!candidate.starts_with(name), *d))
        .map(|(_, n)| n)
}

/// Levenshtein distance between two ASCII-ish strings.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Shorthands for the operator files.
pub(crate) mod prelude {
    pub(crate) use super::ArgKind::*;
    pub(crate) use super::{
        ArgSpec, Engine, Expansion, IdKind, OpSpec, Role, Stage, Time, Variant,
    };

    /// An argument.
    pub(crate) const fn arg(shape: &'static str, kind: super::ArgKind) -> ArgSpec {
        ArgSpec { shape, kind }
    }

    /// A variant.
    pub(crate) const fn on(applies: Stage, produces: Stage, id: IdKind) -> Variant {
        Variant {
            applies,
            produces,
            id,
        }
    }

    /// Supported by both engines.
    pub(crate) const BOTH: &[Engine] = &[Engine::Memory, Engine::Redis];
    /// Supported by the in-memory engine only: bounded sources and `collect_vec`.
    pub(crate) const MEMORY: &[Engine] = &[Engine::Memory];
}

#[cfg(test)]
mod tests;
