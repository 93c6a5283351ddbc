//! One reader of one partition for a consumer group, in one of two [`ReadMode`]s: it
//! reads, claims pending entries, promotes due retries, and sends failed messages to retry
//! or the dead-letter queue with the headers that say why.
//!
//! - [`ReadMode::Xack`]: entries enter the group's pending-entries list and the caller
//!   acknowledges them (`XACK` + commit frontier: [`PartitionReader::acknowledge`] or its
//!   own commit script). A retry or dead letter acknowledges the failed entry in the same
//!   script. Pending entries are claimed and replayed (read from `0`) before new ones.
//! - [`ReadMode::NoAck`]: `XREADGROUP .. NOACK` for an exclusive owner that commits its read
//!   offset itself; nothing is pending, so nothing is acknowledged or claimed. Taking the
//!   partition points the group's last-delivered id at the committed offset, so whatever
//!   was read but not committed before a crash is read again.
//!
//! Two kinds of readers:
//! - an *owner's* ([`PartitionReader::owner`], either mode) holds the partition's lease
//!   ([`PartitionReader::take`]): every claim, promotion, retry and dead letter runs in a
//!   script that first checks the lease and its fencing token, so a stale owner writes
//!   nothing ([`Error::Fenced`]). A read is one transaction (`MULTI`): a guard script
//!   checks the lease, `XREADGROUP` runs as a plain command, and an undo script puts a
//!   read the guard refused back (the group's last-delivered id and, in XACK mode, the
//!   entries it added to the pending list), so a stale owner's read moves nothing either.
//!   The read stays out of Lua because a script's reply of n entries costs Redis several
//!   times the read itself (measured ~7× for 500 entries: each entry is converted into
//!   Lua values and back). In XACK mode taking the partition claims every pending entry
//!   of the group for the owner;
//! - a *subscription member's* ([`PartitionReader::subscription`], XACK) holds no lease
//!   (the subscription's coordinator does; its writes are not fenced), reads blocking,
//!   claims entries pending longer than `claim_idle` (a dead member's) every
//!   `claim_idle / 2`, dead-letters a claimed entry delivered more than `max_retries + 1`
//!   times (`redeliveries_exhausted`, its consumers keep dying on it), and re-creates a
//!   group deleted under it.
//!
//! Either way a malformed entry goes to the dead-letter queue (error type `malformed`), a
//! retry addressed to another group (field `rg`) is skipped, and both still count among
//! the batch's ids, so the commit moves past them.

mod fenced;
mod fetch;
mod read_conn;
mod reply;
mod resp;
mod settle;

pub(crate) use read_conn::ReadConnections;

use arcstr::ArcStr;
use std::time::Duration;

use tokio::time::Instant;

use super::lease::{self, Fence, Lease};
use super::options::{MqOptions, RetryPolicy, StartPolicy};
use super::topic::KeySpace;
use super::Connection;
use crate::mq::message::Message;
use crate::Error;

/// How a [`PartitionReader`] reads, and what its caller commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadMode {
    /// Consumer-group reads with a pending-entries list; the caller acknowledges.
    Xack,
    /// `NOACK` reads of an exclusive owner; the caller commits its read offset.
    NoAck,
}

/// One read of a [`PartitionReader`].
#[derive(Debug, Default)]
pub(crate) struct ReadBatch {
    /// The messages for the caller, in stream order.
    pub(crate) messages: Vec<Message>,
    /// XACK mode: every entry id read, in stream order — messages, dead-lettered and
    /// skipped entries (what the commit acknowledges). NOACK mode: the last one only (the
    /// offset the commit stores). Empty when nothing was read.
    pub(crate) ids: Vec<String>,
    /// Entries dead-lettered while reading: malformed ones, and in a subscription those
    /// delivered too often.
    pub(crate) dead_lettered: usize,
    /// Retries addressed to another consumer group, skipped.
    pub(crate) skipped: usize,
    /// For an owner's read of new entries: the group's last-delivered id before the read,
    /// so `ids` are every entry of the stream after it up to the last (an XACK commit can
    /// move the commit frontier from there without walking the stream). `None` for
    /// replays of pending entries, subscription reads and empty reads.
    pub(crate) read_after: Option<String>,
}

impl ReadBatch {
    /// The id of the last entry read; `None` when nothing was read.
    pub(crate) fn last_id(&self) -> Option<&String> {
        self.ids.last()
    }
}

/// Where [`PartitionReader::take`] positions the group.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Position<'a> {
    /// Where a missing group starts when nothing below names a position.
    pub(crate) start: StartPolicy,
    /// Resume at the commit frontier when there is one: XACK creates a missing group
    /// there; NOACK (without `committed`) moves the group there, read once the lease is
    /// taken.
    pub(crate) from_frontier: bool,
    /// NOACK: the offset the caller committed; the group's last-delivered id moves there
    /// (the group is created there if missing).
    pub(crate) committed: Option<&'a str>,
}

/// What a subscription member's reader does that an owner's does not.
struct Member {
    /// Entries pending at least this long are claimed (their consumer died or stalled).
    claim_idle: Duration,
    next_claim: Instant,
    /// Where a group deleted under the reader is created again.
    start: StartPolicy,
}

/// The reader of one partition; see the module docs.
pub(crate) struct PartitionReader {
    keys: KeySpace,
    /// Shared by the messages read.
    topic: ArcStr,
    group: String,
    partition: u32,
    consumer: String,
    mode: ReadMode,
    /// `Some` for a subscription member (no lease of its own).
    member: Option<Member>,
    /// The lease an owner holds (set by [`Self::take`]).
    lease: Option<Lease>,
    lease_ttl: Duration,
    retry: RetryPolicy,
    retry_poll_interval: Duration,
    max_len: Option<usize>,
    next_promote: Instant,
    /// Retries were still scheduled at the last promotion (reads block shorter).
    retries_waiting: bool,
    /// XACK: the consumer's pending entries are read (from `0`) before new ones.
    replaying: bool,
}

impl std::fmt::Debug for PartitionReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionReader")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("partition", &self.partition)
            .field("consumer", &self.consumer)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl PartitionReader {
    fn new(
        mode: ReadMode,
        keys: &KeySpace,
        (topic, partition, group): (&str, u32, &str),
        consumer: &str,
        opts: &MqOptions,
    ) -> Self {
        Self {
            keys: keys.clone(),
            topic: topic.into(),
            group: group.to_owned(),
            partition,
            consumer: consumer.to_owned(),
            mode,
            member: None,
            lease: None,
            lease_ttl: opts.lease_ttl,
            retry: opts.retry.clone(),
            retry_poll_interval: opts.retry_poll_interval,
            max_len: opts.max_len,
            next_promote: Instant::now(),
            retries_waiting: false,
            replaying: mode == ReadMode::Xack,
        }
    }

    /// An owner's reader of `(topic, partition, group)` for `consumer`, not taken yet
    /// ([`Self::take`] takes the lease and positions the group).
    pub(crate) fn owner(
        mode: ReadMode,
        keys: &KeySpace,
        at: (&str, u32, &str),
        consumer: &str,
        opts: &MqOptions,
    ) -> Self {
        Self::new(mode, keys, at, consumer, opts)
    }

    /// A subscription member's XACK reader of `(topic, partition, group)` for `consumer`
    /// (the group exists; one deleted later is created again from `start`).
    pub(crate) fn subscription(
        keys: &KeySpace,
        at: (&str, u32, &str),
        consumer: &str,
        opts: &MqOptions,
        start: StartPolicy,
    ) -> Self {
        let mut r = Self::new(ReadMode::Xack, keys, at, consumer, opts);
        // Its own pending entries (a step that failed) are claimed back once idle.
        r.replaying = false;
        r.member = Some(Member {
            claim_idle: opts.claim_idle,
            next_claim: Instant::now(),
            start,
        });
        r
    }

    /// The partition read.
    pub(crate) fn partition(&self) -> u32 {
        self.partition
    }

    /// The lease an owner holds.
    pub(crate) fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The consumer group it reads as.
    pub(crate) fn group(&self) -> &str {
        &self.group
    }

    /// The fencing token of the lease held (0 without one).
    pub(crate) fn fencing_token(&self) -> u64 {
        self.lease.as_ref().map_or(0, |l| l.token)
    }

    /// The fence of every write this reader makes: a subscription member's is unfenced; an
    /// owner's is its lease, or [`Error::Fenced`] when it holds none.
    pub(crate) fn fence(&self) -> Result<Fence<'_>, Error> {
        let at = (self.topic.as_str(), self.partition, self.group.as_str());
        match (&self.lease, &self.member) {
            (Some(lease), _) => Ok(Fence::held(&self.keys, at, lease, self.lease_ttl)),
            (None, Some(_)) => Ok(Fence::unfenced(&self.keys, at)),
            (None, None) => Err(Error::Fenced {
                topic: self.topic.to_string(),
                group: self.group.clone(),
                partition: self.partition,
                token: 0,
            }),
        }
    }

    /// Takes the partition for an owner: its lease under a new fencing token (a lease this
    /// reader still holds moves to a new token, so a write of an earlier attempt that
    /// reaches Redis only now is refused), then the group's position (see [`Position`]);
    /// in XACK mode every entry pending in the group is claimed for this consumer, to be
    /// read again before new ones. The group's other consumers of the partition with
    /// nothing pending (earlier owners) are deleted.
    ///
    /// # Errors
    /// [`is_leased_elsewhere`] when another owner holds the lease; [`Error::Fenced`] when
    /// it was taken during the take; [`Error::Redis`].
    pub(crate) async fn take(
        &mut self,
        conn: &mut Connection,
        at: Position<'_>,
    ) -> Result<(), Error> {
        self.take_lease(conn).await?;
        match self.mode {
            ReadMode::Xack => {
                self.ensure_group(conn, at.start, at.from_frontier).await?;
                self.claim_all(conn).await?;
                self.replaying = true;
            }
            ReadMode::NoAck => {
                // Read only now: a commit of an earlier owner can no longer pass it.
                let frontier = match (at.committed, at.from_frontier) {
                    (None, true) => {
                        let (t, p, g) = (&self.topic, self.partition, &self.group);
                        super::frontier::read(conn, &self.keys, t, p, g).await?
                    }
                    (c, _) => c.map(str::to_owned),
                };
                match frontier {
                    Some(id) => self.set_group_id(conn, &id).await?,
                    None => self.ensure_group(conn, at.start, false).await?,
                }
            }
        }
        self.prune_consumers(conn).await?;
        self.next_promote = Instant::now();
        Ok(())
    }

    /// Takes the lease, or moves the one held to a new token. The lease held stays known
    /// until Redis answered: a take that fails on a Redis outage keeps it, so the next
    /// take recognises it when Redis comes back with it (from its AOF) instead of waiting
    /// for it to expire as if another owner held it.
    async fn take_lease(&mut self, conn: &mut Connection) -> Result<(), Error> {
        let ttl = self.lease_ttl;
        let kept = match &self.lease {
            Some(l) => lease::refence(conn, l, &self.consumer, ttl).await?,
            None => None,
        };
        self.lease = None;
        let taken = match kept {
            Some(l) => Some(l),
            None => {
                let (t, p, g) = (&self.topic, self.partition, &self.group);
                let (key, fence) = (self.keys.lease(t, p, g), self.keys.fence(t, p, g));
                lease::acquire(conn, &key, &fence, &self.consumer, ttl).await?
            }
        };
        self.lease = Some(taken.ok_or_else(|| self.leased_elsewhere())?);
        Ok(())
    }

    async fn ensure_group(
        &self,
        conn: &mut Connection,
        start: StartPolicy,
        restore_from_frontier: bool,
    ) -> Result<(), Error> {
        let (t, p, g) = (&self.topic, self.partition, &self.group);
        super::group::ensure_group(conn, &self.keys, t, p, g, start, restore_from_frontier).await?;
        Ok(())
    }

    /// Extends an owner's lease; `false` when it expired and passed to another owner (stop
    /// reading), or when none is held.
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub(crate) async fn renew(&self, conn: &mut Connection) -> Result<bool, Error> {
        match &self.lease {
            Some(l) => lease::renew(conn, l, self.lease_ttl).await,
            None => Ok(false),
        }
    }

    /// Releases an owner's lease (if still ours), so the next owner takes the partition at
    /// once.
    ///
    /// # Errors
    /// [`Error::Redis`] (the lease then expires by its TTL).
    pub(crate) async fn release(&mut self, conn: &mut Connection) -> Result<(), Error> {
        if let Some(l) = self.lease.take() {
            lease::release(conn, &l).await?;
        }
        Ok(())
    }

    /// Acknowledges `ids` (XACK mode) and advances the commit frontier, in one script;
    /// returns how many were pending.
    ///
    /// # Errors
    /// [`Error::Redis`].
    pub(crate) async fn acknowledge(
        &self,
        conn: &mut Connection,
        ids: &[String],
    ) -> Result<u64, Error> {
        let (t, p, g) = (&self.topic, self.partition, &self.group);
        super::frontier::ack(conn, &self.keys, t, p, g, ids).await
    }

    fn leased_elsewhere(&self) -> Error {
        Error::Mq {
            op: TAKE,
            reason: format!(
                "partition {} of `{}` is leased by another consumer of group `{}`",
                self.partition, self.topic, self.group
            ),
        }
    }
}

/// The `op` of a take's errors.
const TAKE: &str = "take partition";

/// Whether a take failed only because another owner holds the partition's lease (the
/// partition is someone else's for now).
pub(crate) fn is_leased_elsewhere(e: &Error) -> bool {
    matches!(e, Error::Mq { op, .. } if *op == TAKE)
}
