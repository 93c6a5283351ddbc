//! What the macro can read of an argument: literals, `Type::constructor(args)` calls and
//! literal `Duration`s, by the names written in the call.

use syn::{Expr, Lit};

/// Strips parentheses, groups and a trailing `?`.
pub(super) fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        Expr::Try(t) => strip(&t.expr),
        e => e,
    }
}

/// `Type::ctor(args)` → ("Type", "ctor", args).
pub(super) fn ctor_call(e: &Expr) -> Option<(String, String, Vec<&Expr>)> {
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

/// The value of a string literal.
pub(super) fn str_lit(e: &Expr) -> Option<String> {
    match strip(e) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(s.value()),
        _ => None,
    }
}

/// The value of an integer literal, negative ones too.
pub(super) fn int_lit(e: &Expr) -> Option<i128> {
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
pub(super) fn duration_nanos(e: &Expr) -> Option<u128> {
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
