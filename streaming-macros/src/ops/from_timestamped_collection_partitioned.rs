//! The `from_timestamped_collection_partitioned` operator.

use super::prelude::*;

/// The `from_timestamped_collection_partitioned` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_timestamped_collection_partitioned",
    role: Role::Source,
    args: &[
        arg("items: impl IntoIterator<Item = (T, i64)>", Expr),
        arg("partitions: u32", Expr),
        arg("|&element| -> Option<key>", Expr),
    ],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Timed,
    expansion: Expansion::Method,
    summary: "Like `from_collection_partitioned`, for `(element, event time ms)` pairs as in `from_timestamped_collection`: the key function sees the element, which keeps its event time.",
    example: r#"
let clicks = [("a", 0), ("b", 10), ("a", 1_500)];
let out = pipeline! {
    env.from_timestamped_collection_partitioned(clicks, 2, |w: &&str| Some(*w))
        .key_by(|w: &&str| *w)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .count()
        .map(|(w, win, n): (&str, TimeWindow, u64)| (w, win.start(), n))
        .collect_vec()
}?;
// "a" → partition 0, "b" → 1: partition 0's records come first.
assert_eq!(out, [("a", 0, 1), ("a", 1000, 1), ("b", 0, 1)]);
"#,
};
