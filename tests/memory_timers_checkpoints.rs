//! Keyed process functions with timers, and in-memory checkpoints.

use std::cell::RefCell;
use std::rc::Rc;
use streaming::api::{
    Collector, KeyedContext, KeyedProcessFunction, ListStateDescriptor, TimeDomain, TimerContext,
    ValueStateDescriptor,
};
use streaming::time::BoundedOutOfOrderness;
use streaming::{BoxError, Error, MemoryEnv};

/// Registers an event-time timer at ts + 10 and a processing-time timer at ts + 5, twice
/// each (dedup), and reports timers as "key@time:domain".
struct Timers;
impl KeyedProcessFunction<&'static str, (&'static str, i64)> for Timers {
    type Out = String;
    fn process_element(
        &mut self,
        value: (&'static str, i64),
        ctx: &mut KeyedContext<'_, &'static str>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        for _ in 0..2 {
            ctx.register_event_time_timer(value.1 + 10)?;
            ctx.register_processing_time_timer(value.1 + 5);
        }
        out.collect(format!(
            "{}@{} wm={}",
            value.0,
            value.1,
            ctx.current_watermark()
        ));
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, &'static str>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let d = match ctx.time_domain() {
            TimeDomain::EventTime => "event",
            TimeDomain::ProcessingTime => "proc",
        };
        out.collect(format!("{}@{timestamp}:{d}", ctx.current_key()));
        Ok(())
    }
}

/// On a stream whose event time was never chosen no watermark would fire an event-time
/// timer: registering one fails the record with an error naming the fix.
#[test]
fn event_time_timer_on_a_stream_without_event_time_fails_naming_the_fix() {
    let env = MemoryEnv::new();
    // The record would be dead-lettered (as on the Redis engine); stop to read the error.
    env.on_record_error(streaming::memory::OnRecordError::StopRun);
    let err = env
        .from_collection_with_id("orders", vec![("a", 0i64)])
        .key_by(|e| e.0)
        .process_function(Timers)
        .collect_vec()
        .unwrap_err();
    assert!(
        matches!(&err, streaming::Error::NoEventTime { operator } if *operator == "orders/2:process"),
        "{err:?}"
    );
    assert_eq!(err.kind(), streaming::ErrorKind::Config);
    let text = err.to_string();
    assert!(
        text.contains(".assign_timestamps_and_watermarks_with(")
            && text.contains("from_timestamped_collection")
            && text.contains(".with_ingestion_time()"),
        "{text}"
    );
}

#[test]
fn timers_fire_by_watermark_and_record_time_deduplicated_and_drained() {
    let env = MemoryEnv::new();
    let out = env
        .from_collection(vec![("a", 0i64), ("b", 3), ("a", 12), ("b", 30)])
        .assign_timestamps_and_watermarks_with(
            |e: &(&str, i64), _| e.1,
            BoundedOutOfOrderness::new(std::time::Duration::ZERO).unwrap(),
        )
        .key_by(|e| e.0)
        .process_function(Timers)
        .collect_vec()
        .unwrap();
    assert_eq!(
        out,
        vec![
            "a@0 wm=-9223372036854775808",
            "b@3 wm=0",
            // processing time moves to 12: a@5 and b@8 processing timers fire first
            "a@5:proc",
            "b@8:proc",
            "a@12 wm=3",
            // watermark 12 fires a@10 (event)
            "a@10:event",
            // record 30: processing timers a@17 fire, then the record, then watermark 30
            "a@17:proc",
            "b@30 wm=12",
            "b@13:event",
            "a@22:event",
            // end of input: remaining event timers, then processing timers
            "b@40:event",
            "b@35:proc",
        ]
    );
}

const SUM: ValueStateDescriptor<i64> = ValueStateDescriptor::new("sum", 0);
const SEEN: ListStateDescriptor<i64> = ListStateDescriptor::new("seen");

fn summing(
    env: &MemoryEnv,
    input: Vec<i64>,
    on_output: impl FnMut((i64, i64)),
) -> Result<(), Error> {
    env.from_collection_with_id("numbers", input)
        .key_by(|x| x % 2)
        .process(|x, ctx, out| {
            let s = ctx.state(&SUM)?.value() + x;
            ctx.state(&SUM)?.update(s);
            ctx.state(&SEEN)?.add(x);
            out.collect((*ctx.current_key(), s));
            Ok(())
        })
        .sink(on_output)
        .map(|_| ())
}

#[test]
fn checkpointing_is_off_by_default() {
    let env = MemoryEnv::new();
    assert!(env.checkpoint_coordinator().is_none());
    env.enable_checkpointing();
    assert!(env.checkpoint_coordinator().is_some());
}

#[test]
fn a_rerun_pipeline_continues_from_the_latest_checkpoint() {
    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let coord = env.checkpoint_coordinator().unwrap();
    let mut out = Vec::new();
    summing(&env, vec![1, 2, 3, 4], |p| out.push(p)).unwrap();
    assert_eq!(out, vec![(1, 1), (0, 2), (1, 4), (0, 6)]);
    let id = coord.trigger_checkpoint().unwrap();
    assert_eq!(id, 1);
    assert_eq!(
        coord.registered_stores(),
        vec!["numbers/2:process".to_string()]
    );

    // Same pipeline text, same source id: the new store receives checkpoint 1.
    out.clear();
    summing(&env, vec![5, 6], |p| out.push(p)).unwrap();
    assert_eq!(out, vec![(1, 9), (0, 12)]);

    // Restore rewinds to checkpoint 1, and a pipeline started afterwards starts from it,
    // not from the newer checkpoint 2.
    assert_eq!(coord.trigger_checkpoint().unwrap(), 2);
    coord.restore_from_checkpoint(1).unwrap();
    out.clear();
    summing(&env, vec![7], |p| out.push(p)).unwrap();
    assert_eq!(out, vec![(1, 11)], "1 + 3 + 7 after restoring checkpoint 1");
    assert!(matches!(
        coord.restore_from_checkpoint(99),
        Err(Error::CheckpointNotFound(99))
    ));
}

#[test]
fn a_checkpoint_taken_mid_run_sees_state_up_to_that_record() {
    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let coord = env.checkpoint_coordinator().unwrap();
    let taken = Rc::new(RefCell::new(None));
    let t = taken.clone();
    let c = coord.clone();
    env.from_collection_with_id("words", vec!["a", "b", "a", "a", "b"])
        .key_by(|w| *w)
        .map(|w| (w, 1u32))
        .key_by(|p| p.0)
        .reduce(|x, y| (x.0, x.1 + y.1))
        .sink(move |(w, n): (&str, u32)| {
            if w == "a" && n == 2 {
                *t.borrow_mut() = Some(c.trigger_checkpoint().unwrap());
            }
        })
        .unwrap();
    let id = taken.borrow().expect("checkpoint taken from the sink");
    // Rerun with no input: the reduce store is restored from the newest checkpoint (a=2, b=1)
    // and the next elements continue from there.
    let out = env
        .from_collection_with_id("words", vec!["a", "b"])
        .key_by(|w| *w)
        .map(|w| (w, 1u32))
        .key_by(|p| p.0)
        .reduce(|x, y| (x.0, x.1 + y.1))
        .collect_vec()
        .unwrap();
    assert_eq!(id, 1);
    assert_eq!(out, vec![("a", 3), ("b", 2)]);
}

#[test]
fn window_state_is_checkpointed() {
    use streaming::time::TumblingEventTimeWindows;
    let env = MemoryEnv::new();
    env.enable_checkpointing();
    let coord = env.checkpoint_coordinator().unwrap();
    let c = coord.clone();
    // The sink takes a checkpoint while window [0,100) holds 3 elements and has not fired.
    let run = |input: Vec<i64>, checkpoint_at: Option<i64>| {
        let c = c.clone();
        env.from_collection_with_id("win", input)
            .with_ingestion_time()
            .map(move |x| {
                if Some(x) == checkpoint_at {
                    c.trigger_checkpoint().unwrap();
                }
                x
            })
            .key_by(|_| ())
            .window(TumblingEventTimeWindows::of(std::time::Duration::from_millis(100)).unwrap())
            .sum()
            .map(|(_, w, s)| (w.start(), s))
            .collect_vec()
            .unwrap()
    };
    assert_eq!(run(vec![1, 2, 3, 4], Some(4)), vec![(0, 10)]);
    // Rerun: the window restores 1+2+3 from the checkpoint taken before 4 was added.
    assert_eq!(run(vec![10], None), vec![(0, 16)]);
}

const DEADLINE: ValueStateDescriptor<i64> = ValueStateDescriptor::new("deadline", i64::MIN);

/// Debounce: every element deletes its key's pending timers and registers new ones 30 ms
/// after it (event time and processing time); a timer reports `key@time:domain`.
struct Debounce;
impl KeyedProcessFunction<&'static str, (&'static str, i64)> for Debounce {
    type Out = String;
    fn process_element(
        &mut self,
        value: (&'static str, i64),
        ctx: &mut KeyedContext<'_, &'static str>,
        _out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let old = ctx.state(&DEADLINE)?.value();
        if old != i64::MIN {
            ctx.delete_event_time_timer(old);
            ctx.delete_processing_time_timer(old);
        }
        // Deleting a timer that was never registered does nothing.
        ctx.delete_event_time_timer(value.1 + 1);
        // Register then delete in one call: no timer; delete then register: one.
        ctx.register_event_time_timer(value.1 + 2)?;
        ctx.delete_event_time_timer(value.1 + 2);
        ctx.delete_event_time_timer(value.1 + 30);
        ctx.register_event_time_timer(value.1 + 30)?;
        ctx.register_processing_time_timer(value.1 + 30);
        ctx.state(&DEADLINE)?.update(value.1 + 30);
        Ok(())
    }

    fn on_timer(
        &mut self,
        timestamp: i64,
        ctx: &mut TimerContext<'_, &'static str>,
        out: &mut Collector<'_, String>,
    ) -> Result<(), BoxError> {
        let d = match ctx.time_domain() {
            TimeDomain::EventTime => "event",
            TimeDomain::ProcessingTime => {
                // A timer can delete another of its key: the event-time twin.
                ctx.delete_event_time_timer(timestamp);
                "proc"
            }
        };
        out.collect(format!("{}@{timestamp}:{d}", ctx.current_key()));
        Ok(())
    }
}

/// `delete_event_time_timer` / `delete_processing_time_timer` (Flink `deleteEventTimeTimer`,
/// `deleteProcessingTimeTimer`): a deleted timer never fires; requests of one call apply
/// in order.
#[test]
fn deleted_timers_do_not_fire() {
    let out = MemoryEnv::new()
        .from_collection(vec![
            ("a", 0i64),
            ("b", 5),
            ("a", 10),
            ("a", 20),
            ("b", 100),
        ])
        .assign_timestamps_and_watermarks_with(
            |e: &(&str, i64), _| e.1,
            BoundedOutOfOrderness::new(std::time::Duration::ZERO).unwrap(),
        )
        .key_by(|e| e.0)
        .process_function(Debounce)
        .collect_vec()
        .unwrap();
    assert_eq!(
        out,
        vec![
            // Record b@100 moves processing time to 100: a's and b's pending processing
            // timers (a@50 — a@30 and a@40 were deleted — and b@35) fire before it, and
            // each deletes its event-time twin.
            "b@35:proc",
            "a@50:proc",
            // End of input: b's last timers (event first).
            "b@130:event",
            "b@130:proc",
        ]
    );
}
