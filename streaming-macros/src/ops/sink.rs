//! The `sink` operator.

use super::prelude::*;

/// The `sink` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "sink",
    role: Role::Sink,
    args: &[arg("sink: impl Sink<T>", Sink)],
    variants: &[on(Stage::Stream, Stage::Done, IdKind::Kind("sink"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs the pipeline into a sink; returns `Result<JobSummary, Error>` on the memory engine, and on the Redis engine registers the pipeline and returns `Result<(), Error>` (`RedisEnv::start` or `blocking_start` starts it).",
    example: r#"
let mut seen = Vec::new();
let summary = pipeline! { env.from_elements([1, 2]).sink(|x: i32| seen.push(x)) }?;
assert_eq!((seen, summary.window_firings), (vec![1, 2], 0));
"#,
};
