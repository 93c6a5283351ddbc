//! The `process` operator of an interval join.

use super::prelude::*;

/// The row of `process` on an interval join.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "process",
    role: Role::Transform,
    args: &[arg("|&first, &second| -> output", Expr)],
    variants: &[on(Stage::BoundedJoin, Stage::Stream, IdKind::Kind("process"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Emits the function's result for every pair of an interval join (Flink `ProcessJoinFunction`, as a closure), when the pair's second element arrives and with that element's timestamp. On the Redis engine the join keeps both inputs' waiting elements in Redis, so their types must be serde `Serialize + DeserializeOwned`.",
    example: r#"
let out = pipeline! {
    let b = env.from_timestamped_collection([("k", 150), ("k", 400)]);
    env.from_timestamped_collection([("k", 100)])
        .key_by(|a: &&str| *a)
        .interval_join(b.key_by(|b: &&str| *b))
        .between(0, 100)
        .process(|a: &&str, b: &&str| format!("{a}{b}"))
        .collect_vec()
}?;
assert_eq!(out, ["kk"]);
"#,
};
