// The builder form of the three orders: the window does not compile on a stream whose
// event time was never chosen.
use std::time::Duration;
use streaming::time::TumblingEventTimeWindows;
use streaming::MemoryEnv;

fn main() -> Result<(), streaming::Error> {
    let env = MemoryEnv::new();
    let orders = vec![("ann", 10u64, 0i64), ("ann", 20, 180_000), ("ann", 30, 360_000)];
    let sums = env
        .from_collection(orders)
        .key_by(|o: &(&str, u64, i64)| o.0)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(60))?)
        .sum_by(|o: &(&str, u64, i64)| o.1)
        .collect_vec()?;
    let _ = sums;
    Ok(())
}
