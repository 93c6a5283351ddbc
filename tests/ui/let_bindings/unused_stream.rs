// A stream named with `let` and never used is a mistake: the pipeline would not read it.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let refunds = env.from_collection(vec![-5i64]);
        env.from_collection(vec![10i64]).collect_vec()
    };
    let _ = out;
}
