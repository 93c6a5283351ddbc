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
    summary: "Declares keyed state for the next `process`: each state gets its slot when the pipeline is built, and each name is bound in the closures of `process` and `on_timer` to its declaration, used as `ctx.state(name)?`. Names are unique per operator.",
    example: "let out = pipeline! {\n    env.from_elements([\"a\", \"b\", \"a\"])\n        .key_by(|w: &&str| w.to_string())\n        .state(count: ValueState<u32> = 0, first: ListState<i64>)\n        .process(|_w: &str, ctx, out| {\n            let n = ctx.state(count)?.value() + 1;\n            ctx.state(count)?.update(n);\n            let ts = ctx.timestamp();\n            ctx.state(first)?.add(ts);\n            out.collect(n);\n            Ok(())\n        })\n        .collect_vec()\n}?;\nassert_eq!(out, [1, 1, 2]);",
};
