//! Expansion snapshots of representative pipelines, kept in `expansions/` so a reviewer
//! can read the generated code. `UPDATE_EXPANSIONS=1 cargo test -p streaming-macros`
//! rewrites them.

use crate::{check, expand, parse::Pipeline, render};
use syn::parse_quote;

fn snapshot(name: &str, pipeline: Pipeline) {
    let checked = check::check(&pipeline).unwrap_or_else(|e| panic!("{}", e[0]));
    let text = render(
        &checked,
        &expand::expand(&checked, &crate::runtime::CratePath::named("streaming")),
    );
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("expansions")
        .join(format!("{name}.rs"));
    if std::env::var_os("UPDATE_EXPANSIONS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        text, expected,
        "expansion of `{name}` changed; rerun with UPDATE_EXPANSIONS=1 and review"
    );
}

#[test]
fn keyed_window() {
    snapshot(
        "keyed_window",
        parse_quote! {
            env.add_source_with_id("words", lines)
                .flat_map(|l: String| l.split(' ').map(String::from).collect::<Vec<_>>())
                .map(|w| (w, 1u64))
                .key_by(|p: &(String, u64)| p.0.clone())
                .window(TumblingEventTimeWindows::of(Duration::from_secs(60)))
                .allowed_lateness(Duration::from_secs(5))
                .reduce(|a, b| (a.0, a.1 + b.1))
                .collect_vec()
        },
    );
}

#[test]
fn configuration_arguments() {
    snapshot(
        "configuration_arguments",
        parse_quote! {
            env.from_elements([1, 2, 3])
                .assign_timestamps_and_watermarks(BoundedOutOfOrderness::new(Duration::from_millis(10)))
                .key_by(|_: &i32| ())
                .window(SlidingEventTimeWindows::of(size, slide)?)
                .trigger(PurgingTrigger::of(CountTrigger::of(2)))
                .reduce(|a, b| a + b)
                .collect_vec()
        },
    );
}

#[test]
fn stateless_chain() {
    snapshot(
        "stateless_chain",
        parse_quote! {
            env.from_collection(0..10_000_000u64)
                .map(|x| x * 3)
                .filter(|x| x % 2 == 0)
                .map(|x| x + 1)
                .filter(|x| x % 5 != 0)
                .sink(|x| total += x)
        },
    );
}

#[test]
fn keyed_state_and_timers() {
    snapshot(
        "keyed_state_and_timers",
        parse_quote! {
            env.from_elements([("a", 1), ("b", 2)])
                .key_by(|p: &(&str, i32)| p.0)
                .state(count: ValueState<u64> = 0, seen: SetState<i32>)
                .process(|v, ctx, out| {
                    let n = ctx.state(count)?.value() + 1;
                    ctx.state(count)?.update(n);
                    ctx.state(seen)?.add(v.1);
                    ctx.register_event_time_timer(ctx.timestamp() + 10)?;
                    out.collect(n);
                    Ok(())
                })
                .on_timer(|ts, ctx, out| {
                    out.collect(ctx.state(count)?.value() + ts as u64);
                    Ok(())
                })
                .print()
        },
    );
}

#[test]
fn several_inputs() {
    snapshot(
        "several_inputs",
        parse_quote! {
            let payments = env.from_mq_topic("payments", "billing").map(|m: Message| parse(&m));
            env.from_mq_topic("orders", "billing")
                .map(|m: Message| parse(&m))
                .key_by(|o: &(String, i64)| o.0.clone())
                .interval_join(payments.key_by(|p: &(String, i64)| p.0.clone()))
                .between(0, 600_000)
                .side_output_late_seconds(RedisListSink::new("late-payments"))
                .process(|o: &(String, i64), p: &(String, i64)| (o.0.clone(), p.1 - o.1))
                .sink(RedisListSink::new("paid"))
        },
    );
}

/// Every path into the runtime crate — in the chain, the configuration, the state
/// descriptors, the engine functions and the placeholder after an error — uses the name
/// the user's manifest gives it.
#[test]
fn every_path_uses_the_crate_name_found() {
    let engine = crate::runtime::CratePath::named("engine");
    let pipelines: [Pipeline; 3] = [
        parse_quote! {
            env.from_elements([("a", 1)])
                .key_by(|p: &(&str, i32)| p.0)
                .window(TumblingEventTimeWindows::of(Duration::from_secs(1))?)
                .trigger(PurgingTrigger::of(CountTrigger::of(2)))
                .count()
                .key_by(|p: &(&str, TimeWindow, u64)| p.0)
                .state(count: ValueState<u64> = 0)
                .process(|v, ctx, out| Ok(()))
                .on_timer(|ts, ctx, out| Ok(()))
                .print()
        },
        parse_quote! {
            env.from_mq_topic("orders", "billing")
                .key_by(|m: &Message| m.partition)
                .state(seen: SetState<u64>)
                .process(|v, ctx, out| Ok(()))
                .print()
        },
        parse_quote! {
            let b = env.from_timestamped_collection(b);
            env.from_timestamped_collection(a)
                .key_by(|x: &u8| *x)
                .interval_join(b.key_by(|x: &u8| *x))
                .between(0, 1)
                .process(|a: &u8, b: &u8| a + b)
                .print()
        },
    ];
    let mut text = String::new();
    for pipeline in &pipelines {
        let checked = check::check(pipeline).unwrap_or_else(|e| panic!("{}", e[0]));
        text.push_str(&expand::expand(&checked, &engine).to_string());
    }
    let error = syn::Error::new(proc_macro2::Span::call_site(), "an error");
    text.push_str(&crate::placeholder(&[error], Some("print".into()), false, &engine).to_string());
    assert!(!text.contains(":: streaming"), "{text}");
    for path in [
        ":: engine :: __private :: config_error",
        ":: engine :: api :: ValueStateDescriptor",
        ":: engine :: api :: SetStateDescriptor",
        ":: engine :: __private :: process_with_timers",
        ":: engine :: __private :: from_mq_topic",
        ":: engine :: __private :: IntervalJoinBy",
        ":: engine :: memory :: JobSummary",
    ] {
        assert!(text.contains(path), "{path} in {text}");
    }
}

#[test]
fn redis_keyed_state() {
    snapshot(
        "redis_keyed_state",
        parse_quote! {
            env.from_mq_topic("orders", "billing")
                .map(|m: Message| m.payload_str().unwrap_or_default().to_string())
                .key_by(|k: &String| k.clone())
                .state(count: ValueState<u64> = 0)
                .process(|k: String, ctx, out| {
                    let n = ctx.state(count)?.value() + 1;
                    ctx.state(count)?.update(n);
                    out.collect(format!("{k}={n}"));
                    Ok(())
                })
                .sink(RedisListSink::new("counts"))
        },
    );
}
