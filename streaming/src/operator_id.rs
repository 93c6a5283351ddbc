//! The stable id of an operator, shared by every layer (errors name operators by it).

use std::fmt;
use std::sync::Arc;

/// The stable id of an operator: `{source_id}/{position}:{kind}`, e.g. `flights/4:window`.
///
/// `position` counts operators from 1 along the chain after the source, so ids do not
/// change when a later operator changes. Errors name operators by this id, and keyed state
/// and checkpoints are stored under it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OperatorId(Arc<str>);

impl OperatorId {
    /// The id of the operator at `position` (1-based) of kind `kind` after source `source_id`.
    pub fn new(source_id: &str, position: u32, kind: &str) -> Self {
        OperatorId(format!("{source_id}/{position}:{kind}").into())
    }

    /// An id already formatted as `{source_id}/{position}:{kind}` (e.g. read back from a
    /// store key).
    pub(crate) fn from_text(id: impl Into<Arc<str>>) -> Self {
        OperatorId(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperatorId({})", self.0)
    }
}

impl AsRef<str> for OperatorId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for OperatorId {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for OperatorId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for OperatorId {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}
