//! The `count` operator.

use super::prelude::*;

/// The `count` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "count",
    role: Role::Transform,
    args: &[],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-count"),
    )],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Counts each window's elements; emits `(key, window, count)` per firing.",
    example: r#"
let out = pipeline! {
    env.from_timestamped_collection([("a", 0), ("b", 200), ("a", 400)])
        .key_by(|w: &&str| *w)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .count()
        .map(|(k, _w, n): (&str, TimeWindow, u64)| (k, n))
        .collect_vec()
}?;
let mut out = out;
out.sort();
assert_eq!(out, [("a", 2), ("b", 1)]);
"#,
};
