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
    summary: "Cuts each key's elements into windows: `TumblingEventTimeWindows`, `SlidingEventTimeWindows`, `EventTimeSessionWindows`, or `GlobalWindows` (needs a `.trigger(..)`, checked at compile time); literal sizes, slides, gaps and offsets are checked at compile time.",
    example: "let out = pipeline! {\n    env.from_collection(0..5)\n        .key_by(|_: &i32| ())\n        .window(SlidingEventTimeWindows::of(Duration::from_millis(4), Duration::from_millis(2)))\n        .count()\n        .map(|(_, w, n): ((), TimeWindow, u64)| (w.start(), n))\n        .collect_vec()\n}?;\nassert_eq!(out, [(-2, 2), (0, 4), (2, 3), (4, 1)]);\n// One window per key that only its trigger fires (a trigger is required); what is left\n// is emitted at the end.\nlet out = pipeline! {\n    env.from_collection(1..=5)\n        .key_by(|_: &i32| ())\n        .window(GlobalWindows::create())\n        .trigger(PurgingTrigger::of(CountTrigger::of(2)))\n        .reduce(|a, b| a + b)\n        .collect_vec()\n}?;\nassert_eq!(out, [3, 7, 5]);",
};
