//! Seed §1.2 examples and the core API of the in-memory engine.

use streaming::api::{
    Collector, KeyedContext, KeyedProcessFunction, Source, SourceContext, TimerContext,
    ValueStateDescriptor,
};
use streaming::memory::{DeadLetter, OnRecordError};
use streaming::BoxError;
use streaming::{Error, MemoryEnv};

#[test]
fn seed_operator_chain() {
    let env = MemoryEnv::new();
    let mut out = Vec::new();
    env.from_elements(["a b", "c", "d e"])
        .flat_map(|line| line.split(' ').map(str::to_string).collect::<Vec<_>>())
        .filter(|w| w != "c")
        .map(|w| w.to_uppercase())
        .sink(|w| out.push(w))
        .unwrap();
    assert_eq!(out, ["A", "B", "D", "E"]);
}

const COUNT: ValueStateDescriptor<i32> = ValueStateDescriptor::new("count", 0);

#[test]
fn seed_keyed_value_state() {
    let env = MemoryEnv::new();
    let out = env
        .from_elements(["a", "b", "a"])
        .key_by(|v| v.to_string())
        .process(|_v, ctx, out| {
            let next = ctx.state(&COUNT)?.value() + 1;
            ctx.state(&COUNT)?.update(next);
            out.collect(format!("{}:{next}", ctx.current_key()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(out, ["a:1", "b:1", "a:2"]);
}

/// `from_collection` gives no timestamps (`ctx.timestamp()` is `i64::MIN`); ingestion time
/// is the arrival index; a timestamped collection keeps the given times.
#[test]
fn from_collection_has_no_timestamps_ingestion_time_is_the_index() {
    let env = MemoryEnv::new();
    let untimed = env
        .from_collection(vec!['x', 'y', 'z'])
        .key_by(|_| ())
        .process(|v, ctx, out| {
            out.collect((v, ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(untimed, [('x', i64::MIN), ('y', i64::MIN), ('z', i64::MIN)]);
    let ingestion = env
        .from_collection(vec!['x', 'y', 'z'])
        .with_ingestion_time()
        .key_by(|_| ())
        .process(|v, ctx, out| {
            out.collect((v, ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(ingestion, [('x', 0), ('y', 1), ('z', 2)]);
    let given = env
        .from_timestamped_collection(vec![('x', 700), ('y', -5), ('z', 40)])
        .key_by(|_| ())
        .process(|v, ctx, out| {
            out.collect((v, ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(given, [('x', 700), ('y', -5), ('z', 40)]);
}

#[test]
fn keyed_reduce_and_sum_are_rolling() {
    let env = MemoryEnv::new();
    let reduced = env
        .from_elements([("a", 1), ("b", 10), ("a", 2), ("a", 3)])
        .key_by(|p| p.0)
        .reduce(|x, y| (x.0, x.1 + y.1))
        .collect_vec()
        .unwrap();
    assert_eq!(reduced, [("a", 1), ("b", 10), ("a", 3), ("a", 6)]);
    let sums = env
        .from_elements([1u64, 2, 3, 4, 5])
        .key_by(|x| x % 2)
        .sum()
        .collect_vec()
        .unwrap();
    assert_eq!(sums, [(1, 1), (0, 2), (1, 4), (0, 6), (1, 9)]);
}

struct Lines {
    opened: bool,
    closed: std::rc::Rc<std::cell::Cell<bool>>,
    /// Emit with `collect_with_timestamp` (times 100, 500, 200) instead of `collect`.
    timestamps: bool,
}

impl Source<(String, i64)> for Lines {
    fn open(&mut self) -> Result<(), streaming::BoxError> {
        self.opened = true;
        Ok(())
    }
    fn run<C: SourceContext<(String, i64)>>(&mut self, ctx: &mut C) -> Result<(), Error> {
        assert!(self.opened);
        for (line, time) in [("first", 100), ("explicit", 500), ("last", 200)] {
            let value = (line.to_string(), 0);
            if self.timestamps {
                ctx.collect_with_timestamp(value, time)?;
            } else {
                ctx.collect(value)?;
            }
        }
        Ok(())
    }
    fn close(&mut self) -> Result<(), streaming::BoxError> {
        self.closed.set(true);
        Ok(())
    }
}

#[test]
fn user_source_lifecycle_and_timestamps() {
    let env = MemoryEnv::new();
    let closed = std::rc::Rc::new(std::cell::Cell::new(false));
    let lines = |timestamps| Lines {
        opened: false,
        closed: closed.clone(),
        timestamps,
    };
    let timed = env
        .add_timestamped_source(lines(true))
        .key_by(|_| 0)
        .process(|(s, _), ctx, out| {
            out.collect((s, ctx.timestamp()));
            Ok(())
        })
        .collect_vec()
        .unwrap();
    let given = [("first", 100), ("explicit", 500), ("last", 200)];
    assert_eq!(timed, given.map(|(s, t)| (s.to_string(), t)));
    assert!(closed.get());
    // `add_source`: the records have no timestamp; on ingestion time the arrival index.
    let untimed = env
        .add_source(lines(false))
        .key_by(|_| 0)
        .process(|_, ctx, out| {
            out.collect(ctx.timestamp());
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(untimed, [i64::MIN; 3]);
    let ingestion = env
        .add_source(lines(false))
        .with_ingestion_time()
        .key_by(|_| 0)
        .process(|_, ctx, out| {
            out.collect(ctx.timestamp());
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(ingestion, [0, 1, 2]);
}

/// A user source emitting against its stream's rule for timestamps fails the run with a
/// source error naming the fix; the source is closed.
#[test]
fn user_source_timestamps_must_match_how_it_was_added() {
    let env = MemoryEnv::new();
    let closed = std::rc::Rc::new(std::cell::Cell::new(false));
    let lines = |timestamps| Lines {
        opened: false,
        closed: closed.clone(),
        timestamps,
    };
    let err = env
        .add_source_with_id("lines", lines(true))
        .collect_vec()
        .unwrap_err();
    assert!(matches!(&err, Error::Source { source_id, .. } if source_id == "lines"));
    assert!(
        err.to_string()
            .contains("add it with `add_timestamped_source`"),
        "{err}"
    );
    assert!(closed.get());
    let err = env
        .add_timestamped_source(lines(false))
        .collect_vec()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("emit with `collect_with_timestamp`"),
        "{err}"
    );
}

#[test]
fn user_function_error_names_the_operator_and_closes_everything() {
    let env = MemoryEnv::new();
    env.on_record_error(OnRecordError::StopRun);
    let closed = std::rc::Rc::new(std::cell::Cell::new(false));
    let err = env
        .add_source(Lines {
            opened: false,
            closed: closed.clone(),
            timestamps: false,
        })
        .map(|(s, _)| s)
        .try_map(|s| {
            if s == "explicit" {
                Err(format!("cannot parse {s:?}"))
            } else {
                Ok(s.len())
            }
        })
        .collect_vec()
        .unwrap_err();
    match &err {
        Error::UserFunction { operator, source } => {
            assert_eq!(operator, "source-0/2:try_map");
            assert_eq!(source.to_string(), "cannot parse \"explicit\"");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(closed.get(), "source closed after an error");
}

#[test]
fn panics_are_caught_and_name_the_operator() {
    let env = MemoryEnv::new();
    env.on_record_error(OnRecordError::StopRun);
    let err = env
        .from_elements([1, 2, 0, 4])
        .map(|x| 100 / x)
        .collect_vec()
        .unwrap_err();
    match err {
        Error::Panic { operator, message } => {
            assert_eq!(operator, "source-0/1:map");
            assert!(message.contains("divide by zero"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_failing_record_is_dead_lettered_and_the_source_goes_on() {
    let env = MemoryEnv::new();
    let closed = std::rc::Rc::new(std::cell::Cell::new(false));
    let mut dead = Vec::new();
    let out = env
        .add_timestamped_source(Lines {
            opened: false,
            closed: closed.clone(),
            timestamps: true,
        })
        .side_output_dead_letters(|d| dead.push(d))
        .map(|(s, _)| s)
        .try_map(|s| {
            if s == "explicit" {
                Err(format!("cannot parse {s:?}"))
            } else {
                Ok(s.len())
            }
        })
        .collect_vec()
        .unwrap();
    assert_eq!(out, ["first".len(), "last".len()]);
    assert_eq!(dead.len(), 1);
    let d = &dead[0];
    assert_eq!(d.record, ("explicit".to_string(), 0));
    assert_eq!(d.timestamp, 500);
    assert_eq!(d.error_type, "user_function");
    assert_eq!(d.dead_letter_type, "retries_exhausted:user_function");
    assert_eq!(
        d.message,
        "operator `source-0/2:try_map` failed: cannot parse \"explicit\""
    );
    assert_eq!(d.attempts, 4);
    assert_eq!(d.operator.as_ref().unwrap(), "source-0/2:try_map");
    assert!(closed.get(), "source closed");
}

#[test]
fn a_panic_is_dead_lettered_with_its_message() {
    let env = MemoryEnv::new();
    env.on_record_error(OnRecordError::DeadLetter);
    let mut dead = Vec::new();
    let summary = env
        .from_elements([1, 2, 0, 4])
        .side_output_dead_letters(|d: DeadLetter<i32>| dead.push(d))
        .map(|x| 100 / x)
        .sink(|_| {})
        .unwrap();
    assert_eq!(summary.dead_letters, 1);
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].record, dead[0].timestamp), (0, 2));
    assert_eq!(dead[0].error_type, "panic");
    assert_eq!(dead[0].dead_letter_type, "panic");
    assert_eq!(dead[0].attempts, 1);
    assert!(dead[0].message.contains("divide by zero"), "{:?}", dead[0]);
    // Without a dead-letter output the record is only counted.
    let out = env.from_elements([1, 0, 4]).map(|x| 100 / x).collect_vec();
    assert_eq!(out.unwrap(), [100, 25]);
}

#[test]
fn sink_lifecycle_open_invoke_close_even_on_error() {
    #[derive(Default)]
    struct Recorder(std::rc::Rc<std::cell::RefCell<Vec<String>>>);
    impl streaming::api::Sink<i32> for Recorder {
        fn open(&mut self) -> Result<(), streaming::BoxError> {
            self.0.borrow_mut().push("open".into());
            Ok(())
        }
        fn invoke(&mut self, v: i32) -> Result<(), streaming::BoxError> {
            if v == 3 {
                return Err("three is not allowed".into());
            }
            self.0.borrow_mut().push(format!("invoke {v}"));
            Ok(())
        }
        fn close(&mut self) -> Result<(), streaming::BoxError> {
            self.0.borrow_mut().push("close".into());
            Ok(())
        }
    }
    let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let env = MemoryEnv::new();
    let err = env
        .from_elements([1, 2, 3, 4])
        .sink(Recorder(log.clone()))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "operator `source-0/1:sink` failed: three is not allowed"
    );
    assert_eq!(*log.borrow(), ["open", "invoke 1", "invoke 2", "close"]);
}

#[test]
fn into_iterator_yields_results() {
    let env = MemoryEnv::new();
    let items: Vec<_> = env
        .from_elements([1, 2, 3])
        .map(|x| x * 2)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(items, [2, 4, 6]);
    env.on_record_error(OnRecordError::StopRun);
    let mut it = env.from_elements([1, 0]).map(|x| 1 / x).into_iter();
    assert_eq!(it.next().unwrap().unwrap(), 1);
    assert!(matches!(it.next(), Some(Err(Error::Panic { .. }))));
    assert!(it.next().is_none());
}

#[test]
fn state_type_conflict_is_an_error() {
    const AS_TEXT: ValueStateDescriptor<String> = ValueStateDescriptor::new("count", String::new());
    let env = MemoryEnv::new();
    env.on_record_error(OnRecordError::StopRun);
    let err = env
        .from_elements([1, 2])
        .key_by(|_| 0)
        .process(
            |v: i32, ctx, out: &mut streaming::api::Collector<'_, i32>| {
                if v == 1 {
                    ctx.state(&COUNT)?.update(1);
                } else {
                    ctx.state(&AS_TEXT)?.update("x".into());
                }
                out.collect(v);
                Ok(())
            },
        )
        .collect_vec()
        .unwrap_err();
    // The state error passes through the user function's `?` unwrapped.
    match err {
        Error::StateType {
            operator,
            state,
            declared,
            requested,
        } => {
            assert_eq!(operator, "source-0/2:process");
            assert_eq!(state, "count");
            assert_eq!(declared, "ValueState<i32>");
            assert_eq!(requested, "ValueState<String>");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn lazy_source_does_not_buffer_input() {
    // 5 M records through a keyed sum with 3 keys: the source is an iterator consumed one
    // record at a time, so this runs in constant memory (the benchmark measures peak RSS).
    let env = MemoryEnv::new();
    let mut last = (0, 0);
    env.from_collection((0..5_000_000u64).map(|x| x % 3))
        .key_by(|x| *x)
        .sum()
        .sink(|p| last = p)
        .unwrap();
    // The last record is 4_999_999 % 3 == 1; its key's sum is the number of ones.
    let ones = (0..5_000_000u64).filter(|i| i % 3 == 1).count() as u64;
    assert_eq!(last, (1, ones));
}

/// Emits `n` records for element `n` and two per timer.
struct Fanout;

impl KeyedProcessFunction<&'static str, u32> for Fanout {
    type Out = String;
    fn process_element(
        &mut self,
        n: u32,
        ctx: &mut KeyedContext<'_, &'static str>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        for i in 0..n {
            out.collect(format!("{n}.{i}"));
        }
        if n == 3 {
            ctx.register_event_time_timer(100)?;
        }
        Ok(())
    }

    fn on_timer(
        &mut self,
        t: i64,
        _ctx: &mut TimerContext<'_, &'static str>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        out.collect(format!("timer {t} a"));
        out.collect(format!("timer {t} b"));
        Ok(())
    }
}

/// A process function emits none, one or several records per call; timers as well. They
/// reach the next operator in the order collected, each call's before the next call's.
#[test]
fn process_outputs_keep_their_order_whatever_their_number_per_call() {
    let env = MemoryEnv::new();
    let out = env
        .from_collection(vec![0u32, 1, 2, 3])
        .with_ingestion_time()
        .key_by(|_| "k")
        .process_function(Fanout)
        .collect_vec()
        .unwrap();
    assert_eq!(
        out,
        [
            "1.0",
            "2.0",
            "2.1",
            "3.0",
            "3.1",
            "3.2",
            "timer 100 a",
            "timer 100 b"
        ]
    );
}
