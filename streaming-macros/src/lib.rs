//! Procedural macros of the `streaming` crate: [`pipeline!`].
//!
//! The macro runs in three phases: `parse` (syntax → AST with spans), `check` (every rule
//! of the DSL, all errors collected) and `expand` (the builder chain, which cannot fail).
//! Operators are rows of a table, one file each under `ops/`. The DSL reference is in the
//! `streaming` crate's documentation.
#![deny(missing_docs)]

use proc_macro::TokenStream;

mod check;
mod expand;
mod imports;
mod ops;
mod parse;
mod reference;
mod runtime;

/// A stream-processing pipeline, checked at compile time and expanded to the fused builder
/// chain. See the DSL reference in the `streaming` crate docs.
#[proc_macro]
pub fn pipeline(input: TokenStream) -> TokenStream {
    let krate = runtime::CratePath::find();
    let pipeline = match syn::parse::<parse::Pipeline>(input) {
        Ok(p) => p,
        Err(e) => return placeholder(&[e], None, false, &krate).into(),
    };
    match check::check(&pipeline) {
        Ok(checked) => {
            let out = expand::expand(&checked, &krate);
            debug(&checked, &out);
            // Reading the variable through `option_env!` makes rustc record it in the
            // dep-info, so cargo rebuilds (and prints again) when it changes.
            quote::quote!({
                const _: ::core::option::Option<&str> =
                    ::core::option_env!("STREAMING_PIPELINE_DEBUG");
                #out
            })
            .into()
        }
        Err(errors) => {
            // A Redis source: the sink registers the pipeline (`Result<(), Error>`).
            let redis = pipeline.first_call().is_some_and(|c| {
                ops::lookup(&c.name.to_string()).is_some_and(|op| {
                    op.role == ops::Role::Source && op.engines == [ops::Engine::Redis]
                })
            });
            let uses = imports::uses(&pipeline);
            let value = if check::is_fragment(&pipeline) {
                fragment_placeholder(&errors, &krate)
            } else {
                let last = pipeline.main.calls.last().map(|c| c.name.to_string());
                placeholder(&errors, last, redis, &krate)
            };
            quote::quote!({ #uses #value }).into()
        }
    }
}

/// The operator ids of a pipeline (`{source_id}/{position}:{kind}`), as an array of string
/// literals; the pipeline is not run. `source-{n}` stands for a runtime-numbered source.
#[doc(hidden)]
#[proc_macro]
pub fn __pipeline_ids(input: TokenStream) -> TokenStream {
    let pipeline = match syn::parse::<parse::Pipeline>(input) {
        Ok(p) => p,
        Err(e) => return e.to_compile_error().into(),
    };
    match check::check(&pipeline) {
        Ok(checked) => {
            let ids = checked.steps().into_iter().filter_map(|s| s.id.clone());
            quote::quote!([#(#ids),*]).into()
        }
        Err(errors) => errors
            .iter()
            .map(syn::Error::to_compile_error)
            .collect::<proc_macro2::TokenStream>()
            .into(),
    }
}

/// The operator reference of the DSL (Markdown generated from the operator table), as a
/// string literal for `#![doc = ..]`.
#[doc(hidden)]
#[proc_macro]
pub fn __dsl_reference(_input: TokenStream) -> TokenStream {
    let text = reference::markdown();
    quote::quote!(#text).into()
}

/// The errors, then a value of the type a valid pipeline with this sink would have, so the
/// code around the macro type-checks and one mistake gives one error; `krate` is the path
/// of the runtime crate.
fn placeholder(
    errors: &[syn::Error],
    last: Option<String>,
    redis: bool,
    krate: &runtime::CratePath,
) -> proc_macro2::TokenStream {
    let krate = krate.at(proc_macro2::Span::call_site());
    let errors = errors.iter().map(syn::Error::to_compile_error);
    let output = match last.as_deref() {
        Some("collect_vec") => quote::quote!(::std::vec::Vec<_>),
        Some("sink" | "for_each" | "print" | "print_with_prefix") if redis => quote::quote!(()),
        Some("sink" | "for_each" | "print" | "print_with_prefix") => {
            quote::quote!(#krate::memory::JobSummary)
        }
        _ => quote::quote!(_),
    };
    quote::quote! {{
        #(#errors)*
        #krate::__private::placeholder::<::core::result::Result<#output, #krate::Error>>()
    }}
}

/// The errors, then a fragment's value of a type that fits any `impl Fragment<In, Out = U>`
/// signature (its input and output types are inferred from it).
fn fragment_placeholder(
    errors: &[syn::Error],
    krate: &runtime::CratePath,
) -> proc_macro2::TokenStream {
    let krate = krate.at(proc_macro2::Span::call_site());
    let errors = errors.iter().map(syn::Error::to_compile_error);
    quote::quote! {{
        #(#errors)*
        #krate::__private::placeholder::<::core::result::Result<
            #krate::DataStream<#krate::__private::PlaceholderPlan<_, _>>,
            #krate::Error,
        >>()
    }}
}

/// Prints the expansion and the operator ids when `STREAMING_PIPELINE_DEBUG` is set (to
/// anything but `0`). The expansion reads it with `option_env!` too, so cargo rebuilds the
/// crate when the variable changes.
fn debug(checked: &check::Checked<'_>, out: &proc_macro2::TokenStream) {
    if std::env::var_os("STREAMING_PIPELINE_DEBUG").is_some_and(|v| !v.is_empty() && v != "0") {
        let site = proc_macro::Span::call_site();
        eprintln!(
            "// at {}:{}\n{}",
            site.file(),
            site.line(),
            render(checked, out)
        );
    }
}

/// The expansion, pretty-printed, headed by the operators (each `let`'s, then the
/// pipeline's; a stream argument's under its operator) with their stages and ids, and the
/// engines.
fn render(checked: &check::Checked<'_>, out: &proc_macro2::TokenStream) -> String {
    fn steps(chain: &check::CheckedChain<'_>, indent: usize, text: &mut String) {
        for step in &chain.steps {
            let id = step.id.as_deref().unwrap_or("-");
            text.push_str(&format!(
                "// {:indent$}{:<24} {} -> {}  [{id}]\n",
                "",
                step.op.name,
                step.variant.applies.noun(),
                step.variant.produces.noun()
            ));
            if let Some(stream) = &step.stream {
                steps(stream, indent + 2, text);
            }
        }
    }
    let mut text = String::from("// pipeline! expansion\n");
    for binding in &checked.bindings {
        text.push_str(&format!("// let {}\n", binding.binding.name));
        steps(&binding.chain, 2, &mut text);
    }
    if !checked.bindings.is_empty() {
        text.push_str("// pipeline\n");
    }
    steps(
        &checked.main,
        2 * usize::from(!checked.bindings.is_empty()),
        &mut text,
    );
    let engines: Vec<_> = checked.engines.iter().map(|e| e.name()).collect();
    text.push_str(&format!("// engines: {}\n", engines.join(", ")));
    let file = quote::quote!(fn pipeline() { let _ = #out; });
    match syn::parse2::<syn::File>(file) {
        Ok(f) => text.push_str(&prettyplease::unparse(&f)),
        Err(_) => text.push_str(&out.to_string()),
    }
    text
}

#[cfg(test)]
mod snapshot_tests;
