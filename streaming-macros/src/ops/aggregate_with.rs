//! The `aggregate_with` operator.

use super::prelude::*;

/// The `aggregate_with` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "aggregate_with",
    role: Role::Transform,
    args: &[
        arg("function: impl AggregateFunction<T>", Expr),
        arg("|&key, &window, result| -> output", Expr),
    ],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-aggregate"),
    )],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Aggregates each window incrementally; emits `with(key, window, result)` per firing.",
    example: "struct Len;\nimpl AggregateFunction<&'static str> for Len {\n    type Acc = usize;\n    type Out = usize;\n    fn create_accumulator(&self) -> usize { 0 }\n    fn add(&self, acc: &mut usize, v: &str) { *acc += v.len() }\n    fn get_result(&self, acc: &usize) -> usize { *acc }\n    fn merge(&self, a: usize, b: usize) -> usize { a + b }\n}\nlet out = pipeline! {\n    env.from_elements([\"ab\", \"c\"])\n        .key_by(|_: &&str| \"k\")\n        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))\n        .aggregate_with(Len, |k: &&str, w: &TimeWindow, n: usize| format!(\"{k}@{}={n}\", w.start()))\n        .collect_vec()\n}?;\nassert_eq!(out, [\"k@0=3\"]);",
};
