//! The `from_timestamped_collection` operator.

use super::prelude::*;

/// The `from_timestamped_collection` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "from_timestamped_collection",
    role: Role::Source,
    args: &[arg("items: impl IntoIterator<Item = (T, i64)>", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    time: Time::Timed,
    expansion: Expansion::Method,
    summary: "A stream of `(element, event time ms)` pairs, consumed lazily: each element carries its event time, so event-time windows run on it; source id `source-{n}`.",
    example: r#"
// Three orders three minutes apart: one per one-minute window.
let orders = [(("ann", 10), 0), (("ann", 20), 180_000), (("ann", 30), 360_000)];
let out = pipeline! {
    env.from_timestamped_collection(orders)
        .key_by(|o: &(&str, i32)| o.0)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
        .sum_by(|o: &(&str, i32)| o.1)
        .map(|(_, w, sum): (&str, TimeWindow, i32)| (w.start(), sum))
        .collect_vec()
}?;
assert_eq!(out, [(0, 10), (180_000, 20), (360_000, 30)]);
"#,
};
