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
    summary: "Replaces the assigner's default trigger: `CountTrigger::of(n)`, `ContinuousEventTimeTrigger::of(interval)`, `PurgingTrigger::of(trigger)` (every firing also purges), `EventTimeTrigger`, `ProcessingTimeTrigger` or a custom `Trigger`; literal counts and intervals are checked at compile time.",
    example: "let out = pipeline! {\n    env.from_elements([1, 2, 3])\n        .key_by(|_: &i32| ())\n        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))\n        .trigger(CountTrigger::of(2))\n        .reduce(|a, b| a + b)\n        .collect_vec()\n}?;\nassert_eq!(out, [3, 6]);\n// Each firing purges the window: it emits the elements since the last firing.\nlet out = pipeline! {\n    env.from_elements([1, 2, 3])\n        .key_by(|_: &i32| ())\n        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))\n        .trigger(PurgingTrigger::of(CountTrigger::of(2)))\n        .reduce(|a, b| a + b)\n        .collect_vec()\n}?;\nassert_eq!(out, [3, 3]);\n// Early results every 4 ms of event time, then the window's result at its end.\nlet out = pipeline! {\n    env.from_collection(0..10)\n        .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(Duration::ZERO))\n        .key_by(|_: &i32| ())\n        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))\n        .trigger(ContinuousEventTimeTrigger::of(Duration::from_millis(4)))\n        .count()\n        .map(|(_, _, n): ((), TimeWindow, u64)| n)\n        .collect_vec()\n}?;\nassert_eq!(out, [5, 9, 10]);",
};
