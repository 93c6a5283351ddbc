//! The `apply` operator.

use super::prelude::*;

/// The `apply` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "apply",
    role: Role::Transform,
    args: &[arg(
        "|&key, &window, &[element], out| -> Result<(), BoxError>",
        Expr,
    )],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-apply"),
    )],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Calls the function with all of a window's elements per firing.",
};
