//! The `assign_timestamps_and_watermarks_with` operator.

use super::prelude::*;

/// The `assign_timestamps_and_watermarks_with` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "assign_timestamps_and_watermarks_with",
    role: Role::Transform,
    args: &[arg("|&element, previous_ts| -> timestamp_ms", Expr), arg("generator: impl WatermarkGenerator<T>", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("watermarks"))],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Sets each element's event time and lets a watermark generator own the watermark from here on.",
};
