//! The `from_mq_topic_with_options` operator.

use super::prelude::*;

/// The `from_mq_topic_with_options` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_mq_topic_with_options",
    role: Role::Source,
    args: &[arg("topic", Expr), arg("group", Expr), arg("options: SubscriptionOptions", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: &[Engine::Redis],
    time: Time::Timed,
    expansion: Expansion::EngineFunction,
    summary: "Like `from_mq_topic` with `SubscriptionOptions` (batch size, poll time, start policy) (Redis engine).",
    example: r#"
let options = SubscriptionOptions::builder()
    .start(StartPolicy::Earliest)
    .poll_timeout(Duration::from_millis(20))
    .build()?;
pipeline! {
    env.from_mq_topic_with_options("words", "lengths", options)
        .map(|m: Message| m.payload.len() as u64)
        .key_by(|n: &u64| n % 2)
        .sum()
        .print_with_prefix("len")
}?;
let job = env.blocking_start()?;
job.blocking_shutdown(Duration::from_secs(10));
"#,
};
