//! The `map` operator.

use super::prelude::*;

/// The `map` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "map",
    role: Role::Transform,
    args: &[arg("|element| -> output", Expr)],
    variants: &[
        on(Stage::Stream, Stage::Stream, IdKind::Kind("map")),
        on(Stage::Keyed, Stage::Stream, IdKind::Kind("map")),
    ],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Transforms every element (on a keyed stream the result is not keyed).",
    example: r#"
let out = pipeline! { env.from_elements([1, 2]).map(|x: i32| x * 10).collect_vec() }?;
assert_eq!(out, [10, 20]);
"#,
};
