//! The rules of arguments the macro can read: literal source ids, literal window and
//! trigger configuration, literal join bounds, and the trigger `GlobalWindows` needs.
//!
//! The configuration rules know the crate's constructors by the names written in the call
//! (`TumblingEventTimeWindows::of(..)`): a renamed one (`use .. as T; T::of(..)`) is not
//! checked here, and fails at run time with `Error::InvalidConfig` instead, as in the
//! builder API.

use super::literal::{ctor_call, duration_nanos, int_lit, str_lit, strip};
use super::{state, Cx};
use crate::ops::{ArgKind, OpSpec};
use crate::parse::{Args, Call};
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::Expr;

/// The argument rules of one call; `source_id` becomes the literal source id it sets, and
/// `states` collects the state names declared for the next `process`.
pub(super) fn arguments(
    cx: &mut Cx,
    call: &Call,
    op: &OpSpec,
    source_id: &mut String,
    states: &mut HashSet<String>,
) {
    if let Args::States(decls) = &call.args {
        for decl in decls {
            state::declaration(cx, decl, states);
        }
        return;
    }
    if matches!(op.name, "from_mq_topic" | "from_mq_topic_with_options") {
        if let Some(id) = mq_source_id(call) {
            *source_id = id;
        }
    }
    for (spec, arg) in op.args.iter().zip(call.args.exprs()) {
        let arg = strip(arg);
        match spec.kind {
            ArgKind::SourceId => {
                if let Some(id) = literal_source_id(cx, arg) {
                    *source_id = id;
                }
            }
            ArgKind::Assigner => assigner(cx, arg),
            ArgKind::Trigger => trigger(cx, arg),
            ArgKind::Expr
            | ArgKind::Generator
            | ArgKind::Sink
            | ArgKind::StateDecls
            | ArgKind::Stream(_) => {}
        }
    }
    if op.name == "between" {
        join_bounds(cx, call);
    }
}

/// Literal bounds of an interval join with `lower <= upper` (else nothing could be joined).
fn join_bounds(cx: &mut Cx, call: &Call) {
    let [lower, upper] = call.args.exprs() else {
        return;
    };
    if let (Some(l), Some(u)) = (int_lit(lower), int_lit(upper)) {
        if l > u {
            cx.err(
                lower.span(),
                format!(
                    "the lower bound {l} ms is above the upper bound {u} ms, so nothing could \
                     be joined: `between(lower, upper)` takes the earliest offset first"
                ),
            );
        }
    }
}

/// The Redis engine's default source id for literal topic and group: `{topic}.{group}`,
/// other characters `_`.
fn mq_source_id(call: &Call) -> Option<String> {
    let mut args = call.args.exprs().iter().map(|a| str_lit(strip(a)));
    let (Some(Some(topic)), Some(Some(group))) = (args.next(), args.next()) else {
        return None;
    };
    let id = format!("{topic}.{group}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(id)
}

/// A literal source id, when it is valid; an error when it is not.
fn literal_source_id(cx: &mut Cx, arg: &Expr) -> Option<String> {
    let id = str_lit(arg)?;
    let valid = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if valid {
        return Some(id);
    }
    cx.err(
        arg.span(),
        format!(
            "source id {id:?} must be non-empty and use only `[A-Za-z0-9_.-]`: \
             it prefixes the ids of operators and their state"
        ),
    );
    None
}

/// Literal sizes, slides and gaps of at least 1 ms; a literal offset smaller than the
/// size (or slide).
fn assigner(cx: &mut Cx, arg: &Expr) {
    let Some((ty, ctor, args)) = ctor_call(arg) else {
        return;
    };
    let fields: &[&str] = match (ty.as_str(), ctor.as_str()) {
        ("TumblingEventTimeWindows", "of") => &["size"],
        ("TumblingEventTimeWindows", "with_offset") => &["size", "offset"],
        ("SlidingEventTimeWindows", "of") => &["size", "slide"],
        ("SlidingEventTimeWindows", "with_offset") => &["size", "slide", "offset"],
        ("EventTimeSessionWindows", "with_gap") => &["gap"],
        _ => return,
    };
    let bound_field = if fields.contains(&"slide") {
        "slide"
    } else {
        "size"
    };
    let mut bound: Option<i128> = None;
    for (field, arg) in fields.iter().zip(args) {
        if *field == "offset" {
            if let (Some(off), Some(b)) = (int_lit(arg), bound) {
                if off.unsigned_abs() >= b.unsigned_abs() {
                    cx.err(
                        arg.span(),
                        format!(
                            "|offset| must be smaller than `{bound_field}` ({b} ms), got {off} ms"
                        ),
                    );
                }
            }
            continue;
        }
        let Some(nanos) = duration_nanos(arg) else {
            continue;
        };
        let ms = i128::try_from(nanos / 1_000_000).unwrap_or(i128::MAX);
        if ms <= 0 {
            cx.err(
                arg.span(),
                format!("window `{field}` must be at least 1 ms, but this duration is {ms} ms"),
            );
        } else if *field == bound_field {
            bound = Some(ms);
        }
    }
}

/// A literal count of at least 1, a literal interval of at least 1 ms, also inside a
/// `PurgingTrigger`.
fn trigger(cx: &mut Cx, arg: &Expr) {
    let Some((ty, ctor, args)) = ctor_call(arg) else {
        return;
    };
    match (ty.as_str(), ctor.as_str(), args.first()) {
        ("CountTrigger", "of", Some(count)) if int_lit(count) == Some(0) => {
            cx.err(count.span(), "a count trigger needs a count of at least 1");
        }
        ("ContinuousEventTimeTrigger", "of", Some(interval)) => {
            let Some(nanos) = duration_nanos(interval) else {
                return;
            };
            if nanos < 1_000_000 {
                cx.err(
                    interval.span(),
                    format!(
                        "a continuous trigger's `interval` must be at least 1 ms, but this duration is {} ms",
                        nanos / 1_000_000
                    ),
                );
            }
        }
        ("PurgingTrigger", "of", Some(inner)) => trigger(cx, inner),
        _ => {}
    }
}

/// `GlobalWindows` has no default trigger (its window never ends in event time): a
/// window function must come after a `.trigger(..)`. A renamed `GlobalWindows` gets the
/// builder's type error instead.
pub(super) fn global_windows_need_a_trigger(cx: &mut Cx, calls: &[Call]) {
    let mut global: Option<&Expr> = None;
    for call in calls {
        match call.name.to_string().as_str() {
            "window" => {
                global = call
                    .args
                    .exprs()
                    .first()
                    .filter(|arg| ctor_call(arg).is_some_and(|(ty, ..)| ty == "GlobalWindows"));
            }
            "trigger" => global = None,
            "allowed_lateness" | "side_output_late_data" | "side_output_rejected" => {}
            _ => {
                if let Some(arg) = global.take() {
                    cx.err(
                        arg.span(),
                        "`GlobalWindows` has no default trigger, so its windows would never fire: \
                         set one with `.trigger(..)` after `.window(..)`, e.g. `.trigger(CountTrigger::of(100))`",
                    );
                }
            }
        }
    }
}
