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
    expansion: Expansion::Method,
    summary: "Counts each window's elements; emits `(key, window, count)` per firing.",
    example: "let out = pipeline! {\n    env.from_elements([\"a\", \"b\", \"a\"])\n        .key_by(|w: &&str| *w)\n        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))\n        .count()\n        .map(|(k, _w, n): (&str, TimeWindow, u64)| (k, n))\n        .collect_vec()\n}?;\nlet mut out = out;\nout.sort();\nassert_eq!(out, [(\"a\", 2), (\"b\", 1)]);",
};
