//! The job client and what a running job's subtasks share with it.
//!
//! - [`client`]: [`JobClient`] (cancel, scale, pause, diagnostics);
//! - [`waits`]: its waits (termination, caught up, flushed): async, woken by the job's
//!   changes, each with a `blocking_` variant;
//! - [`caught_up`]: the caught-up check against Redis;
//! - [`shared`]: [`JobShared`], the state the subtasks and the client share;
//! - [`progress`]: what the job reports ([`PartitionProgress`], [`JobDiagnostics`]);
//! - [`misuse`]: misuses of the API, reported once each;
//! - [`registry`]: the instance's heartbeat in the job registry, and reading the registry;
//! - [`task`]: the thread and runtime of each of the job's background tasks;
//! - [`signals`]: the cancel, the running subtasks and tasks, the change signal;
//! - [`subtasks`]: the running subtasks, their stop flags and how to start more;
//! - [`partitions`]: each partition's progress, registered once ([`PartitionAddr`]);
//! - [`errors`]: the job's errors as typed values ([`JobError`]);
//! - [`checkpoint`]: checkpoints, the leader, retention and restore;
//! - [`forwarders`]: the job-to-job topic forwarders started with the job.

mod addr;
mod caught_up;
pub(crate) mod checkpoint;
mod checkpoints;
mod client;
mod errors;
mod forwarders;
mod misuse;
mod partitions;
mod progress;
mod registry;
mod shared;
pub(crate) mod signals;
pub(crate) mod subtasks;
mod task;
mod waits;

pub use addr::PartitionAddr;
pub(crate) use caught_up::id_at_least;
pub use client::JobClient;
pub use errors::{JobError, JobErrorKind};
pub(crate) use forwarders::start_job_forwarders;
pub(crate) use partitions::PartitionHandle;
pub use progress::{JobDiagnostics, PartitionProgress};
pub(crate) use registry::start as start_registry;
pub use registry::{
    registered_instances, RegisteredInput, RegisteredInstance, RegisteredPartition,
    RegisteredPipeline, RegisteredState,
};
pub(crate) use shared::JobShared;
pub(crate) use task::spawn_task;
