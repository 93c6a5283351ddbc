//! The in-memory workloads of `benches/pipelines.rs` timed **interleaved**: every round
//! runs each variant once, in turn, so a slow phase of a shared machine hits all variants
//! alike; the speed of `pipeline!` is reported as a ratio to its hand-written loop
//! (hand time / `pipeline!` time, so > 1 means `pipeline!` is faster), by the fastest round
//! and by the median round. The last workload compares the test driver with the memory
//! engine running the same fragment (memory time / driver time).
//!
//! ```sh
//! cargo run --release --example pipeline_ratios            # 15 rounds
//! cargo run --release --example pipeline_ratios -- 40      # another number of rounds
//! cargo run --release --example pipeline_ratios -- 40 value # the workloads named so
//! ```
//!
//! Output: one line per workload; a run on the 2-vCPU machine of BENCHMARKS.md:
//!
//! ```text
//! chain: pipeline! min 8.6 ms med 8.8 ms | hand min 9.2 ms med 9.5 ms | speed min 1.08x med 1.08x
//! word count (hand loop emitting every update): pipeline! min 31.2 ms med 32.9 ms | hand min 31.8 ms med 33.2 ms | speed min 1.02x med 1.01x
//! word count (hand loop counting only): pipeline! min 31.8 ms med 40.4 ms | hand min 30.8 ms med 37.1 ms | speed min 0.97x med 0.92x
//! value state count: pipeline! min 35.8 ms med 42.3 ms | hand min 32.5 ms med 36.8 ms | speed min 0.91x med 0.87x
//! ```
#![allow(missing_docs)]

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../benches/support/workloads.rs"]
mod workloads;
use workloads::*;

/// One timed variant: its name and a run of the whole workload.
type Variant<'a> = (&'static str, Box<dyn FnMut() + 'a>);

/// The pairs a variant of the interval join finds: their number and the sum of their
/// values.
fn join_pairs(join: impl FnOnce(&mut dyn FnMut(u64))) -> (u64, u64) {
    let mut found = (0u64, 0u64);
    join(&mut |n| found = (found.0 + 1, found.1.wrapping_add(n)));
    found
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(15, |s| s.parse().expect("rounds: a number"));
    let only = std::env::args().nth(2).unwrap_or_default();
    let lines: &'static [String] = Box::leak(corpus().into_boxed_slice());
    let words: &'static [String] = Box::leak(
        lines
            .iter()
            .flat_map(|l| l.split_whitespace().map(str::to_string))
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let (orders, payments) = join_inputs(100_000);
    // The join's variants find the same pairs.
    let engine_pairs = join_pairs(|f| interval_join_engine(&orders, &payments, f));
    assert!(engine_pairs.0 > 0);
    let hand = join_pairs(|f| interval_join_hand(&orders, &payments, f));
    let probed = join_pairs(|f| interval_join_hand_probed(&orders, &payments, f));
    assert_eq!((engine_pairs, engine_pairs), (hand, probed));
    let sink = Cell::new(0u64);
    let add = |n: u64| sink.set(sink.get().wrapping_add(black_box(n) & 1));
    let workloads: Vec<(&str, Vec<Variant<'_>>)> = vec![
        (
            "chain",
            vec![
                ("pipeline!", Box::new(|| add(chain_macro(black_box(N))))),
                ("hand", Box::new(|| add(chain_hand(black_box(N))))),
            ],
        ),
        (
            "word count (hand loop emitting every update)",
            vec![
                (
                    "pipeline!",
                    Box::new(|| word_count_macro(black_box(lines), |(_, n)| add(n))),
                ),
                (
                    "hand",
                    Box::new(|| {
                        word_count_hand_emitting(black_box(lines), |(_, n)| add(n));
                    }),
                ),
            ],
        ),
        (
            "word count (hand loop counting only)",
            vec![
                (
                    "pipeline!",
                    Box::new(|| word_count_macro(black_box(lines), |(_, n)| add(n))),
                ),
                (
                    "hand",
                    Box::new(|| add(word_count_hand(black_box(lines)).len() as u64)),
                ),
            ],
        ),
        (
            "value state count",
            vec![
                (
                    "pipeline!",
                    Box::new(|| value_state_macro(black_box(lines), add)),
                ),
                (
                    "hand",
                    Box::new(|| {
                        value_state_hand(black_box(lines), add);
                    }),
                ),
            ],
        ),
        (
            "value state count (test driver vs memory engine, one fragment)",
            vec![
                (
                    "driver",
                    Box::new(|| value_state_fragment_driver(black_box(words), add)),
                ),
                (
                    "memory engine",
                    Box::new(|| value_state_fragment_memory(black_box(words), add)),
                ),
            ],
        ),
        (
            "interval join (hand loop with the same buffering)",
            vec![
                (
                    "memory engine",
                    Box::new(|| interval_join_engine(black_box(&orders), &payments, add)),
                ),
                (
                    "hand",
                    Box::new(|| interval_join_hand(black_box(&orders), &payments, add)),
                ),
            ],
        ),
        (
            "interval join (hand loop with the engine's probe: times apart, binary search)",
            vec![
                (
                    "memory engine",
                    Box::new(|| interval_join_engine(black_box(&orders), &payments, add)),
                ),
                (
                    "hand",
                    Box::new(|| interval_join_hand_probed(black_box(&orders), &payments, add)),
                ),
            ],
        ),
    ];
    for (name, mut variants) in workloads {
        if !name.contains(only.as_str()) {
            continue;
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
        for round in 0..rounds + 1 {
            for i in 0..variants.len() {
                // Rotate the order so neither variant always runs first.
                let v = (i + round) % variants.len();
                let t = Instant::now();
                (variants[v].1)();
                if round > 0 {
                    times[v].push(t.elapsed()); // round 0 warms up
                }
            }
        }
        let stats: Vec<(Duration, Duration)> = times
            .iter_mut()
            .map(|t| {
                t.sort();
                (t[0], t[t.len() / 2])
            })
            .collect();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (pm, pmed) = stats[0];
        let (hm, hmed) = stats[1];
        println!(
            "{name}: {} min {:.1} ms med {:.1} ms | {} min {:.1} ms med {:.1} ms | speed min {:.2}x med {:.2}x",
            variants[0].0,
            ms(pm),
            ms(pmed),
            variants[1].0,
            ms(hm),
            ms(hmed),
            ms(hm) / ms(pm),
            ms(hmed) / ms(pmed),
        );
        variants.clear();
    }
    black_box(sink.get());
}
