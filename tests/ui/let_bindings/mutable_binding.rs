// A `let` names one stream: no `mut`, no pattern.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let mut refunds = env.from_collection(vec![-5i64]);
        env.from_collection(vec![10i64]).union(refunds).collect_vec()
    };
    let _ = out;
}
