//! What the record in flight did that cannot be taken back: the memory engine's check
//! before it dead-letters a failed record.
//!
//! The memory engine keeps state in place and hands output to its sinks at once, so it
//! cannot roll a failed record back the way the Redis engine rolls back a batch. Instead,
//! every change of keyed state (the memory engine's change tracking, see
//! [`RecordEffects`](super::RecordEffects)), every record handed to the main sink and every
//! record handed to a side output notes an effect here; the engine clears the note before
//! each source record. A record that fails with no effect noted left nothing behind and can
//! be dead-lettered; one that fails after an effect stops the run.
//!
//! One flag per thread (the memory engine is single-threaded): a store per effect, no
//! pointer to carry through the operators.

use std::cell::Cell;

thread_local! {
    static EFFECT: Cell<bool> = const { Cell::new(false) };
    static SINK_FAILED: Cell<bool> = const { Cell::new(false) };
}

/// Notes that the record in flight changed state or produced output.
#[inline(always)]
pub(crate) fn note_effect() {
    EFFECT.set(true);
}

/// Notes that the main sink failed (the error is the sink's, not the record's).
#[cold]
pub(crate) fn note_sink_failed() {
    SINK_FAILED.set(true);
}

/// Clears the notes before a record; returns the effect note as it was.
#[inline(always)]
pub(crate) fn clear() -> bool {
    SINK_FAILED.set(false);
    EFFECT.replace(false)
}

/// Whether the record in flight changed state or produced output.
pub(crate) fn noted() -> bool {
    EFFECT.get()
}

/// Whether the main sink failed while the record was in flight.
pub(crate) fn sink_failed() -> bool {
    SINK_FAILED.get()
}

/// Sets the effect note back to `was` or'ed with what is noted now (a run nested in a user
/// function leaves the outer record's note as it found it).
pub(crate) fn restore(was: bool) {
    EFFECT.set(was || EFFECT.get());
}
