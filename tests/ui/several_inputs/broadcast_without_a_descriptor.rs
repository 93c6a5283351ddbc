// A keyed stream connects to a broadcast stream, which `broadcast(descriptor)` makes: a
// plain stream is refused at `connect`.
use streaming::MemoryEnv;

fn main() {
    let env = MemoryEnv::new();
    let rules = env.from_collection(vec![("limit".to_string(), 10u64)]);
    let _ = env
        .from_collection(vec![("ann".to_string(), 5u64)])
        .key_by(|a: &(String, u64)| a.0.clone())
        .connect(rules);
}
