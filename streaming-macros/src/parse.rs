//! Syntax → AST: the streams named with `let`, the pipeline's chain of operator calls,
//! with spans.
//!
//! ```text
//! pipeline  := ( "let" ident "=" chain ";" )* chain
//! chain     := head ( "." call )*
//! head      := an expression: a variable, a field path, a call, or `( expr )`: the
//!              environment before a source, or a stream (one bound with `let`)
//! call      := ident [ "::" "<" types ">" ] "(" args ")"
//! args      := expr ("," expr)*                        for every operator but `state`
//!            | state_decl ("," state_decl)*             for `state`
//! state_decl:= ident ":" type [ "=" expr ]
//! ```
//!
//! The argument of an operator that takes another stream (`union(other)`,
//! `connect(broadcast)`) is also read as a chain, so that the check can follow a stream
//! bound with `let` into it.
//!
//! Parsing knows no operator except which ones take state declarations or a stream; every
//! rule about operators lives in `check`.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Ident, Token, Type};

/// A parsed `pipeline!` body.
pub(crate) struct Pipeline {
    /// The streams named with `let`, in order.
    pub(crate) bindings: Vec<Binding>,
    /// The last expression: the pipeline.
    pub(crate) main: Chain,
}

/// `let name = chain;`
pub(crate) struct Binding {
    /// The `let` token.
    pub(crate) let_token: Span,
    /// The name.
    pub(crate) name: Ident,
    /// The stream it names.
    pub(crate) chain: Chain,
}

/// A head and the operator calls on it.
pub(crate) struct Chain {
    /// The expression the first call is made on: the environment, or a stream.
    pub(crate) head: Expr,
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
    /// The argument that is another stream, read as a chain (operators that take one,
    /// when the argument is a chain).
    pub(crate) stream: Option<Box<Chain>>,
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

/// The position of the stream argument of the operator `name`, if one of its rows takes
/// one.
fn stream_argument(name: &str) -> Option<usize> {
    crate::ops::rows(name).find_map(|op| op.stream_argument().map(|(i, _)| i))
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
        if tokens.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                "expected a pipeline: `env.from_elements(..).map(..).collect_vec()`",
            ));
        }
        let mut statements = split_statements(tokens);
        let (last, _) = statements.pop().unwrap_or_default();
        if last.is_empty() {
            return Err(after_the_last_semicolon(&statements));
        }
        let bindings = statements
            .into_iter()
            .map(|(tokens, semi)| binding(tokens, semi))
            .collect::<syn::Result<_>>()?;
        let main = Chain::from_tokens(last)?;
        Ok(Pipeline { bindings, main })
    }
}

/// A statement's tokens and the `;` that ends it (none for the last).
type Statement = (Vec<TokenTree>, Option<Span>);

/// Splits top-level tokens at `;`.
fn split_statements(tokens: Vec<TokenTree>) -> Vec<Statement> {
    let mut statements = vec![(Vec::new(), None)];
    for tt in tokens {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ';' => {
                if let Some(last) = statements.last_mut() {
                    last.1 = Some(p.span());
                }
                statements.push((Vec::new(), None));
            }
            _ => {
                if let Some(last) = statements.last_mut() {
                    last.0.push(tt);
                }
            }
        }
    }
    statements
}

/// The error for a body that ends with `;`: after a `let`, the pipeline is missing;
/// after the pipeline, the `;` is one too many.
fn after_the_last_semicolon(statements: &[Statement]) -> syn::Error {
    let Some((tokens, Some(semi))) = statements.last() else {
        return syn::Error::new(Span::call_site(), "expected a pipeline");
    };
    if is_let(tokens.first()) {
        return syn::Error::new(
            *semi,
            "expected the pipeline after this `let`: the last expression of `pipeline!` is \
             the pipeline, and its value is the sink's result",
        );
    }
    syn::Error::new(
        *semi,
        "unexpected `;`: the last expression of `pipeline!` is the pipeline, and its value \
         is the sink's result; remove the `;`",
    )
}

fn is_let(token: Option<&TokenTree>) -> bool {
    matches!(token, Some(TokenTree::Ident(i)) if i == "let")
}

/// `let name = chain` (before a `;`).
fn binding(tokens: Vec<TokenTree>, semi: Option<Span>) -> syn::Result<Binding> {
    let mut tokens = tokens.into_iter();
    let let_token = match tokens.next() {
        Some(TokenTree::Ident(i)) if i == "let" => i.span(),
        first => {
            let span = first.map_or_else(|| semi.unwrap_or_else(Span::call_site), |t| t.span());
            return Err(syn::Error::new(
                span,
                "expected `let name = stream;`: only the last expression of `pipeline!` is \
                 the pipeline; name the other streams with `let`",
            ));
        }
    };
    let name = match tokens.next() {
        Some(TokenTree::Ident(i)) if i != "mut" => i,
        other => {
            return Err(syn::Error::new(
                other.map_or(let_token, |t| t.span()),
                "expected a name: `let name = stream;` names one stream (no `mut`, no pattern)",
            ))
        }
    };
    let equals = match tokens.next() {
        Some(TokenTree::Punct(p)) if p.as_char() == '=' => p.span(),
        Some(TokenTree::Punct(p)) if p.as_char() == ':' => {
            return Err(syn::Error::new(
                p.span(),
                "a `let` in `pipeline!` names a stream without a type: `let name = stream;`",
            ))
        }
        other => {
            return Err(syn::Error::new(
                other.map_or(name.span(), |t| t.span()),
                "expected `=`: `let name = stream;`",
            ))
        }
    };
    let rest: Vec<TokenTree> = tokens.collect();
    if rest.is_empty() {
        return Err(syn::Error::new(equals, "expected a stream after `=`"));
    }
    let chain = Chain::from_tokens(rest)?;
    Ok(Binding {
        let_token,
        name,
        chain,
    })
}

impl Chain {
    /// A head and its calls, from non-empty tokens.
    fn from_tokens(tokens: Vec<TokenTree>) -> syn::Result<Chain> {
        let end = tokens.last().map_or_else(Span::call_site, TokenTree::span);
        let segments = split_at_dots(tokens);
        // The head is the first segment plus any following segments that are not calls
        // (`self.env`); the first call after it starts the chain.
        let first_call = segments
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, s)| as_call(s).is_some())
            .map_or(segments.len(), |(i, _)| i);
        let mut head_tokens = TokenStream::new();
        for (i, seg) in segments[..first_call].iter().enumerate() {
            if i > 0 {
                head_tokens
                    .extend(quote::quote_spanned!(seg.first().map_or(end, TokenTree::span)=> .));
            }
            head_tokens.extend(seg.iter().cloned());
        }
        let head: Expr = syn::parse2(head_tokens).map_err(|e| {
            syn::Error::new(
                e.span(),
                format!("expected the environment expression before the source: {e}"),
            )
        })?;
        let calls = segments[first_call..]
            .iter()
            .map(|seg| call(seg, end))
            .collect::<syn::Result<_>>()?;
        Ok(Chain { head, calls, end })
    }

    /// The span of the head.
    pub(crate) fn head_span(&self) -> Span {
        self.head.span()
    }

    /// The tokens of the head.
    pub(crate) fn head_tokens(&self) -> TokenStream {
        self.head.to_token_stream()
    }

    /// The head, when it is one name (a stream bound with `let`, or a variable).
    pub(crate) fn head_name(&self) -> Option<&Ident> {
        match &self.head {
            Expr::Path(p) if p.qself.is_none() => p.path.get_ident(),
            _ => None,
        }
    }
}

/// One segment `name(args)` of a chain.
fn call(seg: &[TokenTree], end: Span) -> syn::Result<Call> {
    let Some((name, turbofish, group)) = as_call(seg) else {
        return Err(not_a_call(seg, end));
    };
    let text = name.to_string();
    let (args, stream) = if takes_state_decls(&text) {
        let decls = Punctuated::<StateDecl, Token![,]>::parse_terminated.parse2(group.stream())?;
        (Args::States(decls.into_iter().collect()), None)
    } else {
        let exprs: Vec<Expr> = Punctuated::<Expr, Token![,]>::parse_terminated
            .parse2(group.stream())?
            .into_iter()
            .collect();
        // An argument that is not a chain (`streams[0]`) is an expression only.
        let stream = stream_argument(&text)
            .and_then(|i| exprs.get(i))
            .and_then(|e| Chain::from_tokens(e.to_token_stream().into_iter().collect()).ok())
            .map(Box::new);
        (Args::Exprs(exprs), stream)
    };
    Ok(Call {
        name,
        turbofish,
        args,
        parens: group.span(),
        stream,
    })
}

/// The error for a segment that is not `name(arguments)`: when it starts with a call and
/// has tokens after it, the error is at the first of them (a missing `.`), else at the
/// segment.
fn not_a_call(seg: &[TokenTree], end: Span) -> syn::Error {
    if let [TokenTree::Ident(_), TokenTree::Group(g), extra, ..] = seg {
        if g.delimiter() == Delimiter::Parenthesis {
            return syn::Error::new(
                extra.span(),
                format!(
                    "expected `.` before `{extra}`: operators are chained as `.name(arguments)`"
                ),
            );
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
    /// The binding a chain's head names, if it is a stream bound before `before` (the
    /// number of bindings seen so far): the last one of that name.
    pub(crate) fn bound(&self, chain: &Chain, before: usize) -> Option<&Binding> {
        let name = chain.head_name()?;
        self.bindings[..before.min(self.bindings.len())]
            .iter()
            .rev()
            .find(|b| b.name == *name)
    }

    /// The first call of the pipeline's stream: of its last expression, or of the binding
    /// its head names (and so on).
    pub(crate) fn first_call(&self) -> Option<&Call> {
        let mut chain = &self.main;
        let mut before = self.bindings.len();
        loop {
            let Some(binding) = self.bound(chain, before) else {
                return chain.calls.first();
            };
            before = self
                .bindings
                .iter()
                .position(|b| std::ptr::eq(b, binding))
                .unwrap_or(0);
            chain = &binding.chain;
        }
    }
}

#[cfg(test)]
mod tests;
