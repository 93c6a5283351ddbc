//! The `aggregate` operator.

use super::prelude::*;

/// The `aggregate` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "aggregate",
    role: Role::Transform,
    args: &[arg("function: impl AggregateFunction<T>", Expr)],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-aggregate"),
    )],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Aggregates each window incrementally; emits the function's result per firing.",
    example: "struct Max;\nimpl AggregateFunction<i32> for Max {\n    type Acc = i32;\n    type Out = i32;\n    fn create_accumulator(&self) -> i32 { i32::MIN }\n    fn add(&self, acc: &mut i32, v: i32) { *acc = (*acc).max(v) }\n    fn get_result(&self, acc: &i32) -> i32 { *acc }\n    fn merge(&self, a: i32, b: i32) -> i32 { a.max(b) }\n}\nlet out = pipeline! {\n    env.from_elements([3, 9, 4])\n        .key_by(|_: &i32| ())\n        .window(EventTimeSessionWindows::with_gap(Duration::from_millis(5)))\n        .aggregate(Max)\n        .collect_vec()\n}?;\nassert_eq!(out, [9]);",
};
