//! The walk over the operators: the stage, engines and operator ids after each one, and
//! the per-operator rules in the order their errors are reported.

use super::{args, operators, Cx, Step, RUNTIME_SOURCE_ID};
use crate::ops::{self, Engine, IdKind, OpSpec, Role, Stage, Variant};
use crate::parse::Call;
use std::collections::HashSet;

/// Where the walk is after the operators seen so far.
pub(super) struct Walk<'a> {
    /// The operators that applied at their stage.
    pub(super) steps: Vec<Step<'a>>,
    /// The stage after the last operator.
    pub(super) stage: Stage,
    /// The engines that support every operator so far.
    pub(super) engines: Vec<Engine>,
    /// The last operator that narrowed the engines.
    restricted_by: Option<&'a Call>,
    /// Whether an engine error was reported (one per pipeline).
    engine_lost: bool,
    /// The first source.
    source: Option<&'a Call>,
    /// The first sink.
    sink: Option<&'a Call>,
    /// The source id that prefixes the operator ids.
    source_id: String,
    /// The position of the last operator that took one; `None` once it is known at run time
    /// only (in a fragment, or after `transform`).
    position: Option<u32>,
    /// The state names declared for the next `process`.
    states: HashSet<String>,
    /// After an unknown operator or a stage error the stage is a guess: the stage checks
    /// stop (no cascades).
    pub(super) lost: bool,
}

impl<'a> Walk<'a> {
    pub(super) fn new() -> Self {
        Walk {
            steps: Vec::new(),
            stage: Stage::Env,
            engines: Engine::ALL.to_vec(),
            restricted_by: None,
            engine_lost: false,
            source: None,
            sink: None,
            source_id: RUNTIME_SOURCE_ID.to_string(),
            position: Some(0),
            states: HashSet::new(),
            lost: false,
        }
    }

    /// The walk over a fragment (`pipeline!` without a source and a sink): it starts at a
    /// stream, and its operator ids continue the ones of the stream it is spliced into, so
    /// they are known at run time only.
    pub(super) fn fragment() -> Self {
        Walk {
            stage: Stage::Stream,
            position: None,
            ..Walk::new()
        }
    }

    /// Applies the rules of one operator and moves past it.
    pub(super) fn call(&mut self, cx: &mut Cx, call: &'a Call) {
        let Some(op) = ops::lookup(&call.name.to_string()) else {
            operators::unknown(cx, call, (!self.lost).then_some(self.stage));
            self.lost = true;
            return;
        };
        operators::arity(cx, call, op);
        args::arguments(cx, call, op, &mut self.source_id, &mut self.states);
        if self.follows_the_sink(cx, call) {
            return;
        }
        let variant = self.variant(cx, call, op);
        let chosen = variant.unwrap_or(&op.variants[0]);
        self.advance(call, op, chosen);
        self.engines(cx, call, op);
        let id = self.id(chosen);
        if let Some(variant) = variant {
            self.steps.push(Step {
                call,
                op,
                variant,
                id,
            });
        }
    }

    /// An operator after the sink: one error, then the stage is lost.
    fn follows_the_sink(&mut self, cx: &mut Cx, call: &Call) -> bool {
        if self.lost || self.stage != Stage::Done {
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
        self.lost = true;
        true
    }

    /// The variant of `op` at the current stage; a stage error when there is none.
    fn variant(
        &mut self,
        cx: &mut Cx,
        call: &Call,
        op: &'static OpSpec,
    ) -> Option<&'static Variant> {
        match op.variant_at(self.stage) {
            Some(v) => Some(v),
            None if self.lost => None,
            None => {
                operators::stage(cx, call, op, self.stage, self.source);
                // The stage is now a guess: stop stage checks so one mistake gives one error.
                self.lost = true;
                None
            }
        }
    }

    /// The stage, source, sink and declared state after `call`.
    fn advance(&mut self, call: &'a Call, op: &OpSpec, chosen: &Variant) {
        self.stage = chosen.produces;
        match op.role {
            Role::Source => self.source = self.source.or(Some(call)),
            Role::Sink => self.sink = self.sink.or(Some(call)),
            Role::Transform => {}
        }
        if self.stage != Stage::KeyedState {
            self.states.clear();
        }
    }

    /// Narrows the engines to those that support `op`; one error when none is left.
    fn engines(&mut self, cx: &mut Cx, call: &'a Call, op: &OpSpec) {
        let common: Vec<Engine> = self
            .engines
            .iter()
            .copied()
            .filter(|e| op.engines.contains(e))
            .collect();
        if common.is_empty() {
            if !self.engine_lost {
                operators::no_common_engine(cx, call, op, &self.engines, self.restricted_by);
            }
            // One engine error per pipeline: the operators after it would repeat it.
            self.engine_lost = true;
            return;
        }
        if common.len() < self.engines.len() {
            self.restricted_by = Some(call);
        }
        self.engines = common;
    }

    /// The operator id `chosen` gives, counting its position.
    fn id(&mut self, chosen: &Variant) -> Option<String> {
        match chosen.id {
            IdKind::None => None,
            IdKind::Position => {
                self.position = self.position.map(|p| p + 1);
                None
            }
            IdKind::Kind(kind) => {
                self.position = self.position.map(|p| p + 1);
                let position = self.position?;
                Some(format!("{}/{position}:{kind}", self.source_id))
            }
            IdKind::Fragment => {
                self.position = None;
                None
            }
        }
    }
}
