//! `pipeline!` with streams named by `let` and combined by a second-input operator runs on
//! the memory engine with the builder's output, operator ids and keyed state.

use streaming::api::{
    BroadcastContext, BroadcastStateDescriptor, CollectSink, Collector,
    KeyedBroadcastProcessFunction, KeyedContext, ReadOnlyBroadcastContext, ValueStateDescriptor,
};
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

/// The spending limit, set by the broadcast stream.
const LIMIT: BroadcastStateDescriptor<&'static str, u64> = BroadcastStateDescriptor::new("limit");
/// Per user, how many payments went over the limit.
const OVER: ValueStateDescriptor<u64> = ValueStateDescriptor::new("over", 0);

/// `user: amount (n-th time)` for each payment over the limit; a limit is acknowledged
/// when it is set (on every partition).
#[derive(Clone)]
struct OverLimit;

impl KeyedBroadcastProcessFunction<&'static str, (&'static str, u64), u64, &'static str, u64>
    for OverLimit
{
    type Out = String;
    fn process_element(
        &mut self,
        (user, amount): (&'static str, u64),
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, &'static str, &'static str, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let limit = ctx.broadcast_state()?.get(&"limit").copied();
        if limit.is_some_and(|limit| amount > limit) {
            let n = ctx.state(&OVER)?.value() + 1;
            ctx.state(&OVER)?.update(n);
            out.collect(format!("{user}: {amount} ({n})"));
        }
        Ok(())
    }
    fn process_broadcast_element(
        &mut self,
        limit: u64,
        ctx: &mut BroadcastContext<'_, '_, &'static str, &'static str, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        ctx.broadcast_state()?.put("limit", limit);
        out.collect(format!("limit {limit}"));
        Ok(())
    }
}

/// ((user, amount)) payments.
const PAID: [(&str, u64); 5] = [
    ("ann", 5),
    ("bob", 30),
    ("ann", 25),
    ("ann", 40),
    ("bob", 9),
];

/// One pipeline text, handed to `pipeline!` or to the id macro.
macro_rules! over_limit {
    ($($m:ident)::+, $env:expr) => {
        $($m)::+! {
            let limits = $env
                .from_collection_with_id("limits", vec![20u64, 10])
                .map(|l: u64| l * 100)
                .broadcast(LIMIT);
            $env.from_collection_with_id("payments", PAID.to_vec())
                .map(|(user, amount): (&'static str, u64)| (user, amount * 100))
                .key_by(|p: &(&str, u64)| p.0)
                .connect(limits)
                .process(OverLimit)
                .collect_vec()
        }
    };
}

#[test]
fn a_broadcast_pipeline_matches_the_builder_and_keeps_its_state_under_the_builders_ids() {
    let ids: Vec<String> = over_limit!(streaming::__private::pipeline_ids, env)
        .iter()
        .map(|s| s.to_string())
        .collect();
    // `broadcast` takes no position, `key_by` and `connect` take one each.
    assert_eq!(
        ids,
        [
            "limits/1:map",
            "payments/1:map",
            "payments/4:broadcast_process",
            "payments/5:sink"
        ]
    );

    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let by_macro = over_limit!(pipeline, env).unwrap();
    // The broadcast input runs first on the memory engine: the second limit replaces the
    // first before the first payment; each user's count is its keyed state.
    assert_eq!(
        by_macro,
        [
            "limit 2000",
            "limit 1000",
            "bob: 3000 (1)",
            "ann: 2500 (1)",
            "ann: 4000 (2)"
        ]
    );
    let coordinator = env.checkpoint_coordinator().unwrap();
    let macro_stores = coordinator.registered_stores();
    assert_eq!(macro_stores, ["payments/4:broadcast_process"]);
    assert!(ids.contains(&macro_stores[0]));

    let builder_env = MemoryEnv::new();
    builder_env.enable_checkpointing();
    let by_builder = builder(&builder_env, vec![20, 10], PAID.to_vec());
    assert_eq!(by_builder, by_macro);
    assert_eq!(
        builder_env
            .checkpoint_coordinator()
            .unwrap()
            .registered_stores(),
        macro_stores
    );

    // The builder's pipeline, run after a checkpoint of the macro's, finds its state: the
    // broadcast map (no limit is sent again) and ann's count.
    coordinator.trigger_checkpoint().unwrap();
    let again = builder(&env, Vec::new(), vec![("ann", 11), ("cy", 3)]);
    assert_eq!(again, ["ann: 1100 (3)"]);
}

/// The builder's chain of `over_limit!`.
fn builder(env: &MemoryEnv, limits: Vec<u64>, paid: Vec<(&'static str, u64)>) -> Vec<String> {
    let limits = env
        .from_collection_with_id("limits", limits)
        .map(|l| l * 100)
        .broadcast(LIMIT);
    env.from_collection_with_id("payments", paid)
        .map(|(user, amount)| (user, amount * 100))
        .key_by(|p| p.0)
        .connect(limits)
        .process(OverLimit)
        .collect_vec()
        .unwrap()
}
