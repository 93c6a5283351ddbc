//! The walk over the operators of a chain: the stage, engines, operator ids and event time
//! after each one, and the per-operator rules in the order their errors are reported.

use super::scope::Scope;
use super::{args, inputs, operators, CheckedChain, Cx, Step, RUNTIME_SOURCE_ID};
use crate::ops::{self, Engine, IdKind, OpSpec, Role, Stage, Time, Variant};
use crate::parse::{Call, Chain};
use std::collections::HashSet;

/// What is known of a stream after the operators seen so far; a stream named with `let`
/// hands it to the chains on its name.
#[derive(Clone)]
pub(super) struct At<'a> {
    /// The stage after the last operator.
    pub(super) stage: Stage,
    /// The engines that support every operator so far.
    pub(super) engines: Vec<Engine>,
    /// The last operator that narrowed the engines.
    pub(super) restricted_by: Option<&'a Call>,
    /// The source.
    pub(super) source: Option<&'a Call>,
    /// The source id that prefixes the operator ids.
    source_id: String,
    /// The position of the last operator that took one; `None` once it is known at run time
    /// only (in a fragment, or after `transform`).
    position: Option<u32>,
    /// Whether the records carry event time, when the macro knows.
    pub(super) time: Option<bool>,
    /// After an unknown operator or a stage error the stage is a guess: the stage checks
    /// stop (no cascades).
    pub(super) lost: bool,
}

impl<'a> At<'a> {
    /// Before the source.
    pub(super) fn env() -> Self {
        At {
            stage: Stage::Env,
            engines: Engine::ALL.to_vec(),
            restricted_by: None,
            source: None,
            source_id: RUNTIME_SOURCE_ID.to_string(),
            position: Some(0),
            time: None,
            lost: false,
        }
    }

    /// A fragment's input (`pipeline!` without a source and a sink): a stream whose
    /// operator ids continue the ones of the stream it is spliced into, so they are known
    /// at run time only, and whose event time depends on that stream.
    pub(super) fn fragment() -> Self {
        At {
            stage: Stage::Stream,
            position: None,
            ..At::env()
        }
    }

    /// A value the macro knows nothing of (`let s = make_stream();`).
    pub(super) fn unknown() -> Self {
        At {
            lost: true,
            ..At::fragment()
        }
    }
}

/// The walk over one chain.
pub(super) struct Walk<'a> {
    /// The operators that applied at their stage.
    steps: Vec<Step<'a>>,
    /// Where the stream is after them.
    pub(super) at: At<'a>,
    /// The name the chain starts from, when it starts from a stream bound with `let`.
    pub(super) bound_head: bool,
    /// Whether an engine error was reported (one per chain).
    engine_lost: bool,
    /// The first sink.
    pub(super) sink: Option<&'a Call>,
    /// The state names declared for the next `process`.
    states: HashSet<String>,
}

/// Walks `chain` from `start` (`bound_head`: it starts from a stream bound with `let`),
/// then checks the trigger of `GlobalWindows` in it.
pub(super) fn chain<'a>(
    cx: &mut Cx,
    scope: &mut Scope<'a>,
    chain: &'a Chain,
    (start, bound_head): (At<'a>, bool),
) -> Walk<'a> {
    let mut walk = Walk {
        steps: Vec::new(),
        at: start,
        bound_head,
        engine_lost: false,
        sink: None,
        states: HashSet::new(),
    };
    for call in &chain.calls {
        walk.call(cx, scope, call);
    }
    if !walk.at.lost {
        args::global_windows_need_a_trigger(cx, &chain.calls);
    }
    walk
}

impl<'a> Walk<'a> {
    /// The checked chain, and what is known at its end.
    pub(super) fn finish(self, chain: &'a Chain) -> (CheckedChain<'a>, At<'a>) {
        let steps = self.steps;
        (CheckedChain { chain, steps }, self.at)
    }

    /// Applies the rules of one operator and moves past it.
    fn call(&mut self, cx: &mut Cx, scope: &mut Scope<'a>, call: &'a Call) {
        let name = call.name.to_string();
        let Some(first) = ops::lookup(&name) else {
            operators::unknown(cx, call, (!self.at.lost).then_some(self.at.stage));
            self.at.lost = true;
            return;
        };
        // The stage picks the row of a name with several.
        let op = ops::lookup_at(&name, self.at.stage).unwrap_or(first);
        operators::arity(cx, call, op);
        args::arguments(cx, call, op, &mut self.at.source_id, &mut self.states);
        if self.follows_the_sink(cx, call) {
            return;
        }
        let variant = self.variant(cx, call, op);
        let chosen = variant.unwrap_or(&op.variants[0]);
        let stream = self.stream_argument(cx, scope, call, op);
        if op.time == Time::Needs && !self.at.lost {
            inputs::needs_event_time(cx, call, &self.at);
        }
        self.advance(call, op, chosen);
        self.engines(cx, call, op);
        let id = self.id(chosen);
        if let Some(variant) = variant {
            self.steps.push(Step {
                call,
                op,
                variant,
                id,
                stream,
            });
        }
    }

    /// An operator after the sink: one error, then the stage is lost.
    fn follows_the_sink(&mut self, cx: &mut Cx, call: &Call) -> bool {
        if self.at.lost || self.at.stage != Stage::Done {
            return false;
        }
        let Some(done) = self.sink else {
            return false;
        };
        cx.err(
            call.name.span(),
            format!(
                "`{}` follows the sink `{}`: a sink ends the pipeline",
                call.name, done.name
            ),
        );
        self.at.lost = true;
        true
    }

    /// The variant of `op` at the current stage; a stage error when there is none.
    fn variant(
        &mut self,
        cx: &mut Cx,
        call: &Call,
        op: &'static OpSpec,
    ) -> Option<&'static Variant> {
        match op.variant_at(self.at.stage) {
            Some(v) => Some(v),
            None if self.at.lost => None,
            None => {
                operators::stage(cx, call, self.at.stage, self.at.source);
                // The stage is now a guess: stop stage checks so one mistake gives one error.
                self.at.lost = true;
                None
            }
        }
    }

    /// Walks the stream argument of `op`, when the macro can follow it (a chain on a stream
    /// bound with `let`, or from a source), and checks that it fits `op` here.
    fn stream_argument(
        &mut self,
        cx: &mut Cx,
        scope: &mut Scope<'a>,
        call: &'a Call,
        op: &OpSpec,
    ) -> Option<CheckedChain<'a>> {
        let (_, wanted) = op.stream_argument()?;
        let other = call.stream.as_deref()?;
        let start = scope.start_of_argument(cx, other)?;
        let walk = chain(cx, scope, other, start);
        if !self.at.lost && inputs::argument(cx, call, op, wanted, (other, &walk), &self.at) {
            // The stage is now a guess: stop stage checks so one mistake gives one error.
            self.at.lost = true;
        }
        let (checked, end) = walk.finish(other);
        let common: Vec<Engine> = self
            .at
            .engines
            .iter()
            .copied()
            .filter(|e| end.engines.contains(e))
            .collect();
        if !common.is_empty() {
            self.at.engines = common;
        }
        Some(checked)
    }

    /// The stage, source, sink, event time and declared state after `call`.
    fn advance(&mut self, call: &'a Call, op: &OpSpec, chosen: &Variant) {
        self.at.stage = chosen.produces;
        match op.role {
            Role::Source => self.at.source = self.at.source.or(Some(call)),
            Role::Sink => self.sink = self.sink.or(Some(call)),
            Role::Transform => {}
        }
        self.at.time = match op.time {
            Time::Untimed => Some(false),
            Time::Timed | Time::Chooses => Some(true),
            Time::Unknown => None,
            Time::Keeps | Time::Agrees | Time::Needs => self.at.time,
        };
        if self.at.stage != Stage::KeyedState {
            self.states.clear();
        }
    }

    /// Narrows the engines to those that support `op`; one error when none is left.
    fn engines(&mut self, cx: &mut Cx, call: &'a Call, op: &OpSpec) {
        let common: Vec<Engine> = self
            .at
            .engines
            .iter()
            .copied()
            .filter(|e| op.engines.contains(e))
            .collect();
        if common.is_empty() {
            if !self.engine_lost {
                operators::no_common_engine(cx, call, op, &self.at.engines, self.at.restricted_by);
            }
            // One engine error per chain: the operators after it would repeat it.
            self.engine_lost = true;
            return;
        }
        if common.len() < self.at.engines.len() {
            self.at.restricted_by = Some(call);
        }
        self.at.engines = common;
    }

    /// The operator id `chosen` gives, counting its positions.
    fn id(&mut self, chosen: &Variant) -> Option<String> {
        let at = &mut self.at;
        match chosen.id {
            IdKind::None => None,
            IdKind::Position => {
                at.position = at.position.map(|p| p + 1);
                None
            }
            IdKind::Positions(n) => {
                at.position = at.position.map(|p| p + n);
                None
            }
            IdKind::Kind(kind) => {
                at.position = at.position.map(|p| p + 1);
                let position = at.position?;
                Some(format!("{}/{position}:{kind}", at.source_id))
            }
            IdKind::Fragment => {
                at.position = None;
                None
            }
        }
    }
}
