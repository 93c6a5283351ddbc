//! The `trigger` operator.

use super::prelude::*;

/// The `trigger` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "trigger",
    role: Role::Transform,
    args: &[arg("trigger: impl Trigger<T>", Trigger)],
    variants: &[
        on(Stage::Windowed, Stage::Windowed, IdKind::None),
        on(Stage::CoWindowed, Stage::CoWindowed, IdKind::None),
    ],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Replaces the assigner's default trigger: `CountTrigger::of(n)`, `ContinuousEventTimeTrigger::of(interval)`, `PurgingTrigger::of(trigger)` (every firing also purges), `EventTimeTrigger`, `ProcessingTimeTrigger` or a custom `Trigger`; literal counts and intervals are checked at compile time.",
    example: r#"
let out = pipeline! {
    env.from_timestamped_collection([(1, 0), (2, 10), (3, 20)])
        .key_by(|_: &i32| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .trigger(CountTrigger::of(2))
        .reduce(|a, b| a + b)
        .collect_vec()
}?;
assert_eq!(out, [3, 6]);
// Each firing purges the window: it emits the elements since the last firing.
let out = pipeline! {
    env.from_timestamped_collection([(1, 0), (2, 10), (3, 20)])
        .key_by(|_: &i32| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .trigger(PurgingTrigger::of(CountTrigger::of(2)))
        .reduce(|a, b| a + b)
        .collect_vec()
}?;
assert_eq!(out, [3, 3]);
// Early results every 4 ms of event time, then the window's result at its end.
let out = pipeline! {
    env.from_collection(0..10)
        .assign_timestamps_and_watermarks_with(|x: &i32, _| i64::from(*x), BoundedOutOfOrderness::new(Duration::ZERO))
        .key_by(|_: &i32| ())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .trigger(ContinuousEventTimeTrigger::of(Duration::from_millis(4)))
        .count()
        .map(|(_, _, n): ((), TimeWindow, u64)| n)
        .collect_vec()
}?;
assert_eq!(out, [5, 9, 10]);
"#,
};
