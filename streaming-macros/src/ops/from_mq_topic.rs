//! The `from_mq_topic` operator.

use super::prelude::*;

/// The `from_mq_topic` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_mq_topic",
    role: Role::Source,
    args: &[arg("topic", Expr), arg("group", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: &[Engine::Redis],
    time: Time::Timed,
    expansion: Expansion::EngineFunction,
    summary: "A stream of the messages of a topic read by a consumer group; source id `{topic}.{group}` (Redis engine).",
    example: r#"
// Counts per word, kept in Redis; the sink registers the pipeline, `blocking_start`
// starts it.
let out = CollectSink::new();
pipeline! {
    env.from_mq_topic("words", "counter")
        .map(|m: Message| m.text().unwrap_or_default().to_string())
        .key_by(|w: &String| w.clone())
        .state(count: ValueState<u64> = 0)
        .process(|w: String, ctx, out| {
            let n = ctx.state(count)?.value() + 1;
            ctx.state(count)?.update(n);
            out.collect((w, n));
            Ok(())
        })
        .sink(out.clone())
}?;
let job = env.blocking_start()?;
job.blocking_await_caught_up(Duration::from_secs(10))?;
job.blocking_shutdown(Duration::from_secs(10));
"#,
};
