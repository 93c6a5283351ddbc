//! The rules of the DSL: AST → checked steps, or every error found (not just the first).
//!
//! Each rule is a function over the parsed pipeline that pushes its errors into one
//! collector ([`Cx`]), so one build reports every independent mistake. The walk over the
//! operators (`walk`) applies the per-operator rules in order — unknown operator, arity,
//! arguments, after the sink, stage, engines — and then the pipeline rules run (a trigger
//! for `GlobalWindows`, a source and a sink).
//!
//! Arity, stage and engine errors are generated from the operator table (`ops/`), so they
//! read the same for every operator (`operators`).
//!
//! Each stream named with `let` is walked like the pipeline, from its source or from the
//! stream it continues; what is known at its end (stage, engines, ids, event time) starts
//! the walk of every chain on its name (`scope`). A stream argument (`union(other)`) that
//! the macro can follow is walked too, and its end must fit the operator: the stage it
//! takes, an engine both inputs run on, and the event time it needs (`inputs`).
//!
//! Argument rules (`args`, `state`): literal source ids, literal window
//! sizes/slides/gaps/offsets, trigger counts/intervals and join bounds, state
//! declarations. The literal checks know the crate's constructors by name (`literal`), so a
//! renamed one is not checked at compile time; it still fails at run time.

use crate::ops::{Engine, OpSpec, Role, Variant};
use crate::parse::{Binding, Call, Chain, Pipeline};
use proc_macro2::Span;

mod args;
mod inputs;
mod literal;
mod operators;
mod scope;
mod state;
mod walk;

/// One operator of a valid pipeline.
pub(crate) struct Step<'a> {
    /// The user's call.
    pub(crate) call: &'a Call,
    /// Its row of the operator table.
    pub(crate) op: &'static OpSpec,
    /// How it applies here.
    pub(crate) variant: &'static Variant,
    /// Its operator id, when it has one (`{source_id}/{position}:{kind}`).
    pub(crate) id: Option<String>,
    /// Its stream argument, when the macro follows it (a chain from a source, or on a
    /// stream bound with `let`); other stream arguments are expressions.
    pub(crate) stream: Option<CheckedChain<'a>>,
}

/// A chain whose operators passed every rule.
pub(crate) struct CheckedChain<'a> {
    /// The parsed chain.
    pub(crate) chain: &'a Chain,
    /// Its operators, in order.
    pub(crate) steps: Vec<Step<'a>>,
}

/// A stream named with `let` that passed every rule.
pub(crate) struct CheckedBinding<'a> {
    /// The parsed `let`.
    pub(crate) binding: &'a Binding,
    /// Its stream.
    pub(crate) chain: CheckedChain<'a>,
}

/// A pipeline that passed every rule.
pub(crate) struct Checked<'a> {
    /// The streams named with `let`, in order.
    pub(crate) bindings: Vec<CheckedBinding<'a>>,
    /// The pipeline (the last expression).
    pub(crate) main: CheckedChain<'a>,
    /// The engines that support every operator used.
    pub(crate) engines: Vec<Engine>,
    /// A fragment: no source, no sink; the value is the stream (see [`is_fragment`]).
    pub(crate) fragment: bool,
}

impl<'a> Checked<'a> {
    /// Every operator, in the order of the text: the `let`s, then the pipeline; a stream
    /// argument's operators before the operator that takes it.
    pub(crate) fn steps(&self) -> Vec<&Step<'a>> {
        fn push<'s, 'a>(chain: &'s CheckedChain<'a>, out: &mut Vec<&'s Step<'a>>) {
            for step in &chain.steps {
                if let Some(stream) = &step.stream {
                    push(stream, out);
                }
                out.push(step);
            }
        }
        let mut out = Vec::new();
        for binding in &self.bindings {
            push(&binding.chain, &mut out);
        }
        push(&self.main, &mut out);
        out
    }
}

/// The source id used in ids when it is not a literal: the builder numbers sources per
/// environment at run time (`source-0`, `source-1`, …).
pub(crate) const RUNTIME_SOURCE_ID: &str = "source-{n}";

/// Checks `p` against every rule; all errors are collected.
pub(crate) fn check(p: &Pipeline) -> Result<Checked<'_>, Vec<syn::Error>> {
    let mut cx = Cx::default();
    let mut scope = scope::Scope::new(p);
    let mut bindings = Vec::new();
    for binding in &p.bindings {
        let start = scope.start_of_binding(&mut cx, &binding.chain);
        let mut walk = walk::chain(&mut cx, &mut scope, &binding.chain, start);
        scope::binding_has_no_sink(&mut cx, binding, &mut walk);
        let (chain, end) = walk.finish(&binding.chain);
        scope.bind(end);
        bindings.push(CheckedBinding { binding, chain });
    }
    let fragment = is_fragment(p);
    let start = match scope.start(&mut cx, &p.main) {
        Some(bound) => (bound, true),
        None if fragment => (walk::At::fragment(), false),
        None => (walk::At::env(), false),
    };
    let walk = walk::chain(&mut cx, &mut scope, &p.main, start);
    if !fragment {
        operators::source_and_sink(&mut cx, &p.main, &walk.at, walk.bound_head);
    } else if !walk.at.lost {
        operators::fragment_ends_at_a_stream(&mut cx, &p.main, walk.at.stage);
    }
    scope.every_binding_is_used(&mut cx);
    let engines = walk.at.engines.clone();
    let (main, _) = walk.finish(&p.main);
    if cx.errors.is_empty() {
        Ok(Checked {
            bindings,
            main,
            engines,
            fragment,
        })
    } else {
        Err(cx.errors)
    }
}

/// Whether `p` is a fragment: its stream has operators, the first is not a source (also
/// when the pipeline starts at a stream bound with `let`: the first of that stream) and
/// the pipeline has no sink (`lines.map(..).key_by(..).sum()`). Its value is the stream,
/// for a function that returns `impl Fragment`. With a sink, a missing source stays an
/// error.
pub(crate) fn is_fragment(p: &Pipeline) -> bool {
    let role = |c: &Call| crate::ops::lookup(&c.name.to_string()).map(|op| op.role);
    p.first_call()
        .is_some_and(|first| role(first) != Some(Role::Source))
        && !p.main.calls.iter().any(|c| role(c) == Some(Role::Sink))
}

/// The error collector every rule pushes into (serde_derive's `Ctxt`).
#[derive(Default)]
struct Cx {
    errors: Vec<syn::Error>,
}

impl Cx {
    /// Reports `msg` at `span`.
    fn err(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.errors.push(syn::Error::new(span, msg));
    }
}

#[cfg(test)]
mod several_inputs_tests;
#[cfg(test)]
mod tests;
