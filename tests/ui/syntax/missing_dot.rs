use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2])
            .map(|x: i32| x + 1)
            collect_vec()
    };
    let _ = out;
}
