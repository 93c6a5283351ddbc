//! The `assign_timestamps_and_watermarks` operator.

use super::prelude::*;

/// The `assign_timestamps_and_watermarks` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "assign_timestamps_and_watermarks",
    role: Role::Transform,
    args: &[arg(
        "generator: impl WatermarkGenerator<T> + Clone",
        Generator,
    )],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("watermarks"))],
    engines: BOTH,
    time: Time::Chooses,
    expansion: Expansion::Method,
    summary:
        "Lets a watermark generator own the watermark from here on, keeping record timestamps: the stream must carry event time already (a timestamped source or `with_ingestion_time()`; a compile error otherwise, use `assign_timestamps_and_watermarks_with`).",
    example: r#"
let out = pipeline! {
    env.from_timestamped_collection([(5, 5), (6, 6)])
        .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(Duration::from_millis(10)))
        .collect_vec()
}?;
assert_eq!(out, [5, 6]);
"#,
};
