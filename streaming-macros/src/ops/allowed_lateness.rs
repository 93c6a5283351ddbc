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
    example: "let out = pipeline! {\n    env.from_elements([(1, 0i64), (2, 2_000), (3, 500)])\n        .assign_timestamps_and_watermarks_with(|e: &(i32, i64), _| e.1, AscendingTimestamps)\n        .key_by(|_: &(i32, i64)| ())\n        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))\n        .allowed_lateness(Duration::from_secs(5))\n        .reduce(|a, b| (a.0 + b.0, a.1))\n        .map(|e: (i32, i64)| e.0)\n        .collect_vec()\n}?;\nassert_eq!(out, [1, 4, 2]);",
};
