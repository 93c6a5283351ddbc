//! The `filter` operator.

use super::prelude::*;

/// The `filter` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "filter",
    role: Role::Transform,
    args: &[arg("|&element| -> bool", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("filter"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Keeps the elements for which the predicate is `true`.",
    example: r#"
let out = pipeline! { env.from_elements([1, 2, 3]).filter(|x: &i32| x % 2 == 1).collect_vec() }?;
assert_eq!(out, [1, 3]);
"#,
};
