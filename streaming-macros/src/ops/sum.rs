//! The `sum` operator.

use super::prelude::*;

/// The `sum` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "sum",
    role: Role::Transform,
    args: &[],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("sum")), on(Stage::Windowed, Stage::Stream, IdKind::Kind("window-sum"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Keyed: rolling sum, emitting `(key, sum)`. Windowed: emits `(key, window, sum)` per firing. Numeric elements only.",
    example: r#"
let rolling = pipeline! { env.from_elements([1.5, 2.0]).key_by(|_: &f64| 0).sum().collect_vec() }?;
assert_eq!(rolling, [(0, 1.5), (0, 3.5)]);
let windowed = pipeline! {
    env.from_timestamped_collection([(1u64, 0), (2, 10)])
        .key_by(|_: &u64| 0)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .sum()
        .map(|(k, _w, s): (i32, TimeWindow, u64)| (k, s))
        .collect_vec()
}?;
assert_eq!(windowed, [(0, 3)]);
"#,
};
