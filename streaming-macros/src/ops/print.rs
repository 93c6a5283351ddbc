//! The `print` operator.

use super::prelude::*;

/// The `print` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "print",
    role: Role::Sink,
    args: &[],
    variants: &[on(Stage::Stream, Stage::Done, IdKind::Kind("sink"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs the pipeline and logs every record at INFO; returns `Result<JobSummary, Error>` on the memory engine, and on the Redis engine registers the pipeline and returns `Result<(), Error>` (`RedisEnv::start` or `blocking_start` starts it).",
    example: r#"
let summary = pipeline! { env.from_elements([1, 2]).print() }?;
assert_eq!(summary.late_elements, 0);
"#,
};
