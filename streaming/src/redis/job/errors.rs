//! The errors a running job met: typed values with what failed, where and when.

use super::addr::PartitionAddr;
use std::fmt;
use std::time::SystemTime;

/// What failed, in a [`JobError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobErrorKind {
    /// A batch was not committed (it is read again from the last commit).
    Batch,
    /// Processing-time timers were not committed.
    Timers,
    /// An idle flush was not committed.
    IdleFlush,
    /// The partition's lease passed to another owner (the partition was fenced), or
    /// renewing it failed.
    Lease,
    /// Taking a partition (its lease, read position and state) failed.
    Take,
    /// A checkpoint, or a partition's part of one, was not written.
    Checkpoint,
    /// The state schema does not match the pipeline (the partition stopped).
    StateSchema,
    /// A partition's operator chain failed outside a batch (rebuilding, closing).
    Chain,
    /// A sink failed outside a batch (closing), or the pipeline's sinks cannot commit
    /// together (two write one key as different Redis types: the partition stopped).
    Sink,
    /// A misuse of state reported once (e.g. a state that is not persistent).
    Misuse,
    /// A subtask or background task could not start or ended with an error.
    Task,
}

impl fmt::Display for JobErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobErrorKind::Batch => "batch",
            JobErrorKind::Timers => "timers",
            JobErrorKind::IdleFlush => "idle flush",
            JobErrorKind::Lease => "lease",
            JobErrorKind::Take => "take",
            JobErrorKind::Checkpoint => "checkpoint",
            JobErrorKind::StateSchema => "state schema",
            JobErrorKind::Chain => "chain",
            JobErrorKind::Sink => "sink",
            JobErrorKind::Misuse => "misuse",
            JobErrorKind::Task => "task",
        })
    }
}

/// An error a running job met and reported in
/// [`JobDiagnostics::errors`](super::JobDiagnostics::errors): what failed, the partition
/// (when one did), when, and the message (which also went to the log).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobError {
    /// What failed.
    pub kind: JobErrorKind,
    /// The partition it happened to; `None` for an error of the job or a subtask.
    pub partition: Option<PartitionAddr>,
    /// When it was reported.
    pub at: SystemTime,
    /// What happened and what the engine does about it.
    pub message: String,
}

impl JobError {
    /// An error of kind `kind`, reported now.
    pub(crate) fn new(
        kind: JobErrorKind,
        partition: Option<PartitionAddr>,
        message: String,
    ) -> Self {
        JobError {
            kind,
            partition,
            at: SystemTime::now(),
            message,
        }
    }
}

impl fmt::Display for JobError {
    /// The message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}
