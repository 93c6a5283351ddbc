// The lower bound of an interval join is the earliest offset: above the upper bound,
// nothing could ever be joined.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let paid = pipeline! {
        let payments = env.from_timestamped_collection(vec![((7u32, 30u64), 60_000)]);
        env.from_timestamped_collection(vec![((7u32, "ada"), 0)])
            .key_by(|o: &(u32, &str)| o.0)
            .interval_join(payments.key_by(|p: &(u32, u64)| p.0))
            .between(600_000, 0)
            .process(|o: &(u32, &str), p: &(u32, u64)| (o.1, p.1))
            .collect_vec()
    };
    let _ = paid;
}
