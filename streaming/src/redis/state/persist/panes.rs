//! [`Persist`] for window state: one hash field per (key, window) pane, written only when
//! the pane changed.
//!
//! Field: `[key, window start, window end]` as JSON (e.g. `["k1",1700000000000,1700000060000]`).
//! Value: `[accumulator, trigger state, flags, event-time timers, last arrival]` as JSON,
//! flags bit 0 = the pane has content, bit 1 = content not emitted yet (e.g.
//! `[3,null,3,[1700000059999],0]`). A batch that changes a key's panes rewrites only the
//! panes whose stored value changed and deletes the fields of panes that are gone.

use super::*;
use crate::ops::window::{KeyPanes, PaneDigests};
use crate::time::TimeWindow;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::hash::Hasher;

/// A pane's stored value (see the module docs).
#[derive(Serialize)]
struct PaneOut<'a, Acc, Tr>(&'a Acc, &'a Tr, u8, &'a [i64], u64);

#[derive(serde::Deserialize)]
struct PaneIn<Acc, Tr>(Acc, Tr, u8, Vec<i64>, u64);

const HAS_CONTENT: u8 = 1;
const PENDING: u8 = 2;

fn pane_field<K: Serialize>(operator: &str, key: &K, w: &TimeWindow) -> Result<String, Error> {
    serde_json::to_string(&(key, w.start(), w.end()))
        .map_err(|e| decode_err(operator, PANES_STATE, e))
}

fn encode<Acc: Serialize, Tr: Serialize>(
    operator: &str,
    b: &Bucket<Acc, Tr>,
) -> Result<String, Error> {
    let flags = (u8::from(b.has_content) * HAS_CONTENT) | (u8::from(b.pending) * PENDING);
    serde_json::to_string(&PaneOut(
        &b.acc,
        &b.trigger,
        flags,
        &b.timers,
        b.last_arrival,
    ))
    .map_err(|e| decode_err(operator, PANES_STATE, e))
}

/// The key and window of pane field `field`; `None` (with a warning) when it is no pane's
/// field: no record can use it, so it is skipped and left in Redis.
fn pane_key<K: DeserializeOwned>(operator: &str, field: &str) -> Option<(K, TimeWindow)> {
    let why = match serde_json::from_str::<(K, i64, i64)>(field) {
        Ok((key, start, end)) if end > start => return Some((key, TimeWindow::new(start, end))),
        Ok((_, start, end)) => format!("window end {end} <= start {start}"),
        Err(e) => e.to_string(),
    };
    tracing::warn!(
        operator,
        state = PANES_STATE,
        field,
        "stored field is no pane's (skipped, left in Redis): {why}"
    );
    None
}

fn decode_pane<Acc: DeserializeOwned, Tr: DeserializeOwned>(
    window: TimeWindow,
    value: &str,
) -> Result<Bucket<Acc, Tr>, serde_json::Error> {
    let PaneIn(acc, trigger, flags, timers, last_arrival) = serde_json::from_str(value)?;
    Ok(Bucket {
        window,
        acc,
        trigger,
        has_content: flags & HAS_CONTENT != 0,
        pending: flags & PENDING != 0,
        timers: SmallVec::from_slice(&timers),
        last_arrival,
    })
}

/// The digest of a pane whose stored value did not decode: no pane's, so the pane is
/// written when it is next loaded and changed.
const UNDECODED: u64 = 0;

fn digest(value: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(value.as_bytes());
    h.finish()
}

type Entry<Acc, Tr> = KeyPanes<Acc, Tr, PaneDigests>;

impl<K, Acc, Tr, C: KeyChanges<K>> Sealed for WindowState<K, Acc, Tr, C> {}

impl<K, Acc, Tr> WindowState<K, Acc, Tr, ChangedKeys<K>>
where
    K: Hash + Eq + Clone + 'static,
{
    /// Notes stored pane `window` of `key` as committed (unless it is): a fetch of the
    /// key asks for it.
    fn remember_pane(&mut self, key: K, window: TimeWindow, digest: u64) {
        let written = &mut self.keys.entry(key).or_default().written;
        if !written.iter().any(|(w, _)| *w == window) {
            written.push((window, digest));
        }
    }

    /// Takes `key`'s panes out of memory with their queued timers; what was written of
    /// them stays (a fetch of the key asks for it).
    fn unload(&mut self, key: &K) {
        let Some(entry) = self.keys.get_mut(key) else {
            return;
        };
        for b in std::mem::take(&mut entry.panes) {
            for &t in &b.timers {
                self.timers.remove(t, &(key.clone(), b.window));
            }
        }
        if entry.is_unused() {
            self.keys.remove(key);
        }
    }

    /// Puts back the written panes of the keys the batch's drains changed (a rollback).
    fn restore_written(&mut self) {
        while let Some((k, before)) = self.undo.pop() {
            match self.keys.get_mut(&k) {
                Some(entry) => {
                    entry.written = before;
                    if entry.is_unused() {
                        self.keys.remove(&k);
                    }
                }
                None if before.is_empty() => {}
                None => {
                    let entry = Entry {
                        panes: SmallVec::new(),
                        written: before,
                    };
                    self.keys.insert(k, entry);
                }
            }
        }
    }

    /// `key`'s stored pane `window` does not decode: its panes in memory go (with their
    /// queued timers; their fields stay known, so a fetch of the key asks for them all) and
    /// its records fail until a rollback wants it again.
    fn poison(&mut self, key: K, window: TimeWindow, why: Poison) {
        self.unload(&key);
        self.remember_pane(key.clone(), window, UNDECODED);
        self.changes.lazy.poison(key, why);
    }
}

impl<K, Acc, Tr> Persist for WindowState<K, Acc, Tr, ChangedKeys<K>>
where
    K: Serialize + DeserializeOwned + Hash + Eq + Clone + 'static,
    Acc: Serialize + DeserializeOwned + 'static,
    Tr: Serialize + DeserializeOwned + 'static,
{
    fn configure(&mut self, limits: &StateLimits) {
        self.max_fires = limits.window_max_fires_per_record;
    }

    fn has_event_time_work(&self) -> bool {
        self.keys.values().any(|e| !e.panes.is_empty())
    }

    fn timers(&self) -> Option<usize> {
        Some(self.timers.len())
    }

    fn schema(&mut self, operator: &str, gate: &SchemaGate) -> Result<(), Error> {
        // `/2`: one field per pane (the layout before it, one field per key, is another
        // schema).
        let fingerprint = format!(
            "{PANES_STATE}/2<{}, {}> by {}",
            short_type_name::<Acc>(),
            short_type_name::<Tr>(),
            short_type_name::<K>()
        );
        gate.admit(operator, PANES_STATE, &fingerprint)?;
        Ok(())
    }

    /// A pane that does not decode poisons its key (see [`Lazy`]): none of the key's
    /// panes stays in memory.
    fn load(&mut self, operator: &str, state: &str, entries: StoredEntries) -> Result<(), Error> {
        let mut loaded: HashMap<K, Vec<Bucket<Acc, Tr>>> = HashMap::new();
        for (field, value) in entries {
            let Some((k, window)) = pane_key::<K>(operator, &field) else {
                continue;
            };
            if self.changes.lazy.is_poisoned(&k) {
                self.remember_pane(k, window, UNDECODED);
                continue;
            }
            let b = match decode_pane::<Acc, Tr>(window, &value) {
                Ok(b) => b,
                Err(e) => {
                    for b in loaded.remove(&k).unwrap_or_default() {
                        self.remember_pane(k.clone(), b.window, UNDECODED);
                    }
                    let key = serde_json::to_string(&k).unwrap_or_default();
                    let what = format!("{key} (pane field {field})");
                    self.poison(k, window, Poison::new(operator, state, &what, e));
                    continue;
                }
            };
            let in_memory = self
                .keys
                .get(&k)
                .is_some_and(|e| e.panes.iter().any(|p| p.window == b.window));
            let panes = loaded.entry(k).or_default();
            // `HSCAN` may return a field twice.
            if in_memory || panes.iter().any(|p| p.window == b.window) {
                continue;
            }
            panes.push(b);
        }
        for (k, mut panes) in loaded {
            panes.sort_by_key(|b| (b.window.start(), b.window.end()));
            let entry = self.keys.entry(k.clone()).or_default();
            for b in &panes {
                if !entry.written.iter().any(|(w, _)| *w == b.window) {
                    let value = encode(operator, b)?;
                    entry.written.push((b.window, digest(&value)));
                }
                // The timer queue is rebuilt from the panes' registered timers.
                for &t in &b.timers {
                    self.timers.push(t, (k.clone(), b.window));
                }
            }
            entry.panes.extend(panes);
        }
        Ok(())
    }

    fn drain(&mut self, operator: &str, out: &mut dyn FnMut(StateWrite<'_>)) -> Result<(), Error> {
        let WindowState {
            keys,
            changes,
            undo,
            ..
        } = self;
        for k in changes.drain() {
            // Neither panes nor written ones: nothing to write.
            let Some(entry) = keys.get_mut(&k) else {
                continue;
            };
            let before = &entry.written;
            let mut now = PaneDigests::with_capacity(entry.panes.len());
            for b in &entry.panes {
                let value = encode(operator, b)?;
                let d = digest(&value);
                now.push((b.window, d));
                if !before.contains(&(b.window, d)) {
                    out((
                        PANES_STATE,
                        pane_field(operator, &k, &b.window)?,
                        Some(value),
                    ));
                }
            }
            for (w, _) in before {
                if !now.iter().any(|(n, _)| n == w) {
                    out((PANES_STATE, pane_field(operator, &k, w)?, None));
                }
            }
            let old = std::mem::replace(&mut entry.written, now);
            let has_panes = !entry.panes.is_empty();
            if !has_panes {
                // Nothing written any more (one digest per pane).
                keys.remove(&k);
            }
            if has_panes || !old.is_empty() {
                undo.push((k, old));
            }
        }
        Ok(())
    }

    fn committed(&mut self) {
        self.changes.lazy.committed();
        self.undo.clear();
    }

    fn has_wanted(&self) -> bool {
        !self.changes.lazy.wanted.is_empty()
    }

    fn wanted(&mut self, operator: &str, out: &mut dyn FnMut(&str, String)) -> Result<(), Error> {
        for k in &self.changes.lazy.wanted {
            for (w, _) in self.keys.get(k).into_iter().flat_map(|e| &e.written) {
                out(PANES_STATE, pane_field(operator, k, w)?);
            }
        }
        Ok(())
    }

    fn fetched(&mut self) {
        self.changes.lazy.wanted.clear();
    }

    fn roll_back(&mut self, operator: &str, written: &[(&str, &str)]) -> Result<(), Error> {
        self.restore_written();
        let mut keys: Vec<K> = self.changes.drain().collect();
        for (state, field) in written.iter().filter(|(s, _)| *s == PANES_STATE) {
            let (k, _, _): (K, i64, i64) =
                serde_json::from_str(field).map_err(|e| decode_err(operator, state, e))?;
            keys.push(k);
        }
        for k in keys {
            // The key's queued timers go with its panes; loading them again queues the
            // committed ones.
            self.unload(&k);
            self.changes.lazy.forget(k);
        }
        Ok(())
    }

    fn cached(&self) -> usize {
        self.keys.len()
    }

    adopt_same_type!();
}
