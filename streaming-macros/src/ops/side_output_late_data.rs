//! The `side_output_late_data` operator.

use super::prelude::*;

/// The `side_output_late_data` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "side_output_late_data",
    role: Role::Transform,
    args: &[arg("sink: impl Sink<T>", Sink)],
    variants: &[
        on(Stage::Windowed, Stage::Windowed, IdKind::None),
        on(Stage::CoWindowed, Stage::CoWindowed, IdKind::None),
    ],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Sends elements later than the allowed lateness to a typed side output.",
    example: r#"
let mut late = Vec::new();
let summary = pipeline! {
    env.from_elements([(1, 0i64), (2, 2_000), (3, 500)])
        .assign_timestamps_and_watermarks_with(|e: &(i32, i64), _| e.1, AscendingTimestamps)
        .key_by(|_: &(i32, i64)| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .side_output_late_data(|e: (i32, i64)| late.push(e.0))
        .count()
        .print()
}?;
assert_eq!((late, summary.late_elements), (vec![3], 1));
"#,
};
