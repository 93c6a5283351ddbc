//! The `on_timer` operator.

use super::prelude::*;

/// The `on_timer` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "on_timer",
    role: Role::Transform,
    args: &[arg("|timestamp, ctx, out| -> Result<(), BoxError>", Expr)],
    variants: &[on(Stage::Processed, Stage::Stream, IdKind::None)],
    engines: BOTH,
    expansion: Expansion::OnTimer,
    summary: "The timer callback of the `process` right before it.",
    example: "let out = pipeline! {\n    env.from_elements([\"a\"])\n        .key_by(|k: &&str| k.to_string())\n        .process(|_: &str, ctx, out| {\n            ctx.register_event_time_timer(100);\n            out.collect(0i64);\n            Ok(())\n        })\n        .on_timer(|ts, _ctx, out| {\n            out.collect(ts);\n            Ok(())\n        })\n        .collect_vec()\n}?;\nassert_eq!(out, [0, 100]);",
};
