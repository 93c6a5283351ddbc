//! Side outputs (the late-data sink of a window): delivered at once on the memory engine,
//! buffered with the batch on the Redis engine.

#[cfg(feature = "redis")]
use crate::api::CommitWrites;
use crate::api::Sink;
use crate::BoxError;
use std::cell::RefCell;
use std::rc::Rc;

/// The side output an operator writes to. Built by the engine's runtime: on the memory
/// engine it hands every record to its sink at once; on the Redis engine it buffers them,
/// and the engine delivers the buffer when the batch that produced it commits (and drops
/// it when the batch is rolled back), exactly like the main sink's output.
pub struct SideOutput<T, L> {
    cell: Rc<RefCell<SideBuffer<T, L>>>,
}

/// A side output's sink and, when buffered, the records not yet delivered.
pub(crate) struct SideBuffer<T, L> {
    sink: L,
    /// `None`: delivered at once.
    pending: Option<Vec<T>>,
}

/// A buffered side output as the engine sees it at commit time (one call per batch, not
/// per record).
#[cfg(feature = "redis")]
pub(crate) trait PendingOutput {
    /// Hands the buffered records to the sink, in order, then ends the batch
    /// ([`Sink::flush`]).
    fn deliver(&mut self) -> Result<(), BoxError>;
    /// What the sink buffered for the batch commit (Redis list appends).
    fn take_commit_writes(&mut self) -> Option<CommitWrites>;
    /// The sink's two-phase-commit hooks, when it has them.
    fn two_phase(&mut self) -> Option<&mut dyn crate::api::TwoPhaseHooks>;
}

impl<T, L> SideOutput<T, L> {
    /// A side output that hands each record to `sink` at once.
    pub(crate) fn direct(sink: L) -> Self {
        SideOutput {
            cell: Rc::new(RefCell::new(SideBuffer {
                sink,
                pending: None,
            })),
        }
    }

    /// A side output that buffers records until the engine delivers them; the engine keeps
    /// the returned handle.
    #[cfg(feature = "redis")]
    pub(crate) fn buffered(sink: L) -> (Self, Rc<RefCell<SideBuffer<T, L>>>) {
        let cell = Rc::new(RefCell::new(SideBuffer {
            sink,
            pending: Some(Vec::new()),
        }));
        (
            SideOutput {
                cell: Rc::clone(&cell),
            },
            cell,
        )
    }
}

#[cfg(feature = "redis")]
impl<T, L: Sink<T>> PendingOutput for SideBuffer<T, L> {
    fn deliver(&mut self) -> Result<(), BoxError> {
        let Some(pending) = self.pending.as_mut() else {
            return Ok(());
        };
        for v in std::mem::take(pending) {
            self.sink.invoke(v)?;
        }
        self.sink.flush()
    }

    fn take_commit_writes(&mut self) -> Option<CommitWrites> {
        self.sink.take_commit_writes()
    }

    fn two_phase(&mut self) -> Option<&mut dyn crate::api::TwoPhaseHooks> {
        self.sink.two_phase()
    }
}

impl<T, L: Sink<T>> Sink<T> for SideOutput<T, L> {
    fn open(&mut self) -> Result<(), BoxError> {
        self.cell.borrow_mut().sink.open()
    }

    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        let mut b = self.cell.borrow_mut();
        match b.pending.as_mut() {
            Some(pending) => {
                pending.push(value);
                Ok(())
            }
            None => b.sink.invoke(value),
        }
    }

    fn flush(&mut self) -> Result<(), BoxError> {
        let mut b = self.cell.borrow_mut();
        if b.pending.is_some() {
            // Buffered: the engine flushes the sink with each batch it delivers.
            return Ok(());
        }
        b.sink.flush()
    }

    fn close(&mut self) -> Result<(), BoxError> {
        self.cell.borrow_mut().sink.close()
    }
}
