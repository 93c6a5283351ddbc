//! The `co_flat_map` operator.

use super::prelude::*;

/// The `co_flat_map` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "co_flat_map",
    role: Role::Transform,
    args: &[
        arg("|first| -> impl IntoIterator<Item = output>", Expr),
        arg("|second| -> impl IntoIterator<Item = output>", Expr),
    ],
    variants: &[on(Stage::Connected, Stage::Stream, IdKind::Kind("flat_map"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Replaces each element of the first input with the items of the first function and each of the second with those of the second (Flink `CoFlatMapFunction`); each item keeps its element's timestamp.",
    example: r#"
let out = pipeline! {
    let lines = env.from_elements(["a b", "c"]);
    env.from_elements([2usize])
        .connect(lines)
        .co_flat_map(
            |n: usize| vec!["x".to_string(); n],
            |l: &str| l.split(' ').map(String::from).collect::<Vec<_>>(),
        )
        .collect_vec()
}?;
assert_eq!(out, ["x", "x", "a", "b", "c"]);
"#,
};
