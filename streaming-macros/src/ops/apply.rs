//! The `apply` operator.

use super::prelude::*;

/// The `apply` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "apply",
    role: Role::Transform,
    args: &[arg(
        "|&key, &window, &[element], out| -> Result<(), BoxError>",
        Expr,
    )],
    variants: &[on(
        Stage::Windowed,
        Stage::Stream,
        IdKind::Kind("window-apply"),
    )],
    engines: BOTH,
    expansion: Expansion::Method,
    summary: "Calls the function with all of a window's elements per firing.",
    example: "let out = pipeline! {\n    env.from_elements([1, 2, 3])\n        .key_by(|_: &i32| ())\n        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))\n        .apply(|_k: &(), _w: &TimeWindow, xs: &[i32], out: &mut Collector<'_, String>| {\n            out.collect(format!(\"{xs:?}\"));\n            Ok(())\n        })\n        .collect_vec()\n}?;\nassert_eq!(out, [\"[1, 2, 3]\"]);",
};
