//! Checked pipeline → Rust code. Cannot fail: every rule was enforced by `check`.
//!
//! The expansion is the builder chain itself, so the pipeline compiles to the same nested
//! generic operator structs as the builder API (no `dyn`, no `Box`, no per-record
//! allocation by the framework). Every generated method name and argument keeps the user's
//! span, so a type error between stages is reported at the user's closure or operator.
//!
//! ```text
//! '__streaming_pipeline: {                        // only when a configuration can fail
//!     let __config_0 = match <fallible argument> { Ok(v) => v, Err(e) => break .. config_error(e) };
//!     env.from_elements(..).key_by(..).window(__config_0).reduce(..).collect_vec()
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

use crate::check::{self, Checked, Step};
use crate::ops::{Engine, Expansion};
use crate::parse::{Args, Call, StateDecl};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Expr, Lifetime};

/// Constructors whose `Result` the expansion propagates into the pipeline's result.
const FALLIBLE: &[(&str, &str)] = &[
    ("TumblingEventTimeWindows", "of"),
    ("TumblingEventTimeWindows", "with_offset"),
    ("SlidingEventTimeWindows", "of"),
    ("SlidingEventTimeWindows", "with_offset"),
    ("EventTimeSessionWindows", "with_gap"),
    ("CountTrigger", "of"),
    ("ContinuousEventTimeTrigger", "of"),
    ("BoundedOutOfOrderness", "new"),
];

/// Whether `arg` is evaluated before the chain and its error returned as the pipeline's:
/// a trailing `?`, or a call of a fallible constructor of the crate.
fn is_fallible(arg: &Expr) -> bool {
    if matches!(arg, Expr::Try(_)) {
        return true;
    }
    check::ctor_call(arg)
        .is_some_and(|(ty, ctor, _)| FALLIBLE.iter().any(|(t, c)| *t == ty && *c == ctor))
}

/// Wrappers whose argument may be a fallible constructor: `PurgingTrigger::of(CountTrigger::of(2))`
/// hoists the inner constructor and wraps its value.
const WRAPPERS: &[(&str, &str)] = &[("PurgingTrigger", "of")];

/// The tokens of `arg` in the chain: a fallible argument is evaluated before the chain
/// (its error ends the pipeline's block with the error) and replaced by a variable; a
/// wrapper of a fallible argument wraps that variable.
fn hoist(
    arg: &Expr,
    label: &Lifetime,
    prelude: &mut TokenStream,
    hoisted: &mut usize,
) -> TokenStream {
    if is_fallible(arg) {
        let inner = match arg {
            Expr::Try(t) => &*t.expr,
            e => e,
        };
        let var = Ident::new(
            &format!("__config_{hoisted}"),
            Span::mixed_site().located_at(arg.span()),
        );
        *hoisted += 1;
        prelude.extend(quote_spanned! {arg.span()=>
            let #var = match #inner {
                ::core::result::Result::Ok(value) => value,
                ::core::result::Result::Err(error) => {
                    let error = ::streaming::__private::config_error(error);
                    break #label error
                }
            };
        });
        return var.into_token_stream();
    }
    if let Expr::Call(call) = check::strip(arg) {
        let wrapper = check::ctor_call(arg)
            .is_some_and(|(ty, ctor, _)| WRAPPERS.iter().any(|(t, c)| *t == ty && *c == ctor));
        if wrapper && call.args.len() == 1 && !matches!(arg, Expr::Try(_)) {
            let func = &call.func;
            let inner = hoist(&call.args[0], label, prelude, hoisted);
            return quote_spanned! {arg.span()=> #func(#inner) };
        }
    }
    arg.into_token_stream()
}

/// Expands a checked pipeline.
pub(crate) fn expand(c: &Checked<'_>) -> TokenStream {
    let label = Lifetime {
        apostrophe: Span::mixed_site(),
        ident: Ident::new("__streaming_pipeline", Span::mixed_site()),
    };
    let mut prelude = TokenStream::new();
    let mut hoisted = 0usize;
    let mut chain = c.pipeline.env_tokens();
    let mut steps = c.steps.iter().peekable();
    // The states declared for the next `process`.
    let mut declared: Vec<&StateDecl> = Vec::new();
    while let Some(step) = steps.next() {
        let Step { call, op, .. } = step;
        let name = &call.name;
        let span = name.span();
        let mut args = Vec::new();
        for arg in call.args.exprs() {
            args.push(hoist(arg, &label, &mut prelude, &mut hoisted));
        }
        chain = match op.expansion {
            Expansion::Method => {
                let on_timer = steps.next_if(|next| next.op.expansion == Expansion::OnTimer);
                let states = std::mem::take(&mut declared);
                if !states.is_empty() || on_timer.is_some() {
                    // `process` (the only operator after `state(..)` or before `on_timer`).
                    let process = Process {
                        states: &states,
                        persistent: !c.engines.contains(&Engine::Memory),
                    };
                    process.expand(chain, call, on_timer.map(|t| t.call))
                } else {
                    let turbofish = &call.turbofish;
                    quote_spanned! {span=> #chain.#name #turbofish(#(#args),*) }
                }
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
                quote_spanned! {span=> ::streaming::__private::#name(&#chain, #(#args),*) }
            }
        };
    }
    if hoisted > 0 {
        quote! { #label: { #prelude #chain } }
    } else {
        quote! { { #prelude #chain } }
    }
}

/// A `process` (with its `on_timer`) and the states declared before it.
struct Process<'a> {
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
                quote_spanned! {timer.name.span()=>
                    ::streaming::__private::process_with_timers(
                        #chain, #states, #(#on_element,)* #(#on_timer),*
                    )
                }
            }
            None => quote_spanned! {call.name.span()=>
                ::streaming::__private::process_with_states(#chain, #states, #(#on_element),*)
            },
        }
    }

    /// The descriptors as a list of nested pairs ending in `()`, in declaration order.
    fn states_tuple(&self) -> TokenStream {
        let ctor = if self.persistent { "persistent" } else { "new" };
        self.states.iter().rev().fold(quote!(()), |rest, decl| {
            let Some(path) = descriptor(decl) else {
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
            let ty = descriptor(decl)?;
            let name = &decl.name;
            let i = proc_macro2::Literal::usize_unsuffixed(i);
            Some(quote_spanned! {decl.name.span()=>
                #[allow(unused_variables)]
                let #name = ::streaming::__private::DeclaredState::<#ty>::at(#i);
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
fn descriptor(decl: &StateDecl) -> Option<TokenStream> {
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
    Some(quote_spanned! {span=> ::streaming::api::#descriptor #generics })
}
