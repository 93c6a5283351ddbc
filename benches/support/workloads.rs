//! The workloads of `benches/pipelines.rs` and `examples/pipeline_ratios.rs`: each as
//! `pipeline!`, as builder chain (some) and as a hand-written loop.
#![allow(dead_code)] // each includer uses its own subset

use std::collections::HashMap;
use std::hint::black_box;
use streaming::{pipeline, MemoryEnv};

pub(crate) const N: u64 = 10_000_000;

#[allow(clippy::manual_is_multiple_of)] // the same code as the builder and hand variants
pub(crate) fn chain_macro(n: u64) -> u64 {
    let mut sum = 0u64;
    let env = MemoryEnv::new();
    pipeline! {
        env.from_collection(0..n)
            .map(|x: u64| x.wrapping_mul(3))
            .filter(|x: &u64| x % 7 != 0)
            .map(|x: u64| x + 1)
            .filter(|x: &u64| x % 2 == 0)
            .sink(|x: u64| sum = sum.wrapping_add(x))
    }
    .unwrap();
    sum
}

pub(crate) fn chain_builder(n: u64) -> u64 {
    let mut sum = 0u64;
    MemoryEnv::new()
        .from_collection(0..n)
        .map(|x| x.wrapping_mul(3))
        .filter(|x| x % 7 != 0)
        .map(|x| x + 1)
        .filter(|x| x % 2 == 0)
        .sink(|x| sum = sum.wrapping_add(x))
        .unwrap();
    sum
}

pub(crate) fn chain_hand(n: u64) -> u64 {
    let mut sum = 0u64;
    for x in 0..n {
        let x = x.wrapping_mul(3);
        if x % 7 == 0 {
            continue;
        }
        let x = x + 1;
        if x % 2 != 0 {
            continue;
        }
        sum = sum.wrapping_add(x);
    }
    sum
}

/// 200 k lines of 8 words over a 5,000-word vocabulary (deterministic LCG).
pub(crate) fn corpus() -> Vec<String> {
    let mut seed = 42u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % 5000
    };
    (0..200_000)
        .map(|_| {
            (0..8)
                .map(|_| format!("w{}", next()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

pub(crate) fn word_count_macro(
    lines: &'static [String],
    on_update: impl FnMut((&'static str, u64)),
) {
    let env = MemoryEnv::new();
    pipeline! {
        env.from_collection(lines)
            .flat_map(|l: &'static String| l.split_whitespace())
            .map(|w: &'static str| (w, 1u64))
            .key_by(|p: &(&'static str, u64)| p.0)
            .reduce(|a, b| (a.0, a.1 + b.1))
            .sink(on_update)
    }
    .unwrap();
}

pub(crate) fn word_count_builder(
    lines: &'static [String],
    on_update: impl FnMut((&'static str, u64)),
) {
    MemoryEnv::new()
        .from_collection(lines)
        .flat_map(|l| l.split_whitespace())
        .map(|w| (w, 1u64))
        .key_by(|p| p.0)
        .reduce(|a, b| (a.0, a.1 + b.1))
        .sink(on_update)
        .unwrap();
}

pub(crate) fn word_count_hand(lines: &[String]) -> HashMap<&str, u64> {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for l in lines {
        for w in l.split_whitespace() {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    counts
}

/// The hand loop that does what the rolling reduce does: counts and hands every updated
/// `(word, count)` to the same sink closure.
pub(crate) fn word_count_hand_emitting<'a>(
    lines: &'a [String],
    mut on_update: impl FnMut((&'a str, u64)),
) -> HashMap<&'a str, u64> {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for l in lines {
        for w in l.split_whitespace() {
            let n = counts.entry(w).or_insert(0);
            *n += 1;
            on_update((w, *n));
        }
    }
    counts
}

/// Counts each word in a `ValueState<u64>` of a keyed process function and emits the new
/// count (the per-record state access of `ctx.state(..)`).
pub(crate) fn value_state_macro(lines: &'static [String], on_update: impl FnMut(u64)) {
    let env = MemoryEnv::new();
    pipeline! {
        env.from_collection(lines)
            .flat_map(|l: &'static String| l.split_whitespace())
            .key_by(|w: &&'static str| *w)
            .state(count: ValueState<u64> = 0)
            .process(|_w: &'static str, ctx, out| {
                let mut count = ctx.state(count)?;
                let n = count.value() + 1;
                count.update(n);
                out.collect(n);
                Ok(())
            })
            .sink(on_update)
    }
    .unwrap();
}

/// The same count as a hand loop over a `HashMap` with the std hasher (as the keyed state).
pub(crate) fn value_state_hand(
    lines: &[String],
    mut on_update: impl FnMut(u64),
) -> HashMap<&str, u64> {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for l in lines {
        for w in l.split_whitespace() {
            let n = counts.entry(w).or_insert(0);
            *n += 1;
            on_update(*n);
        }
    }
    counts
}

/// The value-state count as a fragment (a function that runs on every engine): keys are
/// owned `String`s, as keyed state on the Redis engine needs.
pub(crate) fn value_state_fragment(
    words: streaming::fragment::Input<String, streaming::time::NoEventTime>,
) -> impl streaming::fragment::Fragment<String, streaming::time::NoEventTime, Out = u64> {
    pipeline! {
        words
            .key_by(|w: &String| w.clone())
            .state(count: ValueState<u64> = 0)
            .process(|_w: String, ctx, out| {
                let mut count = ctx.state(count)?;
                let n = count.value() + 1;
                count.update(n);
                out.collect(n);
                Ok(())
            })
    }
}

/// [`value_state_fragment`] spliced behind a collection on the memory engine.
pub(crate) fn value_state_fragment_memory(words: &'static [String], on_update: impl FnMut(u64)) {
    MemoryEnv::new()
        .from_collection(words.iter().cloned())
        .transform(value_state_fragment)
        .sink(on_update)
        .unwrap();
}

/// [`value_state_fragment`] under the test driver: one `push` per word, outputs taken
/// every 1 024 words.
pub(crate) fn value_state_fragment_driver(
    words: &'static [String],
    mut on_update: impl FnMut(u64),
) {
    let mut driver = streaming::testing::TestDriver::new(value_state_fragment).unwrap();
    for (i, w) in words.iter().enumerate() {
        driver.push(w.clone(), i as i64).unwrap();
        if i % 1024 == 1023 {
            driver.output().into_iter().for_each(&mut on_update);
        }
    }
    driver.finish().unwrap();
    driver.output().into_iter().for_each(on_update);
}

/// The interval join's inputs: `n` orders `(customer, order id)` every 10 ms and `n`
/// payments `(customer, cents)` 5 ms after each order, over 1,000 customers, each with its
/// event time (ms).
pub(crate) type Orders = Vec<((u32, u32), i64)>;
pub(crate) type Payments = Vec<((u32, u64), i64)>;

pub(crate) fn join_inputs(n: u32) -> (Orders, Payments) {
    let orders = (0..n).map(|i| ((i % 1000, i), i64::from(i) * 10)).collect();
    let payments = (0..n)
        .map(|i| (((i * 7) % 1000, u64::from(i)), i64::from(i) * 10 + 5))
        .collect();
    (orders, payments)
}

/// Bounds of the join: a payment within 0..=2 s after its order.
const JOIN_UPPER_MS: i64 = 2_000;

/// The interval join on the memory engine; `on_pair(order id + cents)` per joined pair.
pub(crate) fn interval_join_engine(orders: &Orders, payments: &Payments, on_pair: impl FnMut(u64)) {
    let env = MemoryEnv::new();
    env.from_timestamped_collection(orders.iter().copied())
        .key_by(|o: &(u32, u32)| o.0)
        .interval_join(
            env.from_timestamped_collection(payments.iter().copied())
                .key_by(|p: &(u32, u64)| p.0),
        )
        .between(0, JOIN_UPPER_MS)
        .unwrap()
        .process(|o: &(u32, u32), p: &(u32, u64)| u64::from(o.1) + p.1)
        .for_each(on_pair)
        .unwrap();
}

/// The same join by hand with the same buffering: per key, each side's elements with
/// their times; each element probes the other side's buffer, then joins its own; the end
/// of input (the run's only watermark) drops every buffer, key by key. Orders first, then
/// payments, as the engine runs them.
pub(crate) fn interval_join_hand(
    orders: &Orders,
    payments: &Payments,
    mut on_pair: impl FnMut(u64),
) {
    type Buffers = (Vec<((u32, u32), i64)>, Vec<((u32, u64), i64)>);
    let mut state: HashMap<u32, Buffers> = HashMap::new();
    for &(order, t) in orders {
        let buffers = state.entry(order.0).or_default();
        for &(payment, tp) in &buffers.1 {
            if t <= tp && tp <= t + JOIN_UPPER_MS {
                on_pair(u64::from(order.1) + payment.1);
            }
        }
        buffers.0.push((order, t));
    }
    for &(payment, tp) in payments {
        let buffers = state.entry(payment.0).or_default();
        for &(order, t) in &buffers.0 {
            if t <= tp && tp <= t + JOIN_UPPER_MS {
                on_pair(u64::from(order.1) + payment.1);
            }
        }
        buffers.1.push((payment, tp));
    }
    for (_, buffers) in state.drain() {
        drop(black_box(buffers));
    }
}

/// One input's buffer in [`interval_join_hand_probed`]: times apart from the elements, and
/// whether the times never decrease.
struct ProbedSide<T> {
    times: Vec<i64>,
    elements: Vec<T>,
    in_order: bool,
}

impl<T> Default for ProbedSide<T> {
    fn default() -> Self {
        ProbedSide {
            times: Vec::new(),
            elements: Vec::new(),
            in_order: true,
        }
    }
}

impl<T> ProbedSide<T> {
    /// Each element within `[low, high]`, in arrival order: a binary search for the run of
    /// them while the times are in order, else a scan.
    fn probe(&self, low: i64, high: i64, mut meet: impl FnMut(&T)) {
        if self.in_order {
            let from = self.times.partition_point(|t| *t < low);
            let run = self.times[from..].iter().take_while(|t| **t <= high);
            run.zip(&self.elements[from..]).for_each(|(_, e)| meet(e));
            return;
        }
        for (t, e) in self.times.iter().zip(&self.elements) {
            if low <= *t && *t <= high {
                meet(e);
            }
        }
    }

    fn push(&mut self, element: T, time: i64) {
        self.in_order &= self.times.last().is_none_or(|last| *last <= time);
        self.times.push(time);
        self.elements.push(element);
    }
}

/// [`interval_join_hand`] with the memory engine's probe: per key, each side's times apart
/// from its elements, and the run of times an element meets found by binary search while
/// the side's times are in order (here always: each key's orders arrive in time order).
pub(crate) fn interval_join_hand_probed(
    orders: &Orders,
    payments: &Payments,
    mut on_pair: impl FnMut(u64),
) {
    type Buffers = (ProbedSide<(u32, u32)>, ProbedSide<(u32, u64)>);
    let mut state: HashMap<u32, Buffers> = HashMap::new();
    for &(order, t) in orders {
        let buffers = state.entry(order.0).or_default();
        (buffers.1).probe(t, t + JOIN_UPPER_MS, |p| on_pair(u64::from(order.1) + p.1));
        buffers.0.push(order, t);
    }
    for &(payment, tp) in payments {
        let buffers = state.entry(payment.0).or_default();
        (buffers.0).probe(tp - JOIN_UPPER_MS, tp, |o| {
            on_pair(u64::from(o.1) + payment.1)
        });
        buffers.1.push(payment, tp);
    }
    for (_, buffers) in state.drain() {
        drop(black_box(buffers));
    }
}
