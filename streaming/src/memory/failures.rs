//! What the memory engine does with a record that fails: [`OnRecordError`], the
//! [`DeadLetter`]s it keeps, and the per-record loop that applies them.

use crate::error::{failed_operator, failure_message, failure_type, is_misuse};
use crate::ops::{effects, Counters, Operator};
use crate::{Error, OperatorId};
use std::rc::Rc;

/// What the memory engine does with a source record that fails: an error or a panic in a
/// user function, a payload that does not decode, window bounds that do not fit in `i64`
/// (without a rejected-element output), a full timer queue, a misused state.
///
/// Set it with [`MemoryEnv::on_record_error`](crate::MemoryEnv::on_record_error). The
/// first three mirror the Redis engine's
/// `ProcessingErrorResult` and give the dead letter the error type and attempts the Redis
/// engine gives it: the record goes to the run's dead letters (readable through
/// [`DataStream::side_output_dead_letters`](crate::DataStream::side_output_dead_letters),
/// counted in [`JobSummary::dead_letters`](super::JobSummary::dead_letters)) and the run
/// goes on with the next record. The memory engine does not run a failed record again: its
/// functions are deterministic on a bounded input, so every retry would fail the same way;
/// the dead letter records the attempts the Redis engine would have made.
///
/// A record whose failure may have left something behind — keyed state it changed, records
/// of it that went downstream — stops the run with [`Error::RecordNotUndone`] under every
/// policy but [`StopRun`](Self::StopRun): the memory engine keeps state in place and
/// delivers output at once, so it cannot take those effects back the way the Redis engine
/// rolls its batch back (the guide's "Failing records" lists the cases). A failure of the
/// main sink itself stops the run as well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnRecordError {
    /// The Redis engine's default: retried `max_retries` times, then dead-lettered. The dead
    /// letter has `attempts = max_retries + 1` and dead-letter type
    /// `retries_exhausted:<type>`; a failure no retry can fix (a decode error, window
    /// bounds, [`Error::permanent`], a misused state) is dead-lettered at once (`attempts`
    /// 1, dead-letter type `<type>`). Use the `max_retries` of the Redis engine's
    /// `RetryPolicy` (default 3) to get the same dead letters.
    Retry {
        /// Retries before the dead letter (the first delivery is not a retry).
        max_retries: u32,
    },
    /// Dead-lettered at once: `attempts` 1, dead-letter type `<type>`.
    DeadLetter,
    /// Dead-lettered at once as a failure: `attempts` 1, dead-letter type `fail:<type>`
    /// (`<type>` for a misused state).
    Fail,
    /// The first failing record stops the run: the terminal operation returns its error.
    /// Window bounds that do not fit in `i64` are then not a failure: without a
    /// rejected-element output the record is counted in
    /// [`JobSummary::window_bounds_rejected`](super::JobSummary::window_bounds_rejected),
    /// logged and dropped.
    StopRun,
}

impl Default for OnRecordError {
    /// [`Retry`](Self::Retry) with 3 retries, the Redis engine's default policy and retry
    /// count.
    fn default() -> Self {
        OnRecordError::Retry { max_retries: 3 }
    }
}

/// A source record that failed, as the memory engine keeps it (see [`OnRecordError`]).
///
/// The fields are those of the Redis engine's dead letter of the same record: its
/// `x-runtime-error-type` header is [`error_type`](Self::error_type), its `dlq.error_type`
/// is [`dead_letter_type`](Self::dead_letter_type), its `dlq.error` (and
/// `x-runtime-error-message`) is [`message`](Self::message), its `dlq.attempts` is
/// [`attempts`](Self::attempts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter<T> {
    /// The record as the source produced it.
    pub record: T,
    /// Its timestamp as the source gave it (ms).
    pub timestamp: i64,
    /// The failure's type: `decode`, `user_function`, `panic`, `window_bounds`,
    /// `timer_queue_full`, `state`, `state_decode`, or `error`.
    pub error_type: &'static str,
    /// The type the dead letter is recorded under: `retries_exhausted:<type>`,
    /// `fail:<type>` or `<type>`, by the policy (see [`OnRecordError`]).
    pub dead_letter_type: String,
    /// The error's message, at most 512 characters.
    pub message: String,
    /// Deliveries the Redis engine would have made: retries + 1.
    pub attempts: u32,
    /// The operator the error names; `None` for an error that names none (e.g. a decode
    /// error a user function passed on with `?`).
    pub operator: Option<OperatorId>,
}

/// Hands a dead letter to the pipeline's dead-letter output.
pub(crate) type DeadLetterOut<'a, T> = &'a mut dyn FnMut(DeadLetter<T>) -> Result<(), Error>;

/// Where the dead letters of a run go, with a copy of each record to put in them.
struct Keep<'a, T> {
    copy: fn(&T) -> T,
    out: DeadLetterOut<'a, T>,
}

/// The record loop's part in failures: feeds each record to the chain and handles its
/// failure by the run's [`OnRecordError`].
#[doc(hidden)]
pub struct RecordFailures<'a, T> {
    policy: OnRecordError,
    counters: Rc<Counters>,
    keep: Option<Keep<'a, T>>,
}

impl<'a, T> RecordFailures<'a, T> {
    /// Failures of a run with `policy`, counted in `counters`; dead letters are counted and
    /// logged only.
    pub(crate) fn new(policy: OnRecordError, counters: Rc<Counters>) -> Self {
        RecordFailures {
            policy,
            counters,
            keep: None,
        }
    }

    /// The same failures, with each dead letter (and a `copy` of its record) handed to
    /// `out`.
    /// The same policy and counters for the records of another input (a pipeline with
    /// several inputs), keeping no dead letters of its own.
    pub(crate) fn for_input<'b, U>(&self) -> RecordFailures<'b, U> {
        RecordFailures::new(self.policy, Rc::clone(&self.counters))
    }

    pub(crate) fn keeping<'b>(
        &self,
        copy: fn(&T) -> T,
        out: DeadLetterOut<'b, T>,
    ) -> RecordFailures<'b, T> {
        RecordFailures {
            policy: self.policy,
            counters: Rc::clone(&self.counters),
            keep: Some(Keep { copy, out }),
        }
    }

    /// Pushes one source record through `op`. A failure goes to the dead letters (and the
    /// run goes on: `Ok`) unless the policy stops the run, the record's effects cannot be
    /// undone, or the main sink failed.
    ///
    /// # Errors
    /// The record's error under [`OnRecordError::StopRun`] and when the sink failed;
    /// [`Error::RecordNotUndone`] when the record failed after it changed state or produced
    /// output; the dead-letter output's error.
    #[inline(always)]
    pub(crate) fn feed<O: Operator<T>>(
        &mut self,
        op: &mut O,
        record: T,
        timestamp: i64,
    ) -> Result<(), Error> {
        if self.keep.is_some() {
            return self.feed_keeping(op, record, timestamp);
        }
        match op.process(record, timestamp) {
            Ok(()) => Ok(()),
            Err(e) => self.failed(e, None, timestamp),
        }
    }

    /// [`feed`](Self::feed) with a copy of the record for its dead letter.
    #[inline(never)]
    fn feed_keeping<O: Operator<T>>(
        &mut self,
        op: &mut O,
        record: T,
        timestamp: i64,
    ) -> Result<(), Error> {
        let copy = self.keep.as_ref().map(|k| (k.copy)(&record));
        match op.process(record, timestamp) {
            Ok(()) => Ok(()),
            Err(e) => self.failed(e, copy, timestamp),
        }
    }

    #[cold]
    #[inline(never)]
    fn failed(&mut self, e: Error, record: Option<T>, timestamp: i64) -> Result<(), Error> {
        let (left_behind, sink_failed) = effects::take();
        if sink_failed || self.policy == OnRecordError::StopRun {
            return Err(e);
        }
        if left_behind {
            return Err(Error::RecordNotUndone {
                timestamp,
                source: Box::new(e),
            });
        }
        let letter = self.dead_letter(&e, timestamp);
        self.counters.add_dead_letter();
        tracing::warn!(
            timestamp,
            error_type = letter.error_type,
            attempts = letter.attempts,
            "record dead-lettered ({}): {}",
            letter.dead_letter_type,
            letter.message
        );
        match (&mut self.keep, record) {
            (Some(keep), Some(record)) => (keep.out)(DeadLetter {
                record,
                timestamp: letter.timestamp,
                error_type: letter.error_type,
                dead_letter_type: letter.dead_letter_type,
                message: letter.message,
                attempts: letter.attempts,
                operator: letter.operator,
            }),
            _ => Ok(()),
        }
    }

    /// The dead letter of a record that failed with `e` (without the record).
    fn dead_letter(&self, e: &Error, timestamp: i64) -> DeadLetter<()> {
        let kind = failure_type(e);
        let misuse = is_misuse(e);
        let (dead_letter_type, attempts) = match self.policy {
            OnRecordError::Retry { max_retries } if !misuse && !e.is_permanent() => (
                format!("retries_exhausted:{kind}"),
                max_retries.saturating_add(1),
            ),
            OnRecordError::Fail if !misuse => (format!("fail:{kind}"), 1),
            _ => (kind.to_string(), 1),
        };
        DeadLetter {
            record: (),
            timestamp,
            error_type: kind,
            dead_letter_type,
            message: failure_message(e),
            attempts,
            operator: failed_operator(e).cloned(),
        }
    }
}
