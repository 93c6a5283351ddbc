//! The `process` operator.

use super::prelude::*;

/// The `process` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "process",
    role: Role::Transform,
    args: &[arg("|element, ctx, out| -> Result<(), BoxError>", Expr)],
    variants: &[on(Stage::Keyed, Stage::Processed, IdKind::Kind("process")), on(Stage::KeyedState, Stage::Processed, IdKind::Kind("process"))],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Runs a function per element with the key's context: key, timestamp, watermark, timers and state.",
};
