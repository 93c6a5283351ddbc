//! Reading several inputs in step by event time (what Kafka Streams does across the
//! partitions of a task): a batch runs each input's entries only up to the time every
//! other input that may have more entries has reached. The rest waits in memory for a
//! later batch, uncommitted: an input that is ahead is not read again until what it holds
//! has run, so the inputs' event times stay within about a batch of each other whatever
//! their volumes — an order enriched from a customer stream with a backlog meets the
//! customer records of its own time, not those of days later.
//!
//! Each input's entries read and not yet released wait in its [`Queue`], in stream order.
//! What a batch commits of an input stops before its first entry still held, so a take
//! (after a crash, a failure or a move) reads the held entries again from the stream; the
//! queues are emptied then.

use crate::mq::reader::ReadBatch;
use crate::mq::Message;
use std::collections::VecDeque;

/// One input's entries read and not yet run, in stream order.
#[derive(Default)]
pub(in crate::redis) struct Queue {
    msgs: VecDeque<Message>,
    /// The ids the reader gave (every id read in Xack mode, the last one otherwise), not
    /// yet released.
    ids: VecDeque<String>,
    /// The input's last read was full: its stream may have more entries.
    more: bool,
}

/// What a queue released to a batch.
#[derive(Default)]
pub(in crate::redis) struct Released {
    /// The messages to run, in stream order.
    pub(in crate::redis) msgs: Vec<Message>,
    /// The reader's ids released (every id before the first message still held).
    pub(in crate::redis) ids: Vec<String>,
    /// The last id released, of a message or of the reader's ids: the input's position
    /// once the batch commits.
    pub(in crate::redis) last: Option<String>,
}

impl Queue {
    /// Whether it holds messages (the input is then not read until they ran).
    pub(in crate::redis) fn holds(&self) -> bool {
        !self.msgs.is_empty()
    }

    /// Adds a read of up to `count` entries.
    pub(in crate::redis) fn push(&mut self, read: ReadBatch, count: usize) {
        let entries = read.messages.len() + read.skipped + read.dead_lettered;
        self.more = entries >= count.max(1);
        self.msgs.extend(read.messages);
        self.ids.extend(read.ids);
    }

    /// The input was not read (it holds messages): it counts as having more.
    pub(in crate::redis) fn not_read(&mut self) {
        self.more = true;
    }

    /// Forgets everything (a take reads it again).
    pub(in crate::redis) fn clear(&mut self) {
        *self = Queue::default();
    }

    /// The latest event time among its messages, when its input may have more entries:
    /// no later batch can run another input's entries beyond it before this input's
    /// next ones are read.
    fn horizon(&self) -> Option<i64> {
        self.msgs
            .iter()
            .map(|m| m.timestamp_ms)
            .max()
            .filter(|_| self.more)
    }

    /// Releases its messages up to (not including) the first one after `upto` (all with
    /// `None`), and the reader's ids before the first message it still holds.
    pub(in crate::redis) fn release(&mut self, upto: Option<i64>) -> Released {
        let keep = (self.msgs.iter())
            .position(|m| upto.is_some_and(|upto| m.timestamp_ms > upto))
            .unwrap_or(self.msgs.len());
        let msgs: Vec<Message> = self.msgs.drain(..keep).collect();
        let first_held = self.msgs.front().map(|m| parse_id(&m.id));
        let ids_released = match first_held {
            Some(held) => (self.ids.iter())
                .position(|id| parse_id(id) >= held)
                .unwrap_or(self.ids.len()),
            None => self.ids.len(),
        };
        let ids: Vec<String> = self.ids.drain(..ids_released).collect();
        let last_msg = msgs.last().map(|m| m.id.to_string());
        let last = match (last_msg, ids.last()) {
            (Some(m), Some(i)) => Some(if parse_id(&m) > parse_id(i) {
                m
            } else {
                i.clone()
            }),
            (m, i) => m.or_else(|| i.cloned()),
        };
        Released { msgs, ids, last }
    }
}

/// The event time up to which a batch runs the entries of `queues`: the lowest horizon
/// of the queues whose input may have more entries; `None` (everything) when none may.
pub(in crate::redis) fn horizon<'a>(queues: impl IntoIterator<Item = &'a Queue>) -> Option<i64> {
    queues.into_iter().filter_map(Queue::horizon).min()
}

/// A stream entry id as `(ms, seq)` for ordering (an unparsable one sorts first).
fn parse_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(id: &str, ts: i64) -> Message {
        Message {
            id: id.into(),
            timestamp_ms: ts,
            ..Message::new(Vec::new())
        }
    }

    fn read(msgs: Vec<Message>, ids: &[&str]) -> ReadBatch {
        ReadBatch {
            messages: msgs,
            ids: ids.iter().map(|s| s.to_string()).collect(),
            ..ReadBatch::default()
        }
    }

    fn ids(msgs: &[Message]) -> Vec<&str> {
        msgs.iter().map(|m| m.id.as_str()).collect()
    }

    /// Customers a day ahead of orders: only the customers up to the orders' time run,
    /// the rest waits, and what commits of them stops before the first held.
    #[test]
    fn an_input_ahead_waits_for_the_one_behind() {
        let (mut orders, mut customers) = (Queue::default(), Queue::default());
        orders.push(read(vec![at("1-0", 10), at("2-0", 20)], &["2-0"]), 2);
        customers.push(
            read(vec![at("5-0", 5), at("6-0", 15), at("7-0", 900)], &["7-0"]),
            3,
        );
        let h = horizon([&orders, &customers]);
        assert_eq!(h, Some(20));
        let (o, c) = (orders.release(h), customers.release(h));
        assert_eq!(
            (ids(&o.msgs), ids(&c.msgs)),
            (vec!["1-0", "2-0"], vec!["5-0", "6-0"])
        );
        assert_eq!(
            (o.last.as_deref(), c.last.as_deref()),
            (Some("2-0"), Some("6-0"))
        );
        assert!(customers.holds() && !orders.holds());
        // The customers are not read again while they hold; the orders caught up (a read
        // of less than the count): the held customer runs.
        customers.not_read();
        orders.push(read(vec![at("3-0", 30)], &["3-0"]), 2);
        let h = horizon([&orders, &customers]);
        assert_eq!(h, Some(900));
        let c = customers.release(h);
        assert_eq!(
            (ids(&c.msgs), c.last.as_deref()),
            (vec!["7-0"], Some("7-0"))
        );
        assert_eq!(orders.release(h).last.as_deref(), Some("3-0"));
    }

    /// Every id of a Xack read: those before the first held message are released with
    /// the messages (a skipped entry between them too); the rest wait with it.
    #[test]
    fn the_ids_before_the_first_held_message_are_released() {
        let mut q = Queue::default();
        q.push(
            read(
                vec![at("1-0", 1), at("3-0", 50), at("4-0", 2)],
                &["1-0", "2-0", "3-0", "4-0", "5-0"],
            ),
            5,
        );
        let r = q.release(Some(10));
        assert_eq!(ids(&r.msgs), ["1-0"]);
        assert_eq!(
            (r.ids, r.last.as_deref()),
            (vec!["1-0".into(), "2-0".into()], Some("2-0"))
        );
        let r = q.release(None);
        assert_eq!(ids(&r.msgs), ["3-0", "4-0"]);
        assert_eq!(r.last.as_deref(), Some("5-0"));
        assert!(!q.holds());
    }

    /// An input whose last read was not full has nothing more: it holds nobody back.
    #[test]
    fn a_caught_up_input_sets_no_horizon() {
        let mut q = Queue::default();
        q.push(read(vec![at("1-0", 7)], &["1-0"]), 10);
        assert_eq!(horizon([&q]), None);
        q.push(read(vec![at("2-0", 8)], &["2-0"]), 1);
        assert_eq!(horizon([&q]), Some(8));
        assert_eq!(parse_id("12-3"), (12, 3));
        assert!(parse_id("9-0") < parse_id("10-0"));
    }
}
