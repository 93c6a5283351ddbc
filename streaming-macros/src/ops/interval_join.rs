//! The `interval_join` operator.

use super::prelude::*;

/// The `interval_join` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "interval_join",
    role: Role::Transform,
    args: &[arg("other: a keyed stream", Stream(Stage::Keyed))],
    variants: &[on(Stage::Keyed, Stage::IntervalJoin, IdKind::Positions(2))],
    engines: BOTH,
    time: Time::Needs,
    expansion: Expansion::Method,
    summary: "Joins this keyed stream with another keyed stream of the same key type by event time (Flink `intervalJoin`), given as to `union`: after `.between(lower, upper)`, an element `a` at `ta` meets each element `b` of the same key with `ta + lower <= tb <= ta + upper`, and `.process(|a, b| ..)` emits a result per pair. Both inputs must carry event time, and `other` must be keyed by the same key type: compile errors at the stream without event time and at the key function of another key type. Each element waits in its key's state until the watermark passes the last time it could still meet one; an element at or behind the watermark is late and joins nothing.",
    example: r#"
// Orders paid within 10 minutes.
let out = pipeline! {
    let payments = env.from_timestamped_collection([(("ada", 30u64), 60_000), (("bob", 5), 900_000)]);
    env.from_timestamped_collection([((7u32, "ada"), 0), ((8, "bob"), 0)])
        .key_by(|o: &(u32, &str)| o.1)
        .interval_join(payments.key_by(|p: &(&str, u64)| p.0))
        .between(0, 600_000)
        .process(|o: &(u32, &str), p: &(&str, u64)| (o.0, p.1))
        .collect_vec()
}?;
assert_eq!(out, [(7, 30)]); // bob paid after 15 minutes
"#,
};
