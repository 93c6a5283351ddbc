//! The `process` operator of a keyed stream connected to a broadcast stream.

use super::prelude::*;

/// The row of `process` on a keyed stream connected to a broadcast stream.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "process",
    role: Role::Transform,
    args: &[arg(
        "function: impl KeyedBroadcastProcessFunction<K, A, B, BK, BV>",
        Expr,
    )],
    variants: &[on(
        Stage::BroadcastConnected,
        Stage::Stream,
        IdKind::Kind("broadcast_process"),
    )],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs a `KeyedBroadcastProcessFunction` (Flink's): `process_broadcast_element` per broadcast element on every partition, writing the broadcast map; `process_element` per element of the keyed stream, with its key's state and timers and the map read-only; `on_timer` per due timer. The memory engine runs the broadcast input first. A function of another key type, element types or map types than the streams and the descriptor is a compile error at the function.",
    example: concat!(
        super::examples::limits_function!(),
        r#"
let out = pipeline! {
    let limits = env.from_elements([("limit", 20u64), ("limit", 25)]).broadcast(LIMITS);
    env.from_elements([("ann", 21u64), ("bob", 30)])
        .key_by(|p: &(&str, u64)| p.0)
        .connect(limits)
        .process(OverLimit)
        .collect_vec()
}?;
// Both limits are in before the first amount: the second replaced the first.
assert_eq!(out, ["bob: 30 > 25"]);
"#
    ),
};
