//! The `window` operator.

use super::prelude::*;

/// The `window` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "window",
    role: Role::Transform,
    args: &[arg("assigner: impl WindowAssigner", Assigner)],
    variants: &[
        on(Stage::Keyed, Stage::Windowed, IdKind::None),
        on(Stage::KeyedConnected, Stage::CoWindowed, IdKind::None),
    ],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Cuts each key's elements into windows: `TumblingEventTimeWindows`, `SlidingEventTimeWindows`, `EventTimeSessionWindows`, or `GlobalWindows` (needs a `.trigger(..)`, checked at compile time). The event-time assigners need a stream whose event time was chosen (a timestamped source, `with_ingestion_time()` or a timestamp assigner): a compile error at the assigner otherwise. Literal sizes, slides, gaps and offsets are checked at compile time. On keyed connected streams it cuts both inputs' elements of each key into the same windows, for a window join (`join`) or co-group (`co_group`); `trigger`, `allowed_lateness` and `side_output_late_data` (of `CoInput` elements) work there as on any window.",
    example: r#"
let out = pipeline! {
    env.from_timestamped_collection((0..5).map(|x| (x, i64::from(x))))
        .key_by(|_: &i32| ())
        .window(SlidingEventTimeWindows::of(Duration::from_millis(4), Duration::from_millis(2)))
        .count()
        .map(|(_, w, n): ((), TimeWindow, u64)| (w.start(), n))
        .collect_vec()
}?;
assert_eq!(out, [(-2, 2), (0, 4), (2, 3), (4, 1)]);
// One window per key that only its trigger fires (a trigger is required); what is left
// is emitted at the end. It needs no event time.
let out = pipeline! {
    env.from_collection(1..=5)
        .key_by(|_: &i32| ())
        .window(GlobalWindows::create())
        .trigger(PurgingTrigger::of(CountTrigger::of(2)))
        .reduce(|a, b| a + b)
        .collect_vec()
}?;
assert_eq!(out, [3, 7, 5]);
"#,
};
