use streaming::time::GlobalWindows;
use streaming::MemoryEnv;

fn main() {
    let out = MemoryEnv::new()
        .from_elements([1, 2])
        .key_by(|x: &i32| *x)
        .window(GlobalWindows::create())
        .sum()
        .collect_vec();
    let _ = out;
}
