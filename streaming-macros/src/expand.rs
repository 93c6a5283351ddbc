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
//!     let count = &::streaming::api::ValueStateDescriptor::<u64>::new("count", 0);  // state(..)
//!     env.from_elements(..).key_by(..).window(__config_0).reduce(..).collect_vec()
//! }
//! ```
//!
//! `::streaming` stands for the path [`CratePath`] finds (the user may have renamed the
//! dependency).

use crate::check::{self, Checked, Step};
use crate::ops::{Engine, Expansion};
use crate::parse::{Args, StateDecl};
use crate::runtime::CratePath;
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
    krate: &CratePath,
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
        let krate = krate.at(arg.span());
        prelude.extend(quote_spanned! {arg.span()=>
            let #var = match #inner {
                ::core::result::Result::Ok(value) => value,
                ::core::result::Result::Err(error) => {
                    let error = #krate::__private::config_error(error);
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
            let inner = hoist(&call.args[0], krate, label, prelude, hoisted);
            return quote_spanned! {arg.span()=> #func(#inner) };
        }
    }
    arg.into_token_stream()
}

/// Expands a checked pipeline; `krate` is the runtime crate.
pub(crate) fn expand(c: &Checked<'_>, krate: &CratePath) -> TokenStream {
    let label = Lifetime {
        apostrophe: Span::mixed_site(),
        ident: Ident::new("__streaming_pipeline", Span::mixed_site()),
    };
    let mut prelude = TokenStream::new();
    let mut hoisted = 0usize;
    let mut chain = c.pipeline.env_tokens();
    let mut steps = c.steps.iter().peekable();
    while let Some(step) = steps.next() {
        let Step { call, op, .. } = step;
        let name = &call.name;
        let span = name.span();
        let mut args = Vec::new();
        for arg in call.args.exprs() {
            args.push(hoist(arg, krate, &label, &mut prelude, &mut hoisted));
        }
        chain = match op.expansion {
            Expansion::Method => {
                let on_timer = steps.next_if(|next| next.op.expansion == Expansion::OnTimer);
                if let Some(timer) = on_timer {
                    let timer_fn = timer.call.args.exprs();
                    let tspan = timer.call.name.span();
                    let krate = krate.at(tspan);
                    quote_spanned! {tspan=>
                        #krate::__private::process_with_timers(#chain, #(#args,)* #(#timer_fn),*)
                    }
                } else {
                    let turbofish = &call.turbofish;
                    quote_spanned! {span=> #chain.#name #turbofish(#(#args),*) }
                }
            }
            Expansion::StateDecls => {
                if let Args::States(decls) = &call.args {
                    // The Redis engine keeps state in Redis: its descriptors need a codec.
                    let persistent = !c.engines.contains(&Engine::Memory);
                    for decl in decls {
                        prelude.extend(state_binding(decl, persistent, krate));
                    }
                }
                chain
            }
            // Consumed with the `process` before it (check guarantees the order).
            Expansion::OnTimer => chain,
            Expansion::EngineFunction => {
                let krate = krate.at(span);
                quote_spanned! {span=> #krate::__private::#name(&#chain, #(#args),*) }
            }
        };
    }
    if hoisted > 0 {
        quote! { #label: { #prelude #chain } }
    } else {
        quote! { { #prelude #chain } }
    }
}

/// `name: ValueState<T> = d` → `let name = &::streaming::api::ValueStateDescriptor::<T>::new("name", d);`
/// (`persistent` instead of `new` on the Redis engine, which stores values as JSON).
fn state_binding(decl: &StateDecl, persistent: bool, krate: &CratePath) -> TokenStream {
    let ctor = Ident::new(
        if persistent { "persistent" } else { "new" },
        decl.name.span(),
    );
    let name = &decl.name;
    let text = name.to_string();
    let syn::Type::Path(path) = &decl.ty else {
        return TokenStream::new();
    };
    let Some(last) = path.path.segments.last() else {
        return TokenStream::new();
    };
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
    let value = match &decl.default {
        Some(default) => {
            quote_spanned! {span=> #krate::api::#descriptor #generics::#ctor(#text, #default) }
        }
        None => quote_spanned! {span=> #krate::api::#descriptor #generics::#ctor(#text) },
    };
    if persistent {
        // A Redis pipeline's functions are `'static` (one copy runs per partition, on its
        // own thread): the descriptor lives for the program (one small allocation per
        // pipeline built).
        quote_spanned! {span=>
            let #name = &*::std::boxed::Box::leak(::std::boxed::Box::new(#value));
        }
    } else {
        quote_spanned! {span=> let #name = &#value; }
    }
}
