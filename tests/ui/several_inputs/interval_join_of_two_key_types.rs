// The inputs of a join are keyed by one key type: orders keyed by customer id (`u32`)
// cannot meet payments keyed by customer name (`String`). One error, at the key that
// has the other type.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let paid = pipeline! {
        let payments = env.from_timestamped_collection(vec![(("ada".to_string(), 30u64), 60_000)]);
        env.from_timestamped_collection(vec![((7u32, 1u32), 0)])
            .key_by(|o: &(u32, u32)| o.1)
            .interval_join(payments.key_by(|p: &(String, u64)| p.0.clone()))
            .between(0, 600_000)
            .process(|o: &(u32, u32), p: &(String, u64)| (o.0, p.1))
            .collect_vec()
    };
    let _ = paid;
}
