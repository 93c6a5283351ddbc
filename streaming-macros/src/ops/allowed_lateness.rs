//! The `allowed_lateness` operator.

use super::prelude::*;

/// The `allowed_lateness` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "allowed_lateness",
    role: Role::Transform,
    args: &[arg("lateness: Duration", Expr)],
    variants: &[
        on(Stage::Windowed, Stage::Windowed, IdKind::None),
        on(Stage::CoWindowed, Stage::CoWindowed, IdKind::None),
    ],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Keeps windows for this long after their end; a late element within it fires the window again.",
    example: r#"
let out = pipeline! {
    env.from_elements([(1, 0i64), (2, 2_000), (3, 500)])
        .assign_timestamps_and_watermarks_with(|e: &(i32, i64), _| e.1, AscendingTimestamps)
        .key_by(|_: &(i32, i64)| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .allowed_lateness(Duration::from_secs(5))
        .reduce(|a, b| (a.0 + b.0, a.1))
        .map(|e: (i32, i64)| e.0)
        .collect_vec()
}?;
assert_eq!(out, [1, 4, 2]);
"#,
};
