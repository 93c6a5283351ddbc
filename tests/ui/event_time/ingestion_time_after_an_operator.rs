// Ingestion time is chosen at the source: right after it, not after an operator.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2, 3])
            .map(|x: i32| x * 2)
            .with_ingestion_time()
            .collect_vec()
    };
    let _ = out;
}
