//! The window operator's state (panes per key, event-time timers) and the emitting parts
//! a pane callback borrows.

use super::functions::WindowFunction;
use crate::api::Collector;
use crate::ops::changes::{KeyChanges, Written};
use crate::ops::timers::TimerQueue;
use crate::ops::{guard, user_error, Counters, OperatorId};
use crate::time::trigger::TriggerTimerRequest;
use crate::time::{TimeWindow, TriggerResult};
use crate::Error;
use hashbrown::HashMap;
use smallvec::SmallVec;
use std::collections::hash_map::RandomState;
use std::marker::PhantomData;

/// One (key, window) pane. The Redis engine keeps it as JSON (see [`WindowState`]).
#[derive(Clone)]
pub(crate) struct Bucket<Acc, Tr> {
    /// The pane's window (of a merging window: the cover of the windows merged into it).
    pub(crate) window: TimeWindow,
    /// The window function's accumulator.
    pub(crate) acc: Acc,
    /// The trigger's state for this pane.
    pub(crate) trigger: Tr,
    /// Elements were added since the pane was created or purged.
    pub(crate) has_content: bool,
    /// Elements were added since the last emission: emitted at cleanup if still set.
    pub(crate) pending: bool,
    /// Event-time timers registered for this pane (trigger timers and the cleanup time;
    /// two inline: a pane mostly has one or both).
    pub(crate) timers: SmallVec<[i64; 2]>,
    /// Merging windows: the arrival number of the pane's latest element (numbers count
    /// up per key while the key has panes).
    pub(crate) last_arrival: u64,
}

/// A key's panes (one inline: a key of aligned windows mostly has one) and what the
/// engine keeps beside them (`W`, the engine's [`KeyChanges::Written`]: nothing on the
/// memory engine; on the Redis engine the windows and digests of the panes it last wrote
/// back). A key's entry goes when both are empty.
#[derive(Clone)]
pub(crate) struct KeyPanes<Acc, Tr, W> {
    pub(crate) panes: SmallVec<[Bucket<Acc, Tr>; 1]>,
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) written: W,
}

impl<Acc, Tr, W: Default> Default for KeyPanes<Acc, Tr, W> {
    fn default() -> Self {
        KeyPanes {
            panes: SmallVec::new(),
            written: W::default(),
        }
    }
}

impl<Acc, Tr, W: Written> KeyPanes<Acc, Tr, W> {
    /// Whether the entry holds nothing (no pane, nothing written): it can go.
    pub(crate) fn is_unused(&self) -> bool {
        self.panes.is_empty() && self.written.is_empty()
    }
}

/// The window operator's state: panes per key and the event-time timer queue.
///
/// The Redis engine keeps it in one hash per (partition, operator), one field per pane:
/// field = `[key, window start, window end]` as JSON, value = `[accumulator, trigger
/// state, flags, event-time timers, last arrival]` as JSON; the timer queue is rebuilt
/// from the panes on load.
#[derive(Clone)]
pub struct WindowState<K, Acc, Tr, C: KeyChanges<K>> {
    /// Per key its panes and what the engine wrote of them (one entry, one lookup). The
    /// standard library's hasher (SipHash with random keys); `hashbrown`'s map for its raw
    /// entries (a record looks its key up once).
    pub(crate) keys: HashMap<K, KeyPanes<Acc, Tr, C::Written>, RandomState>,
    pub(crate) timers: TimerQueue<(K, TimeWindow)>,
    /// Keys whose panes changed since the engine last wrote them back.
    pub(crate) changes: C,
    /// Most windows fired by timers per record (0 = unlimited); due windows beyond it
    /// fire before the next record.
    pub(crate) max_fires: usize,
    /// Per key whose written panes a batch's drain changed, what they were before
    /// (cleared once the batch commits, restored in reverse order on a rollback; empty on
    /// the memory engine).
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) undo: Vec<(K, C::Written)>,
}

/// A key's written panes: (window, digest of the stored value); one inline (a key mostly
/// has one pane). A pane whose digest did not change is not written again.
pub(crate) type PaneDigests = SmallVec<[(TimeWindow, u64); 1]>;

impl Written for PaneDigests {
    fn is_empty(&self) -> bool {
        SmallVec::is_empty(self)
    }
}

impl<K, Acc, Tr, C: KeyChanges<K>> Default for WindowState<K, Acc, Tr, C> {
    fn default() -> Self {
        WindowState {
            keys: HashMap::default(),
            timers: TimerQueue::default(),
            changes: C::default(),
            max_fires: 0,
            undo: Vec::new(),
        }
    }
}

/// The parts of the operator a pane callback needs, borrowed apart from the state.
pub(super) struct Emitter<'a, K, T, WF: WindowFunction<K, T>> {
    pub(super) id: &'a OperatorId,
    pub(super) function: &'a mut WF,
    pub(super) out: &'a mut Vec<WF::Out>,
    pub(super) marks: &'a mut Vec<(usize, i64)>,
    pub(super) counters: &'a Counters,
    pub(super) _k: PhantomData<fn(&K, T)>,
}

impl<K, T, WF: WindowFunction<K, T>> Emitter<'_, K, T, WF> {
    pub(super) fn emit<Tr>(&mut self, key: &K, b: &mut Bucket<WF::Acc, Tr>) -> Result<(), Error> {
        if !b.has_content {
            return Ok(());
        }
        let (function, out, window, acc) = (&mut *self.function, &mut *self.out, &b.window, &b.acc);
        let start = out.len();
        let mut collector = Collector::new(out);
        let emitted = guard(self.id, || function.emit(key, window, acc, &mut collector));
        collector.into_buffer(start);
        emitted?.map_err(|e| user_error(self.id, e))?;
        self.marks.push((self.out.len(), b.window.max_timestamp()));
        b.pending = false;
        self.counters.add_firing();
        Ok(())
    }

    pub(super) fn apply<Tr>(
        &mut self,
        key: &K,
        b: &mut Bucket<WF::Acc, Tr>,
        r: TriggerResult,
    ) -> Result<(), Error> {
        if r.is_fire() {
            self.emit(key, b)?;
        }
        if r.is_purge() {
            b.acc = guard(self.id, || self.function.create())?;
            b.has_content = false;
            b.pending = false;
        }
        Ok(())
    }
}

/// Borrows the emitting parts of a [`WindowOperator`] apart from its other fields.
macro_rules! emitter {
    ($op:ident) => {
        $crate::ops::window::state::Emitter {
            id: &$op.id,
            function: &mut $op.function,
            out: &mut $op.out,
            marks: &mut $op.marks,
            counters: &$op.counters,
            _k: ::std::marker::PhantomData,
        }
    };
}
pub(super) use emitter;

/// Queues the event-time timers `requests` asked for on pane `b` of `key` (each once).
pub(super) fn register<K: Clone, Acc, Tr>(
    timers: &mut TimerQueue<(K, TimeWindow)>,
    requests: &mut Vec<TriggerTimerRequest>,
    key: &K,
    b: &mut Bucket<Acc, Tr>,
) {
    for r in requests.drain(..) {
        if let TriggerTimerRequest::EventTime(t) = r {
            if !b.timers.contains(&t) {
                b.timers.push(t);
                timers.push(t, (key.clone(), b.window));
            }
        }
    }
}
