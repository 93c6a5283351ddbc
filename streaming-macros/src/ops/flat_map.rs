//! The `flat_map` operator.

use super::prelude::*;

/// The `flat_map` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "flat_map",
    role: Role::Transform,
    args: &[arg("|element| -> impl IntoIterator", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("flat_map"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Replaces every element with the items the function returns.",
    example: r#"
let out = pipeline! {
    env.from_elements(["a b", "c"]).flat_map(|l: &str| l.split(' ').collect::<Vec<_>>()).collect_vec()
}?;
assert_eq!(out, ["a", "b", "c"]);
"#,
};
