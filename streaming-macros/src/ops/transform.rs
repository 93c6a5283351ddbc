//! The `transform` operator.

use super::prelude::*;

/// The `transform` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "transform",
    role: Role::Transform,
    args: &[arg("|input: Input<T>| -> impl Fragment<T>", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Fragment)],
    engines: BOTH,
    time: Time::Unknown,
    expansion: Expansion::Method,
    summary: "Continues the pipeline with a fragment: a function from `streaming::fragment::Input<T>` to `impl Fragment<T, Out = U>` (or from `Input<T, NoEventTime>` to `impl Fragment<T, NoEventTime, Out = U>` when it needs no event time from its input), written with the builder or with `pipeline!` without a source and a sink. Its operators get the ids they would have inline; ids after it are known at run time only.",
    example: r#"
use streaming::fragment::{Fragment, Input};
// Needs no event time from its input, so it follows any stream.
fn doubled_evens(numbers: Input<i32, NoEventTime>) -> impl Fragment<i32, NoEventTime, Out = i32> {
    pipeline! { numbers.filter(|x: &i32| x % 2 == 0).map(|x: i32| x * 2) }
}
let out = pipeline! { env.from_elements([1, 2, 3, 4]).transform(doubled_evens).collect_vec() }?;
assert_eq!(out, [4, 8]);
"#,
};
