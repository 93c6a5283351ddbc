// A stream goes into one operator: its elements are not copied for a second.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let refunds = env.from_collection(vec![-5i64]);
        let doubled = refunds.map(|x: i64| x * 2);
        env.from_collection(vec![10i64]).union(doubled).union(refunds).collect_vec()
    };
    let _ = out;
}
