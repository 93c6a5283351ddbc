//! The names a failed pipeline's text refers to, so that its placeholder can still use
//! them: without it, imports used only inside the pipeline would add "unused import"
//! warnings to the one error of the mistake.

use crate::parse::{Args, Pipeline};
use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::{quote, ToTokens};
use std::collections::BTreeSet;

/// `#[allow(unused_imports)] use Name as _;` for every name the pipeline's text starts a
/// path with that is an item, not a local: the head of a `a::b` path, and a capitalized
/// single name (a type, trait, constant). Single capital letters (generic parameters) and
/// `Self` are left out; so are lower-case single names, which may be locals.
pub(crate) fn uses(p: &Pipeline) -> TokenStream {
    let mut tokens = TokenStream::new();
    for chain in p.bindings.iter().map(|b| &b.chain).chain([&p.main]) {
        tokens.extend(chain.head_tokens());
        for call in &chain.calls {
            if let Some(t) = &call.turbofish {
                tokens.extend(t.clone());
            }
            match &call.args {
                Args::Exprs(exprs) => exprs.iter().for_each(|e| e.to_tokens(&mut tokens)),
                // The state kinds (`ValueState<T>`) are the DSL's words, not paths in scope.
                Args::States(decls) => decls.iter().for_each(|d| {
                    if let Some(default) = &d.default {
                        default.to_tokens(&mut tokens);
                    }
                }),
            }
        }
    }
    let mut names = BTreeSet::new();
    heads(tokens, &mut names);
    let uses = names.into_iter().map(|name| {
        let ident = Ident::new(&name, Span::call_site());
        quote! { #[allow(unused_imports)] use #ident as _; }
    });
    quote! { #(#uses)* }
}

/// Collects the path heads of `tokens` (and of the groups inside) into `names`.
fn heads(tokens: TokenStream, names: &mut BTreeSet<String>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Group(g) => heads(g.stream(), names),
            TokenTree::Ident(ident) => {
                let after_dot = i >= 1 && is_punct(&tokens[i - 1], &['.']);
                let after_path_sep = i >= 2 && is_path_sep(&tokens[i - 2..i]);
                if after_dot || after_path_sep {
                    continue;
                }
                let name = ident.to_string();
                let path_head = is_path_sep(&tokens[i + 1..]);
                let capitalized = name.len() > 1
                    && name.starts_with(|c: char| c.is_ascii_uppercase())
                    && name != "Self";
                if (path_head || capitalized) && !is_keyword(&name) {
                    names.insert(name);
                }
            }
            _ => {}
        }
    }
}

fn is_punct(t: &TokenTree, chars: &[char]) -> bool {
    matches!(t, TokenTree::Punct(p) if chars.contains(&p.as_char()))
}

fn is_path_sep(rest: &[TokenTree]) -> bool {
    matches!(rest, [TokenTree::Punct(a), TokenTree::Punct(b), ..] if a.as_char() == ':' && b.as_char() == ':')
}

fn is_keyword(name: &str) -> bool {
    matches!(name, "crate" | "self" | "super" | "Self") || name.starts_with("r#")
}
