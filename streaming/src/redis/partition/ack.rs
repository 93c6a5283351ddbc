//! What the job's [`AckMode`] means for one partition on the batch path — the one place
//! that tells the modes apart there: how the partition's reader reads ([`reading`]), what a
//! batch's commit acknowledges ([`committed`]) and how the commit's transaction does it
//! ([`acknowledging`]). (A job's caught-up check reads the mode's result in Redis: see
//! `job::caught_up`.)
//!
//! - [`AckMode::Xack`]: entries are read into the group's pending list (this consumer's
//!   pending entries replayed first after a take); the commit `XACK`s every id read and
//!   moves the commit frontier.
//! - [`AckMode::Offset`]: entries are read with `NOACK` after the committed offset; the
//!   commit stores the last id as the offset (and as the commit frontier).

use crate::mq::reader::{ReadBatch, ReadMode};
use crate::redis::partition::commit::script::TailAck;
use crate::redis::{AckMode, RedisRuntimeConfig};

/// How the partition's reader reads in `config`'s mode, and whether a take positions
/// the group from the commit frontier.
pub(in crate::redis) fn reading(config: &RedisRuntimeConfig) -> (ReadMode, bool) {
    match config.ack_mode() {
        AckMode::Xack => (ReadMode::Xack, config.restore_group_from_commit_frontier()),
        // The engine's Offset commits store the offset as the commit frontier.
        AckMode::Offset => (ReadMode::NoAck, true),
    }
}

/// What the commit of the batch `read` acknowledges — every id read, skipped entries
/// included (Xack), or the last one (Offset) — and, for a Xack read of new entries, the
/// group's last-delivered id before it (the commit moves the frontier from there without
/// walking the stream).
pub(in crate::redis) fn committed(
    mode: AckMode,
    read: &mut ReadBatch,
) -> (Vec<String>, Option<String>) {
    match mode {
        AckMode::Xack => (std::mem::take(&mut read.ids), read.read_after.take()),
        AckMode::Offset => (read.last_id().into_iter().cloned().collect(), None),
    }
}

/// How a commit's transaction acknowledges `ids` (as [`committed`] gave them): whether it
/// `XACK`s them as a plain command before the tail (Xack mode, the ids being every entry
/// after `read_after`), what the tail does, and the ids the tail gets (the last one only
/// after a plain `XACK`).
pub(in crate::redis) fn acknowledging<'a>(
    mode: AckMode,
    ids: &'a [String],
    read_after: Option<&str>,
) -> (bool, TailAck, &'a [String]) {
    match mode {
        AckMode::Xack if read_after.is_some() && !ids.is_empty() => {
            (true, TailAck::XackedBefore, &ids[ids.len() - 1..])
        }
        AckMode::Xack => (false, TailAck::Xack, ids),
        AckMode::Offset => (false, TailAck::Offset, ids),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> ReadBatch {
        ReadBatch {
            ids: vec!["1-0".into(), "2-0".into(), "3-0".into()],
            read_after: Some("0-5".into()),
            ..ReadBatch::default()
        }
    }

    #[test]
    fn xack_commits_every_id_read_and_offset_the_last() {
        let (ids, after) = committed(AckMode::Xack, &mut batch());
        assert_eq!(
            (ids, after.as_deref()),
            (vec!["1-0".into(), "2-0".into(), "3-0".into()], Some("0-5"))
        );
        let (ids, after) = committed(AckMode::Offset, &mut batch());
        assert_eq!((ids, after), (vec!["3-0".to_string()], None));
        let (ids, after) = committed(AckMode::Offset, &mut ReadBatch::default());
        assert_eq!((ids, after), (Vec::<String>::new(), None));
    }

    #[test]
    fn a_xack_read_of_new_entries_is_acknowledged_by_a_plain_xack_before_the_tail() {
        let ids: Vec<String> = vec!["1-0".into(), "2-0".into()];
        assert_eq!(
            acknowledging(AckMode::Xack, &ids, Some("0-5")),
            (true, TailAck::XackedBefore, &ids[1..])
        );
        // Replayed pending entries (no position before them): the tail acknowledges them.
        assert_eq!(
            acknowledging(AckMode::Xack, &ids, None),
            (false, TailAck::Xack, &ids[..])
        );
        assert_eq!(
            acknowledging(AckMode::Xack, &[], Some("0-5")),
            (false, TailAck::Xack, &[][..])
        );
        assert_eq!(
            acknowledging(AckMode::Offset, &ids[1..], None),
            (false, TailAck::Offset, &ids[1..])
        );
    }

    #[test]
    fn offset_mode_reads_without_ack_from_the_frontier() {
        let offset = RedisRuntimeConfig::builder()
            .ack_mode(AckMode::Offset)
            .build()
            .unwrap();
        assert_eq!(reading(&offset), (ReadMode::NoAck, true));
        let xack = RedisRuntimeConfig::builder()
            .ack_mode(AckMode::Xack)
            .build()
            .unwrap();
        assert_eq!(
            reading(&xack),
            (ReadMode::Xack, xack.restore_group_from_commit_frontier())
        );
    }
}
