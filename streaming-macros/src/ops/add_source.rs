//! The `add_source` operator.

use super::prelude::*;

/// The `add_source` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "add_source",
    role: Role::Source,
    args: &[arg("source: impl Source<T>", Expr)],
    variants: &[on(Stage::Env, Stage::Stream, IdKind::None)],
    engines: MEMORY,
    expansion: Expansion::Method,
    summary: "A stream fed by a user `Source`; source id `source-{n}`.",
};
