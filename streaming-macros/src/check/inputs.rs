//! The rules of operators with a second input (`union`, `connect`, `interval_join`): the
//! stream argument is at the stage the operator takes, runs on an engine this stream runs
//! on, and has the event time the operator needs. Each error is at the stream that breaks
//! the rule: the argument, or the operator for the stream it is called on (a broadcast
//! stream connected to a stream that is not keyed).

use super::walk::{At, Walk};
use super::Cx;
use crate::ops::{Engine, OpSpec, Stage, Time};
use crate::parse::{Call, Chain};
use syn::spanned::Spanned;

/// How to give a stream event time, for messages.
const CHOOSE_EVENT_TIME: &str = "start it from a source with timestamps \
    (`from_timestamped_collection`, `add_timestamped_source`, a topic), add \
    `.with_ingestion_time()` right after its memory source, or choose them with \
    `.assign_timestamps_and_watermarks_with(..)` before `key_by`";

/// The rules of the stream argument of `call` (the chain `other`, walked to its end),
/// which must be at `wanted`, against the stream `this` it is called on. Returns whether
/// the stage after `call` is a guess (the operator meant is of another stage: a broadcast
/// stream connected to a stream that is not keyed).
pub(super) fn argument(
    cx: &mut Cx,
    call: &Call,
    op: &OpSpec,
    wanted: Stage,
    (chain, walk): (&Chain, &Walk<'_>),
    this: &At<'_>,
) -> bool {
    let other = &walk.at;
    if other.lost {
        // Its own errors were reported.
        return false;
    }
    let Some(arg) = op
        .stream_argument()
        .and_then(|(i, _)| call.args.exprs().get(i))
    else {
        return false;
    };
    let span = arg.span();
    let what = describe(chain, walk);
    if other.stage == Stage::Broadcast && wanted != Stage::Broadcast && op.name == "connect" {
        cx.err(
            call.name.span(),
            broadcast_to_a_stream_not_keyed(this.stage),
        );
        return true;
    } else if !wanted.accepts(other.stage) {
        cx.err(span, stage(op, wanted, &what, walk));
    } else if !this.engines.iter().any(|e| other.engines.contains(e)) {
        cx.err(
            span,
            format!(
                "`{}` combines streams of one engine, but this stream runs on the {} engine \
                 and {what} on the {} engine",
                op.name,
                titles(&this.engines),
                titles(&other.engines)
            ),
        );
    } else if let Some(msg) = time(op, &what, this.time, other.time) {
        cx.err(span, msg);
    }
    false
}

/// `connect` of a broadcast stream called on a stream that is not keyed (at `stage`): the
/// broadcast map is read next to keyed state, so the builder connects only a keyed stream
/// to it.
fn broadcast_to_a_stream_not_keyed(stage: Stage) -> String {
    format!(
        "`connect` of a broadcast stream applies to a keyed stream, but here it is applied \
         to {}: add `.key_by(|element| key)` before it, for a `KeyedBroadcastProcessFunction`",
        stage.noun()
    )
}

/// `call` joins by event time: the stream it is called on must carry it.
pub(super) fn needs_event_time(cx: &mut Cx, call: &Call, this: &At<'_>) {
    if this.time == Some(false) {
        cx.err(
            call.name.span(),
            format!(
                "`{}` joins by event time, but this stream's timestamps were never chosen: \
                 {CHOOSE_EVENT_TIME}",
                call.name
            ),
        );
    }
}

/// The stream argument at another stage than `wanted`.
fn stage(op: &OpSpec, wanted: Stage, what: &str, walk: &Walk<'_>) -> String {
    let name = op.name;
    let found = walk.at.stage;
    if let (Stage::Done, Some(sink)) = (found, walk.sink) {
        return format!(
            "`{name}` takes {}, but {what} ends with the sink `{}`: remove it",
            wanted.noun(),
            sink.name
        );
    }
    let hint = match (wanted, found) {
        (Stage::Keyed, Stage::Stream | Stage::Processed) => {
            ": key it by the key type of this stream, `.key_by(|element| key)`".to_string()
        }
        (Stage::Stream, Stage::Keyed) => format!(
            ": `{name}` takes a stream before its `key_by`; key the result of `{name}` instead"
        ),
        (Stage::Broadcast, Stage::Stream | Stage::Processed) => {
            ": broadcast it with `.broadcast(descriptor)` for a `KeyedBroadcastProcessFunction`, \
             or `connect` it before this stream's `key_by` and key both inputs with \
             `.key_by(|&first| key, |&second| key)` for a `KeyedCoProcessFunction`"
                .to_string()
        }
        (Stage::Stream, Stage::Broadcast) => {
            format!(": `{name}` takes a stream before its `broadcast`")
        }
        _ => String::new(),
    };
    format!(
        "`{name}` takes {}, but {what} is {}{hint}",
        wanted.noun(),
        found.noun()
    )
}

/// The event-time rule of `op` for this stream (`this`) and the argument (`other`), when
/// the macro knows both: both carry event time or neither (`union`, `connect`), or both
/// carry it (`interval_join`; this stream's is checked at the operator).
fn time(op: &OpSpec, what: &str, this: Option<bool>, other: Option<bool>) -> Option<String> {
    let name = op.name;
    match (op.time, this, other) {
        (Time::Needs, _, Some(false)) => Some(format!(
            "`{name}` joins by event time, but the timestamps of {what} were never chosen: \
             {CHOOSE_EVENT_TIME}"
        )),
        (Time::Agrees, Some(true), Some(false)) => Some(format!(
            "`{name}` takes streams that both carry event time or neither does: this stream \
             carries it, but the timestamps of {what} were never chosen: {CHOOSE_EVENT_TIME}"
        )),
        (Time::Agrees, Some(false), Some(true)) => Some(format!(
            "`{name}` takes streams that both carry event time or neither does: {what} \
             carries it, but this stream's timestamps were never chosen: {CHOOSE_EVENT_TIME}"
        )),
        _ => None,
    }
}

/// The stream argument in messages: `` `payments` ``, `` `payments.map(..)` ``, or the
/// stream of its source.
fn describe(chain: &Chain, walk: &Walk<'_>) -> String {
    let calls: String = chain
        .calls
        .iter()
        .map(|c| format!(".{}(..)", c.name))
        .collect();
    match chain.head_name() {
        Some(name) if walk.bound_head => format!("`{name}{calls}`"),
        _ => match walk.at.source {
            Some(source) => format!("the stream from `{}`", source.name),
            None => "the other stream".to_string(),
        },
    }
}

fn titles(engines: &[Engine]) -> String {
    engines
        .iter()
        .map(|e| e.title())
        .collect::<Vec<_>>()
        .join(" or ")
}
