//! Pipelines with several inputs on the memory engine: `union` and `connect` (co-map,
//! co-flat-map, a keyed co-process function with shared state and timers), the merged
//! watermark, and failing records of either input.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use streaming::api::{Collector, KeyedContext, Sink, TimerContext, ValueStateDescriptor};
use streaming::memory::OnRecordError;
use streaming::time::{BoundedOutOfOrderness, TumblingEventTimeWindows};
use streaming::{BoxError, Error, KeyedCoProcessFunction, MemoryEnv};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Counts per key and tumbling 2 s window of two timestamped inputs, each with its own
/// watermark generator (no out-of-orderness allowed).
fn union_counts(
    first: Vec<(&'static str, i64)>,
    second: Vec<(&'static str, i64)>,
) -> Vec<(&'static str, i64, u64)> {
    let env = MemoryEnv::new();
    let generator = || BoundedOutOfOrderness::new(ms(0)).unwrap();
    let a = env
        .from_timestamped_collection(first)
        .assign_timestamps_and_watermarks(generator());
    let b = env
        .from_timestamped_collection(second)
        .assign_timestamps_and_watermarks(generator());
    a.union(b)
        .key_by(|k: &&str| *k)
        .window(TumblingEventTimeWindows::of(ms(2000)).unwrap())
        .count()
        .map(|(k, w, n)| (k, w.start(), n))
        .collect_vec()
        .unwrap()
}

/// The second input's record at 1.5 s would be late against the first input's watermark
/// (4.999 s after its record at 5 s): the merged watermark is the lowest of the inputs',
/// so it is not, and it counts in its window.
#[test]
fn the_union_watermark_waits_for_the_slower_input() {
    let out = union_counts(vec![("a", 1000), ("a", 5000)], vec![("a", 1500)]);
    assert_eq!(out, [("a", 0, 2), ("a", 4000, 1)]);
}

/// The same records from one input: the record at 1.5 s arrives after the watermark passed
/// its window and is late (the union changes what is late, as it should).
#[test]
fn one_input_with_the_same_records_finds_the_record_late() {
    let env = MemoryEnv::new();
    let summary = env
        .from_timestamped_collection(vec![("a", 1000i64), ("a", 5000), ("a", 1500)])
        .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(ms(0)).unwrap())
        .key_by(|k: &&str| *k)
        .window(TumblingEventTimeWindows::of(ms(2000)).unwrap())
        .count()
        .sink(|_: (&str, streaming::time::TimeWindow, u64)| ())
        .unwrap();
    assert_eq!(summary.late_elements, 1);
}

#[test]
fn three_inputs_keep_each_input_in_order_and_ids_continue_the_first() {
    let env = MemoryEnv::new();
    let a = env.from_collection_with_id("a", vec![1, 2]);
    let b = env
        .from_collection_with_id("b", vec![10, 20])
        .map(|x| x + 1);
    let c = env.from_collection_with_id("c", vec![100]);
    let merged = a.union(b).union(c);
    assert_eq!(merged.next_operator_id("map"), "a/3:map");
    assert_eq!(merged.collect_vec().unwrap(), [1, 2, 11, 21, 100]);
}

#[test]
fn co_flat_map_runs_one_function_per_input() {
    let env = MemoryEnv::new();
    let lines = env.from_collection(vec!["a b", "c"]);
    let counts = env.from_collection(vec![2usize]);
    let out = lines
        .connect(counts)
        .co_flat_map(
            |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>(),
            |n| vec!["#".repeat(n)],
        )
        .collect_vec()
        .unwrap();
    assert_eq!(out, ["a", "b", "c", "##"]);
}

#[derive(Clone, Debug, PartialEq)]
struct Customer {
    id: u32,
    name: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
struct Order {
    customer: u32,
    amount: u64,
}

const NAME: ValueStateDescriptor<String> = ValueStateDescriptor::persistent("name", String::new());
const TOTAL: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("total", 0);

/// Keeps each customer's latest name (first input) and enriches orders (second input)
/// with it; an event-time timer 10 ms after an order reports the customer's total.
struct Enrich;

impl KeyedCoProcessFunction<u32, Customer, Order> for Enrich {
    type Out = String;

    fn process_element1(
        &mut self,
        customer: Customer,
        ctx: &mut KeyedContext<'_, u32>,
        _out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.state(&NAME)?.update(customer.name.to_string());
        Ok(())
    }

    fn process_element2(
        &mut self,
        order: Order,
        ctx: &mut KeyedContext<'_, u32>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let name = ctx.state(&NAME)?.value();
        let total = ctx.state(&TOTAL)?.value() + order.amount;
        ctx.state(&TOTAL)?.update(total);
        ctx.register_event_time_timer(ctx.timestamp() + 10)?;
        out.collect(format!("{name}: {}", order.amount));
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, u32>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let total = ctx.state(&TOTAL)?.value();
        out.collect(format!(
            "{} total at {timestamp}: {total}",
            ctx.current_key()
        ));
        Ok(())
    }
}

#[test]
fn a_keyed_co_process_function_shares_state_and_timers_between_its_inputs() {
    let env = MemoryEnv::new();
    let customers = env.from_timestamped_collection(vec![
        (Customer { id: 1, name: "ada" }, 0),
        (Customer { id: 2, name: "bob" }, 0),
        (
            Customer {
                id: 1,
                name: "ada l.",
            },
            1,
        ),
    ]);
    let orders = env.from_timestamped_collection(vec![
        (
            Order {
                customer: 1,
                amount: 5,
            },
            100,
        ),
        (
            Order {
                customer: 2,
                amount: 7,
            },
            105,
        ),
        (
            Order {
                customer: 1,
                amount: 3,
            },
            120,
        ),
        (
            Order {
                customer: 3,
                amount: 1,
            },
            130,
        ),
    ]);
    let out = customers
        .connect(orders)
        .key_by(|c: &Customer| c.id, |o: &Order| o.customer)
        .process(Enrich)
        .collect_vec()
        .unwrap();
    // Orders are enriched as they come; the timers fire at the end of input, in time
    // order, each seeing the key's state as it is then.
    assert_eq!(
        out,
        [
            "ada l.: 5",
            "bob: 7",
            "ada l.: 3",
            ": 1",
            "1 total at 110: 8",
            "2 total at 115: 7",
            "1 total at 130: 8",
            "3 total at 140: 1",
        ]
    );
}

/// Counts how often the sink was opened and closed.
#[derive(Clone, Default)]
struct Lifecycle(Rc<RefCell<(u32, u32, Vec<i32>)>>);

impl Sink<i32> for Lifecycle {
    fn open(&mut self) -> Result<(), BoxError> {
        self.0.borrow_mut().0 += 1;
        Ok(())
    }
    fn invoke(&mut self, value: i32) -> Result<(), BoxError> {
        self.0.borrow_mut().2.push(value);
        Ok(())
    }
    fn close(&mut self) -> Result<(), BoxError> {
        self.0.borrow_mut().1 += 1;
        Ok(())
    }
}

fn failing_union(env: &MemoryEnv, sink: Lifecycle) -> Result<streaming::JobSummary, Error> {
    let a = env.from_collection(vec![1, 2, 3]).try_map(|x: i32| {
        if x == 2 {
            Err::<i32, BoxError>("two".into())
        } else {
            Ok(x)
        }
    });
    let b = env.from_collection(vec![10, 20]);
    a.union(b).sink(sink)
}

#[test]
fn a_failing_record_of_one_input_is_dead_lettered_and_both_inputs_go_on() {
    let env = MemoryEnv::new();
    let sink = Lifecycle::default();
    let summary = failing_union(&env, sink.clone()).unwrap();
    assert_eq!(summary.dead_letters, 1);
    assert_eq!(*sink.0.borrow(), (1, 1, vec![1, 3, 10, 20]));
}

#[test]
fn a_run_stopped_by_the_first_input_never_runs_the_second_and_closes_the_sink_once() {
    let env = MemoryEnv::new();
    env.on_record_error(OnRecordError::StopRun);
    let sink = Lifecycle::default();
    let err = failing_union(&env, sink.clone()).unwrap_err();
    assert!(err.to_string().contains("two"), "{err}");
    assert_eq!(*sink.0.borrow(), (1, 1, vec![1]));
}

/// A record that fails after the union is the record of the input it came from: it goes to
/// that input's dead-letter output, the other input's records run on.
#[test]
fn a_record_failing_after_the_union_goes_to_its_own_inputs_dead_letters() {
    let env = MemoryEnv::new();
    let mut first_dead = Vec::new();
    let mut second_dead = Vec::new();
    let a = env
        .from_collection_with_id("a", vec![1, 2, 3])
        .side_output_dead_letters(|d: streaming::memory::DeadLetter<i32>| {
            first_dead.push(d.record)
        });
    let b = env
        .from_collection_with_id("b", vec![20, 30])
        .side_output_dead_letters(|d: streaming::memory::DeadLetter<i32>| {
            second_dead.push(d.record)
        });
    let out = a
        .union(b)
        .try_map(|x: i32| {
            if x % 2 == 0 {
                Err::<i32, BoxError>("even".into())
            } else {
                Ok(x)
            }
        })
        .collect_vec()
        .unwrap();
    assert_eq!(out, [1, 3]);
    assert_eq!((first_dead, second_dead), (vec![2], vec![20, 30]));
}
