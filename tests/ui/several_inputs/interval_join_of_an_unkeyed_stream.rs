// An interval join takes a keyed stream: the key of the other input says which of its
// elements meet this stream's.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let paid = pipeline! {
        let payments = env.from_timestamped_collection(vec![((7u32, 30u64), 60_000)]);
        env.from_timestamped_collection(vec![((7u32, "ada"), 0)])
            .key_by(|o: &(u32, &str)| o.0)
            .interval_join(payments)
            .between(0, 600_000)
            .process(|o: &(u32, &str), p: &(u32, u64)| (o.1, p.1))
            .collect_vec()
    };
    let _ = paid;
}
