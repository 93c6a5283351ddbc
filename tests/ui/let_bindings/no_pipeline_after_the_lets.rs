// The last expression is the pipeline: here every statement is a `let`.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let numbers = env.from_collection(vec![10i64]).map(|x: i64| x + 1);
    };
    let _ = out;
}
