//! The `process_function` operator.

use super::prelude::*;

/// The `process_function` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "process_function",
    role: Role::Transform,
    args: &[arg("function: impl KeyedProcessFunction<K, T>", Expr)],
    variants: &[on(Stage::Keyed, Stage::Stream, IdKind::Kind("process"))],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Runs a `KeyedProcessFunction` (with `on_timer`).",
};
