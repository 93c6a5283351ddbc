//! The `assign_timestamps_and_watermarks` operator.

use super::prelude::*;

/// The `assign_timestamps_and_watermarks` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "assign_timestamps_and_watermarks",
    role: Role::Transform,
    args: &[arg("generator: impl WatermarkGenerator<T>", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("watermarks"))],
    engines: BOTH,
    expansion: Expansion::Method,
    summary:
        "Lets a watermark generator own the watermark from here on, keeping record timestamps.",
};
