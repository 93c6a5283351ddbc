//! The queue's Lua scripts: `lua_script!` makes one of the files of `mq/lua/`,
//! `fenced_script!` one that a partition owner runs (the lease check first, see
//! [`lease::lease_guarded`](super::lease::lease_guarded)), and the functions the engine's
//! scripts call too.

/// A `LazyLock<redis::Script>` for a `static` (the script is made once): the files of
/// `mq/lua/` named, concatenated in order (preludes first).
macro_rules! lua_script {
    ($($file:literal),+ $(,)?) => {
        std::sync::LazyLock::new(|| {
            redis::Script::new(concat!($(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/src/mq/lua/",
                $file
            ))),+))
        })
    };
}

/// A `LazyLock<redis::Script>` that a partition owner runs: the lease check's prelude and
/// the given sources (the caller's `include_str!`s of its Lua files), concatenated (see
/// [`lease::lease_guarded`](super::lease::lease_guarded)).
macro_rules! fenced_script {
    ($($src:expr),+ $(,)?) => {
        std::sync::LazyLock::new(|| {
            redis::Script::new(&$crate::mq::lease::lease_guarded(concat!($($src),+)))
        })
    };
}

pub(crate) use fenced_script;

/// The commit frontier (`lua/advance.lua`), which the engine's commit calls too:
/// `id_gt(a, b)`, and `advance(stream, acked, frontier, newly)`, which moves the frontier
/// over the acknowledged ids.
pub(crate) const ADVANCE: &str = include_str!("lua/advance.lua");
