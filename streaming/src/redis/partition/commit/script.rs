//! The batch commit's two scripts — the guard that opens its transaction and the tail that
//! closes it (see [`commit`](crate::redis::partition::commit)) — loaded once, with their KEYS and ARGV as
//! typed values: what each argument is, is named here, and the scripts' files say how they
//! read them (`lua/commit_guard.lua`, `lua/commit_tail.lua`).

use crate::mq::lease::lease_guarded;
use crate::mq::lua::ADVANCE;
pub(crate) use crate::redis::state::keys::{KeyType, Written};
use redis::{RedisWrite, ToRedisArgs};
use std::sync::LazyLock;

/// The guard's text (after the lease check it calls), without comments: the text goes
/// with every commit (`EVAL`, so that a server that lost its script cache by a restart
/// never runs the writes unchecked).
pub(in crate::redis) static GUARD: LazyLock<String> =
    LazyLock::new(|| without_comments(&lease_guarded(include_str!("lua/commit_guard.lua"))));

/// The tail's text (after the frontier functions it calls), without comments.
pub(in crate::redis) static TAIL: LazyLock<String> = LazyLock::new(|| {
    without_comments(&format!(
        "{ADVANCE}\n{}",
        include_str!("lua/commit_tail.lua")
    ))
});

/// `source` without its comment lines and indentation.
fn without_comments(source: &str) -> String {
    (source.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The guard's call: `numkeys`, KEYS (lease, fencing counter, undo marker, written
/// keys…), ARGV (lease value held, lease ttl in ms, per written key its type).
pub(in crate::redis) struct GuardCall<'a> {
    pub(in crate::redis) lease: &'a str,
    pub(in crate::redis) fence: &'a str,
    pub(in crate::redis) undo: &'a str,
    pub(in crate::redis) written: &'a [Written<'a>],
    /// The lease value this owner holds (`"{token} {consumer}"`).
    pub(in crate::redis) held: &'a str,
    pub(in crate::redis) lease_ttl_ms: u64,
}

impl ToRedisArgs for GuardCall<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        (3 + self.written.len()).write_redis_args(out);
        for key in [self.lease, self.fence, self.undo] {
            out.write_arg(key.as_bytes());
        }
        for (key, _) in self.written {
            out.write_arg(key.as_bytes());
        }
        out.write_arg(self.held.as_bytes());
        self.lease_ttl_ms.write_redis_args(out);
        for (_, ty) in self.written {
            ty.write_redis_args(out);
        }
    }
}

/// How the tail acknowledges the batch's ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::redis) enum TailAck {
    /// `AckMode::Xack`: the tail `XACK`s the ids.
    Xack,
    /// `AckMode::Xack`: the transaction `XACK`ed them before the tail (they are every
    /// entry after the read position); the tail gets the last id only.
    XackedBefore,
    /// `AckMode::Offset`: the tail moves the committed offset.
    Offset,
}

impl ToRedisArgs for TailAck {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        out.write_arg(match self {
            TailAck::Xack => b"x",
            TailAck::XackedBefore => b"a",
            TailAck::Offset => b"o",
        });
    }
}

/// Whether the tail returns a written key's size: `Some(type)` names the key's type, whose
/// size command the tail runs (`HLEN`, `SCARD`, `LLEN`); `None`: not asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::redis) struct SizeOf(pub(in crate::redis) Option<KeyType>);

impl ToRedisArgs for SizeOf {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        out.write_arg(self.0.map_or("", KeyType::name).as_bytes());
    }
}

/// The partition's keys the tail reads and writes.
pub(in crate::redis) struct TailKeys {
    pub(in crate::redis) stream: String,
    /// Ids acknowledged above the frontier (Xack mode).
    pub(in crate::redis) acked: String,
    /// The commit frontier (the committed offset in Offset mode).
    pub(in crate::redis) frontier: String,
    pub(in crate::redis) undo: String,
    /// The batch's entries sent to retry or dead letter (Offset mode).
    pub(in crate::redis) settled: String,
}

/// The tail's call: `numkeys`, KEYS (stream, acked, frontier, undo marker, settled,
/// written keys… in the guard's order), ARGV (ack mode, group, number of ids, ids…, the
/// read position before the batch or '', per written key its [`SizeOf`]).
pub(in crate::redis) struct TailCall<'a> {
    pub(in crate::redis) keys: &'a TailKeys,
    pub(in crate::redis) written: &'a [Written<'a>],
    pub(in crate::redis) ack: TailAck,
    pub(in crate::redis) group: &'a str,
    pub(in crate::redis) ids: &'a [String],
    /// The group's last-delivered id before the read of `ids` (Xack), when known.
    pub(in crate::redis) read_after: Option<&'a str>,
    /// Per written key (same order), whether its size is returned.
    pub(in crate::redis) sizes: &'a [SizeOf],
}

impl ToRedisArgs for TailCall<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let k = self.keys;
        (5 + self.written.len()).write_redis_args(out);
        for key in [&k.stream, &k.acked, &k.frontier, &k.undo, &k.settled] {
            out.write_arg(key.as_bytes());
        }
        for (key, _) in self.written {
            out.write_arg(key.as_bytes());
        }
        self.ack.write_redis_args(out);
        out.write_arg(self.group.as_bytes());
        self.ids.len().write_redis_args(out);
        for id in self.ids {
            out.write_arg(id.as_bytes());
        }
        out.write_arg(self.read_after.unwrap_or("").as_bytes());
        for size in self.sizes {
            size.write_redis_args(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &impl ToRedisArgs) -> Vec<String> {
        (a.to_redis_args().into_iter())
            .map(|b| String::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn the_guard_gets_its_keys_then_the_lease_then_each_written_keys_type() {
        let written = [("s:h", KeyType::Hash), ("out", KeyType::List)];
        let call = GuardCall {
            lease: "L",
            fence: "F",
            undo: "U",
            written: &written,
            held: "7 c-1",
            lease_ttl_ms: 30000,
        };
        assert_eq!(
            args(&call),
            ["5", "L", "F", "U", "s:h", "out", "7 c-1", "30000", "hash", "list"]
        );
    }

    #[test]
    fn the_tail_gets_its_keys_the_ack_the_ids_and_per_written_key_whether_to_size_it() {
        let keys = TailKeys {
            stream: "S".into(),
            acked: "A".into(),
            frontier: "F".into(),
            undo: "U".into(),
            settled: "D".into(),
        };
        let written = [("s:h", KeyType::Hash), ("out", KeyType::List)];
        let ids = ["1-0".to_string(), "1-1".to_string()];
        let call = TailCall {
            keys: &keys,
            written: &written,
            ack: TailAck::Offset,
            group: "g",
            ids: &ids,
            read_after: None,
            sizes: &[SizeOf(Some(KeyType::Hash)), SizeOf(None)],
        };
        assert_eq!(
            args(&call),
            [
                "7", "S", "A", "F", "U", "D", "s:h", "out", "o", "g", "2", "1-0", "1-1", "",
                "hash", ""
            ]
        );
    }

    #[test]
    fn the_scripts_carry_their_preludes_without_comments() {
        assert!(GUARD.contains("local function lease_held("));
        assert!(TAIL.contains("local function advance("));
        assert!(!GUARD
            .lines()
            .chain(TAIL.lines())
            .any(|l| l.starts_with("--")));
    }
}
