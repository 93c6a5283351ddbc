//! `pipeline!` and the builder API against hand-written loops: a 4-operator stateless
//! chain over 10 M `u64`, a rolling word count and a keyed `ValueState` count in `process`.
//!
//! `cargo bench --bench pipelines`; figures in BENCHMARKS.md.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::collections::HashMap;
use streaming::{pipeline, MemoryEnv};

const N: u64 = 10_000_000;

#[allow(clippy::manual_is_multiple_of)] // the same code as the builder and hand variants
fn chain_macro(n: u64) -> u64 {
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

fn chain_builder(n: u64) -> u64 {
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

fn chain_hand(n: u64) -> u64 {
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
fn corpus() -> Vec<String> {
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

fn word_count_macro(lines: &'static [String], on_update: impl FnMut((&'static str, u64))) {
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

fn word_count_builder(lines: &'static [String], on_update: impl FnMut((&'static str, u64))) {
    MemoryEnv::new()
        .from_collection(lines)
        .flat_map(|l| l.split_whitespace())
        .map(|w| (w, 1u64))
        .key_by(|p| p.0)
        .reduce(|a, b| (a.0, a.1 + b.1))
        .sink(on_update)
        .unwrap();
}

fn word_count_hand(lines: &[String]) -> HashMap<&str, u64> {
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
fn word_count_hand_emitting<'a>(
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
fn value_state_macro(lines: &'static [String], on_update: impl FnMut(u64)) {
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
fn value_state_hand(lines: &[String], mut on_update: impl FnMut(u64)) -> HashMap<&str, u64> {
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

fn benches(c: &mut Criterion) {
    assert_eq!(chain_macro(100_000), chain_hand(100_000));
    assert_eq!(chain_builder(100_000), chain_hand(100_000));
    let mut g = c.benchmark_group("chain_10M_u64");
    g.throughput(Throughput::Elements(N));
    g.sample_size(20);
    g.bench_function("pipeline_macro", |b| b.iter(|| chain_macro(black_box(N))));
    g.bench_function("builder", |b| b.iter(|| chain_builder(black_box(N))));
    g.bench_function("hand_loop", |b| b.iter(|| chain_hand(black_box(N))));
    g.finish();

    let lines: &'static [String] = Box::leak(corpus().into_boxed_slice());
    let mut from_macro = HashMap::new();
    word_count_macro(lines, |(w, n)| {
        from_macro.insert(w, n);
    });
    assert_eq!(from_macro, word_count_hand(lines));
    let mut from_hand = HashMap::new();
    word_count_hand_emitting(lines, |(w, n)| {
        from_hand.insert(w, n);
    });
    assert_eq!(from_macro, from_hand);
    let mut g = c.benchmark_group("word_count_1.6M_words");
    g.throughput(Throughput::Elements(1_600_000));
    g.sample_size(20);
    g.bench_function("pipeline_macro", |b| {
        b.iter(|| {
            let mut updates = 0u64;
            word_count_macro(black_box(lines), |(_, n)| updates += black_box(n) & 1);
            updates
        })
    });
    g.bench_function("builder", |b| {
        b.iter(|| {
            let mut updates = 0u64;
            word_count_builder(black_box(lines), |(_, n)| updates += black_box(n) & 1);
            updates
        })
    });
    g.bench_function("hand_loop", |b| {
        b.iter(|| word_count_hand(black_box(lines)))
    });
    g.bench_function("hand_loop_emitting", |b| {
        b.iter(|| {
            let mut updates = 0u64;
            word_count_hand_emitting(black_box(lines), |(_, n)| updates += black_box(n) & 1);
            updates
        })
    });
    g.finish();

    let (mut from_macro, mut from_hand) = (0u64, 0u64);
    value_state_macro(lines, |n| from_macro += n);
    value_state_hand(lines, |n| from_hand += n);
    assert_eq!(from_macro, from_hand);
    let mut g = c.benchmark_group("value_state_count_1.6M_words");
    g.throughput(Throughput::Elements(1_600_000));
    g.sample_size(20);
    g.bench_function("pipeline_macro", |b| {
        b.iter(|| {
            let mut updates = 0u64;
            value_state_macro(black_box(lines), |n| updates += black_box(n) & 1);
            updates
        })
    });
    g.bench_function("hand_loop", |b| {
        b.iter(|| {
            let mut updates = 0u64;
            value_state_hand(black_box(lines), |n| updates += black_box(n) & 1);
            updates
        })
    });
    g.finish();
}

criterion_group!(pipelines, benches);
criterion_main!(pipelines);
