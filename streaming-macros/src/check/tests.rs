//! Tests of the rules, on parsed pipelines.

use super::literal::duration_nanos;
use super::*;
use crate::ops::Engine;
use crate::parse::Pipeline;
use syn::parse_quote;
use syn::Expr;

fn errors(p: Pipeline) -> Vec<String> {
    match check(&p) {
        Ok(_) => Vec::new(),
        Err(e) => e.iter().map(ToString::to_string).collect(),
    }
}

fn ids(p: Pipeline) -> Vec<String> {
    let checked = check(&p).unwrap_or_else(|e| panic!("{}", e[0]));
    checked
        .steps()
        .into_iter()
        .filter_map(|s| s.id.clone())
        .collect()
}

#[test]
fn a_valid_keyed_window_pipeline_has_no_errors() {
    let p: Pipeline = parse_quote! {
        env.from_elements(["a b", "c"])
            .flat_map(|l: &str| l.split(' ').map(String::from).collect::<Vec<_>>())
            .key_by(|w: &String| w.clone())
            .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
            .allowed_lateness(Duration::from_secs(5))
            .reduce(|a, b| a + &b)
            .collect_vec()
    };
    assert_eq!(errors(p), Vec::<String>::new());
}

#[test]
fn unknown_operator_suggests_the_closest() {
    let p: Pipeline = parse_quote!(env.from_elements([1]).mapp(|x| x).collect_vec());
    assert_eq!(errors(p), ["unknown operator `mapp`; did you mean `map`?"]);
}

#[test]
fn a_method_on_the_environment_needs_parentheses() {
    let p: Pipeline = parse_quote!(env.clone().from_elements([1]).collect_vec());
    let e = errors(p);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].ends_with("put it in parentheses: `(env.clone(..)).from_elements(..)`"),
        "{e:?}"
    );
    let p: Pipeline = parse_quote!((env.clone()).from_elements([1]).collect_vec());
    assert!(errors(p).is_empty());
}

#[test]
fn unknown_operator_does_not_cascade() {
    let p: Pipeline = parse_quote!(env.from_elements([1]).frobnicate(|x| x).sum().collect());
    let e = errors(p);
    assert_eq!(e.len(), 2, "{e:?}");
    assert_eq!(
        e[0],
        "unknown operator `frobnicate`; on a stream the operators are `map`, `try_map`, `filter`, `flat_map`, \
         `transform`, `union`, `with_ingestion_time`, `assign_timestamps_and_watermarks`, `assign_timestamps_and_watermarks_with`, `key_by`, `connect`, `broadcast`, `sink`, `for_each`, `print`, \
         `print_with_prefix` or `collect_vec`"
    );
    assert_eq!(
        e[1],
        "unknown operator `collect`; did you mean `collect_vec`?"
    );
}

#[test]
fn a_pipeline_without_source_and_sink_is_a_fragment() {
    let p: Pipeline = parse_quote!(orders
        .map(|x| x)
        .key_by(|x| *x)
        .window(w)
        .count()
        .transform(f));
    let checked = check(&p).expect("a valid fragment");
    assert!(checked.fragment);
    // Its ids continue the ids of the stream it is spliced into: unknown at compile time.
    assert!(checked.steps().into_iter().all(|s| s.id.is_none()));
}

#[test]
fn a_fragment_ends_at_a_stream() {
    let p: Pipeline = parse_quote!(orders.map(|x| x).key_by(|x| *x));
    assert_eq!(
        errors(p),
        ["a pipeline fragment ends at a stream, but this one ends at a keyed stream: add the operator that uses it"]
    );
}

#[test]
fn a_sink_without_a_source_is_not_a_fragment() {
    let p: Pipeline = parse_quote!(orders.map(|x| x).collect_vec());
    let e = errors(p);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("the pipeline has no source: start it with "),
        "{e:?}"
    );
}

#[test]
fn ids_after_transform_are_known_at_run_time_only() {
    let p: Pipeline = parse_quote!(env
        .from_collection_with_id("src", [1])
        .map(|x| x)
        .transform(f)
        .map(|x| x)
        .collect_vec());
    let checked = check(&p).expect("valid");
    let ids: Vec<_> = checked.steps().into_iter().map(|s| s.id.clone()).collect();
    assert_eq!(ids[1], Some("src/1:map".to_string()));
    assert_eq!(ids[3], None);
}

#[test]
fn arity_errors_come_from_the_table() {
    let p: Pipeline = parse_quote!(env.from_elements([1]).map(|x| x, 2).sum(1).collect_vec());
    assert_eq!(
        errors(p),
        [
            "`map` takes 1 argument: `map(|element| -> output)`, but 2 were given",
            "`sum` takes no arguments: `sum()`, but 1 was given",
            "`sum` applies to a keyed stream or a windowed stream, but here it is applied to a stream; \
             add `.key_by(|element| key)` before it",
        ]
    );
}

#[test]
fn keyed_and_windowed_operators_need_their_stage() {
    let p: Pipeline = parse_quote!(env.from_elements([1]).window(w).trigger(t).collect_vec());
    assert_eq!(
        errors(p),
        [
            "`window` applies to a keyed stream, but here it is applied to a stream; \
             add `.key_by(|element| key)` before it",
        ]
    );
    let p: Pipeline = parse_quote!(env
        .from_elements([1])
        .key_by(|x| *x)
        .allowed_lateness(d)
        .sum()
        .collect_vec());
    assert_eq!(
        errors(p),
        ["`allowed_lateness` applies to a windowed stream, but here it is applied to a keyed stream; \
          add `.window(assigner)` before it"]
    );
    let p: Pipeline = parse_quote!(env
        .from_elements([1])
        .map(|x| x)
        .on_timer(|t, c, o| Ok(()))
        .collect_vec());
    assert_eq!(
        errors(p),
        ["`on_timer` applies to the output of `process`, but here it is applied to a stream; `on_timer` must directly follow `process`"]
    );
}

#[test]
fn sources_and_sinks() {
    let p: Pipeline = parse_quote!(env.map(|x| x).collect_vec());
    assert!(
        errors(p)[0].starts_with("the pipeline has no source: start it with `from_elements(..)`")
    );
    let p: Pipeline = parse_quote!(env.from_elements([1]).from_collection(v).collect_vec());
    assert_eq!(
        errors(p),
        ["a pipeline has exactly one source, but `from_collection` is a second one (the first is `from_elements`)"]
    );
    let p: Pipeline = parse_quote!(env.from_elements([1]).map(|x| x));
    assert_eq!(
        errors(p),
        ["the pipeline has no sink: end it with `sink(..)`, `for_each(..)`, `print()`, `print_with_prefix(..)` or `collect_vec()`"]
    );
    let p: Pipeline = parse_quote!(env.from_elements([1]).collect_vec().map(|x| x));
    assert_eq!(
        errors(p),
        ["`map` follows the sink `collect_vec`: a sink ends the pipeline"]
    );
}

#[test]
fn source_ids_are_checked_when_literal() {
    let p: Pipeline = parse_quote!(env.add_source_with_id("my source", s).collect_vec());
    assert_eq!(
        errors(p),
        ["source id \"my source\" must be non-empty and use only `[A-Za-z0-9_.-]`: it prefixes the ids of operators and their state"]
    );
    let p: Pipeline = parse_quote!(env.add_source_with_id(id, s).collect_vec());
    assert!(errors(p).is_empty());
}

#[test]
fn global_windows_need_a_trigger() {
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x)
            .window(GlobalWindows::create())
            .allowed_lateness(d)
            .sum().collect_vec()
    };
    assert_eq!(
        errors(p),
        ["`GlobalWindows` has no default trigger, so its windows would never fire: set one with `.trigger(..)` after `.window(..)`, e.g. `.trigger(CountTrigger::of(100))`"]
    );
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x)
            .window(GlobalWindows::create())
            .side_output_late_data(s)
            .trigger(CountTrigger::of(2))
            .sum().collect_vec()
    };
    assert!(errors(p).is_empty());
}

#[test]
fn literal_trigger_configuration_is_checked_inside_purging_triggers() {
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x)
            .window(w)
            .trigger(PurgingTrigger::of(CountTrigger::of(0)))
            .trigger(ContinuousEventTimeTrigger::of(Duration::from_micros(999)))
            .trigger(PurgingTrigger::of(ContinuousEventTimeTrigger::of(Duration::from_millis(1))))
            .sum().collect_vec()
    };
    assert_eq!(
        errors(p),
        [
            "a count trigger needs a count of at least 1",
            "a continuous trigger's `interval` must be at least 1 ms, but this duration is 0 ms",
        ]
    );
}

#[test]
fn literal_window_configuration_is_checked() {
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x)
            .window(SlidingEventTimeWindows::with_offset(Duration::from_secs(0), Duration::from_micros(10), 5))
            .trigger(CountTrigger::of(0))
            .sum().collect_vec()
    };
    assert_eq!(
        errors(p),
        [
            "window `size` must be at least 1 ms, but this duration is 0 ms",
            "window `slide` must be at least 1 ms, but this duration is 0 ms",
            "a count trigger needs a count of at least 1",
        ]
    );
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x)
            .window(TumblingEventTimeWindows::with_offset(Duration::from_secs(1), -1000)?)
            .sum().collect_vec()
    };
    assert_eq!(
        errors(p),
        ["|offset| must be smaller than `size` (1000 ms), got -1000 ms"]
    );
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x)
            .window(EventTimeSessionWindows::with_gap(std::time::Duration::ZERO))
            .sum().collect_vec()
    };
    assert_eq!(
        errors(p),
        ["window `gap` must be at least 1 ms, but this duration is 0 ms"]
    );
}

#[test]
fn state_declarations() {
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x)
            .state(count: ValueState<u64> = 0, seen: SetState<u64>)
            .state(count: ListState<u64>, m: MapState<u64>, v: ValueState<u8>, l: ListState<u8> = vec![])
            .process(|v, ctx, out| Ok(()))
            .collect_vec()
    };
    assert_eq!(
        errors(p),
        [
            "state `count` is declared twice for this `process`: state names are unique per operator",
            "`MapState` takes 2 type arguments: `MapState<K, V>`",
            "value state `v` needs a default: `v: ValueState<T> = default`",
            "`ListState` starts empty for every key and takes no default",
        ]
    );
    let p: Pipeline = parse_quote! {
        env.from_elements([1]).key_by(|x| *x).state(a: ValueState<u8> = 0).reduce(|a, b| a).collect_vec()
    };
    assert_eq!(
        errors(p),
        ["`reduce` applies to a keyed stream or a windowed stream, but here it is applied to a keyed stream with declared state; \
          `state(..)` must be followed by `process`"]
    );
}

#[test]
fn engines_must_share_every_operator() {
    let p: Pipeline = parse_quote!(env
        .from_mq_topic("orders", "billing")
        .map(|m| m)
        .collect_vec());
    assert_eq!(
        errors(p),
        ["`collect_vec` is not supported on the Redis engine yet: `from_mq_topic` before it runs only on the Redis engine, `collect_vec` only on the memory engine"]
    );
    // Windows run on both engines; one engine error for the memory-only terminal.
    let p: Pipeline = parse_quote!(env
        .from_mq_topic_with_id("orders-v1", "orders", "billing")
        .key_by(|m| m.partition)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .count()
        .print());
    assert_eq!(errors(p), Vec::<String>::new());
    let p: Pipeline = parse_quote!(env
        .from_mq_topic_with_id("orders-v1", "orders", "billing")
        .key_by(|m| m.partition)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
        .count()
        .collect_vec());
    assert_eq!(
        errors(p),
        ["`collect_vec` is not supported on the Redis engine yet: `from_mq_topic_with_id` before it runs only on the Redis engine, `collect_vec` only on the memory engine"]
    );
    let p: Pipeline = parse_quote!(env.from_mq_topic("orders", "billing").map(|m| m).print());
    let checked_engines = check(&p).map(|c| c.engines).unwrap_or_default();
    assert_eq!(checked_engines, [Engine::Redis]);
}

#[test]
fn ids_follow_the_builder() {
    let p: Pipeline = parse_quote! {
        env.add_source_with_id("flights", src)
            .map(f)
            .assign_timestamps_and_watermarks(g)
            .key_by(k)
            .window(w)
            .trigger(t)
            .aggregate(a)
            .filter(p)
            .key_by(k2)
            .state(s: ValueState<u8> = 0)
            .process(pf)
            .on_timer(ot)
            .sink(s)
    };
    assert_eq!(
        ids(p),
        [
            "flights/1:map",
            "flights/2:watermarks",
            "flights/4:window-aggregate",
            "flights/5:filter",
            "flights/7:process",
            "flights/8:sink"
        ]
    );
    let p: Pipeline = parse_quote!(env.from_elements([1]).key_by(k).sum().print());
    assert_eq!(ids(p), ["source-{n}/2:sum", "source-{n}/3:sink"]);
    // The Redis engine's source id: `{topic}.{group}` with other characters as `_`.
    let p: Pipeline = parse_quote! {
        env.from_mq_topic("orders", "bill ing")
            .map(f)
            .key_by(k)
            .state(n: ValueState<u64> = 0)
            .process(pf)
            .sink(s)
    };
    assert_eq!(
        ids(p),
        [
            "orders.bill_ing/1:map",
            "orders.bill_ing/3:process",
            "orders.bill_ing/4:sink"
        ]
    );
    let p: Pipeline = parse_quote!(env
        .from_mq_topic_with_id("orders-v2", "orders", "g")
        .map(f)
        .print());
    assert_eq!(ids(p), ["orders-v2/1:map", "orders-v2/2:sink"]);
}

#[test]
fn ids_do_not_change_when_a_later_operator_changes() {
    let a: Pipeline = parse_quote!(env
        .add_source_with_id("s", x)
        .map(f)
        .key_by(k)
        .reduce(r)
        .print());
    let b: Pipeline = parse_quote!(env
        .add_source_with_id("s", x)
        .map(f)
        .key_by(k)
        .reduce(r)
        .filter(g)
        .map(h)
        .collect_vec());
    assert_eq!(ids(a)[..2], ids(b)[..2]);
}

#[test]
fn literal_durations() {
    let d = |e: Expr| duration_nanos(&e);
    assert_eq!(d(parse_quote!(Duration::from_secs(2))), Some(2_000_000_000));
    assert_eq!(
        d(parse_quote!(std::time::Duration::from_millis(5))),
        Some(5_000_000)
    );
    assert_eq!(d(parse_quote!(Duration::new(1, 5))), Some(1_000_000_005));
    assert_eq!(d(parse_quote!(Duration::ZERO)), Some(0));
    assert_eq!(d(parse_quote!(Duration::from_secs(n))), None);
    assert_eq!(d(parse_quote!(size)), None);
}
