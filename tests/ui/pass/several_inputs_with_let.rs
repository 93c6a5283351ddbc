// Streams named with `let` inside `pipeline!` and combined by every operator of several
// inputs, on the memory engine.
use std::time::Duration;
use streaming::api::{CollectSink, Collector, KeyedContext, ValueStateDescriptor};
use streaming::time::{AscendingTimestamps, TimeWindow, TumblingEventTimeWindows};
use streaming::{pipeline, BoxError, KeyedCoProcessFunction, MemoryEnv};

const TOTAL: ValueStateDescriptor<u64> = ValueStateDescriptor::new("total", 0);

/// A running total per account over deposits (first input) and withdrawals (second).
struct Balance;
impl KeyedCoProcessFunction<&'static str, (&'static str, u64), (&'static str, u64)> for Balance {
    type Out = (&'static str, u64);
    fn process_element1(
        &mut self,
        deposit: (&'static str, u64),
        ctx: &mut KeyedContext<'_, &'static str>,
        out: &mut Collector<'_, (&'static str, u64)>,
    ) -> Result<(), BoxError> {
        let total = ctx.state(&TOTAL)?.value() + deposit.1;
        ctx.state(&TOTAL)?.update(total);
        out.collect((deposit.0, total));
        Ok(())
    }
    fn process_element2(
        &mut self,
        withdrawal: (&'static str, u64),
        ctx: &mut KeyedContext<'_, &'static str>,
        out: &mut Collector<'_, (&'static str, u64)>,
    ) -> Result<(), BoxError> {
        let total = ctx.state(&TOTAL)?.value().saturating_sub(withdrawal.1);
        ctx.state(&TOTAL)?.update(total);
        out.collect((withdrawal.0, total));
        Ok(())
    }
}

fn main() -> Result<(), streaming::Error> {
    let env = MemoryEnv::new();

    // A `let` continuing another one, a shadowing `let`, and a union.
    let out = pipeline! {
        let refunds = env.from_elements([-5i64]);
        let refunds = refunds.map(|x: i64| x * 2);
        env.from_elements([10i64, 20]).union(refunds).collect_vec()
    }?;
    assert_eq!(out, [10, 20, -10]);

    // connect with a function per input.
    let out = pipeline! {
        let lines = env.from_elements(["a b"]);
        env.from_elements([2usize])
            .connect(lines)
            .co_flat_map(
                |n: usize| vec![n.to_string(); n],
                |l: &str| l.split(' ').map(String::from).collect::<Vec<_>>(),
            )
            .collect_vec()
    }?;
    assert_eq!(out, ["2", "2", "a", "b"]);

    // A keyed co-process function; the argument is a chain on a bound stream.
    let out = pipeline! {
        let withdrawals = env.from_elements([("ann", 3u64)]);
        env.from_elements([("ann", 10u64), ("bob", 1)])
            .connect(withdrawals.filter(|w: &(&str, u64)| w.1 > 0))
            .key_by(|d: &(&str, u64)| d.0, |w: &(&str, u64)| w.0)
            .process(Balance)
            .collect_vec()
    }?;
    assert_eq!(out, [("ann", 10), ("bob", 1), ("ann", 7)]);

    // A window join and a co-group with their window's configuration.
    let late = CollectSink::new();
    let out = pipeline! {
        let views = env.from_timestamped_collection([("ad1", 1), ("ad2", 3)]);
        env.from_timestamped_collection([("ad1", 5), ("ad2", 12)])
            .connect(views)
            .key_by(|c: &&str| *c, |v: &&str| *v)
            .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
            .allowed_lateness(Duration::from_millis(1))
            .side_output_late_data(late.clone())
            .join(|click: &&str, view: &&str| format!("{click}={view}"))
            .collect_vec()
    }?;
    assert_eq!(out, ["ad1=ad1"]);
    let out = pipeline! {
        let views = env.from_timestamped_collection([("ad1", 1), ("ad1", 2)]);
        env.from_timestamped_collection([("ad1", 5)])
            .connect(views)
            .key_by(|c: &&str| *c, |v: &&str| *v)
            .window(TumblingEventTimeWindows::of(Duration::from_millis(10)))
            .co_group(|ad: &&str, _w: &TimeWindow, clicks: &[&str], views: &[&str], out: &mut Collector<'_, String>| {
                out.collect(format!("{ad}: {}/{}", clicks.len(), views.len()));
                Ok(())
            })
            .collect_vec()
    }?;
    assert_eq!(out, ["ad1: 1/2"]);

    // An interval join with both late side outputs.
    let (late_orders, late_payments) = (CollectSink::new(), CollectSink::new());
    let out = pipeline! {
        let payments = env
            .from_timestamped_collection([(("ada", 30u64), 60_000)])
            .assign_timestamps_and_watermarks(AscendingTimestamps);
        env.from_timestamped_collection([((7u32, "ada"), 0)])
            .key_by(|o: &(u32, &str)| o.1)
            .interval_join(payments.key_by(|p: &(&str, u64)| p.0))
            .between(0, 600_000)
            .side_output_late_firsts(late_orders.clone())
            .side_output_late_seconds(late_payments.clone())
            .process(|o: &(u32, &str), p: &(&str, u64)| (o.0, p.1))
            .collect_vec()
    }?;
    assert_eq!(out, [(7, 30)]);
    assert_eq!((late_orders.len(), late_payments.len()), (0, 0));
    Ok(())
}
