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
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Calls the function with all of a window's elements per firing.",
    example: r#"
let out = pipeline! {
    env.from_timestamped_collection([(1, 0), (2, 300), (3, 700)])
        .key_by(|_: &i32| ())
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .apply(|_k: &(), _w: &TimeWindow, xs: &[i32], out: &mut Collector<'_, String>| {
            out.collect(format!("{xs:?}"));
            Ok(())
        })
        .collect_vec()
}?;
assert_eq!(out, ["[1, 2, 3]"]);
"#,
};
