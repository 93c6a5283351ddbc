//! The `on_timer` operator.

use super::prelude::*;

/// The `on_timer` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "on_timer",
    role: Role::Transform,
    args: &[arg("|timestamp, ctx, out| -> Result<(), BoxError>", Expr)],
    variants: &[on(Stage::Processed, Stage::Stream, IdKind::None)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::OnTimer,
    summary: "The timer callback of the `process` right before it.",
    example: r#"
let out = pipeline! {
    env.from_timestamped_collection([("a", 10)])
        .key_by(|k: &&str| k.to_string())
        .process(|_: &str, ctx, out| {
            ctx.register_event_time_timer(100)?;
            out.collect(0i64);
            Ok(())
        })
        .on_timer(|ts, _ctx, out| {
            out.collect(ts);
            Ok(())
        })
        .collect_vec()
}?;
assert_eq!(out, [0, 100]);
"#,
};
