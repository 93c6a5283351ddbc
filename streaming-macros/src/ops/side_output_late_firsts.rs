//! The `side_output_late_firsts` operator.

use super::prelude::*;

/// The `side_output_late_firsts` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "side_output_late_firsts",
    role: Role::Transform,
    args: &[arg("sink: impl Sink<first>", Sink)],
    variants: &[on(Stage::BoundedJoin, Stage::BoundedJoin, IdKind::None)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Sends the first input's late elements of an interval join (at or behind the watermark when they arrive: they join nothing) to a typed side output (Flink `sideOutputLeftLateData`), between `between` and `process`.",
    example: r#"
let (late_firsts, late_seconds) = (CollectSink::new(), CollectSink::new());
let out = pipeline! {
    let seconds = env
        .from_timestamped_collection([(1, 5_000), (1, 1_000)])
        .assign_timestamps_and_watermarks(AscendingTimestamps);
    env.from_timestamped_collection([(1, 5_000), (1, 1_000)])
        .assign_timestamps_and_watermarks(AscendingTimestamps)
        .key_by(|x: &i32| *x)
        .interval_join(seconds.key_by(|x: &i32| *x))
        .between(0, 0)
        .side_output_late_firsts(late_firsts.clone())
        .side_output_late_seconds(late_seconds.clone())
        .process(|a: &i32, b: &i32| a + b)
        .collect_vec()
}?;
// The memory engine runs the first input to its end before the second, so only the
// second's element at 1 s is behind the watermark (on the Redis engine inputs interleave).
assert_eq!(out, [2]);
assert_eq!((late_firsts.snapshot(), late_seconds.snapshot()), (vec![], vec![1]));
"#,
};
