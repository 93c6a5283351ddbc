//! The `for_each` operator.

use super::prelude::*;

/// The `for_each` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "for_each",
    role: Role::Sink,
    args: &[arg("|element|", Expr)],
    variants: &[on(Stage::Stream, Stage::Done, IdKind::Kind("sink"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs the pipeline, calling the closure for every record; returns `Result<JobSummary, Error>` on the memory engine, and on the Redis engine registers the pipeline and returns `Result<(), Error>` (`RedisEnv::start` or `blocking_start` starts it).",
    example: r#"
let mut total = 0;
let summary = pipeline! { env.from_elements([1, 2]).for_each(|x| total += x) }?;
assert_eq!((total, summary.late_elements), (3, 0));
"#,
};
