//! The `count` operator.

use super::prelude::*;

/// The `count` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "count",
    role: Role::Transform,
    args: &[],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-count"),
    )],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Counts each window's elements; emits `(key, window, count)` per firing.",
};
