//! The Redis engine's build-time runtime ([`RedisRuntime`]) and its state key layout.

use super::persist::Persist;
use crate::memory::StoreFactory;
use crate::ops::{Counters, OperatorId};
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// A stateful operator's store as the runner sees it.
pub(crate) type DynStore = Rc<RefCell<dyn Persist>>;

/// What the stages of one partition's chain are built with: it hands out stores that
/// track their changes and remembers them, so the runner can load and drain them.
#[derive(Default)]
pub struct RedisRuntime {
    counters: Rc<Counters>,
    stores: RefCell<Vec<(OperatorId, DynStore)>>,
}

impl std::fmt::Debug for RedisRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRuntime")
            .field(
                "stores",
                &self
                    .stores
                    .borrow()
                    .iter()
                    .map(|(id, _)| id.to_string())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl RedisRuntime {
    pub(crate) fn into_stores(self) -> Vec<(OperatorId, DynStore)> {
        self.stores.into_inner()
    }
}

impl<S: Persist> StoreFactory<S> for RedisRuntime {
    fn store(&self, operator: &OperatorId, init: S) -> Result<Rc<RefCell<S>>, Error> {
        let store = Rc::new(RefCell::new(init));
        store.borrow_mut().track();
        let dynamic: DynStore = store.clone();
        self.stores.borrow_mut().push((operator.clone(), dynamic));
        Ok(store)
    }

    fn counters(&self) -> Rc<Counters> {
        Rc::clone(&self.counters)
    }
}

/// The state keys of one (job, topic, group, partition).
///
/// - state hash of (operator, state): `{prefix}:{job}:{T:n}:{group}:{operator}:{state}`,
///   fields = the key as JSON, values = the value as JSON;
/// - index of those hashes (a set): `{prefix}:{job}:{T:n}:{group}:index`.
///
/// `{T:n}` is the partition's hash tag, shared with its stream, so one script can commit
/// them together on Redis Cluster.
#[derive(Clone, Debug)]
pub(crate) struct StateKeys {
    base: String,
}

impl StateKeys {
    pub(crate) fn new(prefix: &str, job: &str, tag: &str, group: &str) -> Self {
        StateKeys {
            base: format!("{prefix}:{job}:{tag}:{group}"),
        }
    }

    pub(crate) fn index(&self) -> String {
        format!("{}:index", self.base)
    }

    pub(crate) fn hash(&self, operator: &str, state: &str) -> String {
        format!("{}:{operator}:{state}", self.base)
    }

    /// The state name of `key` when it is a hash of `operator`.
    pub(crate) fn state_of<'k>(&self, key: &'k str, operator: &str) -> Option<&'k str> {
        key.strip_prefix(self.base.as_str())?
            .strip_prefix(':')?
            .strip_prefix(operator)?
            .strip_prefix(':')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_carry_the_partition_tag_and_parse_back() {
        let k = StateKeys::new("streaming:runtime", "job", "{orders:3}", "billing");
        assert_eq!(k.index(), "streaming:runtime:job:{orders:3}:billing:index");
        let h = k.hash("orders.billing/2:process", "count");
        assert_eq!(
            h,
            "streaming:runtime:job:{orders:3}:billing:orders.billing/2:process:count"
        );
        assert_eq!(k.state_of(&h, "orders.billing/2:process"), Some("count"));
        assert_eq!(k.state_of(&h, "orders.billing/2:proc"), None);
        assert_eq!(k.state_of(&h, "orders.billing/3:process"), None);
    }
}
