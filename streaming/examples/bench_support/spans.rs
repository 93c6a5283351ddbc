//! `--spans`: what the engine's tracing spans (`take`, `batch`, `commit`, `checkpoint`)
//! cost the keyed count. One global subscriber that listens only while a flag is set:
//! rounds alternate not listening (spans not created: the state of a job without a
//! subscriber or with spans filtered out, plus one `enabled` call per span) and listening
//! (every span created, entered and closed by a subscriber that keeps nothing). Also the
//! cost of the two spans each batch opens, not listened to, against a batch's time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

static LISTENING: AtomicBool = AtomicBool::new(false);

/// Listens to spans while [`LISTENING`] is set; keeps nothing.
struct Toggle(AtomicU64);

impl Subscriber for Toggle {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.is_span() && LISTENING.load(Ordering::Relaxed)
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nanoseconds per batch of the two spans a batch opens (`batch`, `commit`), not
/// listened to.
fn spans_per_batch_ns() -> f64 {
    let (job, topic, group) = ("bench", "t", "g");
    let rounds = 2_000_000u32;
    let started = Instant::now();
    for p in 0..rounds {
        let batch = tracing::info_span!("batch", job = %job, topic = %topic, group = %group, partition = p, records = 100u64);
        let commit = tracing::info_span!("commit", job = %job, topic = %topic, group = %group, partition = p, records = 100usize);
        let (entered_batch, entered_commit) = (batch.enter(), commit.enter());
        std::hint::black_box((&entered_batch, &entered_commit));
    }
    started.elapsed().as_nanos() as f64 / f64::from(rounds)
}

/// Runs `count` (the keyed count's msg/s over `n` messages) `repeats` times each way.
pub(crate) fn spans_main(n: usize, repeats: usize, count: impl Fn(usize) -> f64) {
    tracing::subscriber::set_global_default(Toggle(AtomicU64::new(0))).expect("no subscriber yet");
    println!("| round | spans not listened to (msg/s) | spans listened to (msg/s) | ratio |");
    println!("|---|---|---|---|");
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for r in 1..=repeats {
        LISTENING.store(false, Ordering::Relaxed);
        let a = count(n);
        LISTENING.store(true, Ordering::Relaxed);
        let b = count(n);
        LISTENING.store(false, Ordering::Relaxed);
        println!("| {r} | {a:.0} | {b:.0} | {:.3} |", b / a);
        off.push(a);
        on.push(b);
    }
    let (off, on) = (median(off), median(on));
    println!("| median | {off:.0} | {on:.0} | {:.3} |", on / off);
    let ns = spans_per_batch_ns();
    // Batches of 100 messages: one batch takes 100 / (msg/s) seconds.
    let batch_ns = 100.0 / off * 1e9;
    println!();
    println!(
        "The two spans of a batch, not listened to: {ns:.1} ns per batch = {:.5} % of a batch ({batch_ns:.0} ns at {off:.0} msg/s).",
        ns / batch_ns * 100.0
    );
}
