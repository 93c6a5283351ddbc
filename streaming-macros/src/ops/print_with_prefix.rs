//! The `print_with_prefix` operator.

use super::prelude::*;

/// The `print_with_prefix` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "print_with_prefix",
    role: Role::Sink,
    args: &[arg("prefix: &str", Expr)],
    variants: &[on(Stage::Stream, Stage::Done, IdKind::Kind("sink"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Like `print`, each line as `{prefix}> {record:?}`; returns what `print` returns.",
    example: r#"
let summary = pipeline! { env.from_elements([1, 2]).print_with_prefix("numbers") }?;
assert_eq!(summary.window_firings, 0);
"#,
};
