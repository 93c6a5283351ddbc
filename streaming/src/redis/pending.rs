//! A batch's state writes, collected from the chain's stores, per state hash.

use super::chain::Stores;
use super::keys::StateKeys;
use crate::Error;
use std::collections::HashMap;

/// One state hash's writes in a batch: field (key as JSON) → value (`None` = delete).
pub(super) struct PendingHash {
    pub(super) key: String,
    pub(super) operator: String,
    pub(super) state: String,
    pub(super) fields: HashMap<String, Option<String>>,
}

/// A batch's state writes, per hash (later writes of a field replace earlier ones).
#[derive(Default)]
pub(super) struct Pending {
    pub(super) hashes: Vec<PendingHash>,
    index: HashMap<String, usize>,
}

impl Pending {
    /// The index of the hash `key` of (operator, state), added when new.
    fn hash_index(&mut self, key: String, operator: &str, state: &str) -> usize {
        if let Some(i) = self.index.get(&key) {
            return *i;
        }
        self.hashes.push(PendingHash {
            key: key.clone(),
            operator: operator.to_string(),
            state: state.to_string(),
            fields: HashMap::new(),
        });
        self.index.insert(key, self.hashes.len() - 1);
        self.hashes.len() - 1
    }
}

/// Moves every store's changes into `pending`; `touched` gets the hashes written.
pub(super) fn drain_into(
    stores: &Stores,
    keys: &StateKeys,
    pending: &mut Pending,
    touched: &mut Vec<usize>,
) -> Result<(), Error> {
    for (op, store) in stores {
        // Unsharded, every field of one (operator, state) goes to the same hash: remember
        // the last one instead of formatting and looking up its key per field.
        let mut last: Option<(String, usize)> = None;
        store
            .borrow_mut()
            .drain(op.as_str(), &mut |(state, field, value)| {
                if let Some((s, i)) = &last {
                    if keys.single_hash() && s == state {
                        let i = *i;
                        pending.hashes[i].fields.insert(field, value);
                        touched.push(i);
                        return;
                    }
                }
                let key = keys.hash(op.as_str(), state, &field);
                let i = pending.hash_index(key, op.as_str(), state);
                pending.hashes[i].fields.insert(field, value);
                touched.push(i);
                last = Some((state.to_string(), i));
            })?;
    }
    Ok(())
}
