//! The `window` operator.

use super::prelude::*;

/// The `window` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "window",
    role: Role::Transform,
    args: &[arg("assigner: impl WindowAssigner", Assigner)],
    variants: &[on(Stage::Keyed, Stage::Windowed, IdKind::None)],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Cuts each key's elements into windows; literal sizes, slides, gaps and offsets are checked at compile time.",
};
