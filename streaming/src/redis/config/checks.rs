//! Checks of [`RedisRuntimeConfig`](super::RedisRuntimeConfig) fields that need more than a bound.

use super::{invalid, ReplicaWait};
use crate::Error;
use std::time::Duration;

/// A replica wait the engine can honour: at least one replica, and a `WAIT` that returns
/// before the connection's response timeout gives up on it.
pub(super) fn check_replica_wait(w: &ReplicaWait, response_timeout: Duration) -> Result<(), Error> {
    let field = "commit_replica_wait";
    if w.replicas == 0 {
        return Err(invalid(
            field,
            "waits for 0 replicas: set at least 1, or `None` not to wait",
        ));
    }
    if w.timeout < Duration::from_millis(1) {
        return Err(invalid(
            field,
            format!(
                "timeout {:?} is under 1 ms (`WAIT` with 0 ms blocks forever): set at least 1 ms",
                w.timeout
            ),
        ));
    }
    if w.timeout >= response_timeout {
        return Err(invalid(
            field,
            format!(
                "timeout {:?} is not shorter than the response timeout {response_timeout:?} of `mq_options`: the call would time out before `WAIT` answers",
                w.timeout
            ),
        ));
    }
    Ok(())
}
