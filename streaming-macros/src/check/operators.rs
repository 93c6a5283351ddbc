//! The rules the operator table decides: unknown operators, arity, stage, engines, and a
//! source and a sink per pipeline. Their messages are generated from the table.

use super::walk::At;
use super::Cx;
use crate::ops::{self, ArgKind, Engine, OpSpec, Role, Stage};
use crate::parse::{Args, Call, Chain};
use syn::spanned::Spanned;

/// An operator not in the table: the closest name, or the operators of the stage.
pub(super) fn unknown(cx: &mut Cx, call: &Call, stage: Option<Stage>) {
    let name = call.name.to_string();
    let msg = match (ops::did_you_mean(&name), stage) {
        (Some(s), _) => format!("unknown operator `{name}`; did you mean `{s}`?"),
        (None, Some(Stage::Env)) => format!(
            "unknown operator `{name}`: a pipeline starts with a source ({}); to call a method \
             on the environment, put it in parentheses: `(env.{name}(..)).from_elements(..)`",
            role_list(Role::Source)
        ),
        (None, Some(stage)) => format!(
            "unknown operator `{name}`; on {stage} the operators are {}",
            operators_at(stage)
        ),
        (None, None) => format!("unknown operator `{name}`"),
    };
    cx.err(call.name.span(), msg);
}

/// The number of arguments the table gives the operator.
pub(super) fn arity(cx: &mut Cx, call: &Call, op: &OpSpec) {
    let given = call.args.len();
    let ok = match op.args {
        [a] if a.kind == ArgKind::StateDecls => given >= 1,
        args => args.len() == given,
    };
    if ok {
        return;
    }
    let span = match &call.args {
        Args::Exprs(e) if e.len() > op.args.len() => e[op.args.len()].span(),
        _ => call.parens,
    };
    let were = match given {
        0 => "none were".to_string(),
        1 => "1 was".to_string(),
        n => format!("{n} were"),
    };
    cx.err(
        span,
        format!(
            "`{}` takes {}: `{}`, but {were} given",
            op.name,
            op.arity_text(),
            op.signature()
        ),
    );
}

/// An operator applied at a stage none of its rows applies to: what it applies to and the
/// fix.
pub(super) fn stage(cx: &mut Cx, call: &Call, stage: Stage, source: Option<&Call>) {
    let name = call.name.to_string();
    let rows: Vec<&OpSpec> = ops::rows(&name).collect();
    let span = call.name.span();
    if rows.iter().any(|op| op.role == Role::Source) {
        let first = source.map_or_else(String::new, |s| format!(" (the first is `{}`)", s.name));
        cx.err(
            span,
            format!("a pipeline has exactly one source, but `{name}` is a second one{first}"),
        );
        return;
    }
    if stage == Stage::Env {
        cx.err(
            span,
            format!(
                "the pipeline has no source: start it with {} before `{name}`",
                role_list(Role::Source)
            ),
        );
        return;
    }
    let applied: Vec<Stage> = rows
        .iter()
        .flat_map(|op| op.variants.iter().map(|v| v.applies))
        .collect();
    let wants = |s: Stage| applied.contains(&s);
    // The stages of the kind of pipeline at hand (of one input, or of several), when the
    // operator has some: `trigger` on a keyed stream needs a windowed stream.
    let akin = |s: &&Stage| s.of_several_inputs() == stage.of_several_inputs();
    let shown: Vec<&Stage> = match applied.iter().filter(akin).count() {
        0 => applied.iter().collect(),
        _ => applied.iter().filter(akin).collect(),
    };
    let applies = or_list(
        shown
            .into_iter()
            .filter(|s| !(wants(Stage::Keyed) && **s == Stage::KeyedState))
            .map(|s| s.noun().to_string()),
    );
    let hint = stage_hint(&wants, stage);
    let sep = if hint.is_empty() { "" } else { "; " };
    cx.err(
        span,
        format!("`{name}` applies to {applies}, but here it is applied to {stage}{sep}{hint}"),
    );
}

/// What is missing at `stage` before an operator that applies to the stages `wants`
/// accepts.
fn stage_hint(wants: &dyn Fn(Stage) -> bool, stage: Stage) -> String {
    const KEY_BOTH: &str = "`.key_by(|&first| key, |&second| key)`";
    match stage {
        Stage::Stream | Stage::Processed if wants(Stage::Keyed) => {
            "add `.key_by(|element| key)` before it".to_string()
        }
        Stage::Stream | Stage::Processed if wants(Stage::Windowed) => {
            "add `.key_by(|element| key)` and `.window(assigner)` before it".to_string()
        }
        Stage::Stream | Stage::Processed if wants(Stage::Connected) => {
            "add `.connect(other)` before it".to_string()
        }
        Stage::Keyed if wants(Stage::Windowed) => "add `.window(assigner)` before it".to_string(),
        Stage::Connected if wants(Stage::KeyedConnected) => {
            format!("keyed state and timers need a key: add {KEY_BOTH} before it")
        }
        Stage::Connected if wants(Stage::KeyedState) => format!(
            "the keyed state of connected streams belongs to a `KeyedCoProcessFunction`: \
             key both inputs with {KEY_BOTH}, then `.process(function)`"
        ),
        Stage::BroadcastConnected if wants(Stage::KeyedState) => {
            "the keyed state of a keyed stream connected to a broadcast stream belongs to its \
             `KeyedBroadcastProcessFunction`: `ctx.state(descriptor)` in `process_element`"
                .to_string()
        }
        Stage::Broadcast => "a broadcast stream is the argument of a keyed stream's \
             `connect`: name it with `let` and pass it to `.key_by(..).connect(name)`"
            .to_string(),
        Stage::KeyedConnected if wants(Stage::CoWindowed) => {
            "add `.window(assigner)` before it".to_string()
        }
        _ if wants(Stage::IntervalJoin) => {
            "it follows `.key_by(..).interval_join(other)`".to_string()
        }
        _ if wants(Stage::BoundedJoin) => {
            "it follows `.interval_join(other).between(lower, upper)`".to_string()
        }
        _ if wants(Stage::Processed) => "`on_timer` must directly follow `process`".to_string(),
        Stage::KeyedState => "`state(..)` must be followed by `process`".to_string(),
        Stage::Windowed => format!(
            "a windowed stream first needs a window function: {}",
            window_functions()
        ),
        Stage::Keyed => format!(
            "a keyed stream first needs a keyed operator: {}",
            operators_at(Stage::Keyed)
        ),
        s if s.of_several_inputs() => {
            format!("on {stage} the operators are {}", operators_at(stage))
        }
        _ => String::new(),
    }
}

/// "`a`, `b` or `c`": the operators that apply at `stage`.
fn operators_at(stage: Stage) -> String {
    let mut names: Vec<&str> = Vec::new();
    for op in ops::TABLE.iter().filter(|o| o.variant_at(stage).is_some()) {
        if !names.contains(&op.name) {
            names.push(op.name);
        }
    }
    or_list(names.into_iter().map(|n| format!("`{n}`")))
}

/// No engine supports `call` together with the operators before it (`engines`, the last
/// one narrowing them being `restricted_by`).
pub(super) fn no_common_engine(
    cx: &mut Cx,
    call: &Call,
    op: &OpSpec,
    engines: &[Engine],
    restricted_by: Option<&Call>,
) {
    let name = &call.name;
    let before = restricted_by.map_or_else(String::new, |c| format!("`{}`", c.name));
    let msg = match engines {
        [only] => format!(
            "`{name}` is not supported on the {} engine yet: {before} before it runs \
             only on the {} engine, `{name}` only on the {} engine",
            only.title(),
            only.title(),
            titles(op.engines)
        ),
        _ => format!(
            "`{name}` runs only on the {} engine, but {before} before it runs only on the {} engine: \
             no engine has both",
            names(op.engines),
            names(engines)
        ),
    };
    cx.err(call.name.span(), msg);
}

/// A pipeline starts with a source, or at a stream bound with `let` (`bound_head`), and
/// (unless the stage is lost) ends with a sink.
pub(super) fn source_and_sink(cx: &mut Cx, main: &Chain, at: &At<'_>, bound_head: bool) {
    let (lost, stage) = (at.lost, at.stage);
    if main.calls.is_empty() && !bound_head {
        cx.err(
            main.head_span(),
            format!(
                "the pipeline has no source: start it with {}",
                role_list(Role::Source)
            ),
        );
    } else if !lost && stage != Stage::Done {
        let mut msg = format!(
            "the pipeline has no sink: end it with {}",
            role_list(Role::Sink)
        );
        if stage == Stage::Windowed {
            msg.push_str(&format!(
                ", after a window function ({})",
                window_functions()
            ));
        }
        let last = main.calls.last().map_or(main.end, |c| c.name.span());
        cx.err(last, msg);
    }
}

/// A fragment ends at a stream (its value is that stream): not after `key_by`, `window` or
/// `state(..)`, which need an operator after them.
pub(super) fn fragment_ends_at_a_stream(cx: &mut Cx, main: &Chain, stage: Stage) {
    if matches!(stage, Stage::Stream | Stage::Processed) {
        return;
    }
    let mut msg = format!(
        "a pipeline fragment ends at a stream, but this one ends at {}",
        stage.noun()
    );
    if stage == Stage::Windowed {
        msg.push_str(&format!(": add a window function ({})", window_functions()));
    } else {
        msg.push_str(": add the operator that uses it");
    }
    let last = main.calls.last().map_or(main.end, |c| c.name.span());
    cx.err(last, msg);
}

fn titles(engines: &[Engine]) -> String {
    engines
        .iter()
        .map(|e| e.title())
        .collect::<Vec<_>>()
        .join(" and ")
}

fn names(engines: &[Engine]) -> String {
    engines
        .iter()
        .map(|e| e.name())
        .collect::<Vec<_>>()
        .join(" and ")
}

/// "`a(..)`, `b(..)` or `c(..)`" for the operators of a role.
fn role_list(role: Role) -> String {
    or_list(
        ops::TABLE
            .iter()
            .filter(|o| o.role == role)
            .map(|o| format!("`{}`", call_shape(o))),
    )
}

fn call_shape(op: &OpSpec) -> String {
    if op.args.is_empty() {
        format!("{}()", op.name)
    } else {
        format!("{}(..)", op.name)
    }
}

/// The operators that end a windowed stream.
fn window_functions() -> String {
    or_list(
        ops::TABLE
            .iter()
            .filter(|o| {
                o.variants
                    .iter()
                    .any(|v| v.applies == Stage::Windowed && v.produces == Stage::Stream)
            })
            .map(|o| format!("`{}`", o.name)),
    )
}

fn or_list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}
