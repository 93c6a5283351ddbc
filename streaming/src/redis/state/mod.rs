//! Keyed state kept in Redis: the stores a partition's chain is built with (`runtime`,
//! `persist`, `process_state`), the chain itself (`chain`), the key layout (`keys`), the
//! state schema check (`schema`) and a batch's state writes (`pending`).

pub(crate) mod chain;
pub(crate) mod keys;
pub(crate) mod pending;
pub(crate) mod persist;
pub(crate) mod process_state;
pub(crate) mod runtime;
pub(crate) mod schema;
