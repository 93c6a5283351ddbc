//! `pipeline!` with streams named by `let` and combined by a second-input operator runs on
//! the memory engine with the builder's output, operator ids and keyed state.

use streaming::api::{CollectSink, Collector, KeyedContext, ValueStateDescriptor};
use streaming::time::AscendingTimestamps;
use streaming::{pipeline, BoxError, KeyedCoProcessFunction, MemoryEnv};

/// ((order id, customer), placed at ms).
const ORDERS: [((u32, &str), i64); 3] = [((1, "ada"), 0), ((2, "bob"), 1_000), ((3, "cy"), 2_000)];
/// ((customer, cents), paid at ms): bob pays after 15 minutes, and ada's payment at 0.5 s
/// arrives after the one at 2 min (late).
const PAYMENTS: [((&str, u64), i64); 4] = [
    (("ada", 30), 60_000),
    (("cy", 7), 120_000),
    (("bob", 5), 900_000),
    (("ada", 1), 500),
];

/// One pipeline text, handed to `pipeline!` or to the id macro.
macro_rules! paid_orders {
    ($($m:ident)::+, $env:expr, $late:expr) => {
        $($m)::+! {
            let payments = $env
                .from_timestamped_collection_with_id("payments", PAYMENTS)
                .assign_timestamps_and_watermarks(AscendingTimestamps);
            $env.from_timestamped_collection_with_id("orders", ORDERS)
                .assign_timestamps_and_watermarks(AscendingTimestamps)
                .key_by(|o: &(u32, &str)| o.1)
                .interval_join(payments.key_by(|p: &(&str, u64)| p.0))
                .between(0, 600_000)
                .side_output_late_seconds($late)
                .process(|o: &(u32, &str), p: &(&str, u64)| (o.0, p.1))
                .map(|(order, cents): (u32, u64)| format!("order {order}: {cents}"))
                .collect_vec()
        }
    };
}

#[test]
fn an_interval_join_of_a_named_stream_matches_the_builder() {
    let ids: Vec<String> = paid_orders!(streaming::__private::pipeline_ids, env, late)
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        ids,
        [
            "payments/1:watermarks",
            "orders/1:watermarks",
            "orders/5:process",
            "orders/6:map",
            "orders/7:sink"
        ]
    );

    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let late = CollectSink::new();
    let by_macro = paid_orders!(pipeline, env, late.clone()).unwrap();
    assert_eq!(by_macro, ["order 1: 30", "order 3: 7"]);
    assert_eq!(late.snapshot(), [("ada", 1)]);
    let macro_stores = env.checkpoint_coordinator().unwrap().registered_stores();
    // The join's buffers are the keyed state of its process, under the macro's id.
    assert_eq!(macro_stores, ["orders/5:process"]);
    assert!(ids.contains(&macro_stores[0]));

    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let late = CollectSink::new();
    let payments = env
        .from_timestamped_collection_with_id("payments", PAYMENTS)
        .assign_timestamps_and_watermarks(AscendingTimestamps);
    let by_builder = env
        .from_timestamped_collection_with_id("orders", ORDERS)
        .assign_timestamps_and_watermarks(AscendingTimestamps)
        .key_by(|o| o.1)
        .interval_join(payments.key_by(|p| p.0))
        .between(0, 600_000)
        .unwrap()
        .side_output_late_seconds(late.clone())
        .process(|o, p| (o.0, p.1))
        .map(|(order, cents)| format!("order {order}: {cents}"))
        .collect_vec()
        .unwrap();
    assert_eq!(by_builder, by_macro);
    assert_eq!(late.snapshot(), [("ada", 1)]);
    assert_eq!(
        env.checkpoint_coordinator().unwrap().registered_stores(),
        macro_stores
    );
}

const TOTAL: ValueStateDescriptor<u64> = ValueStateDescriptor::new("total", 0);

/// Each account's balance after every deposit (first input) and withdrawal (second).
#[derive(Clone)]
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

#[test]
fn a_keyed_co_process_of_named_streams_keeps_state_per_key_across_inputs() {
    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let balances = pipeline! {
        let atm = env.from_collection_with_id("atm", vec![("ann", 4u64)]);
        let withdrawals = env
            .from_collection_with_id("card", vec![("ann", 3u64), ("bob", 0)])
            .union(atm)
            .filter(|w: &(&str, u64)| w.1 > 0);
        env.from_collection_with_id("deposits", vec![("ann", 10u64), ("bob", 2)])
            .connect(withdrawals)
            .key_by(|d: &(&str, u64)| d.0, |w: &(&str, u64)| w.0)
            .process(Balance)
            .collect_vec()
    }
    .unwrap();
    // All deposits first (the memory engine runs the first input to its end), then the
    // card's withdrawal and the ATM's, each from ann's balance.
    assert_eq!(balances, [("ann", 10), ("bob", 2), ("ann", 7), ("ann", 3)]);
    // The process's state is under the first input's ids: connect and key_by take a
    // position each, as in the builder.
    assert_eq!(
        env.checkpoint_coordinator().unwrap().registered_stores(),
        ["deposits/3:process"]
    );
}
