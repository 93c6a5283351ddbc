//! State size sampling and hot keys: which hashes a commit samples (`HLEN`), and the
//! hot-key policy armed for a hash whose sampled size reached the threshold.

use crate::ops::OperatorId;
use crate::redis::partition::context::Ctx;
use crate::redis::state::pending::{Pending, PendingHash};
use crate::redis::state::persist::WATERMARK_STATE;
use crate::redis::{HotKeyPolicy, RedisRuntimeConfig};
use crate::Error;
use std::collections::HashMap;
use tokio::time::Instant;

/// A hash found hot: its policy applies until `until`.
struct HotArm {
    until: Instant,
}

/// A partition's state size samples and the hashes found hot.
#[derive(Default)]
pub(in crate::redis) struct HotKeys {
    /// State field writes committed so far (drives the size sampling).
    writes: u64,
    /// Hashes found hot, by key.
    hot: HashMap<String, HotArm>,
    /// Last sampled field count per hash.
    fields: HashMap<String, u64>,
}

impl HotKeys {
    fn is_armed(&self, key: &str) -> bool {
        self.hot.get(key).is_some_and(|a| Instant::now() < a.until)
    }

    pub(in crate::redis) fn any_armed(&self) -> bool {
        let now = Instant::now();
        self.hot.values().any(|a| now < a.until)
    }

    /// [`HotKeyPolicy::FailFast`]: a record's write (`touched`, indices into `pending`) to an armed hot
    /// hash fails the record.
    pub(in crate::redis) fn check(
        &self,
        pending: &Pending,
        touched: &[usize],
    ) -> Result<(), Error> {
        for &i in touched {
            let h = &pending.hashes[i];
            if self.is_armed(&h.key) {
                return Err(Error::HotKey {
                    operator: OperatorId::from_text(h.operator.as_str()),
                    state: h.state.clone(),
                    fields: self.fields.get(&h.key).copied().unwrap_or(0),
                });
            }
        }
        Ok(())
    }

    /// [`HotKeyPolicy::Throttle`]: back-pressure before writing to a hot hash.
    pub(in crate::redis) async fn throttle(&self, ctx: &Ctx<'_>, pending: &Pending) {
        let config = &ctx.spec.config;
        if config.hot_key_policy() == HotKeyPolicy::Throttle
            && pending
                .hashes
                .iter()
                .any(|h| h.writes() && self.is_armed(&h.key))
        {
            if let Ok(mut h) = ctx.job.hot.lock() {
                h.throttled += 1;
            }
            tokio::time::sleep(config.hot_key_throttle_max()).await;
        }
    }

    /// Counts the commit's field writes; per hash, whether the commit samples its size
    /// (its writes crossed a multiple of the report interval).
    pub(in crate::redis) fn sample_marks(
        &mut self,
        config: &RedisRuntimeConfig,
        pending: &Pending,
    ) -> Vec<bool> {
        let every = match (
            config.state_size_report_every_n_writes(),
            config.hot_key_fields_warn_threshold(),
        ) {
            (0, 0) => 0,
            (0, _) => 1,
            (n, _) => n,
        };
        let mut sampled = Vec::with_capacity(pending.hashes.len());
        for h in &pending.hashes {
            if h.state == WATERMARK_STATE {
                // The engine's own bookkeeping, not user state: not sampled.
                sampled.push(false);
                continue;
            }
            let before = self.writes;
            self.writes += (h.fields.len() + h.appends.len()) as u64;
            sampled.push(every > 0 && self.writes / every > before / every);
        }
        sampled
    }

    /// Records a sampled `HLEN`; at the threshold, warns (once per interval per hash) and
    /// arms the hot-key policy for the interval. `true` when it warned.
    pub(in crate::redis) fn sampled_size(
        &mut self,
        ctx: &Ctx<'_>,
        h: &PendingHash,
        size: u64,
    ) -> bool {
        let config = &ctx.spec.config;
        self.fields.insert(h.key.clone(), size);
        let threshold = config.hot_key_fields_warn_threshold();
        let hot = threshold > 0 && size >= threshold;
        let warn = hot && !self.is_armed(&h.key);
        if let Ok(mut stats) = ctx.job.hot.lock() {
            stats.sizes.insert(h.key.clone(), size);
            if warn {
                stats.warnings += 1;
            }
        }
        tracing::debug!(key = %h.key, fields = size, "state size sampled");
        if warn {
            let interval = config.hot_key_warn_interval();
            tracing::warn!(job = %config.job_name(), operator = %h.operator, state = %h.state,
                           key = %h.key, fields = size, threshold, policy = ?config.hot_key_policy(),
                           "hot key: state hash has {size} fields (threshold {threshold}); policy armed for {interval:?}");
            self.hot.insert(
                h.key.clone(),
                HotArm {
                    until: Instant::now() + interval,
                },
            );
        }
        warn
    }
}
