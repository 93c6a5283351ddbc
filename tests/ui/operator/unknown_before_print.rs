#![allow(unused_imports)]
use streaming::{pipeline, MemoryEnv};

fn main() {
    let env = MemoryEnv::new();
    // The placeholder has the type `print` would give: `summary` type-checks, one error.
    let summary = pipeline! { env.from_elements([1, 2]).mapp(|x: i32| x + 1).print() }.unwrap();
    assert_eq!(summary.late_elements, 0);
}
