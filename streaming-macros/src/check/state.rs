//! The rules of `state(..)` declarations: a known kind with its type arguments, a default
//! for value state only, names unique per operator.

use super::Cx;
use crate::parse::StateDecl;
use std::collections::HashSet;
use syn::spanned::Spanned;

/// The rules of one declaration; `states` holds the names declared for this `process`.
pub(super) fn declaration(cx: &mut Cx, decl: &StateDecl, states: &mut HashSet<String>) {
    let name = decl.name.to_string();
    if !states.insert(name.clone()) {
        cx.err(
            decl.name.span(),
            format!("state `{name}` is declared twice for this `process`: state names are unique per operator"),
        );
    }
    let Some((kind, n_types)) = state_kind(&decl.ty) else {
        cx.err(
            decl.ty.span(),
            "expected a state type: `ValueState<T>`, `ListState<T>`, `MapState<K, V>` or `SetState<T>`",
        );
        return;
    };
    type_arguments(cx, decl, &kind, n_types);
    match (&decl.default, kind.as_str()) {
        (None, "ValueState") => cx.err(
            decl.name.span(),
            format!("value state `{name}` needs a default: `{name}: ValueState<T> = default`"),
        ),
        (Some(d), k) if k != "ValueState" => cx.err(
            d.span(),
            format!("`{k}` starts empty for every key and takes no default"),
        ),
        _ => {}
    }
}

/// `MapState<K, V>` takes two type arguments, the other kinds one.
fn type_arguments(cx: &mut Cx, decl: &StateDecl, kind: &str, n_types: usize) {
    let expected = if kind == "MapState" { 2 } else { 1 };
    if n_types == expected {
        return;
    }
    let form = if kind == "MapState" {
        "MapState<K, V>".to_string()
    } else {
        format!("{kind}<T>")
    };
    let count = if expected == 1 {
        "1 type argument"
    } else {
        "2 type arguments"
    };
    cx.err(decl.ty.span(), format!("`{kind}` takes {count}: `{form}`"));
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
