use std::time::Duration;
use streaming::time::{AscendingTimestamps, CountTrigger, SlidingEventTimeWindows};
use streaming::{pipeline, Error, MemoryEnv};

fn run(env: &MemoryEnv, slide: Duration) -> Result<Vec<u64>, Error> {
    pipeline! {
        env.from_timestamped_collection([(1u64, 0), (2, 500), (3, 1_000)])
            .key_by(|x: &u64| x % 2)
            .window(SlidingEventTimeWindows::of(Duration::from_secs(2), slide)?)
            .trigger(CountTrigger::of(1))
            .count()
            .map(|(_, _, n): (u64, streaming::time::TimeWindow, u64)| n)
            .collect_vec()
    }
}

fn main() {
    let env = MemoryEnv::new();
    assert!(run(&env, Duration::ZERO).is_err());
    assert!(!run(&env, Duration::from_secs(1)).unwrap().is_empty());
    let out = pipeline! {
        env.from_elements([("a", 5i64), ("a", 7)])
            .assign_timestamps_and_watermarks_with(|e: &(&str, i64), _| e.1, AscendingTimestamps)
            .key_by(|e: &(&str, i64)| e.0)
            .state(total: ValueState<i64> = 0, seen: MapState<i64, bool>)
            .process(|e: (&str, i64), ctx, out| {
                let t = ctx.state(total)?.value() + e.1;
                ctx.state(total)?.update(t);
                ctx.state(seen)?.put(e.1, true);
                ctx.register_event_time_timer(100)?;
                out.collect(t);
                Ok(())
            })
            .on_timer(|ts, ctx, out| {
                out.collect(ts + ctx.state(seen)?.len() as i64);
                Ok(())
            })
            .collect_vec()
    }
    .unwrap();
    assert_eq!(out, [5, 12, 102]);
}
