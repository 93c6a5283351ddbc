//! The `state` operator.

use super::prelude::*;

/// The `state` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "state",
    role: Role::Transform,
    args: &[arg("name: ValueState<T> = default, name: ListState<T>, …", StateDecls)],
    variants: &[on(Stage::Keyed, Stage::KeyedState, IdKind::None), on(Stage::KeyedState, Stage::KeyedState, IdKind::None)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::StateDecls,
    summary: "Declares keyed state for the next `process`: each state gets its slot when the pipeline is built, and each name is bound in the closures of `process` and `on_timer` to its declaration, used as `ctx.state(name)?`. Names are unique per operator.",
    example: r#"
let out = pipeline! {
    env.from_elements(["a", "b", "a"])
        .key_by(|w: &&str| w.to_string())
        .state(count: ValueState<u32> = 0, first: ListState<i64>)
        .process(|_w: &str, ctx, out| {
            let n = ctx.state(count)?.value() + 1;
            ctx.state(count)?.update(n);
            let ts = ctx.timestamp();
            ctx.state(first)?.add(ts);
            out.collect(n);
            Ok(())
        })
        .collect_vec()
}?;
assert_eq!(out, [1, 1, 2]);
"#,
};
