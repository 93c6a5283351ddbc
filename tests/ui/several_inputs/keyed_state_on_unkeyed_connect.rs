// Keyed state and timers need a key: connected streams get `process` only after `key_by`.
use streaming::MemoryEnv;

fn main() {
    let env = MemoryEnv::new();
    let a = env.from_collection(vec![1u32]);
    let b = env.from_collection(vec![2u64]);
    let _ = a.connect(b).process(|_x: u32| ());
}
