//! Assigners, triggers and watermark generators under other names work like the crate's
//! names: the macro tells a fallible constructor by the `Result` it returns, not by its
//! name, so a renamed one (or the user's own) is unwrapped the same way. A renamed
//! constructor gets no compile-time check of its literals, but the same error at run time.
use std::time::Duration;
use streaming::time::{
    BoundedOutOfOrderness as Bounded, CountTrigger as Count, PurgingTrigger as Purging,
    EventTime, Offers, TimeWindow, Trigger, TumblingEventTimeWindows as Tumbling, WindowAssigner,
};
use streaming::{pipeline, Error, MemoryEnv};

type Sessions = streaming::time::EventTimeSessionWindows;

fn window_of(ms: u64) -> Result<Tumbling, Error> {
    Tumbling::of(Duration::from_millis(ms))
}

/// A generic assigner is a plain value.
fn sums<W>(env: &MemoryEnv, assigner: W) -> Result<Vec<i32>, Error>
where
    W: WindowAssigner,
    W::DefaultTrigger: Trigger<i32>,
    EventTime: Offers<W::Time>,
{
    pipeline! {
        env.from_timestamped_collection([(1, 0), (2, 1)])
            .key_by(|_: &i32| ())
            .window(assigner)
            .reduce(|a, b| a + b)
            .collect_vec()
    }
}

fn main() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_elements([1, 2, 3])
            .with_ingestion_time()
            .assign_timestamps_and_watermarks(Bounded::new(Duration::from_millis(10)))
            .key_by(|_: &i32| ())
            .window(Tumbling::of(Duration::from_secs(1)))
            .trigger(Purging::of(Count::of(2)))
            .reduce(|a, b| a + b)
            .collect_vec()
    };
    assert_eq!(out.unwrap(), [3, 3]);

    let out = pipeline! {
        env.from_collection([(1, 0i64), (2, 5), (3, 100)])
            .assign_timestamps_and_watermarks_with(|e: &(i32, i64), _| e.1, Bounded::new(Duration::ZERO))
            .key_by(|_: &(i32, i64)| ())
            .window(Sessions::with_gap(Duration::from_millis(10)))
            .count()
            .map(|(_, w, n): ((), TimeWindow, u64)| (w.start(), n))
            .collect_vec()
    };
    assert_eq!(out.unwrap(), [(0, 2), (100, 1)]);

    let out = pipeline! {
        env.from_timestamped_collection([(1, 0), (2, 1)])
            .key_by(|_: &i32| ())
            .window(window_of(1_000))
            .reduce(|a, b| a + b)
            .collect_vec()
    };
    assert_eq!(out.unwrap(), [3]);
    assert_eq!(sums(&env, window_of(1_000).unwrap()).unwrap(), [3]);

    let err = pipeline! {
        env.from_timestamped_collection([(1, 0)])
            .key_by(|_: &i32| ())
            .window(Tumbling::of(Duration::ZERO))
            .reduce(|a, b| a + b)
            .collect_vec()
    }
    .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { field: "size", .. }), "{err}");

    let err = pipeline! {
        env.from_timestamped_collection([(1, 0)])
            .key_by(|_: &i32| ())
            .window(Tumbling::of(Duration::from_secs(1)))
            .trigger(Purging::of(Count::of(0)))
            .reduce(|a, b| a + b)
            .collect_vec()
    }
    .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig { field: "count", .. }), "{err}");
}
