//! Syntax → AST: the environment expression and the chain of operator calls, with spans.
//!
//! ```text
//! pipeline  := env ( "." call )+
//! env       := an expression: a variable, a field path, a call, or `( expr )`
//! call      := ident [ "::" "<" types ">" ] "(" args ")"
//! args      := expr ("," expr)*                        for every operator but `state`
//!            | state_decl ("," state_decl)*             for `state`
//! state_decl:= ident ":" type [ "=" expr ]
//! ```
//!
//! Parsing knows no operator except which one takes state declarations; every rule about
//! operators lives in `check`.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Ident, Token, Type};

/// A parsed `pipeline!` body.
pub(crate) struct Pipeline {
    /// The environment expression the source is called on.
    pub(crate) env: Expr,
    /// The operator calls, in order.
    pub(crate) calls: Vec<Call>,
    /// The span of the last token, where a missing sink is reported.
    pub(crate) end: Span,
}

/// One `.name(args)` of the chain.
pub(crate) struct Call {
    /// The operator name, with the user's span (type errors of the expansion land here).
    pub(crate) name: Ident,
    /// An explicit `::<..>` after the name, passed through.
    pub(crate) turbofish: Option<TokenStream>,
    /// The arguments.
    pub(crate) args: Args,
    /// The span of the parentheses.
    pub(crate) parens: Span,
}

/// The arguments of a call.
pub(crate) enum Args {
    /// Expressions (every operator but `state`).
    Exprs(Vec<Expr>),
    /// State declarations (`state`).
    States(Vec<StateDecl>),
}

impl Args {
    /// How many arguments were given.
    pub(crate) fn len(&self) -> usize {
        match self {
            Args::Exprs(e) => e.len(),
            Args::States(s) => s.len(),
        }
    }

    /// The expression arguments (empty for state declarations).
    pub(crate) fn exprs(&self) -> &[Expr] {
        match self {
            Args::Exprs(e) => e,
            Args::States(_) => &[],
        }
    }
}

/// `name: Kind<T..> [= default]` in `state(..)`.
pub(crate) struct StateDecl {
    /// The state's name: both its id in the operator and the binding the closure uses.
    pub(crate) name: Ident,
    /// `ValueState<T>`, `ListState<T>`, `MapState<K, V>` or `SetState<T>`.
    pub(crate) ty: Type,
    /// The default of a value state.
    pub(crate) default: Option<Expr>,
}

impl Parse for StateDecl {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty: Type = input.parse()?;
        let default = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else {
            None
        };
        Ok(StateDecl { name, ty, default })
    }
}

/// Whether the operator `name` takes state declarations instead of expressions.
fn takes_state_decls(name: &str) -> bool {
    crate::ops::lookup(name).is_some_and(|op| {
        op.args
            .iter()
            .any(|a| a.kind == crate::ops::ArgKind::StateDecls)
    })
}

impl Parse for Pipeline {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let tokens: Vec<TokenTree> = input.step(|cursor| {
            let mut rest = *cursor;
            let mut out = Vec::new();
            while let Some((tt, next)) = rest.token_tree() {
                out.push(tt);
                rest = next;
            }
            Ok((out, rest))
        })?;
        let Some(last) = tokens.last() else {
            return Err(syn::Error::new(
                Span::call_site(),
                "expected a pipeline: `env.from_elements(..).map(..).collect_vec()`",
            ));
        };
        let end = last.span();
        let segments = split_at_dots(tokens);
        // The environment is the first segment plus any following segments that are not
        // calls (`self.env`); the first call after it starts the chain.
        let first_call = segments
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, s)| as_call(s).is_some())
            .map_or(segments.len(), |(i, _)| i);
        let mut env_tokens = TokenStream::new();
        for (i, seg) in segments[..first_call].iter().enumerate() {
            if i > 0 {
                env_tokens
                    .extend(quote::quote_spanned!(seg.first().map_or(end, TokenTree::span)=> .));
            }
            env_tokens.extend(seg.iter().cloned());
        }
        let env: Expr = syn::parse2(env_tokens).map_err(|e| {
            syn::Error::new(
                e.span(),
                format!("expected the environment expression before the source: {e}"),
            )
        })?;
        let mut calls = Vec::new();
        for seg in &segments[first_call..] {
            let Some((name, turbofish, group)) = as_call(seg) else {
                return Err(not_a_call(seg, end));
            };
            let args = if takes_state_decls(&name.to_string()) {
                let decls =
                    Punctuated::<StateDecl, Token![,]>::parse_terminated.parse2(group.stream())?;
                Args::States(decls.into_iter().collect())
            } else {
                let exprs =
                    Punctuated::<Expr, Token![,]>::parse_terminated.parse2(group.stream())?;
                Args::Exprs(exprs.into_iter().collect())
            };
            calls.push(Call {
                name,
                turbofish,
                args,
                parens: group.span(),
            });
        }
        Ok(Pipeline { env, calls, end })
    }
}

/// The error for a segment that is not `name(arguments)`: when it starts with a call and
/// has tokens after it, the error is at the first of them (a missing `.` or a trailing
/// `;`), else at the segment.
fn not_a_call(seg: &[TokenTree], end: Span) -> syn::Error {
    if let [TokenTree::Ident(_), TokenTree::Group(g), extra, ..] = seg {
        if g.delimiter() == Delimiter::Parenthesis {
            return match extra {
                TokenTree::Punct(p) if p.as_char() == ';' => syn::Error::new(
                    p.span(),
                    "unexpected `;`: a pipeline is one expression, and its value is the sink's \
                     result; remove the `;` (build a pipeline over several statements with the \
                     builder API)",
                ),
                other => syn::Error::new(
                    other.span(),
                    format!("expected `.` before `{other}`: operators are chained as `.name(arguments)`"),
                ),
            };
        }
    }
    let span = seg.first().map_or(end, TokenTree::span);
    syn::Error::new(span, "expected an operator call `.name(arguments)`")
}

/// Splits top-level tokens at lone `.` punctuation (a `..` range is not a split point).
fn split_at_dots(tokens: Vec<TokenTree>) -> Vec<Vec<TokenTree>> {
    let mut segments = vec![Vec::new()];
    let mut joint_dot = false;
    for tt in tokens {
        if let TokenTree::Punct(p) = &tt {
            if p.as_char() == '.' && !joint_dot && p.spacing() == proc_macro2::Spacing::Alone {
                segments.push(Vec::new());
                continue;
            }
            joint_dot = p.as_char() == '.' && p.spacing() == proc_macro2::Spacing::Joint;
        } else {
            joint_dot = false;
        }
        if let Some(seg) = segments.last_mut() {
            seg.push(tt);
        }
    }
    segments
}

/// `ident [::<..>] (group)` → its parts.
fn as_call(seg: &[TokenTree]) -> Option<(Ident, Option<TokenStream>, proc_macro2::Group)> {
    let (TokenTree::Ident(name), TokenTree::Group(group)) = (seg.first()?, seg.last()?) else {
        return None;
    };
    if group.delimiter() != Delimiter::Parenthesis || seg.len() < 2 {
        return None;
    }
    let middle: TokenStream = seg[1..seg.len() - 1].iter().cloned().collect();
    let turbofish = if middle.is_empty() {
        None
    } else {
        // Only `::<..>` may sit between the name and the arguments.
        syn::parse2::<syn::AngleBracketedGenericArguments>(middle.clone())
            .ok()
            .filter(|g| g.colon2_token.is_some())?;
        Some(middle)
    };
    Some((name.clone(), turbofish, group.clone()))
}

impl Pipeline {
    /// The span of the environment expression.
    pub(crate) fn env_span(&self) -> Span {
        self.env.span()
    }

    /// The tokens of the environment expression.
    pub(crate) fn env_tokens(&self) -> TokenStream {
        self.env.to_token_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn parse(tokens: TokenStream) -> syn::Result<Pipeline> {
        syn::parse2(tokens)
    }

    fn names(p: &Pipeline) -> Vec<String> {
        p.calls.iter().map(|c| c.name.to_string()).collect()
    }

    #[test]
    fn environment_forms() {
        let p = parse(quote!(self.env.from_elements([1]).collect_vec())).unwrap();
        assert_eq!(p.env_tokens().to_string(), "self . env");
        assert_eq!(names(&p), ["from_elements", "collect_vec"]);
        let p = parse(quote!(MemoryEnv::new().from_collection(0..n).print())).unwrap();
        assert_eq!(p.env_tokens().to_string(), "MemoryEnv :: new ()");
        let p = parse(quote!((envs[0].clone()).from_elements([1]).print())).unwrap();
        assert_eq!(p.env_tokens().to_string(), "(envs [0] . clone ())");
        let p = parse(quote!(make_env().from_elements([1]).print())).unwrap();
        assert_eq!(p.env_tokens().to_string(), "make_env ()");
    }

    #[test]
    fn arguments_turbofish_and_ranges() {
        let p = parse(quote!(env
            .from_collection(0..10)
            .map::<u8, _>(|x| x as u8, extra)
            .sum()
            .print()))
        .unwrap();
        assert_eq!(names(&p), ["from_collection", "map", "sum", "print"]);
        assert_eq!(
            p.calls[1]
                .turbofish
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some(":: < u8 , _ >")
        );
        assert_eq!(p.calls[1].args.len(), 2);
        assert_eq!(p.calls[2].args.len(), 0);
    }

    #[test]
    fn state_declarations_parse_only_for_state() {
        let p = parse(quote!(env.from_elements([1]).key_by(k).state(a: ValueState<u8> = 0, b: MapState<u8, String>).process(f).print()))
            .unwrap();
        match &p.calls[2].args {
            Args::States(decls) => {
                assert_eq!(decls.len(), 2);
                assert_eq!(decls[0].name.to_string(), "a");
                assert!(decls[0].default.is_some() && decls[1].default.is_none());
            }
            Args::Exprs(_) => panic!("state takes declarations"),
        }
        assert!(parse(quote!(env.from_elements([1]).map(a: u8).print())).is_err());
    }

    #[test]
    fn syntax_errors() {
        let e = parse(quote!(env.from_elements([1]).len.print()))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "expected an operator call `.name(arguments)`"
        );
        assert!(parse(TokenStream::new()).is_err());
    }
}
