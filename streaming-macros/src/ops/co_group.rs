//! The `co_group` operator.

use super::prelude::*;

/// The `co_group` row of the operator table.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "co_group",
    role: Role::Transform,
    args: &[arg(
        "|&key, &window, &[first], &[second], out| -> Result<(), BoxError>",
        Expr,
    )],
    variants: &[on(
        Stage::CoWindowed,
        Stage::Stream,
        IdKind::Kind("window-apply"),
    )],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Calls the function per firing with the window's elements of each input, each in arrival order, also when one side is empty (Flink `coGroup`): an outer join, or anything else over both sides.",
    example: r#"
let out = pipeline! {
    let views = env.from_timestamped_collection([("ad1", 1), ("ad1", 2), ("ad2", 3)]);
    env.from_timestamped_collection([("ad1", 5)])
        .connect(views)
        .key_by(|c: &&str| *c, |v: &&str| *v)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .co_group(|ad: &&str, _w: &TimeWindow, clicks: &[&str], views: &[&str], out: &mut Collector<'_, String>| {
            out.collect(format!("{ad}: {} of {}", clicks.len(), views.len()));
            Ok(())
        })
        .collect_vec()
}?;
assert_eq!(out, ["ad1: 1 of 2", "ad2: 0 of 1"]);
"#,
};
