//! The `try_map` operator.

use super::prelude::*;

/// The `try_map` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "try_map",
    role: Role::Transform,
    args: &[arg("|element| -> Result<output, error>", Expr)],
    variants: &[on(Stage::Stream, Stage::Stream, IdKind::Kind("try_map"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary:
        "Transforms every element with a fallible function; an element whose function returns `Err` fails and is dead-lettered (the crate's rule for failing records), and the run goes on.",
    example: r#"
// "x" does not parse: its record is dead-lettered and the run goes on.
let out = pipeline! {
    env.from_elements(["1", "x", "3"]).try_map(|s: &str| s.parse::<i32>()).collect_vec()
}
.unwrap();
assert_eq!(out, [1, 3]);
"#,
};
