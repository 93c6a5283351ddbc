//! The end of an interval join: joined pairs go on down the chain, late elements of either
//! input go to that input's side output.

use super::{guard, user_error, Counters, Operator, OperatorId};
use crate::api::Sink;
use crate::{BoxError, Error};
use std::rc::Rc;

/// What an interval join's function emits: a joined result, or an element of one input
/// that arrived late (behind the watermark) and joined nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinOutput<O, A, B> {
    /// What the join function returned for a pair.
    Joined(O),
    /// A late element of the first input.
    LateFirst(A),
    /// A late element of the second input.
    LateSecond(B),
}

/// Passes joined results to `next` and late elements to their side outputs (`firsts`,
/// `seconds`), counting each late element in the run's late-element count.
pub struct SplitLate<L1, L2, N> {
    id: OperatorId,
    firsts: L1,
    seconds: L2,
    counters: Rc<Counters>,
    next: N,
}

impl<L1, L2, N> SplitLate<L1, L2, N> {
    pub(crate) fn new(
        id: OperatorId,
        firsts: L1,
        seconds: L2,
        counters: Rc<Counters>,
        next: N,
    ) -> Self {
        SplitLate {
            id,
            firsts,
            seconds,
            counters,
            next,
        }
    }
}

/// Runs the side-output call `f` under operator `id` (a panic or an error names it).
fn run(id: &OperatorId, f: impl FnOnce() -> Result<(), BoxError>) -> Result<(), Error> {
    guard(id, f)?.map_err(|e| user_error(id, e))
}

impl<O, A, B, L1, L2, N> Operator<JoinOutput<O, A, B>> for SplitLate<L1, L2, N>
where
    L1: Sink<A>,
    L2: Sink<B>,
    N: Operator<O>,
{
    fn open(&mut self) -> Result<(), Error> {
        run(&self.id, || self.firsts.open())?;
        run(&self.id, || self.seconds.open())?;
        self.next.open()
    }

    #[inline]
    fn process(&mut self, value: JoinOutput<O, A, B>, timestamp: i64) -> Result<(), Error> {
        match value {
            JoinOutput::Joined(out) => self.next.process(out, timestamp),
            JoinOutput::LateFirst(a) => {
                self.counters.add_late();
                run(&self.id, || self.firsts.invoke(a))
            }
            JoinOutput::LateSecond(b) => {
                self.counters.add_late();
                run(&self.id, || self.seconds.invoke(b))
            }
        }
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        self.next.on_watermark(watermark)
    }

    fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
        self.next.on_processing_time(now)
    }

    fn finish(&mut self) -> Result<(), Error> {
        // The side outputs' one batch on the memory engine ends here (the Redis engine
        // flushes them with each batch it delivers).
        run(&self.id, || self.firsts.flush())?;
        run(&self.id, || self.seconds.flush())?;
        self.next.finish()
    }

    fn close(&mut self) -> Result<(), Error> {
        let a = run(&self.id, || self.firsts.close());
        let b = run(&self.id, || self.seconds.close());
        let next = self.next.close();
        a.and(b).and(next)
    }
}
