//! The `filter` operator.

use super::prelude::*;

/// The `filter` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "filter",
    role: Role::Transform,
    args: &[arg("|&element| -> bool", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("filter"))],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Keeps the elements for which the predicate is `true`.",
};
