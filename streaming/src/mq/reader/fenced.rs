//! An owner's read under the lease check: one transaction of a guard script, the plain
//! `XREADGROUP` and an undo script, its reply read from bytes on one server (see
//! [`super::read_conn`]) or through redis-rs on a cluster.

use std::sync::LazyLock;

use redis::{Pipeline, Value};

use super::reply::{self, Entries, FencedReply};
use super::{PartitionReader, ReadMode};
use crate::mq::lease::lease_guarded;
use crate::mq::Connection;
use crate::Error;

/// The lease check before a fenced read, sent as `EVAL` inside the read's transaction:
/// an `EVALSHA` the server lost (a restart) would fail there while the read after it ran
/// unchecked.
static READ_GUARD: LazyLock<String> =
    LazyLock::new(|| lease_guarded(include_str!("../lua/read_guard.lua")));

/// The undo of a read the guard refused (same transaction, also sent as `EVAL`).
const READ_UNDO: &str = include_str!("../lua/read_undo.lua");

/// Replies to a fenced read's transaction: `MULTI`, three `QUEUED`, `EXEC`.
const REPLIES: usize = 5;

/// One fenced read, the lease check passed.
pub(super) struct FencedRead {
    /// The entries read.
    pub(super) entries: Entries,
    /// The read answered nil: nothing new.
    pub(super) nil: bool,
    /// The group's last-delivered id before the read (XACK mode; `None` when unknown or
    /// in NOACK mode).
    pub(super) before: Option<String>,
}

impl PartitionReader {
    /// `XREADGROUP` from `from` under the lease check (never blocking), in one transaction:
    /// a guard script checks the lease, the read runs as a plain command (a script returning
    /// n entries costs Redis several times the read itself: each entry is converted into
    /// Lua values and back), and an undo script puts a refused read back — the group's
    /// last-delivered id and, in XACK mode, the pending entries it took — so a stale
    /// owner's read moves nothing. Entries are decoded binary-safe and in field order
    /// (redis-rs's `StreamReadReply` keys fields by `String`: one foreign entry with a
    /// non-UTF-8 field name would fail the whole read, again on every retry, instead of
    /// being dead-lettered).
    ///
    /// # Errors
    /// [`Error::Fenced`] when the lease is gone (nothing read); [`Error::Redis`].
    pub(super) async fn read_fenced(
        &self,
        conn: &mut Connection,
        count: usize,
        from: &str,
    ) -> Result<FencedRead, Error> {
        let fence = self.fence()?;
        let pipe = self.read_transaction(count, from)?;
        let at = (&self.topic, self.partition);
        // A NOACK commit stores the last id only.
        let every_id = self.mode == ReadMode::Xack;
        let reply = match conn.read_connections() {
            Some(reads) => {
                if cfg!(debug_assertions) {
                    crate::mq::debug_check_slots(pipe.cmd_iter());
                }
                let request = pipe.get_packed_pipeline();
                let read = |frames: &[&[u8]]| reply::from_frames(frames, at, every_id);
                reads.round_trip(&request, REPLIES, read).await??
            }
            None => {
                let values: (Value, Value, Value) = pipe.query_async(conn).await?;
                reply::from_values(values, at, every_id)?
            }
        };
        let FencedReply {
            fenced,
            before,
            nil,
            entries,
        } = reply;
        if fenced {
            return Err(fence.error());
        }
        Ok(FencedRead {
            entries,
            nil,
            before,
        })
    }

    /// The transaction of [`Self::read_fenced`].
    fn read_transaction(&self, count: usize, from: &str) -> Result<Pipeline, Error> {
        let fence = self.fence()?;
        let (lease, fence_counter, held, ttl) = fence.parts();
        let stream = self.stream();
        let undo = self.keys.read_undo(&self.topic, self.partition, &self.group);
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(&self.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(count);
        if self.mode == ReadMode::NoAck {
            read.arg("NOACK");
        }
        read.arg("STREAMS").arg(&stream).arg(from);
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("EVAL")
            .arg(READ_GUARD.as_str())
            .arg(4)
            .arg(&stream)
            .arg(lease)
            .arg(fence_counter)
            .arg(&undo)
            .arg(held)
            .arg(ttl)
            .arg(&self.group)
            // Only an XACK commit uses the position (to skip its frontier walk).
            .arg(if self.mode == ReadMode::Xack { "1" } else { "0" })
            .add_command(read)
            .cmd("EVAL")
            .arg(READ_UNDO)
            .arg(2)
            .arg(&stream)
            .arg(&undo)
            .arg(&self.group)
            .arg(&self.consumer)
            .arg(count);
        Ok(pipe)
    }
}
