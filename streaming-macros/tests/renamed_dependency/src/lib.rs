//! `pipeline!` with `streaming` renamed to `engine` in this package's manifest: the
//! expansion reaches the runtime crate by the name the manifest gives, so every operator
//! kind that emits a path into the crate is used here (fallible configuration, keyed state,
//! timers, the message-queue sources and persistent state of the Redis engine).

#[cfg(test)]
mod tests {
    use engine::mq::Message;
    use engine::redis::{CollectSink, RedisEnv};
    use engine::time::{CountTrigger, TimeWindow, TumblingEventTimeWindows};
    use engine::{pipeline, Error, MemoryEnv};
    use std::time::Duration;

    #[test]
    fn a_keyed_window_with_a_trigger() {
        let env = MemoryEnv::new();
        let out = pipeline! {
            env.from_collection(0..6)
                .with_ingestion_time()
                .key_by(|x: &i32| x % 2)
                .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
                .trigger(CountTrigger::of(3))
                .count()
                .map(|(k, _, n): (i32, TimeWindow, u64)| (k, n))
                .collect_vec()
        };
        assert_eq!(out.unwrap(), [(0, 3), (1, 3)]);
    }

    #[test]
    fn an_invalid_configuration_is_the_pipeline_error() {
        let env = MemoryEnv::new();
        let size = Duration::ZERO;
        let err = pipeline! {
            env.from_timestamped_collection([(1u8, 0)])
                .key_by(|x: &u8| *x)
                .window(TumblingEventTimeWindows::of(size))
                .count()
                .print()
        }
        .unwrap_err();
        assert!(
            matches!(err, Error::InvalidConfig { field: "size", .. }),
            "{err}"
        );
    }

    #[test]
    fn keyed_state_and_timers() {
        let env = MemoryEnv::new();
        let out = pipeline! {
            env.from_elements([("a", 5i64), ("a", 7), ("b", 1)])
                .with_ingestion_time()
                .key_by(|e: &(&str, i64)| e.0)
                .state(total: ValueState<i64> = 0)
                .process(|e: (&str, i64), ctx, out| {
                    let t = ctx.state(total)?.value() + e.1;
                    ctx.state(total)?.update(t);
                    ctx.register_event_time_timer(100)?;
                    out.collect(t);
                    Ok(())
                })
                .on_timer(|ts, ctx, out| {
                    out.collect(ts + ctx.state(total)?.value());
                    Ok(())
                })
                .collect_vec()
        };
        assert_eq!(out.unwrap(), [5, 12, 1, 112, 101]);
    }

    #[test]
    fn a_redis_pipeline_registers() -> Result<(), Error> {
        // Registration contacts no server.
        let env = RedisEnv::try_new("redis://127.0.0.1:6379/")?;
        let out = CollectSink::new();
        pipeline! {
            env.from_mq_topic("words", "counter")
                .map(|m: Message| m.text().unwrap_or_default().to_string())
                .key_by(|w: &String| w.clone())
                .state(count: ValueState<u64> = 0)
                .process(|w: String, ctx, out| {
                    let mut count = ctx.state(count)?;
                    let n = count.value() + 1;
                    count.update(n);
                    out.collect((w, n));
                    Ok(())
                })
                .sink(out.clone())
        }
    }
}
