//! The `co_map` operator.

use super::prelude::*;

/// The `co_map` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "co_map",
    role: Role::Transform,
    args: &[
        arg("|first| -> output", Expr),
        arg("|second| -> output", Expr),
    ],
    variants: &[on(Stage::Connected, Stage::Stream, IdKind::Kind("map"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Transforms the first input's elements with the first function and the second input's with the second, into one output type (Flink `CoMapFunction`).",
    example: r#"
let out = pipeline! {
    let celsius = env.from_elements([20.0f64]);
    env.from_elements([68.0f64])
        .connect(celsius)
        .co_map(|f: f64| (f - 32.0) * 5.0 / 9.0, |c: f64| c)
        .collect_vec()
}?;
assert_eq!(out, [20.0, 20.0]);
"#,
};
