//! The `min_by` operator.

use super::prelude::*;

/// The `min_by` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "min_by",
    role: Role::Transform,
    args: &[arg("|e: &T| -> value", Expr)],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("min-by")), on(Stage::Windowed, Stage::Stream, IdKind::Kind("window-min-by"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "The element with the smallest value of the closure (the earliest on ties). Keyed: rolling, per element. Windowed: per firing.",
    example: r#"
let cheapest = pipeline! {
    env.from_timestamped_collection([(("a", 5), 0), (("b", 3), 10), (("c", 3), 20)])
        .key_by(|_: &(&str, i32)| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .min_by(|e: &(&str, i32)| e.1)
        .collect_vec()
}?;
assert_eq!(cheapest, [("b", 3)]);
"#,
};
