//! Tests of the rules of streams named with `let` and of operators with a second input.

use super::*;
use crate::parse::Pipeline;
use syn::parse_quote;

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
fn a_named_stream_keeps_its_ids_and_the_join_counts_the_builders_positions() {
    let p: Pipeline = parse_quote! {
        let payments = env.from_timestamped_collection_with_id("payments", p).map(f);
        let keyed = payments.filter(g).key_by(k);
        env.from_timestamped_collection_with_id("orders", o)
            .key_by(k)
            .interval_join(keyed)
            .between(0, 10)
            .side_output_late_firsts(s)
            .process(j)
            .map(h)
            .print()
    };
    // `interval_join` connects both inputs and keys them (2 positions after `key_by`).
    assert_eq!(
        ids(p),
        [
            "payments/1:map",
            "payments/2:filter",
            "orders/4:process",
            "orders/5:map",
            "orders/6:sink"
        ]
    );
    let p: Pipeline = parse_quote! {
        let b = env.from_collection_with_id("b", b);
        env.from_collection_with_id("a", a)
            .connect(b.map(f))
            .key_by(k1, k2)
            .window(w)
            .join(j)
            .print()
    };
    assert_eq!(ids(p), ["b/1:map", "a/3:window-apply", "a/4:sink"]);
}

#[test]
fn the_argument_must_be_at_the_stage_the_operator_takes() {
    let p: Pipeline = parse_quote! {
        let payments = env.from_timestamped_collection(p);
        env.from_timestamped_collection(o).key_by(k).interval_join(payments).between(0, 1).process(j).print()
    };
    assert_eq!(
        errors(p),
        [
            "`interval_join` takes a keyed stream, but `payments` is a stream: key it by the key \
          type of this stream, `.key_by(|element| key)`"
        ]
    );
    let p: Pipeline = parse_quote! {
        let keyed = env.from_elements(p).key_by(k);
        env.from_elements(o).union(keyed).print()
    };
    assert_eq!(
        errors(p),
        [
            "`union` takes a stream, but `keyed` is a keyed stream: `union` takes a stream before \
          its `key_by`; key the result of `union` instead"
        ]
    );
}

#[test]
fn event_time_is_needed_by_a_join_and_agreed_by_a_union() {
    let join = |first: syn::Ident, second: syn::Ident| -> Pipeline {
        parse_quote! {
            let payments = env.#second(p);
            env.#first(o).key_by(k).interval_join(payments.key_by(k)).between(0, 1).process(j).print()
        }
    };
    let e = errors(join(
        parse_quote!(from_collection),
        parse_quote!(from_timestamped_collection),
    ));
    assert!(
        e.len() == 1 && e[0].starts_with("`interval_join` joins by event time, but this stream's"),
        "{e:?}"
    );
    let e = errors(join(
        parse_quote!(from_timestamped_collection),
        parse_quote!(from_elements),
    ));
    assert!(
        e.len() == 1 && e[0].contains("the timestamps of `payments.key_by(..)` were never chosen"),
        "{e:?}"
    );
    let p: Pipeline = parse_quote! {
        let payments = env.from_mq_topic("payments", "g");
        env.from_mq_topic("orders", "g").key_by(k).interval_join(payments.key_by(k)).between(0, 1).process(j).sink(s)
    };
    assert!(errors(p).is_empty());
    // Timestamps chosen after the source count.
    let p: Pipeline = parse_quote! {
        let b = env.from_elements(p).with_ingestion_time();
        env.from_timestamped_collection(o).union(b).print()
    };
    assert!(errors(p).is_empty());
    let p: Pipeline = parse_quote! {
        let b = env.from_elements(p);
        env.from_timestamped_collection(o).connect(b).co_map(f, g).print()
    };
    let e = errors(p);
    assert!(
        e.len() == 1
            && e[0].starts_with("`connect` takes streams that both carry event time or neither"),
        "{e:?}"
    );
}

#[test]
fn the_inputs_run_on_one_engine() {
    let p: Pipeline = parse_quote! {
        let backfill = memory.from_collection(v);
        env.from_mq_topic("t", "g").union(backfill).sink(s)
    };
    assert_eq!(
        errors(p),
        [
            "`union` combines streams of one engine, but this stream runs on the Redis engine and \
          `backfill` on the memory engine"
        ]
    );
    // The engines of a pipeline are those both inputs run on.
    let p: Pipeline = parse_quote! {
        let b = env.from_mq_topic("b", "g");
        env.from_mq_topic("a", "g").union(b).collect_vec()
    };
    let e = errors(p);
    assert!(
        e.len() == 1 && e[0].starts_with("`collect_vec` is not supported on the Redis engine"),
        "{e:?}"
    );
}

#[test]
fn a_name_is_used_once_and_a_let_has_no_sink() {
    let p: Pipeline = parse_quote! {
        let b = env.from_elements(p);
        env.from_elements(o).union(b).union(b).print()
    };
    let e = errors(p);
    assert!(
        e.len() == 1 && e[0].starts_with("`b` is used twice"),
        "{e:?}"
    );
    let p: Pipeline = parse_quote! {
        let b = env.from_elements(p);
        env.from_elements(o).print()
    };
    let e = errors(p);
    assert!(
        e.len() == 1 && e[0].starts_with("`b` is never used"),
        "{e:?}"
    );
    // Named in an expression the macro does not follow: rustc checks it.
    let p: Pipeline = parse_quote! {
        let b = env.from_elements(p);
        env.from_elements(o).union(merge(b)).print()
    };
    assert!(errors(p).is_empty());
    let p: Pipeline = parse_quote! {
        let b = env.from_elements(p).print();
        env.from_elements(o).union(b).print()
    };
    let e = errors(p);
    assert!(
        e.len() == 1 && e[0].starts_with("`print` ends the stream `b`"),
        "{e:?}"
    );
}

#[test]
fn a_stream_built_before_the_pipeline_is_not_followed() {
    let p: Pipeline = parse_quote! {
        env.from_timestamped_collection(o).key_by(k).interval_join(payments_by_customer).between(0, 1).process(j).print()
    };
    assert!(errors(p).is_empty());
    // A pipeline may start at a named stream.
    let p: Pipeline = parse_quote! {
        let a = env.from_elements(o);
        a.map(f).print()
    };
    assert!(errors(p).is_empty());
    let p: Pipeline = parse_quote! {
        let a = env.from_elements(o);
        a
    };
    let e = errors(p);
    assert!(
        e.len() == 1 && e[0].starts_with("the pipeline has no sink"),
        "{e:?}"
    );
}

#[test]
fn connected_streams_say_what_they_need() {
    let stage_error = |p: Pipeline| errors(p).pop().unwrap_or_default();
    let e = stage_error(parse_quote! {
        let b = env.from_elements(p);
        env.from_elements(o).connect(b).process(f).print()
    });
    assert_eq!(
        e,
        "`process` applies to keyed connected streams, an interval join with its bounds or a \
         keyed stream connected to a broadcast stream, but here it is applied to connected \
         streams; keyed state and timers need a key: add `.key_by(|&first| key, |&second| key)` \
         before it"
    );
    let e = stage_error(parse_quote! {
        let b = env.from_elements(p);
        env.from_elements(o).connect(b).map(f).print()
    });
    assert_eq!(
        e,
        "`map` applies to a stream or a keyed stream, but here it is applied to connected \
         streams; on connected streams the operators are `co_map`, `co_flat_map` or `key_by`"
    );
    let e = stage_error(parse_quote! {
        env.from_elements(o).key_by(k).between(0, 1).print()
    });
    assert_eq!(
        e,
        "`between` applies to an interval join without its bounds, but here it is applied to a \
         keyed stream; it follows `.key_by(..).interval_join(other)`"
    );
    let e = errors(parse_quote! {
        let b = env.from_elements(p);
        env.from_elements(o).connect(b).key_by(k).process(f).print()
    });
    assert_eq!(
        e,
        ["`key_by` takes 2 arguments: `key_by(|&first| -> key, |&second| -> key)`, but 1 was given"]
    );
}

#[test]
fn literal_join_bounds() {
    let p: Pipeline = parse_quote! {
        let b = env.from_timestamped_collection(p);
        env.from_timestamped_collection(o).key_by(k).interval_join(b.key_by(k)).between(5, -5).process(j).print()
    };
    assert_eq!(
        errors(p),
        [
            "the lower bound 5 ms is above the upper bound -5 ms, so nothing could be joined: \
          `between(lower, upper)` takes the earliest offset first"
        ]
    );
}

#[test]
fn a_fragment_may_name_its_streams() {
    let p: Pipeline = parse_quote! {
        let evens = input.filter(f);
        evens.map(g).key_by(k).sum()
    };
    let checked = check(&p).unwrap_or_else(|e| panic!("{}", e[0]));
    assert!(checked.fragment);
    let p: Pipeline = parse_quote! {
        let evens = input.filter(f);
        evens.key_by(k)
    };
    let e = errors(p);
    assert!(
        e.len() == 1 && e[0].starts_with("a pipeline fragment ends at a stream"),
        "{e:?}"
    );
}

#[test]
fn a_broadcast_connection_counts_the_builders_positions() {
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection_with_id("rules", r).map(f).broadcast(RULES);
        env.from_collection_with_id("amounts", a)
            .key_by(k)
            .connect(rules)
            .process(Limits)
            .map(g)
            .print()
    };
    // `broadcast` takes no position; `connect` takes one, as in the builder.
    assert_eq!(
        ids(p),
        [
            "rules/1:map",
            "amounts/3:broadcast_process",
            "amounts/4:map",
            "amounts/5:sink"
        ]
    );
    let p: Pipeline = parse_quote! {
        env.from_collection(a).key_by(k).connect(env.from_collection(r).broadcast(RULES)).process(f).print()
    };
    assert_eq!(
        ids(p),
        ["source-{n}/3:broadcast_process", "source-{n}/4:sink"]
    );
}

#[test]
fn a_broadcast_stream_connects_to_a_keyed_stream() {
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection(r);
        env.from_collection(a).key_by(k).connect(rules).process(f).print()
    };
    assert_eq!(
        errors(p),
        [
            "`connect` takes a broadcast stream, but `rules` is a stream: broadcast it with \
             `.broadcast(descriptor)` for a `KeyedBroadcastProcessFunction`, or `connect` it \
             before this stream's `key_by` and key both inputs with `.key_by(|&first| key, \
             |&second| key)` for a `KeyedCoProcessFunction`"
        ]
    );
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection(r).broadcast(RULES);
        env.from_collection(a).connect(rules).process(f).print()
    };
    assert_eq!(
        errors(p),
        [
            "`connect` of a broadcast stream applies to a keyed stream, but here it is applied \
             to a stream: add `.key_by(|element| key)` before it, for a \
             `KeyedBroadcastProcessFunction`"
        ]
    );
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection(r).broadcast();
        env.from_collection(a).key_by(k).connect(rules).process(f).print()
    };
    assert_eq!(
        errors(p),
        [
            "`broadcast` takes 1 argument: `broadcast(descriptor: BroadcastStateDescriptor<BK, \
             BV>)`, but none were given"
        ]
    );
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection(r).broadcast(RULES);
        env.from_collection(a).union(rules).print()
    };
    assert_eq!(
        errors(p),
        [
            "`union` takes a stream, but `rules` is a broadcast stream: `union` takes a stream \
          before its `broadcast`"
        ]
    );
    let p: Pipeline = parse_quote! {
        env.from_collection(r).broadcast(RULES).print()
    };
    assert_eq!(
        errors(p),
        [
            "`print` applies to a stream, but here it is applied to a broadcast stream; a \
             broadcast stream is the argument of a keyed stream's `connect`: name it with \
             `let` and pass it to `.key_by(..).connect(name)`"
        ]
    );
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection(r).broadcast(RULES);
        env.from_collection(a).key_by(k).connect(rules).state(n: ValueState<u64> = 0).process(f).print()
    };
    assert_eq!(
        errors(p),
        [
            "`state` applies to a keyed stream, but here it is applied to a keyed stream \
             connected to a broadcast stream; the keyed state of a keyed stream connected to \
             a broadcast stream belongs to its `KeyedBroadcastProcessFunction`: \
             `ctx.state(descriptor)` in `process_element`"
        ]
    );
}

#[test]
fn a_broadcast_stream_runs_on_the_engine_and_time_of_the_keyed_stream() {
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection(r).broadcast(RULES);
        env.from_mq_topic("amounts", "g").key_by(k).connect(rules).process(f).print()
    };
    assert_eq!(
        errors(p),
        [
            "`connect` combines streams of one engine, but this stream runs on the Redis engine \
          and `rules` on the memory engine"
        ]
    );
    let p: Pipeline = parse_quote! {
        let rules = env.from_collection(r).broadcast(RULES);
        env.from_timestamped_collection(a).key_by(k).connect(rules).process(f).print()
    };
    assert_eq!(errors(p).len(), 1);
}
