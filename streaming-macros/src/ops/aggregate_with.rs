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
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Aggregates each window incrementally; emits `with(key, window, result)` per firing.",
    example: r#"
struct Len;
impl AggregateFunction<&'static str> for Len {
    type Acc = usize;
    type Out = usize;
    fn create_accumulator(&self) -> usize { 0 }
    fn add(&self, acc: &mut usize, v: &str) { *acc += v.len() }
    fn get_result(&self, acc: &usize) -> usize { *acc }
    fn merge(&self, a: usize, b: usize) -> usize { a + b }
}
let out = pipeline! {
    env.from_timestamped_collection([("ab", 100), ("c", 900)])
        .key_by(|_: &&str| "k")
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .aggregate_with(Len, |k: &&str, w: &TimeWindow, n: usize| format!("{k}@{}={n}", w.start()))
        .collect_vec()
}?;
assert_eq!(out, ["k@0=3"]);
"#,
};
