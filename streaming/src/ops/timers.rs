//! A timer queue ordered by (time, registration order).

use std::collections::BTreeMap;

/// Timers ordered by time, ties in registration order, so firing is deterministic.
#[derive(Clone, Debug)]
pub(crate) struct TimerQueue<E> {
    queue: BTreeMap<(i64, u64), E>,
    seq: u64,
}

impl<E> Default for TimerQueue<E> {
    fn default() -> Self {
        TimerQueue {
            queue: BTreeMap::new(),
            seq: 0,
        }
    }
}

impl<E> TimerQueue<E> {
    pub(crate) fn push(&mut self, time: i64, entry: E) {
        self.queue.insert((time, self.seq), entry);
        self.seq += 1;
    }

    /// Removes and returns the earliest timer with time `<= upto`.
    pub(crate) fn pop_due(&mut self, upto: i64) -> Option<(i64, E)> {
        let (&(time, _), _) = self.queue.first_key_value()?;
        if time > upto {
            return None;
        }
        self.queue.pop_first().map(|((t, _), e)| (t, e))
    }

    /// Removes the timer at `time` whose entry is `entry` (the earliest registered, if
    /// several); returns whether one was queued.
    pub(crate) fn remove(&mut self, time: i64, entry: &E) -> bool
    where
        E: PartialEq,
    {
        let found = self
            .queue
            .range((time, 0)..=(time, u64::MAX))
            .find(|(_, e)| *e == entry)
            .map(|(&k, _)| k);
        found.is_some_and(|k| self.queue.remove(&k).is_some())
    }

    /// Whether a timer with time `<= upto` is queued.
    pub(crate) fn has_due(&self, upto: i64) -> bool {
        self.queue
            .first_key_value()
            .is_some_and(|(&(time, _), _)| time <= upto)
    }

    /// Queued timers.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue of `timers` pushed in order.
    fn queue<const N: usize>(timers: [(i64, &'static str); N]) -> TimerQueue<&'static str> {
        let mut q = TimerQueue::default();
        for (time, entry) in timers {
            q.push(time, entry);
        }
        q
    }

    /// Pops every timer due at `upto`, in firing order.
    fn pop_all(q: &mut TimerQueue<&'static str>, upto: i64) -> Vec<(i64, &'static str)> {
        std::iter::from_fn(|| q.pop_due(upto)).collect()
    }

    #[test]
    fn pops_in_time_then_registration_order() {
        let mut q = queue([(5, "b"), (3, "a"), (5, "c"), (9, "d")]);
        assert_eq!(pop_all(&mut q, 5), [(3, "a"), (5, "b"), (5, "c")]);
        assert_eq!(q.len(), 1);
        assert_eq!(pop_all(&mut q, i64::MAX), [(9, "d")]);
    }

    #[test]
    fn removes_one_entry_at_its_time() {
        let mut q = queue([(5, "a"), (5, "b"), (6, "a")]);
        assert!(q.remove(5, &"a"));
        assert!(!q.remove(5, &"a"));
        assert!(!q.remove(7, &"b"));
        assert_eq!(pop_all(&mut q, 10), [(5, "b"), (6, "a")]);
    }
}
