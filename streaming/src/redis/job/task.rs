//! The job's background tasks (the registry heartbeat, checkpoints and leader election,
//! topic forwarders): each on a thread of its own with a current-thread tokio runtime.

use std::future::Future;
use std::sync::Arc;

use super::shared::JobShared;

/// Runs `task` on a thread named `name` with a current-thread runtime. A runtime that
/// cannot start is one of the job's errors, a thread that cannot be spawned too (both
/// naming `what`). `ended` runs when the task is over — also when its thread unwinds or
/// could not be spawned — and then the waits for the job's changes are woken.
pub(crate) fn spawn_task<F, Fut>(
    job: &Arc<JobShared>,
    (name, what): (&str, &'static str),
    ended: fn(&JobShared),
    task: F,
) where
    F: FnOnce(Arc<JobShared>) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let guard = TaskEnd(Arc::clone(job), ended);
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let job = Arc::clone(&guard.0);
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(task(job)),
                Err(e) => job.error(format!("{what}: cannot start a tokio runtime: {e}")),
            }
            drop(guard);
        });
    if let Err(e) = spawned {
        job.error(format!("{what}: cannot spawn its thread: {e}"));
    }
}

/// Runs a task's `ended` when dropped, then wakes the waits for the job's changes.
struct TaskEnd(Arc<JobShared>, fn(&JobShared));

impl Drop for TaskEnd {
    fn drop(&mut self) {
        (self.1)(&self.0);
        self.0.signal_change();
    }
}
