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
    example: "let err = pipeline! {\n    env.from_elements([\"1\", \"x\"]).try_map(|s: &str| s.parse::<i32>()).collect_vec()\n}\n.unwrap_err();\nassert!(err.to_string().starts_with(\"operator `source-0/1:try_map` failed\"));",
};
