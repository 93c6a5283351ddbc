//! The `from_collection` operator.

use super::prelude::*;

/// The `from_collection` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_collection",
    role: Role::Source,
    args: &[arg("items: impl IntoIterator", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Untimed,
    expansion: Expansion::Method,
    summary: "A stream of the items of any `IntoIterator`, consumed lazily, without timestamps: event-time windows need `from_timestamped_collection`, `with_ingestion_time()` or a timestamp assigner; source id `source-{n}`.",
    example: r#"
let out = pipeline! { env.from_collection(1..=3).map(|x: i32| x * 2).collect_vec() }?;
assert_eq!(out, [2, 4, 6]);
"#,
};
