//! The rules of the DSL: AST → checked steps, or every error found (not just the first).
//!
//! Each rule is a function over the parsed pipeline that pushes its errors into one
//! collector ([`Cx`]), so one build reports every independent mistake. The walk over the
//! operators (`walk`) applies the per-operator rules in order — unknown operator, arity,
//! arguments, after the sink, stage, engines — and then the pipeline rules run (a trigger
//! for `GlobalWindows`, a source and a sink).
//!
//! Arity, stage and engine errors are generated from the operator table (`ops/`), so they
//! read the same for every operator (`operators`). Argument rules (`args`, `state`): literal
//! source ids, literal window sizes/slides/gaps/offsets and trigger counts/intervals, state
//! declarations. The literal checks know the crate's constructors by name (`literal`), so a
//! renamed one is not checked at compile time; it still fails at run time.

use crate::ops::{Engine, OpSpec, Role, Variant};
use crate::parse::{Call, Pipeline};
use proc_macro2::Span;

mod args;
mod literal;
mod operators;
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
}

/// A pipeline that passed every rule.
pub(crate) struct Checked<'a> {
    /// The parsed pipeline.
    pub(crate) pipeline: &'a Pipeline,
    /// Its operators, in order.
    pub(crate) steps: Vec<Step<'a>>,
    /// The engines that support every operator used.
    pub(crate) engines: Vec<Engine>,
    /// A fragment: no source, no sink; the value is the stream (see [`is_fragment`]).
    pub(crate) fragment: bool,
}

/// The source id used in ids when it is not a literal: the builder numbers sources per
/// environment at run time (`source-0`, `source-1`, …).
pub(crate) const RUNTIME_SOURCE_ID: &str = "source-{n}";

/// Checks `p` against every rule; all errors are collected.
pub(crate) fn check(p: &Pipeline) -> Result<Checked<'_>, Vec<syn::Error>> {
    let mut cx = Cx::default();
    let fragment = is_fragment(p);
    let mut walk = if fragment {
        walk::Walk::fragment()
    } else {
        walk::Walk::new()
    };
    for call in &p.calls {
        walk.call(&mut cx, call);
    }
    if !walk.lost {
        args::global_windows_need_a_trigger(&mut cx, &p.calls);
    }
    if !fragment {
        operators::source_and_sink(&mut cx, p, walk.lost, walk.stage);
    } else if !walk.lost {
        operators::fragment_ends_at_a_stream(&mut cx, p, walk.stage);
    }
    if cx.errors.is_empty() {
        Ok(Checked {
            pipeline: p,
            steps: walk.steps,
            engines: walk.engines,
            fragment,
        })
    } else {
        Err(cx.errors)
    }
}

/// Whether `p` is a fragment: it has operators, the first is not a source and none is a
/// sink (`lines.map(..).key_by(..).sum()`). Its value is the stream, for a function that
/// returns `impl Fragment`. With a sink, a missing source stays an error.
pub(crate) fn is_fragment(p: &Pipeline) -> bool {
    let role = |c: &Call| crate::ops::lookup(&c.name.to_string()).map(|op| op.role);
    p.calls
        .first()
        .is_some_and(|first| role(first) != Some(Role::Source))
        && !p.calls.iter().any(|c| role(c) == Some(Role::Sink))
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
mod tests;
