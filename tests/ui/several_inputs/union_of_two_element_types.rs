// A union takes streams of one element type; `connect` pairs two types.
use streaming::MemoryEnv;

fn main() {
    let env = MemoryEnv::new();
    let numbers = env.from_collection(vec![1u32, 2]);
    let words = env.from_collection(vec!["a"]);
    let _ = numbers.union(words).collect_vec();
}
