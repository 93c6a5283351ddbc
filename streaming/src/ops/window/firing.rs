//! The timer path of the window operator: event-time timers firing panes, under the
//! per-record cap.

use super::functions::WindowFunction;
use super::state::{emitter, register, WindowState};
use super::WindowOperator;
use crate::ops::changes::KeyChanges;
use crate::ops::guard;
use crate::time::{TimeWindow, Trigger, TriggerContext};
use crate::Error;
use std::hash::Hash;
use std::rc::Rc;

// Firing needs only the panes, the triggers and the window function.
impl<KF, K, T, A, Tr, WF, L, E, C, N> WindowOperator<KF, K, T, A, Tr, WF, L, E, C, N>
where
    K: Hash + Eq + Clone,
    Tr: Trigger<T>,
    WF: WindowFunction<K, T>,
    C: KeyChanges<K>,
{
    /// Fires the event-time timers due at `watermark`: all of them at the final
    /// watermark, else at most `max_fires` (when set); the rest stay due and fire before
    /// the next record ([`Self::carry_over`]).
    pub(super) fn fire_timers(&mut self, watermark: i64) -> Result<(), Error> {
        let state = Rc::clone(&self.state);
        let mut st = state.borrow_mut();
        let limit = if st.max_fires == 0 || watermark == i64::MAX {
            usize::MAX
        } else {
            st.max_fires
        };
        self.carry = false;
        loop {
            if self.fired >= limit {
                self.carry = st.timers.has_due(watermark);
                break;
            }
            let Some((time, (key, window))) = st.timers.pop_due(watermark) else {
                break;
            };
            self.fired += 1;
            self.fire_one(&mut st, time, key, window, watermark)?;
        }
        Ok(())
    }

    /// With windows left due by the cap: fires the due timers of `key`'s panes before an
    /// element of `key` is added, so no element joins a window that is already due (the
    /// results stay those of an uncapped run; other keys' due windows keep waiting).
    pub(super) fn fire_key_due(&mut self, key: &K) -> Result<(), Error> {
        let watermark = self.watermark;
        let state = Rc::clone(&self.state);
        let mut st = state.borrow_mut();
        let Some(entry) = st.keys.get(key) else {
            return Ok(());
        };
        let mut due: Vec<(i64, TimeWindow)> = entry
            .panes
            .iter()
            .flat_map(|b| {
                b.timers
                    .iter()
                    .filter(|&&t| t <= watermark)
                    .map(move |&t| (t, b.window))
            })
            .collect();
        due.sort_by_key(|(t, w)| (*t, w.start(), w.end()));
        for (time, window) in due {
            self.fire_one(&mut st, time, key.clone(), window, watermark)?;
        }
        Ok(())
    }

    /// Runs event-time timer `time` of `key`'s pane `window` (if the pane still has it).
    fn fire_one(
        &mut self,
        st: &mut WindowState<K, WF::Acc, Tr, C>,
        time: i64,
        key: K,
        window: TimeWindow,
        watermark: i64,
    ) -> Result<(), Error> {
        let WindowState {
            keys,
            timers,
            changes,
            ..
        } = st;
        let Some(entry) = keys.get_mut(&key) else {
            return Ok(());
        };
        let panes = &mut entry.panes;
        changes.mark(&key);
        let Some(idx) = panes
            .iter()
            .position(|b| b.window == window && b.timers.contains(&time))
        else {
            return Ok(()); // the pane merged away, was cleaned up or already fired it
        };
        let b = &mut panes[idx];
        b.timers.retain(|t| *t != time);
        let mut ctx = TriggerContext {
            watermark,
            processing_time: watermark,
            timers: &mut self.requests,
        };
        let r = guard(&self.id, || {
            b.trigger.on_event_time(time, &window, &mut ctx)
        })?;
        register(timers, &mut self.requests, &key, b);
        let mut em = emitter!(self);
        em.apply(&key, b, r)?;
        if time == window.cleanup_time(self.lateness) {
            // Cleanup: contents never emitted are emitted once (nothing is dropped silently).
            if b.pending {
                em.emit(&key, b)?;
            }
            panes.swap_remove(idx);
            if entry.is_unused() {
                keys.remove(&key);
            }
        }
        Ok(())
    }
}
