//! The rules of the DSL: AST → checked steps, or every error found (not just the first).
//!
//! Arity, stage and engine errors are generated from the operator table (`ops/`), so they
//! read the same for every operator. Argument rules: literal source ids, literal window
//! sizes/slides/gaps/offsets and count-trigger counts, state declarations.

use crate::ops::{self, ArgKind, Engine, IdKind, OpSpec, Role, Stage, Variant};
use crate::parse::{Args, Call, Pipeline, StateDecl};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{Expr, Lit};

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
}

/// The source id used in ids when it is not a literal: the builder numbers sources per
/// environment at run time (`source-0`, `source-1`, …).
pub(crate) const RUNTIME_SOURCE_ID: &str = "source-{n}";

/// Checks `p` against every rule; all errors are collected.
pub(crate) fn check(p: &Pipeline) -> Result<Checked<'_>, Vec<syn::Error>> {
    let mut cx = Cx::default();
    let mut steps = Vec::new();
    let mut stage = Stage::Env;
    let mut engines: Vec<Engine> = Engine::ALL.to_vec();
    let mut restricted_by: Option<&Call> = None;
    let mut engine_lost = false;
    let mut source: Option<&Call> = None;
    let mut sink: Option<&Call> = None;
    let mut source_id = RUNTIME_SOURCE_ID.to_string();
    let mut position = 0u32;
    let mut states: HashMap<String, ()> = HashMap::new();
    // After an unknown operator the stage is unknown: stop stage checks (no cascades).
    let mut lost = false;

    for call in &p.calls {
        let name = call.name.to_string();
        let Some(op) = ops::lookup(&name) else {
            cx.unknown(call, (!lost).then_some(stage));
            lost = true;
            continue;
        };
        cx.arity(call, op);
        cx.arguments(call, op, &mut source_id, &mut states);
        if !lost {
            if let Some(done) = sink.filter(|_| stage == Stage::Done) {
                cx.err(
                    call.name.span(),
                    format!(
                        "`{name}` follows the sink `{}`: a sink ends the pipeline",
                        done.name
                    ),
                );
                lost = true;
                continue;
            }
        }
        let variant = match op.variant_at(stage) {
            Some(v) => Some(v),
            None if lost => None,
            None => {
                cx.stage(call, op, stage, source);
                // The stage is now a guess: stop stage checks so one mistake gives one error.
                lost = true;
                None
            }
        };
        let chosen = variant.unwrap_or(&op.variants[0]);
        stage = chosen.produces;
        match op.role {
            Role::Source => source = source.or(Some(call)),
            Role::Sink => sink = sink.or(Some(call)),
            Role::Transform => {}
        }
        if stage != Stage::KeyedState {
            states.clear();
        }
        let common: Vec<Engine> = engines
            .iter()
            .copied()
            .filter(|e| op.engines.contains(e))
            .collect();
        if common.is_empty() {
            if !engine_lost {
                let before = restricted_by.map_or_else(String::new, |c| format!("`{}`", c.name));
                let msg = match engines.as_slice() {
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
                        names(&engines)
                    ),
                };
                cx.err(call.name.span(), msg);
            }
            // One engine error per pipeline: the operators after it would repeat it.
            engine_lost = true;
        } else {
            if common.len() < engines.len() {
                restricted_by = Some(call);
            }
            engines = common;
        }
        let id = match chosen.id {
            IdKind::None => None,
            IdKind::Position => {
                position += 1;
                None
            }
            IdKind::Kind(kind) => {
                position += 1;
                Some(format!("{source_id}/{position}:{kind}"))
            }
        };
        if let Some(variant) = variant {
            steps.push(Step {
                call,
                op,
                variant,
                id,
            });
        }
    }

    if !lost {
        cx.global_windows_need_a_trigger(&p.calls);
    }

    if p.calls.is_empty() {
        cx.err(
            p.env_span(),
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
        let last = p.calls.last().map_or(p.end, |c| c.name.span());
        cx.err(last, msg);
    }

    if cx.errors.is_empty() {
        Ok(Checked {
            pipeline: p,
            steps,
            engines,
        })
    } else {
        Err(cx.errors)
    }
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

#[derive(Default)]
struct Cx {
    errors: Vec<syn::Error>,
}

impl Cx {
    fn err(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.errors.push(syn::Error::new(span, msg));
    }

    fn unknown(&mut self, call: &Call, stage: Option<Stage>) {
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
                or_list(
                    ops::TABLE
                        .iter()
                        .filter(|o| o.variant_at(stage).is_some())
                        .map(|o| format!("`{}`", o.name))
                )
            ),
            (None, None) => format!("unknown operator `{name}`"),
        };
        self.err(call.name.span(), msg);
    }

    fn arity(&mut self, call: &Call, op: &OpSpec) {
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
        self.err(
            span,
            format!(
                "`{}` takes {}: `{}`, but {were} given",
                op.name,
                op.arity_text(),
                op.signature()
            ),
        );
    }

    fn stage(&mut self, call: &Call, op: &OpSpec, stage: Stage, source: Option<&Call>) {
        let name = &op.name;
        let span = call.name.span();
        if op.role == Role::Source {
            let first =
                source.map_or_else(String::new, |s| format!(" (the first is `{}`)", s.name));
            self.err(
                span,
                format!("a pipeline has exactly one source, but `{name}` is a second one{first}"),
            );
            return;
        }
        if stage == Stage::Env {
            self.err(
                span,
                format!(
                    "the pipeline has no source: start it with {} before `{name}`",
                    role_list(Role::Source)
                ),
            );
            return;
        }
        let wants_keyed = op.variants.iter().any(|v| v.applies == Stage::Keyed);
        let applies = or_list(
            op.variants
                .iter()
                .filter(|v| !(wants_keyed && v.applies == Stage::KeyedState))
                .map(|v| v.applies.noun().to_string()),
        );
        let wants = |s: Stage| op.variants.iter().any(|v| v.applies == s);
        let hint = match stage {
            Stage::Stream | Stage::Processed if wants(Stage::Keyed) => {
                "add `.key_by(|element| key)` before it".to_string()
            }
            Stage::Stream | Stage::Processed if wants(Stage::Windowed) => {
                "add `.key_by(|element| key)` and `.window(assigner)` before it".to_string()
            }
            Stage::Keyed if wants(Stage::Windowed) => {
                "add `.window(assigner)` before it".to_string()
            }
            _ if wants(Stage::Processed) => "`on_timer` must directly follow `process`".to_string(),
            Stage::KeyedState => "`state(..)` must be followed by `process`".to_string(),
            Stage::Windowed => format!(
                "a windowed stream first needs a window function: {}",
                window_functions()
            ),
            Stage::Keyed => format!(
                "a keyed stream first needs a keyed operator: {}",
                or_list(
                    ops::TABLE
                        .iter()
                        .filter(|o| o.variants.iter().any(|v| v.applies == Stage::Keyed))
                        .map(|o| format!("`{}`", o.name))
                )
            ),
            _ => String::new(),
        };
        let sep = if hint.is_empty() { "" } else { "; " };
        self.err(
            span,
            format!("`{name}` applies to {applies}, but here it is applied to {stage}{sep}{hint}"),
        );
    }

    fn arguments(
        &mut self,
        call: &Call,
        op: &OpSpec,
        source_id: &mut String,
        states: &mut HashMap<String, ()>,
    ) {
        if let Args::States(decls) = &call.args {
            for decl in decls {
                self.state_decl(decl, states);
            }
            return;
        }
        if matches!(op.name, "from_mq_topic" | "from_mq_topic_with_options") {
            // The Redis engine's default source id: `{topic}.{group}`, other characters `_`.
            let mut args = call.args.exprs().iter().map(|a| str_lit(strip(a)));
            if let (Some(Some(topic)), Some(Some(group))) = (args.next(), args.next()) {
                *source_id = format!("{topic}.{group}")
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
            }
        }
        for (spec, arg) in op.args.iter().zip(call.args.exprs()) {
            let arg = strip(arg);
            match spec.kind {
                ArgKind::SourceId => {
                    if let Some(id) = str_lit(arg) {
                        if id.is_empty()
                            || !id
                                .bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
                        {
                            self.err(
                                arg.span(),
                                format!(
                                    "source id {id:?} must be non-empty and use only `[A-Za-z0-9_.-]`: \
                                     it prefixes the ids of operators and their state"
                                ),
                            );
                        } else {
                            *source_id = id;
                        }
                    }
                }
                ArgKind::Assigner => self.assigner(arg),
                ArgKind::Trigger => self.trigger(arg),
                ArgKind::Expr | ArgKind::Generator | ArgKind::StateDecls => {}
            }
        }
    }

    fn state_decl(&mut self, decl: &StateDecl, states: &mut HashMap<String, ()>) {
        let name = decl.name.to_string();
        if states.insert(name.clone(), ()).is_some() {
            self.err(
                decl.name.span(),
                format!("state `{name}` is declared twice for this `process`: state names are unique per operator"),
            );
        }
        let Some((kind, n_types)) = state_kind(&decl.ty) else {
            self.err(
                decl.ty.span(),
                "expected a state type: `ValueState<T>`, `ListState<T>`, `MapState<K, V>` or `SetState<T>`",
            );
            return;
        };
        let expected = if kind == "MapState" { 2 } else { 1 };
        if n_types != expected {
            let form = if kind == "MapState" {
                "MapState<K, V>"
            } else {
                "Kind<T>"
            };
            let form = form.replace("Kind", &kind);
            self.err(
                decl.ty.span(),
                format!(
                    "`{kind}` takes {}: `{form}`",
                    if expected == 1 {
                        "1 type argument"
                    } else {
                        "2 type arguments"
                    }
                ),
            );
        }
        match (&decl.default, kind.as_str()) {
            (None, "ValueState") => self.err(
                decl.name.span(),
                format!("value state `{name}` needs a default: `{name}: ValueState<T> = default`"),
            ),
            (Some(d), k) if k != "ValueState" => self.err(
                d.span(),
                format!("`{k}` starts empty for every key and takes no default"),
            ),
            _ => {}
        }
    }

    fn assigner(&mut self, arg: &Expr) {
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
                        self.err(
                            arg.span(),
                            format!("|offset| must be smaller than `{bound_field}` ({b} ms), got {off} ms"),
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
                self.err(
                    arg.span(),
                    format!("window `{field}` must be at least 1 ms, but this duration is {ms} ms"),
                );
            } else if *field == bound_field {
                bound = Some(ms);
            }
        }
    }

    /// `GlobalWindows` has no default trigger (its window never ends in event time): a
    /// window function must come after a `.trigger(..)`.
    fn global_windows_need_a_trigger(&mut self, calls: &[Call]) {
        let mut global: Option<&Expr> = None;
        for call in calls {
            let name = call.name.to_string();
            match name.as_str() {
                "window" => {
                    global =
                        call.args.exprs().first().filter(|arg| {
                            ctor_call(arg).is_some_and(|(ty, ..)| ty == "GlobalWindows")
                        });
                }
                "trigger" => global = None,
                "allowed_lateness" | "side_output_late_data" | "side_output_rejected" => {}
                _ => {
                    if let Some(arg) = global.take() {
                        self.err(
                            arg.span(),
                            "`GlobalWindows` has no default trigger, so its windows would never fire: \
                             set one with `.trigger(..)` after `.window(..)`, e.g. `.trigger(CountTrigger::of(100))`",
                        );
                    }
                }
            }
        }
    }

    fn trigger(&mut self, arg: &Expr) {
        let Some((ty, ctor, args)) = ctor_call(arg) else {
            return;
        };
        match (ty.as_str(), ctor.as_str(), args.first()) {
            ("CountTrigger", "of", Some(count)) if int_lit(count) == Some(0) => {
                self.err(count.span(), "a count trigger needs a count of at least 1");
            }
            ("ContinuousEventTimeTrigger", "of", Some(interval)) => {
                if let Some(nanos) = duration_nanos(interval) {
                    if nanos < 1_000_000 {
                        self.err(
                            interval.span(),
                            format!(
                                "a continuous trigger's `interval` must be at least 1 ms, but this duration is {} ms",
                                nanos / 1_000_000
                            ),
                        );
                    }
                }
            }
            ("PurgingTrigger", "of", Some(inner)) => self.trigger(inner),
            _ => {}
        }
    }
}

/// `ValueState<u64>` → ("ValueState", 1).
fn state_kind(ty: &syn::Type) -> Option<(String, usize)> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let kind = last.ident.to_string();
    if !["ValueState", "ListState", "MapState", "SetState"].contains(&kind.as_str()) {
        return None;
    }
    let n = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a.args.len(),
        _ => 0,
    };
    Some((kind, n))
}

/// Strips parentheses, groups and a trailing `?`.
pub(crate) fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        Expr::Try(t) => strip(&t.expr),
        e => e,
    }
}

/// `Type::ctor(args)` → ("Type", "ctor", args).
pub(crate) fn ctor_call(e: &Expr) -> Option<(String, String, Vec<&Expr>)> {
    let Expr::Call(call) = strip(e) else {
        return None;
    };
    let Expr::Path(path) = &*call.func else {
        return None;
    };
    let segs: Vec<_> = path.path.segments.iter().collect();
    let [.., ty, ctor] = segs.as_slice() else {
        return None;
    };
    Some((
        ty.ident.to_string(),
        ctor.ident.to_string(),
        call.args.iter().map(strip).collect(),
    ))
}

fn str_lit(e: &Expr) -> Option<String> {
    match strip(e) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s.value()),
        _ => None,
    }
}

fn int_lit(e: &Expr) -> Option<i128> {
    match strip(e) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(i), ..
        }) => i.base10_parse().ok(),
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => int_lit(expr).map(|v| -v),
        _ => None,
    }
}

/// The value of a literal `Duration` expression in nanoseconds, when the macro can see it.
pub(crate) fn duration_nanos(e: &Expr) -> Option<u128> {
    match strip(e) {
        Expr::Path(p) => {
            let segs: Vec<_> = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            match segs.as_slice() {
                [.., d, z] if d == "Duration" && z == "ZERO" => Some(0),
                _ => None,
            }
        }
        e => {
            let (ty, ctor, args) = ctor_call(e)?;
            if ty != "Duration" {
                return None;
            }
            let n = |i: usize| {
                args.get(i)
                    .and_then(|a| int_lit(a))
                    .and_then(|v| u128::try_from(v).ok())
            };
            let unit: u128 = match ctor.as_str() {
                "from_nanos" => 1,
                "from_micros" => 1_000,
                "from_millis" => 1_000_000,
                "from_secs" => 1_000_000_000,
                "from_mins" => 60_000_000_000,
                "from_hours" => 3_600_000_000_000,
                "new" => return Some(n(0)?.checked_mul(1_000_000_000)? + n(1)?),
                _ => return None,
            };
            n(0)?.checked_mul(unit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn errors(p: Pipeline) -> Vec<String> {
        match check(&p) {
            Ok(_) => Vec::new(),
            Err(e) => e.iter().map(ToString::to_string).collect(),
        }
    }

    fn ids(p: Pipeline) -> Vec<String> {
        let checked = check(&p).unwrap_or_else(|e| panic!("{}", e[0]));
        checked.steps.iter().filter_map(|s| s.id.clone()).collect()
    }

    #[test]
    fn a_valid_keyed_window_pipeline_has_no_errors() {
        let p: Pipeline = parse_quote! {
            env.from_elements(["a b", "c"])
                .flat_map(|l: &str| l.split(' ').map(String::from).collect::<Vec<_>>())
                .key_by(|w: &String| w.clone())
                .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
                .allowed_lateness(Duration::from_secs(5))
                .reduce(|a, b| a + &b)
                .collect_vec()
        };
        assert_eq!(errors(p), Vec::<String>::new());
    }

    #[test]
    fn unknown_operator_suggests_the_closest() {
        let p: Pipeline = parse_quote!(env.from_elements([1]).mapp(|x| x).collect_vec());
        assert_eq!(errors(p), ["unknown operator `mapp`; did you mean `map`?"]);
    }

    #[test]
    fn a_method_on_the_environment_needs_parentheses() {
        let p: Pipeline = parse_quote!(env.clone().from_elements([1]).collect_vec());
        let e = errors(p);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].ends_with("put it in parentheses: `(env.clone(..)).from_elements(..)`"),
            "{e:?}"
        );
        let p: Pipeline = parse_quote!((env.clone()).from_elements([1]).collect_vec());
        assert!(errors(p).is_empty());
    }

    #[test]
    fn unknown_operator_does_not_cascade() {
        let p: Pipeline = parse_quote!(env.from_elements([1]).frobnicate(|x| x).sum().collect());
        let e = errors(p);
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(
            e[0],
            "unknown operator `frobnicate`; on a stream the operators are `map`, `try_map`, `filter`, `flat_map`, \
             `assign_timestamps_and_watermarks`, `assign_timestamps_and_watermarks_with`, `key_by`, `sink`, `for_each`, `print`, \
             `print_with_prefix` or `collect_vec`"
        );
        assert_eq!(
            e[1],
            "unknown operator `collect`; did you mean `collect_vec`?"
        );
    }

    #[test]
    fn arity_errors_come_from_the_table() {
        let p: Pipeline = parse_quote!(env.from_elements([1]).map(|x| x, 2).sum(1).collect_vec());
        assert_eq!(
            errors(p),
            [
                "`map` takes 1 argument: `map(|element| -> output)`, but 2 were given",
                "`sum` takes no arguments: `sum()`, but 1 was given",
                "`sum` applies to a keyed stream or a windowed stream, but here it is applied to a stream; \
                 add `.key_by(|element| key)` before it",
            ]
        );
    }

    #[test]
    fn keyed_and_windowed_operators_need_their_stage() {
        let p: Pipeline = parse_quote!(env.from_elements([1]).window(w).trigger(t).collect_vec());
        assert_eq!(
            errors(p),
            [
                "`window` applies to a keyed stream, but here it is applied to a stream; \
                 add `.key_by(|element| key)` before it",
            ]
        );
        let p: Pipeline = parse_quote!(env
            .from_elements([1])
            .key_by(|x| *x)
            .allowed_lateness(d)
            .sum()
            .collect_vec());
        assert_eq!(
            errors(p),
            ["`allowed_lateness` applies to a windowed stream, but here it is applied to a keyed stream; \
              add `.window(assigner)` before it"]
        );
        let p: Pipeline = parse_quote!(env
            .from_elements([1])
            .map(|x| x)
            .on_timer(|t, c, o| Ok(()))
            .collect_vec());
        assert_eq!(
            errors(p),
            ["`on_timer` applies to the output of `process`, but here it is applied to a stream; `on_timer` must directly follow `process`"]
        );
    }

    #[test]
    fn sources_and_sinks() {
        let p: Pipeline = parse_quote!(env.map(|x| x).collect_vec());
        assert!(errors(p)[0]
            .starts_with("the pipeline has no source: start it with `from_elements(..)`"));
        let p: Pipeline = parse_quote!(env.from_elements([1]).from_collection(v).collect_vec());
        assert_eq!(
            errors(p),
            ["a pipeline has exactly one source, but `from_collection` is a second one (the first is `from_elements`)"]
        );
        let p: Pipeline = parse_quote!(env.from_elements([1]).map(|x| x));
        assert_eq!(
            errors(p),
            ["the pipeline has no sink: end it with `sink(..)`, `for_each(..)`, `print()`, `print_with_prefix(..)` or `collect_vec()`"]
        );
        let p: Pipeline = parse_quote!(env.from_elements([1]).collect_vec().map(|x| x));
        assert_eq!(
            errors(p),
            ["`map` follows the sink `collect_vec`: a sink ends the pipeline"]
        );
    }

    #[test]
    fn source_ids_are_checked_when_literal() {
        let p: Pipeline = parse_quote!(env.add_source_with_id("my source", s).collect_vec());
        assert_eq!(
            errors(p),
            ["source id \"my source\" must be non-empty and use only `[A-Za-z0-9_.-]`: it prefixes the ids of operators and their state"]
        );
        let p: Pipeline = parse_quote!(env.add_source_with_id(id, s).collect_vec());
        assert!(errors(p).is_empty());
    }

    #[test]
    fn global_windows_need_a_trigger() {
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x)
                .window(GlobalWindows::create())
                .allowed_lateness(d)
                .sum().collect_vec()
        };
        assert_eq!(
            errors(p),
            ["`GlobalWindows` has no default trigger, so its windows would never fire: set one with `.trigger(..)` after `.window(..)`, e.g. `.trigger(CountTrigger::of(100))`"]
        );
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x)
                .window(GlobalWindows::create())
                .side_output_late_data(s)
                .trigger(CountTrigger::of(2))
                .sum().collect_vec()
        };
        assert!(errors(p).is_empty());
    }

    #[test]
    fn literal_trigger_configuration_is_checked_inside_purging_triggers() {
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x)
                .window(w)
                .trigger(PurgingTrigger::of(CountTrigger::of(0)))
                .trigger(ContinuousEventTimeTrigger::of(Duration::from_micros(999)))
                .trigger(PurgingTrigger::of(ContinuousEventTimeTrigger::of(Duration::from_millis(1))))
                .sum().collect_vec()
        };
        assert_eq!(
            errors(p),
            [
                "a count trigger needs a count of at least 1",
                "a continuous trigger's `interval` must be at least 1 ms, but this duration is 0 ms",
            ]
        );
    }

    #[test]
    fn literal_window_configuration_is_checked() {
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x)
                .window(SlidingEventTimeWindows::with_offset(Duration::from_secs(0), Duration::from_micros(10), 5))
                .trigger(CountTrigger::of(0))
                .sum().collect_vec()
        };
        assert_eq!(
            errors(p),
            [
                "window `size` must be at least 1 ms, but this duration is 0 ms",
                "window `slide` must be at least 1 ms, but this duration is 0 ms",
                "a count trigger needs a count of at least 1",
            ]
        );
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x)
                .window(TumblingEventTimeWindows::with_offset(Duration::from_secs(1), -1000)?)
                .sum().collect_vec()
        };
        assert_eq!(
            errors(p),
            ["|offset| must be smaller than `size` (1000 ms), got -1000 ms"]
        );
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x)
                .window(EventTimeSessionWindows::with_gap(std::time::Duration::ZERO))
                .sum().collect_vec()
        };
        assert_eq!(
            errors(p),
            ["window `gap` must be at least 1 ms, but this duration is 0 ms"]
        );
    }

    #[test]
    fn state_declarations() {
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x)
                .state(count: ValueState<u64> = 0, seen: SetState<u64>)
                .state(count: ListState<u64>, m: MapState<u64>, v: ValueState<u8>, l: ListState<u8> = vec![])
                .process(|v, ctx, out| Ok(()))
                .collect_vec()
        };
        assert_eq!(
            errors(p),
            [
                "state `count` is declared twice for this `process`: state names are unique per operator",
                "`MapState` takes 2 type arguments: `MapState<K, V>`",
                "value state `v` needs a default: `v: ValueState<T> = default`",
                "`ListState` starts empty for every key and takes no default",
            ]
        );
        let p: Pipeline = parse_quote! {
            env.from_elements([1]).key_by(|x| *x).state(a: ValueState<u8> = 0).reduce(|a, b| a).collect_vec()
        };
        assert_eq!(
            errors(p),
            ["`reduce` applies to a keyed stream or a windowed stream, but here it is applied to a keyed stream with declared state; \
              `state(..)` must be followed by `process`"]
        );
    }

    #[test]
    fn engines_must_share_every_operator() {
        let p: Pipeline = parse_quote!(env
            .from_mq_topic("orders", "billing")
            .map(|m| m)
            .collect_vec());
        assert_eq!(
            errors(p),
            ["`collect_vec` is not supported on the Redis engine yet: `from_mq_topic` before it runs only on the Redis engine, `collect_vec` only on the memory engine"]
        );
        // Windows run on both engines; one engine error for the memory-only terminal.
        let p: Pipeline = parse_quote!(env
            .from_mq_topic_with_id("orders-v1", "orders", "billing")
            .key_by(|m| m.partition)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .count()
            .print());
        assert_eq!(errors(p), Vec::<String>::new());
        let p: Pipeline = parse_quote!(env
            .from_mq_topic_with_id("orders-v1", "orders", "billing")
            .key_by(|m| m.partition)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .count()
            .collect_vec());
        assert_eq!(
            errors(p),
            ["`collect_vec` is not supported on the Redis engine yet: `from_mq_topic_with_id` before it runs only on the Redis engine, `collect_vec` only on the memory engine"]
        );
        let p: Pipeline = parse_quote!(env.from_mq_topic("orders", "billing").map(|m| m).print());
        let checked_engines = check(&p).map(|c| c.engines).unwrap_or_default();
        assert_eq!(checked_engines, [Engine::Redis]);
    }

    #[test]
    fn ids_follow_the_builder() {
        let p: Pipeline = parse_quote! {
            env.add_source_with_id("flights", src)
                .map(f)
                .assign_timestamps_and_watermarks(g)
                .key_by(k)
                .window(w)
                .trigger(t)
                .aggregate(a)
                .filter(p)
                .key_by(k2)
                .state(s: ValueState<u8> = 0)
                .process(pf)
                .on_timer(ot)
                .sink(s)
        };
        assert_eq!(
            ids(p),
            [
                "flights/1:map",
                "flights/2:watermarks",
                "flights/4:window-aggregate",
                "flights/5:filter",
                "flights/7:process",
                "flights/8:sink"
            ]
        );
        let p: Pipeline = parse_quote!(env.from_elements([1]).key_by(k).sum().print());
        assert_eq!(ids(p), ["source-{n}/2:sum", "source-{n}/3:sink"]);
        // The Redis engine's source id: `{topic}.{group}` with other characters as `_`.
        let p: Pipeline = parse_quote! {
            env.from_mq_topic("orders", "bill ing")
                .map(f)
                .key_by(k)
                .state(n: ValueState<u64> = 0)
                .process(pf)
                .sink(s)
        };
        assert_eq!(
            ids(p),
            [
                "orders.bill_ing/1:map",
                "orders.bill_ing/3:process",
                "orders.bill_ing/4:sink"
            ]
        );
        let p: Pipeline = parse_quote!(env
            .from_mq_topic_with_id("orders-v2", "orders", "g")
            .map(f)
            .print());
        assert_eq!(ids(p), ["orders-v2/1:map", "orders-v2/2:sink"]);
    }

    #[test]
    fn ids_do_not_change_when_a_later_operator_changes() {
        let a: Pipeline = parse_quote!(env
            .add_source_with_id("s", x)
            .map(f)
            .key_by(k)
            .reduce(r)
            .print());
        let b: Pipeline = parse_quote!(env
            .add_source_with_id("s", x)
            .map(f)
            .key_by(k)
            .reduce(r)
            .filter(g)
            .map(h)
            .collect_vec());
        assert_eq!(ids(a)[..2], ids(b)[..2]);
    }

    #[test]
    fn literal_durations() {
        let d = |e: Expr| duration_nanos(&e);
        assert_eq!(d(parse_quote!(Duration::from_secs(2))), Some(2_000_000_000));
        assert_eq!(
            d(parse_quote!(std::time::Duration::from_millis(5))),
            Some(5_000_000)
        );
        assert_eq!(d(parse_quote!(Duration::new(1, 5))), Some(1_000_000_005));
        assert_eq!(d(parse_quote!(Duration::ZERO)), Some(0));
        assert_eq!(d(parse_quote!(Duration::from_secs(n))), None);
        assert_eq!(d(parse_quote!(size)), None);
    }
}
