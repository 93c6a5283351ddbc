//! The `connect` operator of a keyed stream and a broadcast stream.

use super::prelude::*;

/// The row of `connect` on a keyed stream.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "connect",
    role: Role::Transform,
    args: &[arg("broadcast: a broadcast stream", Stream(Stage::Broadcast))],
    variants: &[on(
        Stage::Keyed,
        Stage::BroadcastConnected,
        IdKind::Position,
    )],
    engines: BOTH,
    time: Time::Agrees,
    expansion: Expansion::Method,
    summary: "Connects this keyed stream to a broadcast stream (Flink `KeyedStream.connect(BroadcastStream)`), given as to `union` after its `broadcast(descriptor)`, for a `KeyedBroadcastProcessFunction` (`process`). A stream that is not broadcast is a compile error at the argument (to pair two streams for a `KeyedCoProcessFunction`, `connect` them before `key_by`); both carry event time or neither does, and the watermark after it is the lowest of both inputs'. Operators after it continue this stream's ids.",
    example: concat!(
        super::examples::limits_function!(),
        r#"
let limits = env.from_elements([("limit", 10u64)]);
let out = pipeline! {
    env.from_elements([("ann", 5u64), ("bob", 30), ("ann", 12)])
        .key_by(|p: &(&str, u64)| p.0)
        .connect(limits.broadcast(LIMITS))
        .process(OverLimit)
        .collect_vec()
}?;
assert_eq!(out, ["bob: 30 > 10", "ann: 12 > 10"]);
"#
    ),
};
