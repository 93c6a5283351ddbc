//! The `state` operator.

use super::prelude::*;

/// The `state` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "state",
    role: Role::Transform,
    args: &[arg("name: ValueState<T> = default, name: ListState<T>, …", StateDecls)],
    variants: &[on(Stage::Keyed, Stage::KeyedState, IdKind::None), on(Stage::KeyedState, Stage::KeyedState, IdKind::None)],
    engines: BOTH,
    expansion: Expansion::StateDecls,
    summary: "Declares keyed state for the next `process`: each name becomes a `&…StateDescriptor` binding the closure uses as `ctx.state(name)?`. Names are unique per operator.",
};
