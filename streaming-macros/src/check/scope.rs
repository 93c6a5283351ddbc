//! The streams named with `let`: where the chain on a name starts, and the rules of names
//! (each named stream is used, once, and has no sink).

use super::walk::{At, Walk};
use super::Cx;
use crate::ops::{self, Role};
use crate::parse::{Args, Binding, Chain, Pipeline};
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;

/// The names bound so far, with what is known at the end of each.
pub(super) struct Scope<'a> {
    pipeline: &'a Pipeline,
    /// What is known at the end of each binding walked so far, in order.
    ends: Vec<At<'a>>,
    /// Per binding: where its name was first used as a stream.
    used_at: Vec<Option<Span>>,
}

impl<'a> Scope<'a> {
    pub(super) fn new(pipeline: &'a Pipeline) -> Self {
        Scope {
            pipeline,
            ends: Vec::new(),
            used_at: Vec::new(),
        }
    }

    /// Adds the binding just walked, which ended at `end`.
    pub(super) fn bind(&mut self, end: At<'a>) {
        self.ends.push(end);
        self.used_at.push(None);
    }

    /// Where `chain` starts when its head names a stream bound before: that stream's end.
    /// A name used a second time is an error there.
    pub(super) fn start(&mut self, cx: &mut Cx, chain: &Chain) -> Option<At<'a>> {
        let bindings = &self.pipeline.bindings;
        let bound = self.pipeline.bound(chain, self.ends.len())?;
        let i = bindings.iter().position(|b| std::ptr::eq(b, bound))?;
        let head = chain.head_span();
        match self.used_at[i] {
            Some(_) => cx.err(
                head,
                format!(
                    "`{}` is used twice: a stream goes into one operator, its elements are not \
                     copied; read its source again under another name for a second use",
                    bound.name
                ),
            ),
            None => self.used_at[i] = Some(head),
        }
        Some(self.ends[i].clone())
    }

    /// Where the stream of a `let` starts: at the stream its head names, at its source,
    /// or (a chain on a value the macro does not know) at a stream whose ids are known at
    /// run time only, like a fragment's. The flag says whether it continues a bound stream.
    pub(super) fn start_of_binding(&mut self, cx: &mut Cx, chain: &Chain) -> (At<'a>, bool) {
        if let Some(bound) = self.start(cx, chain) {
            return (bound, true);
        }
        if starts_with_a_source(chain) {
            (At::env(), false)
        } else if chain.calls.is_empty() {
            (At::unknown(), false)
        } else {
            (At::fragment(), false)
        }
    }

    /// Where a stream argument starts, when the macro follows it: at the stream its head
    /// names, or at its source. Another argument (a stream built before the pipeline) is
    /// an expression the macro does not check.
    pub(super) fn start_of_argument(
        &mut self,
        cx: &mut Cx,
        chain: &Chain,
    ) -> Option<(At<'a>, bool)> {
        if let Some(bound) = self.start(cx, chain) {
            return Some((bound, true));
        }
        starts_with_a_source(chain).then(|| (At::env(), false))
    }

    /// Every stream named with `let` is used: as a stream, or at least named in a later
    /// expression (which rustc then checks).
    pub(super) fn every_binding_is_used(&self, cx: &mut Cx) {
        let bindings = &self.pipeline.bindings;
        for (i, binding) in bindings.iter().enumerate() {
            if self.used_at.get(i).is_some_and(Option::is_some) {
                continue;
            }
            let later = bindings[i + 1..]
                .iter()
                .map(|b| &b.chain)
                .chain([&self.pipeline.main]);
            if later.into_iter().any(|c| mentions(c, &binding.name)) {
                continue;
            }
            cx.err(
                binding.name.span(),
                format!(
                    "`{}` is never used: pass it to `union`, `connect` or `interval_join` in \
                     the pipeline, or remove this `let`",
                    binding.name
                ),
            );
        }
    }
}

/// A `let` names a stream to use in the pipeline: the sink belongs to the last expression.
/// After a sink the stream's end is lost, so its uses add no errors.
pub(super) fn binding_has_no_sink(cx: &mut Cx, binding: &Binding, walk: &mut Walk<'_>) {
    if let Some(sink) = walk.sink {
        walk.at.lost = true;
        cx.err(
            sink.name.span(),
            format!(
                "`{}` ends the stream `{}`, but a `let` names a stream for the pipeline: \
                 only the last expression of `pipeline!` has a sink",
                sink.name, binding.name
            ),
        );
    }
}

fn starts_with_a_source(chain: &Chain) -> bool {
    chain
        .calls
        .first()
        .is_some_and(|c| ops::lookup(&c.name.to_string()).is_some_and(|op| op.role == Role::Source))
}

/// Whether `name` appears anywhere in `chain`.
fn mentions(chain: &Chain, name: &proc_macro2::Ident) -> bool {
    let mut tokens = chain.head_tokens();
    for call in &chain.calls {
        match &call.args {
            Args::Exprs(exprs) => exprs.iter().for_each(|e| e.to_tokens(&mut tokens)),
            Args::States(decls) => decls
                .iter()
                .filter_map(|d| d.default.as_ref())
                .for_each(|e| e.to_tokens(&mut tokens)),
        }
    }
    contains(tokens, name)
}

fn contains(tokens: TokenStream, name: &proc_macro2::Ident) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => i == *name,
        TokenTree::Group(g) => contains(g.stream(), name),
        _ => false,
    })
}
