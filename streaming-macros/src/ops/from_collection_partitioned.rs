//! The `from_collection_partitioned` operator.

use super::prelude::*;

/// The `from_collection_partitioned` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_collection_partitioned",
    role: Role::Source,
    args: &[
        arg("items: impl IntoIterator", Expr),
        arg("partitions: u32", Expr),
        arg("|&item| -> Option<key>", Expr),
    ],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Untimed,
    expansion: Expansion::Method,
    summary: "Like `from_collection`, replayed as N partitions like a Redis topic: the item's key picks its partition (`partition_for_key`, round robin without a key); each partition runs its own clone of the pipeline (state, watermark), one after another.",
    example: r#"
let out = pipeline! { env.from_collection_partitioned(["a", "b", "a"], 4, |w: &&str| Some(*w)).map(|w: &str| w.len()).collect_vec() }?;
assert_eq!(out, [1, 1, 1]);
"#,
};
