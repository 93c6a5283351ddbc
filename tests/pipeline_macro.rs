//! `pipeline!` gives the same output as the builder chain it stands for.

use std::time::Duration;
use streaming::api::{
    AggregateFunction, Collector, KeyedContext, KeyedProcessFunction, Source, SourceContext,
    TimerContext,
};
use streaming::time::{
    AscendingTimestamps, BoundedOutOfOrderness, CountTrigger, EventTimeSessionWindows,
    SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows,
};
use streaming::{pipeline, BoxError, Error, MemoryEnv};

#[test]
fn stateless_chain_matches_the_builder() {
    let env = MemoryEnv::new();
    let by_macro = pipeline! {
        env.from_elements(["a b", "c", "d e"])
            .flat_map(|line: &str| line.split(' ').map(str::to_string).collect::<Vec<_>>())
            .filter(|w: &String| w != "c")
            .map(|w: String| w.to_uppercase())
            .collect_vec()
    }
    .unwrap();
    let by_builder = env
        .from_elements(["a b", "c", "d e"])
        .flat_map(|line| line.split(' ').map(str::to_string).collect::<Vec<_>>())
        .filter(|w| w != "c")
        .map(|w| w.to_uppercase())
        .collect_vec()
        .unwrap();
    assert_eq!(by_macro, ["A", "B", "D", "E"]);
    assert_eq!(by_macro, by_builder);
}

#[test]
fn word_count_in_tumbling_windows() {
    let env = MemoryEnv::new();
    let words = [
        ("a", 0i64),
        ("b", 500),
        ("a", 900),
        ("a", 1500),
        ("b", 2100),
    ];
    let mut out = pipeline! {
        env.from_collection(words)
            .assign_timestamps_and_watermarks_with(|w: &(&str, i64), _| w.1, AscendingTimestamps)
            .map(|w: (&str, i64)| (w.0.to_string(), 1u64))
            .key_by(|p: &(String, u64)| p.0.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .reduce(|a, b| (a.0, a.1 + b.1))
            .collect_vec()
    }
    .unwrap();
    out.sort();
    assert_eq!(
        out,
        [
            ("a".to_string(), 1),
            ("a".to_string(), 2),
            ("b".to_string(), 1),
            ("b".to_string(), 1)
        ]
    );
}

#[test]
fn rolling_reduce_and_sum_match_the_builder() {
    let env = MemoryEnv::new();
    let reduced = pipeline! {
        env.from_elements([("a", 1), ("b", 10), ("a", 2), ("a", 3)])
            .key_by(|p: &(&str, i32)| p.0)
            .reduce(|x, y| (x.0, x.1 + y.1))
            .collect_vec()
    }
    .unwrap();
    assert_eq!(reduced, [("a", 1), ("b", 10), ("a", 3), ("a", 6)]);
    let sums = pipeline! { env.from_elements([1u64, 2, 3, 4, 5]).key_by(|x: &u64| x % 2).sum().collect_vec() }.unwrap();
    assert_eq!(sums, [(1, 1), (0, 2), (1, 4), (0, 6), (1, 9)]);
    let builder = env
        .from_elements([1u64, 2, 3, 4, 5])
        .key_by(|x| x % 2)
        .sum()
        .collect_vec()
        .unwrap();
    assert_eq!(sums, builder);
}

#[test]
fn keyed_state_and_timers() {
    let env = MemoryEnv::new();
    let out = pipeline! {
        env.from_collection(vec![("a", 10i64), ("b", 20), ("a", 30)])
            .assign_timestamps_and_watermarks_with(|e: &(&str, i64), _| e.1, AscendingTimestamps)
            .key_by(|e: &(&str, i64)| e.0.to_string())
            .state(count: ValueState<u32> = 0, times: ListState<i64>)
            .process(|e: (&str, i64), ctx, out| {
                let n = ctx.state(count)?.value() + 1;
                ctx.state(count)?.update(n);
                ctx.state(times)?.add(e.1);
                if n == 1 {
                    ctx.register_event_time_timer(e.1 + 100)?;
                }
                out.collect(format!("{}#{n}", ctx.current_key()));
                Ok(())
            })
            .on_timer(|ts, ctx, out| {
                let seen = ctx.state(times)?.get().to_vec();
                out.collect(format!("timer {} @{ts}: {seen:?}", ctx.current_key()));
                Ok(())
            })
            .collect_vec()
    }
    .unwrap();
    assert_eq!(
        out,
        [
            "a#1",
            "b#1",
            "a#2",
            "timer a @110: [10, 30]",
            "timer b @120: [20]"
        ]
    );
}

#[test]
fn process_closure_and_process_function() {
    struct Tag;
    impl KeyedProcessFunction<i32, i32> for Tag {
        type Out = (i32, i32);
        fn process_element(
            &mut self,
            v: i32,
            ctx: &mut KeyedContext<'_, i32>,
            out: &mut Collector<'_, (i32, i32)>,
        ) -> Result<(), BoxError> {
            out.collect((*ctx.current_key(), v));
            Ok(())
        }
        fn on_timer(
            &mut self,
            _: i64,
            _: &mut TimerContext<'_, i32>,
            _: &mut Collector<'_, (i32, i32)>,
        ) -> Result<(), BoxError> {
            Ok(())
        }
    }
    let env = MemoryEnv::new();
    let a = pipeline! { env.from_elements([1, 2, 3]).key_by(|x: &i32| x % 2).process_function(Tag).collect_vec() }.unwrap();
    assert_eq!(a, [(1, 1), (0, 2), (1, 3)]);
    let b = pipeline! {
        env.from_elements([1, 2, 3])
            .key_by(|x: &i32| x % 2)
            .process(|v: i32, ctx, out| {
                out.collect(v * 10 + ctx.current_key());
                Ok(())
            })
            .map(|x: i32| x + 1)
            .collect_vec()
    }
    .unwrap();
    assert_eq!(b, [12, 21, 32]);
}

struct Avg;
impl AggregateFunction<i64> for Avg {
    type Acc = (i64, i64);
    type Out = f64;
    fn create_accumulator(&self) -> (i64, i64) {
        (0, 0)
    }
    fn add(&self, acc: &mut (i64, i64), v: i64) {
        acc.0 += v;
        acc.1 += 1;
    }
    fn get_result(&self, acc: &(i64, i64)) -> f64 {
        acc.0 as f64 / acc.1 as f64
    }
    fn merge(&self, a: (i64, i64), b: (i64, i64)) -> (i64, i64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

#[test]
fn window_functions_match_the_builder() {
    let env = MemoryEnv::new();
    let input = [0i64, 100, 1100, 1200, 1300, 5000];
    let agg = pipeline! {
        env.from_collection(input)
            .assign_timestamps_and_watermarks_with(|t: &i64, _| *t, BoundedOutOfOrderness::new(Duration::from_millis(10)))
            .key_by(|_: &i64| "k")
            .window(EventTimeSessionWindows::with_gap(Duration::from_millis(500)))
            .aggregate(Avg)
            .collect_vec()
    }
    .unwrap();
    let builder = env
        .from_collection(input)
        .assign_timestamps_and_watermarks_with(
            |t: &i64, _| *t,
            BoundedOutOfOrderness::new(Duration::from_millis(10)).unwrap(),
        )
        .key_by(|_| "k")
        .window(EventTimeSessionWindows::with_gap(Duration::from_millis(500)).unwrap())
        .aggregate(Avg)
        .collect_vec()
        .unwrap();
    assert_eq!(agg, [50.0, 1200.0, 5000.0]);
    assert_eq!(agg, builder);

    let with = pipeline! {
        env.from_collection(input)
            .assign_timestamps_and_watermarks_with(|t: &i64, _| *t, AscendingTimestamps)
            .key_by(|_: &i64| "k")
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1))?)
            .aggregate_with(Avg, |k: &&str, w: &TimeWindow, avg: f64| format!("{k}[{}]={avg}", w.start()))
            .collect_vec()
    }
    .unwrap();
    assert_eq!(with, ["k[0]=50", "k[1000]=1200", "k[5000]=5000"]);

    let counts = pipeline! {
        env.from_collection(input)
            .assign_timestamps_and_watermarks_with(|t: &i64, _| *t, AscendingTimestamps)
            .key_by(|_: &i64| 0u8)
            .window(SlidingEventTimeWindows::of(Duration::from_secs(2), Duration::from_secs(1)))
            .count()
            .map(|(_, w, n): (u8, TimeWindow, u64)| (w.start(), n))
            .collect_vec()
    }
    .unwrap();
    assert_eq!(
        counts,
        [(-1000, 2), (0, 5), (1000, 3), (4000, 1), (5000, 1)]
    );

    let sums = pipeline! {
        env.from_collection(input)
            .with_ingestion_time()
            .assign_timestamps_and_watermarks(AscendingTimestamps)
            .key_by(|_: &i64| 0u8)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .sum()
            .map(|(_, w, s): (u8, TimeWindow, i64)| (w.start(), s))
            .collect_vec()
    }
    .unwrap();
    // Ingestion time: the timestamps are the element indexes, one window [0, 1000).
    assert_eq!(sums, [(0, 8700)]);

    let applied = pipeline! {
        env.from_collection(input)
            .assign_timestamps_and_watermarks_with(|t: &i64, _| *t, AscendingTimestamps)
            .key_by(|_: &i64| 0u8)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .trigger(CountTrigger::of(2))
            .apply(|_k: &u8, _w: &TimeWindow, xs: &[i64], out: &mut Collector<'_, usize>| {
                out.collect(xs.len());
                Ok(())
            })
            .collect_vec()
    }
    .unwrap();
    let applied_builder = env
        .from_collection(input)
        .assign_timestamps_and_watermarks_with(|t: &i64, _| *t, AscendingTimestamps)
        .key_by(|_: &i64| 0u8)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)).unwrap())
        .trigger(CountTrigger::of(2).unwrap())
        .apply(
            |_k: &u8, _w: &TimeWindow, xs: &[i64], out: &mut Collector<'_, usize>| {
                out.collect(xs.len());
                Ok(())
            },
        )
        .collect_vec()
        .unwrap();
    assert_eq!(applied, applied_builder);
    assert_eq!(applied, [2, 2, 3, 1]);
}

#[test]
fn lateness_and_late_side_output() {
    let env = MemoryEnv::new();
    let mut late = Vec::new();
    let input = [(0i64, 1i64), (2500, 2), (900, 3), (3000, 4), (100, 5)];
    let summary = pipeline! {
        env.from_collection(input)
            .assign_timestamps_and_watermarks_with(|e: &(i64, i64), _| e.0, AscendingTimestamps)
            .key_by(|_: &(i64, i64)| 0)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .allowed_lateness(Duration::from_millis(1600))
            .side_output_late_data(|e: (i64, i64)| late.push(e))
            .reduce(|a, b| (a.0, a.1 + b.1))
            .sink(|_| ())
    }
    .unwrap();
    // 900 is within lateness (window [0,1000) cleans up at 999 + 1600 = 2599 > 2500);
    // 100 arrives after watermark 3000 >= 2599: late.
    assert_eq!(late, [(100, 5)]);
    assert_eq!(summary.late_elements, 1);
}

#[test]
fn invalid_runtime_configuration_is_the_pipeline_error() {
    let env = MemoryEnv::new();
    let size = Duration::ZERO; // not a literal: checked when the pipeline is built
    let err = pipeline! {
        env.from_timestamped_collection([(1u8, 0)]).key_by(|x: &u8| *x).window(TumblingEventTimeWindows::of(size)).count().collect_vec()
    }
    .unwrap_err();
    assert!(
        matches!(err, Error::InvalidConfig { field: "size", .. }),
        "{err}"
    );
    let n = 0;
    let err = pipeline! {
        env.from_timestamped_collection([(1u8, 0)]).key_by(|x: &u8| *x)
            .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
            .trigger(CountTrigger::of(n))
            .count()
            .print()
    }
    .unwrap_err();
    assert!(
        matches!(err, Error::InvalidConfig { field: "count", .. }),
        "{err}"
    );
}

struct Numbers(u32);
impl Source<u32> for Numbers {
    fn run<C: SourceContext<u32>>(&mut self, ctx: &mut C) -> Result<(), Error> {
        for i in 0..self.0 {
            ctx.collect_with_timestamp(i, i64::from(i) * 10)?;
        }
        Ok(())
    }
}

#[test]
fn user_sources_try_map_and_print() {
    let env = MemoryEnv::new();
    // By default the failing record is dead-lettered and the run goes on.
    let mut seen = Vec::new();
    let summary = pipeline! {
        env.add_timestamped_source_with_id("numbers", Numbers(5))
            .try_map(|x: u32| if x == 3 { Err(format!("bad {x}")) } else { Ok(x) })
            .for_each(|x| seen.push(x))
    }
    .unwrap();
    assert_eq!((seen, summary.dead_letters), (vec![0, 1, 2, 4], 1));
    env.on_record_error(streaming::memory::OnRecordError::StopRun);
    let err = pipeline! {
        env.add_timestamped_source_with_id("numbers", Numbers(5))
            .try_map(|x: u32| if x == 3 { Err(format!("bad {x}")) } else { Ok(x) })
            .print_with_prefix("n")
    }
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "operator `numbers/1:try_map` failed: bad 3"
    );
    let printed = pipeline! { env.add_timestamped_source(Numbers(3)).print() }.unwrap();
    assert_eq!(printed.window_firings, 0);
    let mut seen = Vec::new();
    pipeline! { env.add_timestamped_source(Numbers(3)).map(|x: u32| x * 2).sink(|x: u32| seen.push(x)) }
        .unwrap();
    assert_eq!(seen, [0, 2, 4]);
}

#[test]
fn environment_expressions() {
    struct Holder {
        env: MemoryEnv,
    }
    let h = Holder {
        env: MemoryEnv::new(),
    };
    let out = pipeline! { h.env.from_elements([1, 2]).map(|x: i32| x + 1).collect_vec() }.unwrap();
    assert_eq!(out, [2, 3]);
    let out = pipeline! { MemoryEnv::new().from_elements([1, 2]).collect_vec() }.unwrap();
    assert_eq!(out, [1, 2]);
    let out = pipeline! { (h.env.clone()).from_elements([3]).collect_vec() }.unwrap();
    assert_eq!(out, [3]);
}

#[test]
fn collection_with_id_and_for_each() {
    let env = MemoryEnv::new();
    let mut seen = Vec::new();
    let summary = pipeline! {
        env.from_collection_with_id("letters", ['a', 'b'])
            .map(|c: char| c.to_ascii_uppercase())
            .for_each(|c| seen.push(c))
    }
    .unwrap();
    assert_eq!((seen, summary.window_firings), (vec!['A', 'B'], 0));
    env.on_record_error(streaming::memory::OnRecordError::StopRun);
    let err = pipeline! { env.from_collection_with_id("letters", [1u8, 0]).map(|x: u8| 1 / x).collect_vec() }
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "operator `{}` panicked: attempt to divide by zero",
            streaming::__private::pipeline_ids! { env.from_collection_with_id("letters", x).map(f).collect_vec() }
                [0]
        )
    );
}
