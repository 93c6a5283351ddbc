//! The `from_collection_with_id` operator.

use super::prelude::*;

/// The `from_collection_with_id` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_collection_with_id",
    role: Role::Source,
    args: &[arg("\"source-id\"", SourceId), arg("items: impl IntoIterator", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Untimed,
    expansion: Expansion::Method,
    summary: "Like `from_collection`, with an explicit source id (`[A-Za-z0-9_.-]+`, checked at compile time when it is a literal), which prefixes the operator ids and so keys their checkpointed state.",
    example: r#"
// A failing record stops the run (by default it is dead-lettered).
env.on_record_error(streaming::memory::OnRecordError::StopRun);
let err = pipeline! { env.from_collection_with_id("numbers", [1, 0]).map(|x: i32| 1 / x).print() }.unwrap_err();
assert!(err.to_string().contains("numbers/1:map"));
"#,
};
