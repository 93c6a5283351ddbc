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
    example: "let out = pipeline! {\n    env.from_elements([1, 2, 3])\n        .key_by(|_: &i32| ())\n        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))\n        .trigger(CountTrigger::of(2))\n        .reduce(|a, b| a + b)\n        .collect_vec()\n}?;\nassert_eq!(out, [3, 6]);",
};
