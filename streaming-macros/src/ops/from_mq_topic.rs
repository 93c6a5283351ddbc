//! The `from_mq_topic` operator.

use super::prelude::*;

/// The `from_mq_topic` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_mq_topic",
    role: Role::Source,
    args: &[arg("topic", Expr), arg("group", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: &[Engine::Redis],
    expansion: Expansion::EngineFunction,
    summary: "A stream of the messages of a topic read by a consumer group; source id `{topic}.{group}` (Redis engine).",
    example: "",
};
