//! The `collect_vec` operator.

use super::prelude::*;

/// The `collect_vec` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "collect_vec",
    role: Role::Sink,
    args: &[],
    variants: &[on(Stage::Stream, Stage::Done, IdKind::Kind("sink"))],
    engines: MEMORY,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs the pipeline and returns its output: `Result<Vec<T>, Error>`.",
    example: r#"
let out = pipeline! { env.from_elements([1, 2]).collect_vec() }?;
assert_eq!(out, [1, 2]);
"#,
};
