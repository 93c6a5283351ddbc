//! The `key_by` operator.

use super::prelude::*;

/// The `key_by` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "key_by",
    role: Role::Transform,
    args: &[arg("|&element| -> key", Expr)],
    variants: &[on(Stage::Stream, Stage::Keyed, IdKind::Position)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Partitions the stream by key.",
    example: r#"
let out = pipeline! { env.from_elements([1u32, 2, 3]).key_by(|x: &u32| x % 2).sum().collect_vec() }?;
assert_eq!(out, [(1, 1), (0, 2), (1, 4)]);
"#,
};
