//! The `try_map` operator.

use super::prelude::*;

/// The `try_map` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "try_map",
    role: Role::Transform,
    args: &[arg("|element| -> Result<output, error>", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("try_map"))],
    engines: BOTH,
    expansion: Expansion::Method,
    summary:
        "Transforms every element with a fallible function; the first `Err` stops the pipeline.",
    example: r#"
let err = pipeline! {
    env.from_elements(["1", "x"]).try_map(|s: &str| s.parse::<i32>()).collect_vec()
}
.unwrap_err();
assert!(err.to_string().starts_with("operator `source-0/1:try_map` failed"));
"#,
};
