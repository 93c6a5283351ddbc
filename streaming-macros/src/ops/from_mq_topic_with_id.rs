//! The `from_mq_topic_with_id` operator.

use super::prelude::*;

/// The `from_mq_topic_with_id` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_mq_topic_with_id",
    role: Role::Source,
    args: &[arg("source_id", SourceId), arg("topic", Expr), arg("group", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: &[Engine::Redis],
    expansion: Expansion::EngineFunction,
    summary: "Like `from_mq_topic` with a source id (a literal is checked at compile time); it prefixes the operator ids that key the state (Redis engine).",
    example: "",
};
