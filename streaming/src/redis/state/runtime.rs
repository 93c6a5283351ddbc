//! The Redis engine's build-time runtime ([`RedisRuntime`]).

use crate::api::Sink;
use crate::dataflow::{Runtime, SideOutputFactory, StoreFactory};
use crate::ops::{Counters, OperatorId, PendingOutput, SideOutput, WatermarkState};
use crate::redis::state::persist::{ChangedKeys, DynStore, Persist, StateLimits};
use crate::redis::state::process_state::ProcessChanges;
use crate::sealed::Sealed;
use crate::time::WallClock;
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

/// A buffered side output as the runner sees it.
pub(crate) type DynSideOutput = Rc<RefCell<dyn PendingOutput>>;

/// What a built chain leaves the runner: its stores (a chain registers its LAST operator
/// first), its window operators' counters and its side outputs.
pub(crate) type ChainParts = (
    Vec<(OperatorId, DynStore)>,
    Rc<Counters>,
    Vec<DynSideOutput>,
);

/// What the stages of one partition's chain are built with: it hands out stores that
/// track their changed keys and remembers them, so the runner can load
/// them and write their changes back with each batch. Processing time is the wall clock.
#[derive(Default)]
pub struct RedisRuntime {
    counters: Rc<Counters>,
    limits: StateLimits,
    /// See [`ChainSettings::input_idle_timeout`](crate::redis::state::chain::ChainSettings).
    input_idle_timeout: Option<std::time::Duration>,
    stores: RefCell<Vec<(OperatorId, DynStore)>>,
    side_outputs: RefCell<Vec<DynSideOutput>>,
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
    pub(crate) fn new(limits: StateLimits) -> Self {
        RedisRuntime {
            limits,
            // A record whose window bounds overflow is dead-lettered like any failed
            // record (unless the window has a rejected-element output).
            counters: Rc::new(Counters {
                window_bounds_fail_record: true,
                ..Counters::default()
            }),
            ..RedisRuntime::default()
        }
    }

    /// With `timeout`, an input of a chain with several inputs that had no record this
    /// long, while another had, is idle.
    pub(crate) fn with_input_idle_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
        self.input_idle_timeout = timeout;
        self
    }

    /// How long an input of a chain with several inputs goes without a record before it
    /// is idle (`None`: never).
    pub(crate) fn input_idle_timeout(&self) -> Option<std::time::Duration> {
        self.input_idle_timeout
    }

    /// The stores in registration order (a chain registers its LAST operator first), the
    /// counters of the chain's window operators and its side outputs.
    pub(crate) fn into_parts(self) -> ChainParts {
        (
            self.stores.into_inner(),
            self.counters,
            self.side_outputs.into_inner(),
        )
    }

    fn register<S: Persist>(&self, operator: &OperatorId, init: S) -> Rc<RefCell<S>> {
        let store = Rc::new(RefCell::new(init));
        store.borrow_mut().configure(&self.limits);
        let dynamic: DynStore = store.clone();
        self.stores.borrow_mut().push((operator.clone(), dynamic));
        store
    }
}

impl Sealed for RedisRuntime {}

impl<S: Persist> StoreFactory<S> for RedisRuntime {
    fn store(&self, operator: &OperatorId, init: S) -> Result<Rc<RefCell<S>>, Error> {
        Ok(self.register(operator, init))
    }
}

/// Side outputs are buffered: the runner delivers them when the batch commits (a Redis
/// sink's writes go into the batch's commit) and drops them on a rollback.
impl<T: 'static, L: Sink<T> + 'static> SideOutputFactory<T, L> for RedisRuntime {
    fn side_output(&self, sink: L) -> SideOutput<T, L> {
        let (output, buffer) = SideOutput::buffered(sink);
        let dynamic: DynSideOutput = buffer;
        self.side_outputs.borrow_mut().push(dynamic);
        output
    }
}

impl Runtime for RedisRuntime {
    type Changes<K: std::hash::Hash + Eq + Clone + 'static> = ChangedKeys<K>;
    type ProcessChanges<K: std::hash::Hash + Eq + Clone + 'static> = ProcessChanges<K>;
    type Clock = WallClock;

    fn watermark_state(
        &self,
        operator: &OperatorId,
    ) -> Rc<RefCell<WatermarkState<ChangedKeys<()>>>> {
        self.register(operator, WatermarkState::default())
    }

    fn counters(&self) -> Rc<Counters> {
        Rc::clone(&self.counters)
    }
}
