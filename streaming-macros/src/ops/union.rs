//! The `union` operator.

use super::prelude::*;

/// The `union` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "union",
    role: Role::Transform,
    args: &[arg("other stream of the same element type", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Position)],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Merges another stream of the same element type (built with the builder before the pipeline) into this one; the watermark after it is the lowest of both inputs'. On the Redis engine both are topics of one `RedisEnv` with the same partition count, read partition by partition.",
    example: r#"
let tens = env.from_elements([10, 20]).map(|x| x + 1);
let out = pipeline! { env.from_elements([1, 2]).union(tens).collect_vec() }?;
assert_eq!(out, [1, 2, 11, 21]);
"#,
};
