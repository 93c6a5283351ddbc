// Three orders three minutes apart, with their order time, but the source is given only
// the orders: nothing chose their event time, so the one-minute window must not run.
use std::time::Duration;
use streaming::time::TumblingEventTimeWindows;
use streaming::{pipeline, MemoryEnv};

#[derive(Clone)]
struct Order {
    customer: &'static str,
    amount: u64,
    placed_ms: i64,
}

fn main() {
    let env = MemoryEnv::new();
    let orders = vec![
        Order { customer: "ann", amount: 10, placed_ms: 0 },
        Order { customer: "ann", amount: 20, placed_ms: 180_000 },
        Order { customer: "ann", amount: 30, placed_ms: 360_000 },
    ];
    let sums = pipeline! {
        env.from_collection(orders)
            .key_by(|o: &Order| o.customer)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .sum_by(|o: &Order| o.amount)
            .collect_vec()
    };
    let _ = sums;
}
