use streaming::fragment::{Fragment, Input};
use streaming::time::NoEventTime;
use streaming::{pipeline, MemoryEnv};

fn evens_doubled(numbers: Input<i32, NoEventTime>) -> impl Fragment<i32, NoEventTime, Out = i32> {
    pipeline! { numbers.filter(|x: &i32| x % 2 == 0).map(|x: i32| x * 2) }
}

/// A fragment that names a stream on its way.
fn tens(numbers: Input<i32, NoEventTime>) -> impl Fragment<i32, NoEventTime, Out = i32> {
    pipeline! {
        let small = numbers.filter(|x: &i32| *x < 10);
        small.map(|x: i32| x * 10)
    }
}

/// The builder form of a fragment.
fn plus_one(numbers: Input<i32, NoEventTime>) -> impl Fragment<i32, NoEventTime, Out = i32> {
    numbers.map(|x: i32| x + 1)
}

fn main() -> Result<(), streaming::Error> {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2, 3, 4]).transform(evens_doubled).transform(plus_one).collect_vec()
    }?;
    assert_eq!(out, [5, 9]);
    let out = pipeline! { env.from_elements([1, 20, 3]).transform(tens).collect_vec() }?;
    assert_eq!(out, [10, 30]);
    Ok(())
}
