//! The `from_mq_topic_with_id` operator.

use super::prelude::*;

/// The `from_mq_topic_with_id` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_mq_topic_with_id",
    role: Role::Source,
    args: &[arg("source_id", SourceId), arg("topic", Expr), arg("group", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: &[Engine::Redis],
    time: Time::Timed,
    expansion: Expansion::EngineFunction,
    summary: "Like `from_mq_topic` with a source id (a literal is checked at compile time); it prefixes the operator ids that key the state (Redis engine).",
    example: r#"
// The operator ids start with `orders-v1` instead of `orders.billing`.
pipeline! {
    env.from_mq_topic_with_id("orders-v1", "orders", "billing")
        .map(|m: Message| m.payload.len() as u64)
        .key_by(|n: &u64| n % 4)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
        .sum()
        .print()
}?;
let job = env.blocking_start()?;
job.blocking_shutdown(Duration::from_secs(10));
"#,
};
