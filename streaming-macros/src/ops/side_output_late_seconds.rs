//! The `side_output_late_seconds` operator.

use super::prelude::*;

/// The `side_output_late_seconds` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "side_output_late_seconds",
    role: Role::Transform,
    args: &[arg("sink: impl Sink<second>", Sink)],
    variants: &[on(Stage::BoundedJoin, Stage::BoundedJoin, IdKind::None)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Sends the second input's late elements of an interval join to a typed side output (Flink `sideOutputRightLateData`), between `between` and `process`.",
    example: r#"
let mut late = Vec::new();
let summary = pipeline! {
    let payments = env
        .from_timestamped_collection([(("ada", 30), 9_000), (("ada", 5), 1_000)])
        .assign_timestamps_and_watermarks(AscendingTimestamps);
    env.from_timestamped_collection([("ada", 8_500)])
        .key_by(|o: &&str| *o)
        .interval_join(payments.key_by(|p: &(&str, i32)| p.0))
        .between(0, 1_000)
        .side_output_late_seconds(|p: (&str, i32)| late.push(p.1))
        .process(|o: &&str, p: &(&str, i32)| (*o, p.1))
        .print()
}?;
assert_eq!((late, summary.late_elements), (vec![5], 1));
"#,
};
