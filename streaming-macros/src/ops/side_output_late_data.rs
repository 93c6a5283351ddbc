//! The `side_output_late_data` operator.

use super::prelude::*;

/// The `side_output_late_data` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "side_output_late_data",
    role: Role::Transform,
    args: &[arg("sink: impl Sink<T>", Expr)],
    variants: &[on(Stage::Windowed, Stage::Windowed, IdKind::None)],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Sends elements later than the allowed lateness to a typed side output.",
};
