//! The `reduce` operator.

use super::prelude::*;

/// The `reduce` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "reduce",
    role: Role::Transform,
    args: &[arg("|a, b| -> a", Expr)],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("reduce")), on(Stage::Windowed, Stage::Stream, IdKind::Kind("window-reduce"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Keyed: rolling reduce, emitting the reduced value per element. Windowed: folds each window, emitting one value per firing.",
    example: r#"
let rolling = pipeline! { env.from_elements([1, 2, 3]).key_by(|_: &i32| ()).reduce(|a, b| a + b).collect_vec() }?;
assert_eq!(rolling, [1, 3, 6]);
let windowed = pipeline! {
    env.from_timestamped_collection([(1, 0), (2, 10), (3, 20)])
        .key_by(|_: &i32| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .reduce(|a, b| a + b)
        .collect_vec()
}?;
assert_eq!(windowed, [6]);
"#,
};
