//! The `side_output_rejected` operator.

use super::prelude::*;

/// The `side_output_rejected` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "side_output_rejected",
    role: Role::Transform,
    args: &[arg("sink: impl Sink<RejectedElement<T>>", Sink)],
    variants: &[
        on(Stage::Windowed, Stage::Windowed, IdKind::None),
        on(Stage::CoWindowed, Stage::CoWindowed, IdKind::None),
    ],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Sends elements whose window bounds do not fit in `i64` to a typed error side output (`RejectedElement`); the pipeline goes on.",
    example: r#"
let mut rejected = Vec::new();
let summary = pipeline! {
    env.from_elements([(1, 0i64), (2, i64::MAX)])
        .assign_timestamps_and_watermarks_with(|e: &(i32, i64), _| e.1, NoWatermarks)
        .key_by(|_: &(i32, i64)| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .side_output_rejected(|r: streaming::api::RejectedElement<(i32, i64)>| rejected.push(r.element.0))
        .count()
        .print()
}?;
assert_eq!((rejected, summary.window_bounds_rejected), (vec![2], 1));
"#,
};
