//! The `max_by` operator.

use super::prelude::*;

/// The `max_by` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "max_by",
    role: Role::Transform,
    args: &[arg("|e: &T| -> value", Expr)],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("max-by")), on(Stage::Windowed, Stage::Stream, IdKind::Kind("window-max-by"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "The element with the largest value of the closure (the earliest on ties). Keyed: rolling, per element. Windowed: per firing.",
    example: r#"
let rolling = pipeline! {
    env.from_elements([("a", 1), ("b", 4), ("c", 2)])
        .key_by(|_: &(&str, i32)| ())
        .max_by(|e: &(&str, i32)| e.1)
        .collect_vec()
}?;
assert_eq!(rolling, [("a", 1), ("b", 4), ("b", 4)]);
"#,
};
