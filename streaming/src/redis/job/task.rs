//! The job's background tasks (the registry heartbeat, checkpoints and leader election,
//! topic forwarders): each on a thread of its own with a current-thread tokio runtime,
//! counted in the job until it ends, and ending by the job's stop deadline.

use std::future::Future;
use std::sync::Arc;

use super::shared::JobShared;

/// Runs `task` on a thread named `name` with a current-thread runtime, counted in the
/// job's running tasks (what [`JobClient::await_termination`](super::JobClient::await_termination)
/// waits for) until it ends. A task still running at the job's
/// [`stop_deadline`](super::signals::JobSignals::stop_deadline) (one response timeout after the cancel)
/// is dropped where it stands, so that no wait on a frozen or silent Redis keeps a
/// shutdown waiting. A runtime that cannot start is one of the job's errors, a thread
/// that cannot be spawned too (both naming `what`). `ended` runs when the task is over —
/// also when it was dropped, its thread unwinds or could not be spawned — and then the
/// task stops counting and the waits for the job's changes are woken.
pub(crate) fn spawn_task<F, Fut>(
    job: &Arc<JobShared>,
    (name, what): (&str, &'static str),
    ended: fn(&JobShared),
    task: F,
) where
    F: FnOnce(Arc<JobShared>) -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    job.signals.task_started();
    let guard = TaskEnd(Arc::clone(job), ended);
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let job = Arc::clone(&guard.0);
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(async {
                    tokio::select! {
                        () = task(Arc::clone(&job)) => {}
                        () = job.signals.stop_deadline_passed() => tracing::debug!(
                            job = %job.config.job_name(),
                            "{what}: still waiting on Redis {:?} after the cancel: dropped",
                            job.config.mq_options().response_timeout
                        ),
                    }
                }),
                Err(e) => job.error(
                    crate::redis::JobErrorKind::Task,
                    format!("{what}: cannot start a tokio runtime: {e}"),
                ),
            }
            drop(guard);
        });
    if let Err(e) = spawned {
        job.error(
            crate::redis::JobErrorKind::Task,
            format!("{what}: cannot spawn its thread: {e}"),
        );
    }
}

/// Runs a task's `ended` when dropped, then counts its end (which wakes the waits for
/// the job's changes).
struct TaskEnd(Arc<JobShared>, fn(&JobShared));

impl Drop for TaskEnd {
    fn drop(&mut self) {
        (self.1)(&self.0);
        self.0.signals.task_ended();
    }
}
