// Only the last expression is the pipeline; the statements before it name streams.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_collection(vec![-5i64]).print();
        env.from_collection(vec![10i64]).collect_vec()
    };
    let _ = out;
}
