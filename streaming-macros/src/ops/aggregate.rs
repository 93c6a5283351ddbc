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
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Aggregates each window incrementally; emits the function's result per firing.",
    example: r#"
struct Max;
impl AggregateFunction<i32> for Max {
    type Acc = i32;
    type Out = i32;
    fn create_accumulator(&self) -> i32 { i32::MIN }
    fn add(&self, acc: &mut i32, v: i32) { *acc = (*acc).max(v) }
    fn get_result(&self, acc: &i32) -> i32 { *acc }
    fn merge(&self, a: i32, b: i32) -> i32 { a.max(b) }
}
let out = pipeline! {
    env.from_timestamped_collection([(3, 0), (9, 2), (4, 4)])
        .key_by(|_: &i32| ())
        .window(EventTimeSessionWindows::with_gap(Duration::from_millis(5)))
        .aggregate(Max)
        .collect_vec()
}?;
assert_eq!(out, [9]);
"#,
};
