//! The `sum` operator.

use super::prelude::*;

/// The `sum` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "sum",
    role: Role::Transform,
    args: &[],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("sum")), on(Stage::Windowed, Stage::Stream, IdKind::Kind("window-sum"))],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Keyed: rolling sum, emitting `(key, sum)`. Windowed: emits `(key, window, sum)` per firing. Numeric elements only.",
};
