// A `let` names a stream for the pipeline: the sink belongs to the last expression.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let refunds = env.from_collection(vec![-5i64]).print();
        env.from_collection(vec![10i64]).union(refunds).collect_vec()
    };
    let _ = out;
}
