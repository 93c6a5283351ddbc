//! The `union` operator.

use super::prelude::*;

/// The `union` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "union",
    role: Role::Transform,
    args: &[arg("other: a stream of the same element type", Stream(Stage::Stream))],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Position)],
    engines: BOTH,
    time: Time::Agrees,
    expansion: Expansion::Method,
    summary: "Merges another stream of the same element type into this one (Flink `union`): a stream bound with `let` before the pipeline's last expression, an operator chain on one, or a stream built with the builder before the macro. Both carry event time or neither does (a compile error at the argument otherwise); the watermark after it is the lowest of both inputs'. On the Redis engine both are topics of one `RedisEnv` with the same partition count, read partition by partition.",
    example: r#"
let out = pipeline! {
    let tens = env.from_elements([10, 20]).map(|x: i32| x + 1);
    env.from_elements([1, 2]).union(tens).collect_vec()
}?;
assert_eq!(out, [1, 2, 11, 21]);
// A stream built with the builder before the pipeline.
let hundreds = env.from_elements([100]);
let out = pipeline! { env.from_elements([1]).union(hundreds).collect_vec() }?;
assert_eq!(out, [1, 100]);
"#,
};
