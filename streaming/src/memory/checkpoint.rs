//! In-memory checkpoints of keyed state.

use crate::ops::Shared;
use crate::{Error, OperatorId};
use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

trait Checkpointable {
    /// A deep copy of the state; `None` while an operator holds it.
    fn snapshot(&self) -> Option<Rc<dyn Any>>;
    /// Replaces the state; `Err(true)` when busy, `Err(false)` when the type differs.
    fn restore(&self, snapshot: &dyn Any) -> Result<(), bool>;
}

impl<S: Clone + 'static> Checkpointable for RefCell<S> {
    fn snapshot(&self) -> Option<Rc<dyn Any>> {
        self.try_borrow()
            .ok()
            .map(|s| Rc::new(s.clone()) as Rc<dyn Any>)
    }

    fn restore(&self, snapshot: &dyn Any) -> Result<(), bool> {
        let snap = snapshot.downcast_ref::<S>().ok_or(false)?;
        let mut s = self.try_borrow_mut().map_err(|_| true)?;
        *s = snap.clone();
        Ok(())
    }
}

#[derive(Default)]
struct Inner {
    stores: Vec<(String, Rc<dyn Checkpointable>)>,
    checkpoints: BTreeMap<u64, HashMap<String, Rc<dyn Any>>>,
    next_id: u64,
    /// The checkpoint stores registered from now on start from: the newest one taken, or
    /// the one last restored.
    active: Option<u64>,
}

/// Snapshots and restores the keyed state of the pipelines of one [`MemoryEnv`](super::MemoryEnv).
///
/// Every stateful operator (keyed process, rolling reduce/sum, window) registers its store
/// under its [`OperatorId`](crate::ops::OperatorId) when its pipeline starts. A store
/// registered after a checkpoint was taken starts from that checkpoint's copy of its state
/// (the newest checkpoint, or the one last restored), so running the same pipeline again
/// continues where the checkpoint left off.
/// Cloning the coordinator gives another handle to the same checkpoints.
#[derive(Clone, Default)]
pub struct CheckpointCoordinator {
    inner: Rc<RefCell<Inner>>,
}

impl std::fmt::Debug for CheckpointCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.borrow();
        f.debug_struct("CheckpointCoordinator")
            .field(
                "stores",
                &inner
                    .stores
                    .iter()
                    .map(|(id, _)| id.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("checkpoints", &inner.checkpoints.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl CheckpointCoordinator {
    /// Takes a checkpoint of every registered store; returns its id (1, 2, …).
    ///
    /// # Errors
    /// [`Error::CheckpointBusy`] when called from inside a user function while the
    /// operator owning a store is updating it.
    pub fn trigger_checkpoint(&self) -> Result<u64, Error> {
        let mut inner = self.inner.borrow_mut();
        let mut snapshot = HashMap::new();
        for (id, store) in &inner.stores {
            let copy = store
                .snapshot()
                .ok_or_else(|| Error::CheckpointBusy(OperatorId::from_text(id.as_str())))?;
            snapshot.insert(id.clone(), copy);
        }
        inner.next_id += 1;
        let id = inner.next_id;
        inner.checkpoints.insert(id, snapshot);
        inner.active = Some(id);
        tracing::debug!(
            checkpoint = id,
            stores = inner.stores.len(),
            "checkpoint taken"
        );
        Ok(id)
    }

    /// Restores every registered store that checkpoint `id` holds a copy of, and makes `id`
    /// the checkpoint that stores registered from now on start from (until the next
    /// [`trigger_checkpoint`](Self::trigger_checkpoint)). Registered stores absent from the
    /// checkpoint keep their state.
    ///
    /// # Errors
    /// [`Error::CheckpointNotFound`] for an unknown id; [`Error::CheckpointBusy`] when a
    /// store is in use; [`Error::InvalidConfig`] (field `operator id`) when a store's type
    /// differs from the copy under the same operator id (two different pipelines whose
    /// operators got the same id: give their sources distinct ids).
    pub fn restore_from_checkpoint(&self, id: u64) -> Result<(), Error> {
        let mut inner = self.inner.borrow_mut();
        let snapshot = inner
            .checkpoints
            .get(&id)
            .ok_or(Error::CheckpointNotFound(id))?;
        for (op, store) in &inner.stores {
            if let Some(copy) = snapshot.get(op) {
                restore(op, store.as_ref(), copy.as_ref())?;
            }
        }
        inner.active = Some(id);
        Ok(())
    }

    /// The id of the newest checkpoint, if any.
    pub fn latest_checkpoint_id(&self) -> Option<u64> {
        self.inner.borrow().checkpoints.keys().next_back().copied()
    }

    /// The ids of the registered stores (operator ids), in registration order.
    pub fn registered_stores(&self) -> Vec<String> {
        self.inner
            .borrow()
            .stores
            .iter()
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Registers `store` under `operator`; restores it from the active checkpoint (the
    /// newest taken or the last restored) when that holds the operator. A later
    /// registration under the same id replaces the earlier one.
    pub(crate) fn register<S: Clone + 'static>(
        &self,
        operator: &str,
        store: &Shared<S>,
    ) -> Result<(), Error> {
        let mut inner = self.inner.borrow_mut();
        let dynamic: Rc<dyn Checkpointable> = store.clone();
        if let Some(copy) = inner
            .active
            .and_then(|id| inner.checkpoints.get(&id))
            .and_then(|c| c.get(operator))
        {
            restore(operator, dynamic.as_ref(), copy.as_ref())?;
        }
        inner.stores.retain(|(id, _)| id != operator);
        inner.stores.push((operator.to_string(), dynamic));
        Ok(())
    }
}

fn restore(operator: &str, store: &dyn Checkpointable, copy: &dyn Any) -> Result<(), Error> {
    store.restore(copy).map_err(|busy| {
        if busy {
            Error::CheckpointBusy(OperatorId::from_text(operator))
        } else {
            Error::InvalidConfig {
                field: "operator id",
                reason: format!("checkpointed state under `{operator}` has another type than the operator now using that id"),
            }
        }
    })
}
