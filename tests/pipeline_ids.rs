//! The operator ids the macro derives from the pipeline text are the builder's ids for the
//! same chain, and they do not change when a later operator changes.

use std::time::Duration;
use streaming::api::{Source, SourceContext};
use streaming::time::{AscendingTimestamps, TumblingEventTimeWindows};
use streaming::{pipeline, Error, MemoryEnv};

struct Numbers(u32);
impl Source<u32> for Numbers {
    fn run<C: SourceContext<u32>>(&mut self, ctx: &mut C) -> Result<(), Error> {
        for i in 0..self.0 {
            ctx.collect_with_timestamp(i, i64::from(i) * 100)?;
        }
        Ok(())
    }
}

/// One pipeline text, handed to `pipeline!` or to the id macro.
macro_rules! stateful {
    ($($m:ident)::+, $env:expr) => {
        $($m)::+! {
            $env.add_timestamped_source_with_id("ids", Numbers(6))
                .map(|x: u32| u64::from(x))
                .assign_timestamps_and_watermarks(AscendingTimestamps)
                .key_by(|x: &u64| x % 2)
                .reduce(|a, b| a + b)
                .key_by(|x: &u64| x % 3)
                .window(TumblingEventTimeWindows::of(Duration::from_secs(1)))
                .count()
                .key_by(|p: &(u64, streaming::time::TimeWindow, u64)| p.0)
                .state(n: ValueState<u64> = 0)
                .process(|p: (u64, streaming::time::TimeWindow, u64), ctx, out| {
                    let seen = ctx.state(n)?.value() + p.2;
                    ctx.state(n)?.update(seen);
                    out.collect(seen);
                    Ok(())
                })
                .collect_vec()
        }
    };
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn macro_ids_are_the_builder_ids() {
    let ids: Vec<String> = stateful!(streaming::__private::pipeline_ids, env)
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        ids,
        [
            "ids/1:map",
            "ids/2:watermarks",
            "ids/4:reduce",
            "ids/6:window-count",
            "ids/8:process",
            "ids/9:sink"
        ]
    );

    // The stateful operators register their state under their ids.
    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let by_macro = stateful!(pipeline, env).unwrap();
    let macro_stores = env.checkpoint_coordinator().unwrap().registered_stores();
    assert_eq!(
        sorted(macro_stores.clone()),
        ["ids/4:reduce", "ids/6:window-count", "ids/8:process"]
    );
    assert!(macro_stores.iter().all(|s| ids.contains(s)));

    // The builder chain gives the same ids and the same output.
    let env = MemoryEnv::new();
    env.enable_checkpointing();
    const N: streaming::api::ValueStateDescriptor<u64> =
        streaming::api::ValueStateDescriptor::new("n", 0);
    let by_builder = env
        .add_timestamped_source_with_id("ids", Numbers(6))
        .map(|x: u32| u64::from(x))
        .assign_timestamps_and_watermarks(AscendingTimestamps)
        .key_by(|x: &u64| x % 2)
        .reduce(|a, b| a + b)
        .key_by(|x: &u64| x % 3)
        .window(TumblingEventTimeWindows::of(Duration::from_secs(1)).unwrap())
        .count()
        .key_by(|p: &(u64, streaming::time::TimeWindow, u64)| p.0)
        .process(|p: (u64, streaming::time::TimeWindow, u64), ctx, out| {
            let seen = ctx.state(&N)?.value() + p.2;
            ctx.state(&N)?.update(seen);
            out.collect(seen);
            Ok(())
        })
        .collect_vec()
        .unwrap();
    assert_eq!(
        env.checkpoint_coordinator().unwrap().registered_stores(),
        macro_stores
    );
    // Window firings of different keys may come in any order: compare as sets.
    let (mut by_macro, mut by_builder) = (by_macro, by_builder);
    by_macro.sort_unstable();
    by_builder.sort_unstable();
    assert_eq!(by_macro, by_builder);
    // Rolling sums by parity 0,1,2,4,6,9 keyed by %3: three at 0, two at 1, one at 2.
    assert_eq!(by_macro, [1, 2, 3]);
}

#[test]
fn errors_name_the_operator_by_its_macro_id() {
    let ids = streaming::__private::pipeline_ids! {
        env.add_timestamped_source_with_id("errs", Numbers(5)).filter(|x: &u32| *x > 0).map(|x: u32| 10 / (x - 2)).print()
    };
    assert_eq!(ids, ["errs/1:filter", "errs/2:map", "errs/3:sink"]);
    let env = MemoryEnv::new();
    env.on_record_error(streaming::memory::OnRecordError::StopRun);
    let err = pipeline! {
        env.add_timestamped_source_with_id("errs", Numbers(5)).filter(|x: &u32| *x > 0).map(|x: u32| 10 / (x - 2)).print()
    }
    .unwrap_err();
    match err {
        Error::Panic { operator, .. } => assert_eq!(operator, ids[1]),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn ids_are_stable_when_a_later_operator_changes() {
    let a = streaming::__private::pipeline_ids! {
        env.add_source_with_id("s", src).map(f).key_by(k).reduce(r).print()
    };
    let b = streaming::__private::pipeline_ids! {
        env.add_source_with_id("s", src).map(f).key_by(k).reduce(r2).filter(g).map(h).collect_vec()
    };
    assert_eq!(a[..2], b[..2]);
    assert_eq!(a[..2], ["s/1:map", "s/3:reduce"]);
}
