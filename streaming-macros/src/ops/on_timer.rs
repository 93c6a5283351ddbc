//! The `on_timer` operator.

use super::prelude::*;

/// The `on_timer` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "on_timer",
    role: Role::Transform,
    args: &[arg("|timestamp, ctx, out| -> Result<(), BoxError>", Expr)],
    variants: &[on(Stage::Processed, Stage::Stream, IdKind::None)],
    engines: BOTH,
    expansion: Expansion::OnTimer,
    summary: "The timer callback of the `process` right before it.",
};
