//! The test driver and pipelines written as functions: the same fragment runs under the
//! driver, inline on the memory engine (`transform`) and with the ids an inline pipeline
//! has.

use std::time::Duration;
use streaming::api::{CollectSink, TimeDomain, ValueStateDescriptor};
use streaming::fragment::{Fragment, Input};
use streaming::memory::OnRecordError;
use streaming::testing::{PendingTimer, TestDriver};
use streaming::time::{BoundedOutOfOrderness, NoEventTime, TumblingEventTimeWindows};
use streaming::{pipeline, Error, MemoryEnv};

/// Per word: a running count in keyed state, and 10 ms after each word an event-time timer
/// that emits `(word, count at the timer)`; a processing-time timer at 1 000 emits
/// `(word, -1)`.
fn counts(words: Input<String>) -> impl Fragment<String, Out = (String, i64)> {
    pipeline! {
        words
            .key_by(|w: &String| w.clone())
            .state(count: ValueState<u64> = 0)
            .process(|w: String, ctx, out| {
                let mut count = ctx.state(count)?;
                let n = count.value() + 1;
                count.update(n);
                let at = ctx.timestamp() + 10;
                ctx.register_event_time_timer(at)?;
                ctx.register_processing_time_timer(1_000);
                out.collect((w, n as i64));
                Ok(())
            })
            .on_timer(|_time, ctx, out| {
                let word = ctx.current_key().clone();
                if ctx.time_domain() == TimeDomain::ProcessingTime {
                    out.collect((word, -1));
                } else {
                    let n = ctx.state(count)?.value();
                    out.collect((word, n as i64));
                }
                Ok(())
            })
    }
}

fn word(w: &str, ms: i64) -> (String, i64) {
    (w.to_string(), ms)
}

#[test]
fn the_driver_reads_keyed_state_and_timers_and_fires_them_step_by_step() -> Result<(), Error> {
    let mut driver = TestDriver::new(counts)?;
    driver.push_all([word("a", 5), word("b", 7), word("a", 8)])?;
    assert_eq!(driver.watermark(), i64::MIN);
    assert_eq!(
        driver.output(),
        [
            ("a".to_string(), 1),
            ("b".to_string(), 1),
            ("a".to_string(), 2)
        ]
    );
    let count = |driver: &TestDriver<String, (String, i64)>, key: &str| {
        driver.with_keyed_state("process", &key.to_string(), |ctx| {
            ctx.state(&ValueStateDescriptor::<u64>::new("count", 0))
                .map(|s| s.value())
        })
    };
    assert_eq!(count(&driver, "a")??, 2);
    assert_eq!(count(&driver, "b")??, 1);
    assert_eq!(count(&driver, "c")??, 0);
    let timers = driver.pending_timers::<String>("input/2:process")?;
    let timer = |time, domain, key: &str| PendingTimer {
        time,
        domain,
        key: key.to_string(),
    };
    assert_eq!(
        timers,
        [
            timer(15, TimeDomain::EventTime, "a"),
            timer(17, TimeDomain::EventTime, "b"),
            timer(18, TimeDomain::EventTime, "a"),
            timer(1_000, TimeDomain::ProcessingTime, "a"),
            timer(1_000, TimeDomain::ProcessingTime, "b"),
        ]
    );
    // The watermark fires the event-time timers up to it, one step at a time.
    driver.advance_watermark(16)?;
    assert_eq!(driver.output(), [("a".to_string(), 2)]);
    driver.advance_watermark(17)?;
    assert_eq!(driver.output(), [("b".to_string(), 1)]);
    // Records do not move processing time; the driver does.
    driver.push("b".to_string(), 2_000)?;
    assert_eq!(driver.output(), [("b".to_string(), 2)]);
    driver.advance_processing_time(999)?;
    assert!(driver.output().is_empty());
    driver.advance_processing_time(1_000)?;
    let mut fired = driver.output();
    fired.sort();
    assert_eq!(fired, [("a".to_string(), -1), ("b".to_string(), -1)]);
    // The end of input fires what is left (a's timer at 18, b's at 2 010).
    driver.finish()?;
    assert_eq!(
        driver.output(),
        [("a".to_string(), 2), ("b".to_string(), 2)]
    );
    Ok(())
}

#[test]
fn the_same_fragment_runs_inline_with_the_ids_of_an_inline_pipeline() -> Result<(), Error> {
    let env = MemoryEnv::new();
    // A failing record stops the run (its error names the operator by its id).
    env.on_record_error(OnRecordError::StopRun);
    let words = [("a", 1), ("b", 2), ("a", 3)];
    let mut spliced = env
        .from_timestamped_collection_with_id("words", words)
        .map(|w: &str| w.to_string())
        .transform(counts)
        .collect_vec()?;
    // The records, then at the end of input the event-time timers in time order (11, 12,
    // 13), then the processing-time timers (both at 1 000; their order is not specified).
    spliced[6..].sort();
    let expected = [
        ("a", 1),
        ("b", 1),
        ("a", 2),
        ("a", 2),
        ("b", 1),
        ("a", 2),
        ("a", -1),
        ("b", -1),
    ];
    let expected: Vec<(String, i64)> = expected.iter().map(|&(w, n)| (w.to_string(), n)).collect();
    assert_eq!(spliced, expected);
    // A failing function names the operator by the id it would have inline.
    let fails = |s: Input<String>| s.try_map(|w: String| Err::<String, _>(format!("no {w}")));
    let inline = env
        .from_collection_with_id("words", ["x"])
        .map(str::to_string)
        .try_map(|w: String| Err::<String, _>(format!("no {w}")))
        .collect_vec()
        .expect_err("try_map fails");
    let spliced = env
        .from_timestamped_collection_with_id("words", [("x", 0)])
        .map(str::to_string)
        .transform(fails)
        .collect_vec()
        .expect_err("try_map fails");
    assert_eq!(spliced.to_string(), inline.to_string());
    assert!(inline.to_string().contains("words/2:try_map"), "{inline}");
    // Under the driver, the ids of the fragment right after a source with that id
    // (`key_by` takes position 1, `process` 2).
    let driver = TestDriver::builder().source_id("words").build(counts)?;
    assert_eq!(driver.stateful_operators(), ["words/2:process"]);
    let inline = env
        .from_collection_with_id("words", ["x"])
        .map(|w: &str| -> String { panic!("{w}") })
        .collect_vec()
        .expect_err("the map panics");
    assert!(inline.to_string().contains("words/1:map"), "{inline}");
    Ok(())
}

/// The late side output is a parameter, so a test passes a collector and a service a sink.
fn minute_totals(
    orders: Input<(String, i64)>,
    late: CollectSink<(String, i64)>,
) -> impl Fragment<(String, i64), Out = (String, i64, i64)> {
    pipeline! {
        orders
            .key_by(|o: &(String, i64)| o.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .side_output_late_data(late)
            .sum_by(|o: &(String, i64)| o.1)
            .map(|(customer, w, total)| (customer, w.start(), total))
    }
}

#[test]
fn the_input_watermark_fires_windows_and_late_records_reach_the_side_output() -> Result<(), Error> {
    let late = CollectSink::new();
    let mut driver = TestDriver::new(|orders| minute_totals(orders, late.clone()))?;
    let order = |c: &str, cents: i64, ms: i64| ((c.to_string(), cents), ms);
    driver.push_all([order("ann", 300, 1_000), order("ann", 200, 59_999)])?;
    driver.advance_watermark(59_999)?;
    assert_eq!(
        driver.output_with_timestamps(),
        [(("ann".to_string(), 0, 500), 59_999)]
    );
    driver.push_all([order("ann", 7, 30_000), order("bob", 1, 61_000)])?;
    assert_eq!(late.snapshot(), [("ann".to_string(), 7)]);
    assert_eq!(driver.summary().late_elements, 1);
    driver.finish()?;
    assert_eq!(driver.output(), [("bob".to_string(), 60_000, 1)]);
    assert_eq!(driver.summary().window_firings, 2);
    Ok(())
}

/// Windows of `minutes`; 0 is a configuration error (found when the fragment is built).
fn windows_of(
    orders: Input<(String, i64), NoEventTime>,
    minutes: u64,
) -> impl Fragment<(String, i64), NoEventTime, Out = i64> {
    pipeline! {
        orders
            .assign_timestamps_and_watermarks_with(|o: &(String, i64), _| o.1, BoundedOutOfOrderness::new(Duration::ZERO))
            .key_by(|o: &(String, i64)| o.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60 * minutes)))
            .count()
            .map(|(_, _, n): (String, _, u64)| n as i64)
    }
}

#[test]
fn a_configuration_error_in_a_fragment_is_returned_where_the_pipeline_runs() {
    let at_new = TestDriver::new(|s| windows_of(s, 0)).expect_err("a window of 0 ms");
    assert!(at_new.to_string().contains("size"), "{at_new}");
    let env = MemoryEnv::new();
    let inline = pipeline! {
        env.from_elements([("a".to_string(), 1i64)]).transform(|s| windows_of(s, 0)).collect_vec()
    }
    .expect_err("a window of 0 ms");
    assert_eq!(inline.to_string(), at_new.to_string());
}

#[test]
fn a_failing_record_is_dead_lettered_and_the_driver_goes_on() -> Result<(), Error> {
    let mut driver = TestDriver::new(|s: Input<i32, NoEventTime>| {
        s.map(|x: i32| if x == 2 { panic!("two") } else { x })
    })?;
    driver.push_all([(1, 0), (2, 1), (3, 2)])?;
    assert_eq!(driver.output(), [1, 3]);
    let dead = driver.dead_letters();
    assert_eq!(dead.len(), 1, "{dead:?}");
    let d = &dead[0];
    assert_eq!((d.record, d.timestamp, d.error_type), (2, 1, "panic"));
    assert_eq!(d.attempts, 4, "the Redis engine's default: 3 retries");
    assert_eq!(
        d.operator.as_ref().map(|o| o.to_string()),
        Some("input/1:map".into())
    );
    assert!(d.message.contains("two"), "{}", d.message);
    assert_eq!(driver.summary().dead_letters, 1);
    Ok(())
}

#[test]
fn with_stop_run_a_failing_function_closes_the_driver() -> Result<(), Error> {
    let mut driver = TestDriver::builder()
        .on_record_error(OnRecordError::StopRun)
        .build(|s: Input<i32, NoEventTime>| {
            s.map(|x: i32| if x == 2 { panic!("two") } else { x })
        })?;
    driver.push(1, 0)?;
    let error = driver.push(2, 1).expect_err("the map panics");
    assert!(error.to_string().contains("input/1:map"), "{error}");
    assert_eq!(driver.output(), [1]);
    assert!(driver.dead_letters().is_empty());
    let closed = driver.push(3, 2).expect_err("closed");
    assert!(closed.to_string().contains("closed"), "{closed}");
    Ok(())
}

#[test]
fn a_bad_source_id_is_an_error_naming_the_field() {
    let error = TestDriver::builder()
        .source_id("no spaces")
        .build(counts)
        .expect_err("a space");
    assert!(
        matches!(
            error,
            Error::InvalidConfig {
                field: "source_id",
                ..
            }
        ),
        "{error}"
    );
}
