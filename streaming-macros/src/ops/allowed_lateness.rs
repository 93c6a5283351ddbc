//! The `allowed_lateness` operator.

use super::prelude::*;

/// The `allowed_lateness` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "allowed_lateness",
    role: Role::Transform,
    args: &[arg("lateness: Duration", Expr)],
    variants: &[on(Stage::Windowed, Stage::Windowed, IdKind::None)],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Keeps windows for this long after their end; a late element within it fires the window again.",
};
