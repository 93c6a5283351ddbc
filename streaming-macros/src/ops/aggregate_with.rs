//! The `aggregate_with` operator.

use super::prelude::*;

/// The `aggregate_with` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "aggregate_with",
    role: Role::Transform,
    args: &[
        arg("function: impl AggregateFunction<T>", Expr),
        arg("|&key, &window, result| -> output", Expr),
    ],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-aggregate"),
    )],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Aggregates each window incrementally; emits `with(key, window, result)` per firing.",
};
