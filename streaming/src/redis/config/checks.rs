//! The checks of single options of [`RedisRuntimeConfig`](super::RedisRuntimeConfig) whose
//! rule and message are their own (`check(..)` in its table).

use std::time::Duration;

use crate::options::invalid;
use crate::Error;

/// `timer_threads`: only 1.
pub(super) fn one_timer_thread(field: &'static str, threads: &u32) -> Result<(), Error> {
    match threads {
        0 => Err(invalid(field, "must be at least 1")),
        1 => Ok(()),
        n => Err(invalid(
            field,
            format!(
                "must be 1, got {n}: processing-time timers fire on the subtask that owns the partition; raise `pipeline_parallelism` for more threads"
            ),
        )),
    }
}

/// `mdc_sample_rate`: in `[0, 1]` (NaN is not).
pub(super) fn fraction(field: &'static str, rate: &f64) -> Result<(), Error> {
    if !(0.0..=1.0).contains(rate) {
        return Err(invalid(field, format!("must be in [0, 1], got {rate}")));
    }
    Ok(())
}

/// `watermark_out_of_orderness`: event time is `i64` milliseconds.
pub(super) fn fits_i64_ms(field: &'static str, d: &Duration) -> Result<(), Error> {
    if i64::try_from(d.as_millis()).is_err() {
        return Err(invalid(field, "does not fit in i64 milliseconds"));
    }
    Ok(())
}

/// `checkpoint_threads`: only 1.
pub(super) fn one_checkpoint_thread(field: &'static str, threads: &u32) -> Result<(), Error> {
    if *threads != 1 {
        return Err(invalid(
            field,
            format!(
                "must be 1, got {threads}: each partition's subtask writes its own part of a checkpoint, and one coordinator task schedules them"
            ),
        ));
    }
    Ok(())
}

/// `defer_ack_until_checkpoint`: only `false`.
pub(super) fn no_deferred_ack(field: &'static str, defer: &bool) -> Result<(), Error> {
    if *defer {
        return Err(invalid(
            field,
            "not accepted: every batch commits its state, Redis sink writes and acknowledgement in one transaction, so acknowledging at checkpoints would only make a crash replay more; leave it `false`",
        ));
    }
    Ok(())
}

/// `ack_deferred_messages_on_checkpoint`: only `true`.
pub(super) fn ack_on_checkpoint(field: &'static str, ack: &bool) -> Result<(), Error> {
    if !*ack {
        return Err(invalid(
            field,
            "only `true` is accepted: no message waits for a checkpoint to be acknowledged (every batch commit acknowledges its messages)",
        ));
    }
    Ok(())
}

/// `leader_lease_ttl`: at least 2 whole milliseconds (Redis expires keys in whole
/// milliseconds, and the renew interval must fit under it).
pub(super) fn leader_lease_ttl(field: &'static str, ttl: &Duration) -> Result<(), Error> {
    if ttl.as_millis() < 2 {
        return Err(invalid(field, "must be at least 2 ms"));
    }
    Ok(())
}
