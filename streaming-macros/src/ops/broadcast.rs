//! The `broadcast` operator.

use super::prelude::*;

/// The `broadcast` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "broadcast",
    role: Role::Transform,
    args: &[arg("descriptor: BroadcastStateDescriptor<BK, BV>", Expr)],
    variants: &[on(Stage::Stream, Stage::Broadcast, IdKind::None)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "This stream as a broadcast input (Flink `broadcast(descriptor)`), usually named with `let`: a keyed stream `connect`s to it, and each of its elements reaches every partition of the keyed stream, where the `KeyedBroadcastProcessFunction` of `process` writes the map `descriptor` names (the same on every partition). Meant for low-volume streams: rules, configuration, reference data. On the Redis engine the broadcast topic has one partition, read whole by every job partition (use a `persistent` descriptor there).",
    example: concat!(
        super::examples::limits_function!(),
        r#"
let out = pipeline! {
    let limits = env.from_elements([("limit", 20u64)]).broadcast(LIMITS);
    env.from_elements([("ann", 5u64), ("bob", 30)])
        .key_by(|p: &(&str, u64)| p.0)
        .connect(limits)
        .process(OverLimit)
        .collect_vec()
}?;
assert_eq!(out, ["bob: 30 > 20"]);
"#
    ),
};
