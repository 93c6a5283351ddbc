//! Broadcast state on the memory engine: a rules stream broadcast to a keyed stream; the
//! keyed side reads the rules and keeps its own keyed state and timers.

use streaming::api::{
    BroadcastContext, BroadcastStateDescriptor, Collector, KeyedBroadcastProcessFunction,
    ReadOnlyBroadcastContext, ValueStateDescriptor,
};
use streaming::{BoxError, MemoryEnv};

/// Threshold per rule name.
const RULES: BroadcastStateDescriptor<String, u64> = BroadcastStateDescriptor::persistent("rules");
/// Per user, how many amounts went over the threshold.
const OVER: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("over", 0);

/// Emits `user: amount over threshold (n-th time)` for each amount over the `limit`
/// rule; a rule `("limit", t)` replaces the threshold, and is acknowledged once.
#[derive(Clone)]
struct Limits;

impl KeyedBroadcastProcessFunction<String, (String, u64), (String, u64), String, u64> for Limits {
    type Out = String;

    fn process_element(
        &mut self,
        (user, amount): (String, u64),
        ctx: &mut ReadOnlyBroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        assert_eq!(ctx.current_key(), &user);
        let Some(limit) = ctx.broadcast_state()?.get(&"limit".to_string()).copied() else {
            return Ok(());
        };
        if amount > limit {
            let mut over = ctx.state(&OVER)?;
            let n = over.value() + 1;
            over.update(n);
            out.collect(format!("{user}: {amount} over {limit} ({n})"));
        }
        Ok(())
    }

    fn process_broadcast_element(
        &mut self,
        (name, threshold): (String, u64),
        ctx: &mut BroadcastContext<'_, '_, String, String, u64>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let mut rules = ctx.broadcast_state()?;
        if rules.put(name.clone(), threshold).is_none() {
            out.collect(format!("rule {name} = {threshold}"));
        }
        Ok(())
    }
}

fn amounts() -> Vec<(String, u64)> {
    [
        ("ann", 5),
        ("bob", 30),
        ("ann", 25),
        ("ann", 40),
        ("bob", 9),
    ]
    .into_iter()
    .map(|(u, a)| (u.to_string(), a))
    .collect()
}

#[test]
fn every_keyed_element_reads_the_broadcast_rules_and_keeps_its_keyed_state() {
    let env = MemoryEnv::new();
    let rules = env.from_collection(vec![("limit".to_string(), 20), ("limit".to_string(), 10)]);
    let out = env
        .from_collection(amounts())
        .key_by(|a: &(String, u64)| a.0.clone())
        .connect(rules.broadcast(RULES))
        .process(Limits)
        .collect_vec()
        .unwrap();
    // The broadcast input runs first on the memory engine: both rules are in before the
    // first amount, the second replacing the first.
    assert_eq!(
        out,
        [
            "rule limit = 20",
            "bob: 30 over 10 (1)",
            "ann: 25 over 10 (1)",
            "ann: 40 over 10 (2)",
        ]
    );
}

#[test]
fn without_a_rule_nothing_is_over() {
    let env = MemoryEnv::new();
    let rules = env.from_collection(Vec::<(String, u64)>::new());
    let out = env
        .from_collection(amounts())
        .key_by(|a: &(String, u64)| a.0.clone())
        .connect(rules.broadcast(RULES))
        .process(Limits)
        .collect_vec()
        .unwrap();
    assert!(out.is_empty(), "{out:?}");
}
