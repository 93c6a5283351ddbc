// `broadcast` takes the descriptor of the map its elements write: the error is at the
// empty arguments.
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        let rules = env.from_collection(vec![("limit".to_string(), 10u64)]).broadcast();
        env.from_collection(vec![("ann".to_string(), 5u64)])
            .key_by(|a: &(String, u64)| a.0.clone())
            .connect(rules)
            .process(Limits)
            .collect_vec()
    };
    let _ = out;
}

struct Limits;
