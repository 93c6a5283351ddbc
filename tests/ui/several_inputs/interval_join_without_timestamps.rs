// An interval join matches elements by event time: the orders' timestamps were never
// chosen (`from_collection`), so the join has nothing to compare. The error is at the
// join of the stream without event time.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let paid = pipeline! {
        let payments = env.from_timestamped_collection(vec![((7u32, 30u64), 60_000)]);
        env.from_collection(vec![(7u32, "ada")])
            .key_by(|o: &(u32, &str)| o.0)
            .interval_join(payments.key_by(|p: &(u32, u64)| p.0))
            .between(0, 600_000)
            .process(|o: &(u32, &str), p: &(u32, u64)| (o.1, p.1))
            .collect_vec()
    };
    let _ = paid;
}
