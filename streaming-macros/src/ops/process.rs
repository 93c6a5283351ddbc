//! The `process` operator.

use super::prelude::*;

/// The `process` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "process",
    role: Role::Transform,
    args: &[arg("|element, ctx, out| -> Result<(), BoxError>", Expr)],
    variants: &[on(Stage::Keyed, Stage::Processed, IdKind::Kind("process")), on(Stage::KeyedState, Stage::Processed, IdKind::Kind("process"))],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Runs a function per element with the key's context: key, timestamp, watermark, timers and state.",
    example: r#"
let out = pipeline! {
    env.from_timestamped_collection([(1, 500), (2, 700)])
        .key_by(|x: &i32| x % 2)
        .process(|x: i32, ctx, out| {
            out.collect(format!("{}:{x}@{}", ctx.current_key(), ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
}?;
assert_eq!(out, ["1:1@500", "0:2@700"]);
"#,
};
