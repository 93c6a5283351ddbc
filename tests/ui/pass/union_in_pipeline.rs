// A stream built with the builder joins a `pipeline!` through `union`; the ids after it
// continue the pipeline's source.
use streaming::{pipeline, MemoryEnv};

fn main() -> Result<(), streaming::Error> {
    let env = MemoryEnv::new();
    let refunds = env.from_collection(vec![-5i64]);
    let out = pipeline! {
        env.from_collection_with_id("orders", vec![10i64, 20])
            .union(refunds)
            .key_by(|_: &i64| ())
            .sum()
            .collect_vec()
    }?;
    assert_eq!(out, [((), 10), ((), 30), ((), 25)]);
    Ok(())
}
