//! The `key_by` operator of connected streams.

use super::prelude::*;

/// The row of `key_by` on connected streams.
pub(crate) const SPEC: OpSpec = OpSpec {
    name: "key_by",
    role: Role::Transform,
    args: &[
        arg("|&first| -> key", Expr),
        arg("|&second| -> key", Expr),
    ],
    variants: &[on(Stage::Connected, Stage::KeyedConnected, IdKind::Position)],
    engines: BOTH,
    time: Time::Keeps,
    expansion: Expansion::Method,
    summary: "Keys both inputs of connected streams, the first by the first function and the second by the second, into one key type (a key function of another key type is a compile error at its result), for a `KeyedCoProcessFunction` (`process`) or a window join (`window`).",
    example: r#"
// Clicks and views of each ad in the same 10 ms window.
let out = pipeline! {
    let views = env.from_timestamped_collection([(("ad1", 1u32), 1), (("ad2", 2), 3)]);
    env.from_timestamped_collection([("ad1", 5), ("ad2", 12)])
        .connect(views)
        .key_by(|click: &&str| *click, |view: &(&str, u32)| view.0)
        .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
        .join(|click: &&str, view: &(&str, u32)| (*click, view.1))
        .collect_vec()
}?;
assert_eq!(out, [("ad1", 1)]);
"#,
};
