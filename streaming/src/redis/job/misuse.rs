//! Misuses of the API that no retry can fix, reported once each.

use super::shared::JobShared;
use crate::Error;

impl JobShared {
    /// Reports a misuse ([`is_misuse`](crate::error::is_misuse)) in the job's errors, once per (operator, state).
    pub(crate) fn report_misuse(&self, e: &Error) {
        let (operator, state, message) = match e {
            Error::StateNotPersistent {
                operator,
                state,
                declared,
            } => (
                operator,
                *state,
                format!(
                    "operator `{operator}`: state `{state}` ({declared}) is not persistent, so the Redis engine cannot keep it: every record using it goes to the dead-letter queue (error type `state`, not retried). Declare it with `ValueStateDescriptor::persistent(..)` (likewise `ListStateDescriptor`, `MapStateDescriptor`, `SetStateDescriptor::persistent`), or in `pipeline!` with the `.state(name: ValueState<T> = ..)` syntax, whose declarations are persistent"
                ),
            ),
            Error::StateType {
                operator, state, ..
            } => (
                operator,
                *state,
                format!("{e}: every record using it goes to the dead-letter queue (error type `state`, not retried); give each state name of an operator one type"),
            ),
            Error::StateDecode {
                operator, state, ..
            } => (
                operator,
                state.as_str(),
                format!("{e}: the stored state does not decode as the pipeline's type (e.g. its type changed under `state_schema_mismatch_policy` Ignore, or it was written by hand); records of that key go to the dead-letter queue (not retried), the other keys go on. Fix or delete the stored value, clear the state (policy Clear) or keep the old type"),
            ),
            _ => return,
        };
        let first = self
            .misuses
            .lock()
            .map(|mut m| m.insert(format!("{operator}/{state}")))
            .unwrap_or(true);
        if first {
            self.error(super::JobErrorKind::Misuse, message);
        }
    }
}
