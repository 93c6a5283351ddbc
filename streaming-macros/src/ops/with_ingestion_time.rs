//! The `with_ingestion_time` operator.

use super::prelude::*;

/// The `with_ingestion_time` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "with_ingestion_time",
    role: Role::Transform,
    args: &[],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Chooses,
    expansion: Expansion::Method,
    summary: "Right after a memory source without timestamps: runs the stream on ingestion time, the memory engine's deterministic clock (record `i` of the source arrives at `i` ms), so event-time windows run on it.",
    example: r#"
let out = pipeline! {
    env.from_elements([1, 2, 3, 4])
        .with_ingestion_time()
        .key_by(|_: &i32| ())
        .window(TumblingEventTimeWindows::of(Duration::from_millis(2)))
        .sum()
        .map(|(_, w, sum): ((), TimeWindow, i32)| (w.start(), sum))
        .collect_vec()
}?;
assert_eq!(out, [(0, 3), (2, 7)]);
"#,
};
