//! The `trigger` operator.

use super::prelude::*;

/// The `trigger` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "trigger",
    role: Role::Transform,
    args: &[arg("trigger: impl Trigger<T>", Trigger)],
    variants: &[on(Stage::Windowed, Stage::Windowed, IdKind::None)],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Replaces the assigner's default trigger.",
};
