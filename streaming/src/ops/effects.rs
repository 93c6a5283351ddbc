//! Whether a failed record left something behind: the memory engine's check before it
//! dead-letters a failed record.
//!
//! The memory engine keeps state in place and hands output to its sinks at once, so it
//! cannot roll a failed record back the way the Redis engine rolls back a batch. An
//! operator that sees a failure (its own function's, or one returned from downstream)
//! *after* it changed keyed state, or after it pushed an earlier record of the same input
//! downstream (which may have reached a sink or changed state there), notes it here, on
//! its error path. The engine reads and clears the note when the failure reaches it: a
//! record that failed with nothing noted left nothing behind and can be dead-lettered; one
//! with a note stops the run. Records that succeed never touch the note, so it costs
//! nothing on them.
//!
//! One flag per thread (the memory engine is single-threaded): no pointer to carry through
//! the operators.

use std::cell::Cell;

thread_local! {
    static LEFT_BEHIND: Cell<bool> = const { Cell::new(false) };
    static SINK_FAILED: Cell<bool> = const { Cell::new(false) };
}

/// Notes that the failing record changed state or pushed output before it failed.
#[cold]
#[inline(never)]
pub(crate) fn note_left_behind() {
    LEFT_BEHIND.set(true);
}

/// `e`, after noting that the failing record left something behind (for `map_err`).
#[cold]
#[inline(never)]
pub(crate) fn left_behind(e: crate::Error) -> crate::Error {
    note_left_behind();
    e
}

/// Notes that the main sink failed (the error is the sink's, not the record's).
#[cold]
pub(crate) fn note_sink_failed() {
    SINK_FAILED.set(true);
}

/// Takes the notes of the failure that reached the engine: (left something behind, the
/// sink failed); both are clear afterwards.
pub(crate) fn take() -> (bool, bool) {
    (LEFT_BEHIND.replace(false), SINK_FAILED.replace(false))
}

/// Sets the notes back to `was` (a run inside a user function of another leaves the outer
/// record's notes as it found them); returns the notes as they were.
pub(crate) fn replace(was: (bool, bool)) -> (bool, bool) {
    (LEFT_BEHIND.replace(was.0), SINK_FAILED.replace(was.1))
}
