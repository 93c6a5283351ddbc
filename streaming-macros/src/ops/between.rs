//! The `between` operator.

use super::prelude::*;

/// The `between` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "between",
    role: Role::Transform,
    args: &[arg("lower_ms: i64", Expr), arg("upper_ms: i64", Expr)],
    variants: &[on(Stage::IntervalJoin, Stage::BoundedJoin, IdKind::None)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::FallibleMethod,
    summary: "The bounds of an interval join, in milliseconds relative to a first-input element's event time (negative for before), both inclusive. Literal bounds with `lower > upper` are a compile error; other values are checked when the pipeline is built (`Error::InvalidConfig`, field `lower`, as the pipeline's result).",
    example: r#"
// Each reading with the alarms from 1 s before it to 1 s after it.
let out = pipeline! {
    let alarms = env.from_timestamped_collection([("s1", 2_500), ("s1", 9_000)]);
    env.from_timestamped_collection([(("s1", 7.5f64), 3_000)])
        .key_by(|r: &(&str, f64)| r.0)
        .interval_join(alarms.key_by(|a: &&str| *a))
        .between(-1_000, 1_000)
        .process(|r: &(&str, f64), _a: &&str| r.1)
        .collect_vec()
}?;
assert_eq!(out, [7.5]);
// Bounds known at run time only are checked when the pipeline is built.
let (lower, upper) = (10, 0);
let refused = pipeline! {
    let b = env.from_timestamped_collection([(1, 0)]);
    env.from_timestamped_collection([(1, 0)])
        .key_by(|x: &i32| *x)
        .interval_join(b.key_by(|x: &i32| *x))
        .between(lower, upper)
        .process(|a: &i32, b: &i32| a + b)
        .collect_vec()
};
assert!(matches!(refused, Err(Error::InvalidConfig { field: "lower", .. })));
"#,
};
