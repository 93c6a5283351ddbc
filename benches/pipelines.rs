//! `pipeline!` and the builder API against hand-written loops: a 4-operator stateless
//! chain over 10 M `u64`, a rolling word count and a keyed `ValueState` count in `process`.
//!
//! `cargo bench --bench pipelines`; figures in BENCHMARKS.md.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::collections::HashMap;

mod support;
use support::workloads::*;

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
