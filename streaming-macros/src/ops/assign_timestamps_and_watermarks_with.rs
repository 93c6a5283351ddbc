//! The `assign_timestamps_and_watermarks_with` operator.

use super::prelude::*;

/// The `assign_timestamps_and_watermarks_with` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "assign_timestamps_and_watermarks_with",
    role: Role::Transform,
    args: &[arg("|&element, previous_ts| -> timestamp_ms", Expr), arg("generator: impl WatermarkGenerator<T> + Clone", Generator)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("watermarks"))],
    engines: BOTH,
    time: Time::Chooses,
    expansion: Expansion::Method,
    summary: "Sets each element's event time and lets a watermark generator own the watermark from here on; the stream has event time from here on, whatever its source.",
    example: r#"
let out = pipeline! {
    env.from_elements([(1, 1_000i64), (2, 1_500)])
        .assign_timestamps_and_watermarks_with(|e: &(i32, i64), _| e.1, AscendingTimestamps)
        .key_by(|_: &(i32, i64)| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .count()
        .map(|(_, w, n): ((), TimeWindow, u64)| (w.start(), n))
        .collect_vec()
}?;
assert_eq!(out, [(1_000, 2)]);
"#,
};
