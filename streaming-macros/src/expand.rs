//! Checked pipeline → Rust code. Cannot fail: every rule was enforced by `check`.
//!
//! The expansion is the builder chain itself, so the pipeline compiles to the same nested
//! generic operator structs as the builder API (no `dyn`, no `Box`, no per-record
//! allocation by the framework). Every generated method name and argument keeps the user's
//! span, so a type error between stages is reported at the user's closure or operator.
//!
//! ```text
//! '__streaming_pipeline: {            // only with a configuration argument or a `?`
//!     use ::streaming::__private::{FallibleConfigKind as _, InfallibleConfigKind as _};
//!     let __config_0 = (match <assigner> {  // classified by type: a `Result` is unwrapped
//!         arg => match (&arg).__config_kind().config(arg) {
//!             Ok(value) => value, Err(error) => break .. config_error(error),
//!         },
//!     },);
//!     env.from_elements(..).key_by(..).window(__config_0.0).reduce(..).collect_vec()
//! }
//! ```
//!
//! `state(count: ValueState<u64> = 0).process(|v, ctx, out| ..)` hands the descriptors to
//! the process stage, which gives each its slot when the pipeline is built, and binds each
//! name to the declaration's index at the top of the closure body:
//!
//! ```text
//! ::streaming::__private::process_with_states(    // process_with_timers with `on_timer`
//!     keyed,
//!     (::streaming::api::ValueStateDescriptor::<u64>::new("count", 0), ()),
//!     |v, ctx, out| { let count = ::streaming::__private::DeclaredState::<..>::at(0); .. },
//! )
//! ```
//!
//! Streams named with `let` keep their `let`, before the pipeline; a stream argument the
//! macro followed is expanded as a chain like the pipeline, and `between` (which returns
//! a `Result`) ends the labelled block with its error:
//!
//! ```text
//! '__streaming_pipeline: {
//!     use ::streaming::__private::IntervalJoinBy as _;
//!     let payments = env.from_mq_topic(..).map(..);
//!     match env.from_mq_topic(..).key_by(kf)
//!         .interval_join_by(payments, kg)     // `interval_join(payments.key_by(kg))`
//!         .between(0, 600_000) {
//!         Ok(value) => value, Err(error) => break .. config_error(error),
//!     }
//!     .process(..).sink(..)
//! }
//! ```
//!
//! `::streaming` stands for the path [`CratePath`] finds (the user may have renamed the
//! dependency).

use crate::check::{Checked, Step};
use crate::ops::{ArgKind, Engine, Expansion, Stage};
use crate::parse::{Args, Call, StateDecl};
use crate::runtime::CratePath;
use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Expr, Lifetime};

/// What the expansion of one pipeline carries from argument to argument.
struct Cx<'k> {
    /// The runtime crate.
    krate: &'k CratePath,
    /// The label of the pipeline's block, which a failed configuration breaks with its error.
    label: Lifetime,
    /// The bindings evaluated before the chain.
    prelude: TokenStream,
    /// How many configuration values are bound so far.
    hoisted: usize,
    /// Whether an argument is classified by its type (the kind traits must be in scope).
    classified: bool,
    /// Whether the chain breaks the block with an error of its own (`between`).
    breaks: bool,
    /// Whether an interval join takes the other input's key function apart (its trait
    /// must be in scope).
    joins_by_key: bool,
    /// Whether state descriptors get a codec: the Redis engine keeps state in Redis, and
    /// a fragment runs on every engine.
    persistent: bool,
}

impl Cx<'_> {
    /// Binds `value` before the chain; `__config_n.0` stands for it in the chain.
    ///
    /// The binding is a 1-tuple so that the expression in the chain has two tokens, spanned
    /// at the first and the last token of `arg`: rustc then reports a type error of the
    /// value (`.window(Duration::from_secs(1))`) under the whole argument, as if the user's
    /// tokens stood there.
    fn bind(&mut self, arg: &Expr, value: TokenStream) -> TokenStream {
        let first = arg.span();
        let last = arg
            .to_token_stream()
            .into_iter()
            .last()
            .map_or(first, |t| t.span());
        let var = Ident::new(&format!("__config_{}", self.hoisted), first);
        self.hoisted += 1;
        self.prelude
            .extend(quote_spanned! {first=> let #var = (#value,); });
        let mut field = proc_macro2::Literal::usize_unsuffixed(0);
        field.set_span(last);
        quote_spanned! {last=> #var.#field }
    }

    /// `match result { Ok(value) => value, Err(error) => break 'label <error> }`, spanned
    /// at `span`.
    fn unwrap_or_break(&self, span: Span, result: TokenStream) -> TokenStream {
        let krate = self.krate.at(span);
        let label = &self.label;
        quote_spanned! {span=>
            match #result {
                ::core::result::Result::Ok(value) => value,
                ::core::result::Result::Err(error) => {
                    let error = #krate::__private::config_error(error);
                    break #label error
                }
            }
        }
    }
}

/// The tokens of `arg` in the chain. A trailing `?` (any argument) and a configuration
/// argument are evaluated before the chain and replaced by a variable: a `?` unwraps the
/// `Result`, a configuration argument is classified by its type (a `Result` is unwrapped,
/// any other value is kept), and either error ends the pipeline's block with it.
fn argument(cx: &mut Cx<'_>, arg: &Expr, kind: ArgKind) -> TokenStream {
    if let Expr::Try(t) = arg {
        let value = cx.unwrap_or_break(arg.span(), t.expr.to_token_stream());
        return cx.bind(arg, value);
    }
    // A closure is never a `Result`: a sink written as a closure stays in place.
    if !kind.is_config() || (kind == ArgKind::Sink && matches!(arg, Expr::Closure(_))) {
        return arg.into_token_stream();
    }
    let value = match wrapped(arg).filter(|_| kind == ArgKind::Trigger) {
        // A trigger wrapping a trigger (`PurgingTrigger::of(CountTrigger::of(2))`, under
        // any name): the inner argument is classified too, before the wrapper.
        Some((func, inner)) => {
            let inner = argument(cx, inner, kind);
            quote_spanned! {arg.span()=> #func(#inner) }
        }
        None => arg.into_token_stream(),
    };
    cx.classified = true;
    let classified = quote_spanned! {arg.span()=> (&arg).__config_kind().config(arg) };
    let unwrapped = cx.unwrap_or_break(arg.span(), classified);
    cx.bind(
        arg,
        quote_spanned! {arg.span()=> match #value { arg => #unwrapped } },
    )
}

/// The operators whose arguments are functions of an element (or a reference to it),
/// bound by an `Fn` trait of an input's element type.
const ELEMENT_FUNCTIONS: &[&str] = &[
    "map",
    "try_map",
    "filter",
    "flat_map",
    "key_by",
    "co_map",
    "co_flat_map",
];

/// A closure `|x: T| body` of an element function, called from a closure whose argument
/// type rustc takes from the operator's bound: `{ let mut f = |x: T| body; move |e| f(e) }`.
/// When `T` is not the element type, rustc reports one mismatch at `T` (the argument
/// `e` carries `T`'s span) and the operator's own closure still satisfies its bound, so
/// no follow-on error appears at a later operator. Closures without a typed argument are
/// kept as they are (rustc infers their argument from the bound).
fn element_function(arg: &Expr, by_reference: bool) -> Option<TokenStream> {
    let Expr::Closure(closure) = arg else {
        return None;
    };
    let [syn::Pat::Type(typed)] = closure.inputs.iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    // A closure may return a borrow of a reference in its argument (`|l: &str|
    // l.split(' ')`, `|p: &(&str, i32)| p.0`): that lifetime must come from the operator's
    // bound, so such a closure stays as it is. Only the reference `key_by` and `filter`
    // are handed is allowed (they return an owned key or a `bool`).
    let element = match &*typed.ty {
        syn::Type::Reference(r) if by_reference && r.lifetime.is_none() => &*r.elem,
        other => other,
    };
    let text = element.to_token_stream().to_string();
    if text.contains('&') || text.contains('\'') {
        return None;
    }
    let span = typed.ty.span();
    // The call stands where the user's body does: a result of the wrong type (a filter
    // returning a number) is reported at the body, an argument of the wrong type at its
    // annotation. `f` is hygienic: the user's closure cannot name it.
    let body = closure.body.span();
    let f = Ident::new(
        "__streaming_element_fn",
        Span::mixed_site().located_at(body),
    );
    let element = Ident::new("__streaming_element", span);
    let call = quote_spanned! {body=> #f(#element) };
    Some(quote_spanned! {span=>
        {
            #[allow(unused_mut)]
            let mut #f = #closure;
            move |#element| #call
        }
    })
}

/// `f(inner)` where `inner` is a call or ends in `?`: the function and `inner`.
fn wrapped(arg: &Expr) -> Option<(&Expr, &Expr)> {
    let Expr::Call(call) = arg else {
        return None;
    };
    let [inner] = call.args.iter().collect::<Vec<_>>()[..] else {
        return None;
    };
    matches!(inner, Expr::Call(_) | Expr::Try(_)).then_some((&*call.func, inner))
}

/// Expands a checked pipeline; `krate` is the path of the runtime crate.
pub(crate) fn expand(c: &Checked<'_>, krate: &CratePath) -> TokenStream {
    let mut cx = Cx {
        krate,
        label: Lifetime {
            apostrophe: Span::mixed_site(),
            ident: Ident::new("__streaming_pipeline", Span::mixed_site()),
        },
        prelude: TokenStream::new(),
        hoisted: 0,
        classified: false,
        breaks: false,
        joins_by_key: false,
        persistent: c.fragment || !c.engines.contains(&Engine::Memory),
    };
    // `let name = stream;` keeps the user's `let` and name: the pipeline's text names it.
    let bindings: Vec<TokenStream> = c
        .bindings
        .iter()
        .map(|b| {
            let value = chain(&mut cx, b.chain.chain.head_tokens(), &b.chain.steps);
            let name = &b.binding.name;
            quote_spanned! {b.binding.let_token=> let #name = #value; }
        })
        .collect();
    let mut main = chain(&mut cx, c.main.chain.head_tokens(), &c.main.steps);
    let Cx {
        label,
        mut prelude,
        hoisted,
        classified,
        breaks,
        joins_by_key,
        ..
    } = cx;
    let krate = krate.at(Span::call_site());
    if joins_by_key {
        prelude = quote! { use #krate::__private::IntervalJoinBy as _; #prelude };
    }
    if classified {
        // `as _`: the methods of the kind traits, no names.
        prelude = quote! {
            use #krate::__private::{FallibleConfigKind as _, InfallibleConfigKind as _};
            #prelude
        };
    }
    if c.fragment {
        // A fragment's value is its stream, or the configuration error that stopped it.
        main = quote! { ::core::result::Result::<_, #krate::Error>::Ok(#main) };
    }
    if hoisted > 0 || breaks {
        quote! { #label: { #prelude #(#bindings)* #main } }
    } else {
        quote! { { #prelude #(#bindings)* #main } }
    }
}

/// The builder chain of `steps` on `head`.
fn chain(cx: &mut Cx<'_>, head: TokenStream, steps: &[Step<'_>]) -> TokenStream {
    let mut chain = head;
    let mut steps = steps.iter().peekable();
    // The states declared for the next `process`.
    let mut declared: Vec<&StateDecl> = Vec::new();
    while let Some(step) = steps.next() {
        let Step { call, op, .. } = step;
        let name = &call.name;
        let span = name.span();
        chain = match op.expansion {
            Expansion::Method => {
                let on_timer = steps.next_if(|next| next.op.expansion == Expansion::OnTimer);
                let states = std::mem::take(&mut declared);
                if !states.is_empty() || on_timer.is_some() {
                    // `process` (the only operator after `state(..)` or before `on_timer`).
                    let process = Process {
                        krate: cx.krate,
                        states: &states,
                        persistent: cx.persistent,
                    };
                    process.expand(chain, call, on_timer.map(|t| t.call))
                } else if let Some(joined) = interval_join_by_key(cx, &chain, step) {
                    joined
                } else {
                    let args = arguments(cx, step);
                    let turbofish = &call.turbofish;
                    quote_spanned! {span=> #chain.#name #turbofish(#(#args),*) }
                }
            }
            Expansion::FallibleMethod => {
                let args = arguments(cx, step);
                let turbofish = &call.turbofish;
                cx.breaks = true;
                cx.unwrap_or_break(
                    span,
                    quote_spanned! {span=> #chain.#name #turbofish(#(#args),*) },
                )
            }
            Expansion::StateDecls => {
                if let Args::States(decls) = &call.args {
                    declared.extend(decls);
                }
                chain
            }
            // Consumed with the `process` before it (check guarantees the order).
            Expansion::OnTimer => chain,
            Expansion::EngineFunction => {
                let args = arguments(cx, step);
                let krate = cx.krate.at(span);
                quote_spanned! {span=> #krate::__private::#name(&#chain, #(#args),*) }
            }
        };
    }
    chain
}

/// The arguments of `step` in the chain: an element function called from a closure of the
/// macro's, a stream argument the macro followed as its chain, any other as [`argument`].
fn arguments(cx: &mut Cx<'_>, step: &Step<'_>) -> Vec<TokenStream> {
    let op = step.op;
    op.args
        .iter()
        .zip(step.call.args.exprs())
        .enumerate()
        .map(|(i, (spec, arg))| {
            // The second input's key function stays as it is: rustc infers its result
            // from the key type of the first, so a key of another type is one error
            // under the user's whole result expression.
            let second_key = op.name == "key_by" && i == 1;
            if ELEMENT_FUNCTIONS.contains(&op.name) && !second_key {
                // `key_by` and `filter` take the element by reference and return an
                // owned key or a `bool`, never a borrow of it.
                let by_reference = matches!(op.name, "key_by" | "filter");
                if let Some(wrapped) = element_function(arg, by_reference) {
                    return wrapped;
                }
            }
            match (&step.stream, spec.kind) {
                (Some(stream), ArgKind::Stream(_)) => {
                    chain(cx, stream.chain.head_tokens(), &stream.steps)
                }
                _ => argument(cx, arg, spec.kind),
            }
        })
        .collect()
}

/// `this.interval_join(other.key_by(key))` as `this.interval_join_by(other, key)`, when the
/// argument ends with its `key_by`: the key function (as it is) is then checked against
/// this stream's key type, so a key of another type is one error at the key function's
/// result (the builder's method would report the whole argument's type).
fn interval_join_by_key(
    cx: &mut Cx<'_>,
    chain: &TokenStream,
    step: &Step<'_>,
) -> Option<TokenStream> {
    let other = step
        .stream
        .as_ref()
        .filter(|_| step.op.name == "interval_join")?;
    let (key_by, before) = other.steps.split_last()?;
    if key_by.op.name != "key_by" || key_by.variant.applies != Stage::Stream {
        return None;
    }
    let key = key_by.call.args.exprs().first()?.to_token_stream();
    let other = self::chain(cx, other.chain.head_tokens(), before);
    cx.joins_by_key = true;
    let span = step.call.name.span();
    let method = Ident::new("interval_join_by", span);
    Some(quote_spanned! {span=> #chain.#method(#other, #key) })
}

/// A `process` (with its `on_timer`) and the states declared before it.
struct Process<'a> {
    /// The runtime crate.
    krate: &'a CratePath,
    states: &'a [&'a StateDecl],
    /// Descriptors with a codec (`persistent`): the Redis engine keeps state in Redis.
    persistent: bool,
}

impl Process<'_> {
    fn expand(&self, chain: TokenStream, call: &Call, on_timer: Option<&Call>) -> TokenStream {
        let states = self.states_tuple();
        let on_element = call.args.exprs().iter().map(|f| self.with_bindings(f));
        match on_timer {
            Some(timer) => {
                let on_timer = timer.args.exprs().iter().map(|f| self.with_bindings(f));
                let krate = self.krate.at(timer.name.span());
                quote_spanned! {timer.name.span()=>
                    #krate::__private::process_with_timers(
                        #chain, #states, #(#on_element,)* #(#on_timer),*
                    )
                }
            }
            None => {
                let krate = self.krate.at(call.name.span());
                quote_spanned! {call.name.span()=>
                    #krate::__private::process_with_states(#chain, #states, #(#on_element),*)
                }
            }
        }
    }

    /// The descriptors as a list of nested pairs ending in `()`, in declaration order.
    fn states_tuple(&self) -> TokenStream {
        let ctor = if self.persistent { "persistent" } else { "new" };
        self.states.iter().rev().fold(quote!(()), |rest, decl| {
            let Some(path) = descriptor(decl, self.krate) else {
                return rest;
            };
            let ctor = Ident::new(ctor, decl.name.span());
            let text = decl.name.to_string();
            let span = decl.ty.span();
            let value = match &decl.default {
                Some(default) => quote_spanned! {span=> #path::#ctor(#text, #default) },
                None => quote_spanned! {span=> #path::#ctor(#text) },
            };
            quote! { (#value, #rest) }
        })
    }

    /// A closure with each declared name bound to its [`DeclaredState`] at the top of its
    /// body (the closure captures nothing for them, so it stays `'static`); another
    /// expression as it is.
    fn with_bindings(&self, f: &Expr) -> TokenStream {
        let Expr::Closure(closure) = f else {
            return f.into_token_stream();
        };
        let bindings = self.states.iter().enumerate().filter_map(|(i, decl)| {
            let ty = descriptor(decl, self.krate)?;
            let name = &decl.name;
            let i = proc_macro2::Literal::usize_unsuffixed(i);
            let krate = self.krate.at(decl.name.span());
            Some(quote_spanned! {decl.name.span()=>
                #[allow(unused_variables)]
                let #name = #krate::__private::DeclaredState::<#ty>::at(#i);
            })
        });
        let mut closure = closure.clone();
        let body = &closure.body;
        closure.body = Box::new(syn::parse_quote!({ #(#bindings)* #body }));
        closure.into_token_stream()
    }
}

/// `ValueState<T>` → the descriptor type `::streaming::api::ValueStateDescriptor::<T>` (with
/// turbofish, so it is also the path of its constructors).
fn descriptor(decl: &StateDecl, krate: &CratePath) -> Option<TokenStream> {
    let syn::Type::Path(path) = &decl.ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    let descriptor = Ident::new(&format!("{}Descriptor", last.ident), last.ident.span());
    let generics = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => {
            let args = &a.args;
            quote!(::<#args>)
        }
        _ => TokenStream::new(),
    };
    let span = decl.ty.span();
    let krate = krate.at(span);
    Some(quote_spanned! {span=> #krate::api::#descriptor #generics })
}
