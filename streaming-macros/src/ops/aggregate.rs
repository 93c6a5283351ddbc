//! The `aggregate` operator.

use super::prelude::*;

/// The `aggregate` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "aggregate",
    role: Role::Transform,
    args: &[arg("function: impl AggregateFunction<T>", Expr)],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-aggregate"),
    )],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Aggregates each window incrementally; emits the function's result per firing.",
};
