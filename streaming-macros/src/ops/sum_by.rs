//! The `sum_by` operator.

use super::prelude::*;

/// The `sum_by` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "sum_by",
    role: Role::Transform,
    args: &[arg("|e: &T| -> number", Expr)],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("sum-by")), on(Stage::Windowed, Stage::Stream, IdKind::Kind("window-sum-by"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Sums the number the closure extracts from each element. Keyed: rolling, emits `(key, sum so far)` per element. Windowed: emits `(key, window, sum)` per firing.",
    example: r#"
let totals = pipeline! {
    env.from_timestamped_collection([(("a", 2u64), 0), (("a", 3), 10)])
        .key_by(|e: &(&str, u64)| e.0)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .sum_by(|e: &(&str, u64)| e.1)
        .map(|(k, _w, s): (&str, TimeWindow, u64)| (k, s))
        .collect_vec()
}?;
assert_eq!(totals, [("a", 5)]);
let rolling = pipeline! {
    env.from_elements([("a", 2u64), ("b", 1), ("a", 3)])
        .key_by(|e: &(&str, u64)| e.0)
        .sum_by(|e: &(&str, u64)| e.1)
        .collect_vec()
}?;
assert_eq!(rolling, [("a", 2), ("b", 1), ("a", 5)]);
"#,
};
