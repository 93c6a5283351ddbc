//! The `from_elements` operator.

use super::prelude::*;

/// The `from_elements` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_elements",
    role: Role::Source,
    args: &[arg("[elements; N]", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Untimed,
    expansion: Expansion::Method,
    summary: "A stream of a fixed array of elements, without timestamps (like `from_collection`); source id `source-{n}`.",
    example: r#"
let out = pipeline! { env.from_elements(["a", "b"]).collect_vec() }?;
assert_eq!(out, ["a", "b"]);
"#,
};
