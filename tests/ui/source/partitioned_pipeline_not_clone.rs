use streaming::{pipeline, MemoryEnv};

fn main() -> Result<(), streaming::Error> {
    let env = MemoryEnv::new();
    let mut seen = 0u32;
    // Each partition runs its own copy of the pipeline: a closure holding `&mut` cannot be
    // copied.
    let out = pipeline! {
        env.from_collection_partitioned(["a", "b"], 2, |w: &&str| Some(*w))
            .map(|w: &str| { seen += 1; w.len() })
            .collect_vec()
    }?;
    assert_eq!(out, [1, 1]);
    Ok(())
}
