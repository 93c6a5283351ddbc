//! The fenced read's reply read from bytes against redis-rs's parser on random replies:
//! the same entries, position, nil and fenced flags, and the same errors; the shapes
//! Redis sends are read directly (not through redis-rs); hostile bytes never panic.

use std::collections::BTreeMap;

use arcstr::ArcStr;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

use super::super::resp::{frame_end, Framer};
use super::*;

/// A reply as the test writes it (the encodings of nil kept apart).
#[derive(Clone, Debug)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    NilBulk,
    Array(Vec<Resp>),
    NilArray,
    Map(Vec<(Resp, Resp)>),
    Null,
}

fn encode(r: &Resp, out: &mut Vec<u8>) {
    match r {
        Resp::Simple(s) => out.extend(format!("+{s}\r\n").bytes()),
        Resp::Error(s) => out.extend(format!("-{s}\r\n").bytes()),
        Resp::Int(i) => out.extend(format!(":{i}\r\n").bytes()),
        Resp::Bulk(b) => {
            out.extend(format!("${}\r\n", b.len()).bytes());
            out.extend(b);
            out.extend(b"\r\n");
        }
        Resp::NilBulk => out.extend(b"$-1\r\n"),
        Resp::NilArray => out.extend(b"*-1\r\n"),
        Resp::Null => out.extend(b"_\r\n"),
        Resp::Array(items) => {
            out.extend(format!("*{}\r\n", items.len()).bytes());
            items.iter().for_each(|i| encode(i, out));
        }
        Resp::Map(pairs) => {
            out.extend(format!("%{}\r\n", pairs.len()).bytes());
            for (k, v) in pairs {
                encode(k, out);
                encode(v, out);
            }
        }
    }
}

fn bytes_of(replies: &[Resp]) -> Vec<u8> {
    let mut out = Vec::new();
    replies.iter().for_each(|r| encode(r, &mut out));
    out
}

/// The first `n` replies in `bytes`, as the read connection frames them.
fn frames(bytes: &[u8], n: usize) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut at = 0;
    while out.len() < n {
        let end = frame_end(bytes, at).ok()??;
        out.push(&bytes[at..end]);
        at = end;
    }
    Some(out)
}

const TOPIC: &str = "orders";
const PARTITION: u32 = 3;
const TOPIC_SHARED: ArcStr = arcstr::literal!("orders");
const AT: (&ArcStr, u32) = (&TOPIC_SHARED, PARTITION);

/// What the reply comes to, errors compared by their text and kind.
fn outcome(r: Result<FencedReply, Error>) -> Result<FencedReply, String> {
    r.map_err(|e| format!("{:?} {e}", e.kind()))
}

/// What redis-rs's parser makes of the replies (the path of a cluster connection).
fn general(frames: &[&[u8]], every_id: bool) -> Result<FencedReply, String> {
    let values = transaction_values(frames).map_err(Error::from);
    outcome(values.and_then(|v| from_values(v, AT, every_id)))
}

/// An entry id as Redis writes it.
fn redis_id() -> BoxedStrategy<Vec<u8>> {
    (any::<u64>(), 0u32..4)
        .prop_map(|(ms, seq)| format!("{ms}-{seq}").into_bytes())
        .boxed()
}

/// An entry id, sometimes not even text.
fn entry_id() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![9 => redis_id(), 1 => vec(any::<u8>(), 0..5)].boxed()
}

fn text_or_bytes(text: &'static str) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![4 => text.prop_map(String::into_bytes), 1 => vec(any::<u8>(), 0..5)]
}

fn number_or_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        2 => any::<u32>().prop_map(|n| n.to_string().into_bytes()),
        1 => vec(any::<u8>(), 0..4),
    ]
}

/// One field/value pair: mostly fields of the encoding, some foreign or malformed.
fn field() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    let named = |name: &'static str, v: BoxedStrategy<Vec<u8>>| v.prop_map(move |v| (name.into(), v));
    let headers = prop_oneof![
        3 => btree_map("[a-z-]{1,4}", "[ -~é]{0,4}", 0..3)
            .prop_map(|m: BTreeMap<String, String>| serde_json::to_vec(&m).unwrap_or_default()),
        1 => vec(any::<u8>(), 0..5),
    ];
    prop_oneof![
        3 => named("p", vec(any::<u8>(), 0..24).boxed()),
        3 => named("ts", number_or_bytes().boxed()),
        2 => named("k", text_or_bytes("[a-zé0-9]{0,6}").boxed()),
        1 => named("h", headers.boxed()),
        1 => named("rc", number_or_bytes().boxed()),
        1 => named("mr", number_or_bytes().boxed()),
        1 => named("rg", text_or_bytes("[a-z]{0,4}").boxed()),
        1 => (vec(any::<u8>(), 0..3), vec(any::<u8>(), 0..6)),
    ]
}

/// An entry's fields: a well-formed message's (payload and timestamp first) most often.
fn fields() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
    prop_oneof![
        3 => (vec(any::<u8>(), 0..24), any::<i64>(), vec(field(), 0..4)).prop_map(|(p, ts, more)| {
            let mut f = vec![(b"p".to_vec(), p), (b"ts".to_vec(), ts.to_string().into_bytes())];
            f.extend(more);
            f
        }),
        1 => vec(field(), 0..7),
    ]
}

fn flat(fields: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<Resp> {
    fields
        .into_iter()
        .flat_map(|(f, v)| [Resp::Bulk(f), Resp::Bulk(v)])
        .collect()
}

/// An entry as Redis writes it, `[id, [f, v, …]]`, or `[id, nil]` when deleted while
/// pending, its id drawn from `id`.
fn entry_of(id: fn() -> BoxedStrategy<Vec<u8>>) -> BoxedStrategy<Resp> {
    prop_oneof![
        9 => (id(), fields())
            .prop_map(|(id, f)| Resp::Array(vec![Resp::Bulk(id), Resp::Array(flat(f))])),
        1 => id().prop_map(|id| Resp::Array(vec![Resp::Bulk(id), Resp::NilArray])),
    ]
    .boxed()
}

/// [`entry_of`] with any id.
fn entry() -> BoxedStrategy<Resp> {
    entry_of(entry_id)
}

/// An entry of a shape Redis does not send (RESP3 maps, other types, odd counts).
fn odd_entry() -> impl Strategy<Value = Resp> {
    let id = || entry_id().prop_map(Resp::Bulk);
    prop_oneof![
        id().prop_map(|id| Resp::Array(vec![id])),
        Just(Resp::Array(vec![])),
        Just(Resp::NilArray),
        (id(), fields()).prop_map(|(id, f)| Resp::Array(vec![id, Resp::Array(flat(f)), Resp::Int(1)])),
        (id(), fields(), prop_oneof![Just(b"p".to_vec()), Just(b"ts".to_vec()),
                                     Just(b"k".to_vec()), vec(any::<u8>(), 0..3)])
            .prop_map(|(id, f, x)| {
                let mut kv = flat(f);
                kv.push(Resp::Bulk(x));
                Resp::Array(vec![id, Resp::Array(kv)])
            }),
        (id(), fields()).prop_map(|(id, f)| {
            let kv = f.into_iter().map(|(f, v)| (Resp::Bulk(f), Resp::Bulk(v))).collect();
            Resp::Array(vec![id, Resp::Map(kv)])
        }),
        (id(), vec(prop_oneof![Just(Resp::NilBulk), Just(Resp::Simple("OK".into())),
                               Just(Resp::Int(-3)), Just(Resp::Simple("v".into())),
                               Just(Resp::Null)], 1..4))
            .prop_map(|(id, vs)| Resp::Array(vec![id, Resp::Array(
                vs.into_iter().flat_map(|v| [Resp::Bulk(b"p".to_vec()), v]).collect())])),
        (any::<i64>(), fields()).prop_map(|(i, f)| Resp::Array(vec![Resp::Int(i), Resp::Array(flat(f))])),
        fields().prop_map(|f| Resp::Array(vec![Resp::Simple("1-1".into()), Resp::Array(flat(f))])),
        fields().prop_map(|f| Resp::Array(vec![Resp::Bulk(b"1-1".to_vec()), Resp::Int(f.len() as i64)])),
    ]
}

/// One stream's `[name, entries]`.
fn stream(entry: BoxedStrategy<Resp>) -> impl Strategy<Value = Resp> {
    prop_oneof![
        9 => ("[a-z:{}0-9]{1,12}", vec(entry, 0..8)).prop_map(|(name, es)| {
            Resp::Array(vec![Resp::Bulk(name.into_bytes()), Resp::Array(es)])
        }),
        1 => "[a-z]{1,4}".prop_map(|n| Resp::Array(vec![Resp::Bulk(n.into_bytes()), Resp::NilArray])),
    ]
}

/// A read's reply as Redis writes it: nil, or the streams read (the engine reads one;
/// several are read the same way), entries drawn from `entry`.
fn stream_read(entry: BoxedStrategy<Resp>) -> impl Strategy<Value = Resp> {
    prop_oneof![
        1 => Just(Resp::NilArray),
        6 => vec(stream(entry), 0..3).prop_map(Resp::Array),
    ]
}

/// A read's reply of any shape: mostly Redis's, some of other shapes and errors.
fn any_read() -> impl Strategy<Value = Resp> {
    let mixed = prop_oneof![4 => entry().boxed(), 1 => odd_entry().boxed()].boxed();
    prop_oneof![
        6 => stream_read(entry()),
        3 => vec(stream(mixed), 0..3).prop_map(Resp::Array),
        1 => vec(("[a-z]{1,4}", vec(entry(), 0..3)), 0..3).prop_map(|ss| {
            Resp::Map(ss.into_iter().map(|(n, es)| (Resp::Bulk(n.into_bytes()), Resp::Array(es))).collect())
        }),
        1 => Just(Resp::Error("NOGROUP No such key or consumer group".into())),
        1 => prop_oneof![Just(Resp::NilBulk), Just(Resp::Null), Just(Resp::Int(0)),
                         Just(Resp::Array(vec![Resp::Array(vec![Resp::Bulk(b"s".to_vec())])]))],
    ]
}

fn guard() -> impl Strategy<Value = Resp> {
    prop_oneof![
        4 => Just(Resp::Bulk(Vec::new())),
        4 => entry_id().prop_map(Resp::Bulk),
        2 => Just(Resp::Bulk(b"fenced".to_vec())),
        1 => prop_oneof![Just(Resp::Simple("fenced".into())), Just(Resp::Int(0)),
                         Just(Resp::NilBulk), Just(Resp::Error("BUSY script".into()))],
    ]
}

fn undo() -> impl Strategy<Value = Resp> {
    prop_oneof![
        6 => Just(Resp::Int(1)),
        2 => Just(Resp::Bulk(b"fenced".to_vec())),
        1 => prop_oneof![Just(Resp::Simple("fenced".into())), Just(Resp::Bulk(b"x".to_vec())),
                         Just(Resp::Error("ERR undo".into())), Just(Resp::Int(7))],
    ]
}

/// The five replies of a fenced read's transaction, of any shape.
fn transaction() -> impl Strategy<Value = Vec<Resp>> {
    let ok = prop_oneof![9 => Just(Resp::Simple("OK".into())), 1 => Just(Resp::Error("ERR no".into()))];
    let queued = || prop_oneof![
        12 => Just(Resp::Simple("QUEUED".into())),
        1 => Just(Resp::Error("NOSCRIPT gone".into())),
        1 => Just(Resp::Simple("OK".into())),
    ];
    let exec = prop_oneof![
        12 => (guard(), any_read(), undo()).prop_map(|(g, r, u)| Resp::Array(vec![g, r, u])),
        1 => Just(Resp::NilArray),
        1 => Just(Resp::Error("EXECABORT Transaction discarded".into())),
        1 => (guard(), any_read()).prop_map(|(g, r)| Resp::Array(vec![g, r])),
    ];
    (ok, queued(), queued(), queued(), exec).prop_map(|(m, a, b, c, e)| vec![m, a, b, c, e])
}

/// The five replies as Redis sends them for a read the guard let through or refused.
fn redis_transaction() -> impl Strategy<Value = Vec<Resp>> {
    let guard = prop_oneof![Just(Resp::Bulk(Vec::new())), redis_id().prop_map(Resp::Bulk)];
    let undo = prop_oneof![4 => Just(Resp::Int(1)), 1 => Just(Resp::Bulk(b"fenced".to_vec()))];
    (guard, stream_read(entry_of(redis_id)), undo).prop_map(|(g, r, u)| {
        let queued = Resp::Simple("QUEUED".into());
        let exec = Resp::Array(vec![g, r, u]);
        vec![Resp::Simple("OK".into()), queued.clone(), queued.clone(), queued, exec]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn replies_read_from_bytes_match_redis_rs(tx in transaction(), every_id in any::<bool>()) {
        let bytes = bytes_of(&tx);
        let f = frames(&bytes, 5).expect("five complete replies");
        prop_assert_eq!(f.iter().map(|f| f.len()).sum::<usize>(), bytes.len());
        prop_assert_eq!(outcome(from_frames(&f, AT, every_id)), general(&f, every_id));
    }

    #[test]
    fn stream_reads_from_bytes_match_redis_rs(
        read in any_read(),
        before in entry_id(),
        every_id in any::<bool>(),
    ) {
        let queued = Resp::Simple("QUEUED".into());
        let exec = Resp::Array(vec![Resp::Bulk(before), read, Resp::Int(1)]);
        let tx = [Resp::Simple("OK".into()), queued.clone(), queued.clone(), queued, exec];
        let bytes = bytes_of(&tx);
        let f = frames(&bytes, 5).expect("five complete replies");
        prop_assert_eq!(outcome(from_frames(&f, AT, every_id)), general(&f, every_id));
    }

    #[test]
    fn replies_of_redis_shapes_are_read_without_redis_rs(
        tx in redis_transaction(),
        every_id in any::<bool>(),
    ) {
        let bytes = bytes_of(&tx);
        let f = frames(&bytes, 5).expect("five complete replies");
        let direct = read_directly(&f, AT, every_id);
        prop_assert!(direct.is_some(), "not read directly: {:?}", tx);
        prop_assert_eq!(direct.map(Ok), Some(general(&f, every_id)));
    }

    #[test]
    fn a_reply_is_incomplete_until_its_last_byte(
        tx in transaction(),
        cuts in vec(any::<prop::sample::Index>(), 1..5),
    ) {
        let bytes = bytes_of(&tx[4..]);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len())).collect();
        cuts.sort_unstable();
        // Fed in chunks, the framer goes on where it stopped.
        let mut framer = Framer::at(0);
        for &at in &cuts {
            prop_assert_eq!(frame_end(&bytes[..at], 0), Ok(None));
            prop_assert_eq!(framer.advance(&bytes[..at]), Ok(None));
        }
        prop_assert_eq!(framer.advance(&bytes), Ok(Some(bytes.len())));
        prop_assert_eq!(frame_end(&bytes, 0), Ok(Some(bytes.len())));
    }

    #[test]
    fn hostile_bytes_never_panic(bytes in vec(any::<u8>(), 0..200)) {
        if let Some(f) = frames(&bytes, 5) {
            prop_assert_eq!(outcome(from_frames(&f, AT, true)), general(&f, true));
        }
    }

    #[test]
    fn damaged_replies_never_panic_and_match_redis_rs(
        tx in transaction(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = bytes_of(&tx);
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        bytes.truncate(bytes.len() - cut.index(bytes.len() / 8 + 1));
        if let Some(f) = frames(&bytes, 5) {
            prop_assert_eq!(outcome(from_frames(&f, AT, true)), general(&f, true));
        }
    }
}

/// The replies of one read: a guard with the group's position, two entries (one
/// malformed) and one deleted while pending.
fn sample() -> Vec<Resp> {
    let queued = Resp::Simple("QUEUED".into());
    let good = Resp::Array(vec![
        Resp::Bulk(b"5-1".to_vec()),
        Resp::Array(flat(vec![
            (b"p".to_vec(), b"\x00\xff".to_vec()),
            (b"ts".to_vec(), b"-7".to_vec()),
            (b"k".to_vec(), b"key".to_vec()),
            (b"p".to_vec(), b"second p".to_vec()),
        ])),
    ]);
    let bad = Resp::Array(vec![
        Resp::Bulk(b"5-2".to_vec()),
        Resp::Array(flat(vec![(b"p".to_vec(), b"x".to_vec())])),
    ]);
    let deleted = Resp::Array(vec![Resp::Bulk(b"5-3".to_vec()), Resp::NilArray]);
    let read = Resp::Array(vec![Resp::Array(vec![
        Resp::Bulk(b"s".to_vec()),
        Resp::Array(vec![good, bad, deleted]),
    ])]);
    let exec = Resp::Array(vec![Resp::Bulk(b"4-0".to_vec()), read, Resp::Int(1)]);
    vec![Resp::Simple("OK".into()), queued.clone(), queued.clone(), queued, exec]
}

#[test]
fn a_read_becomes_messages_and_malformed_entries() {
    let bytes = bytes_of(&sample());
    let f = frames(&bytes, 5).unwrap();
    let reply = read_directly(&f, AT, true).expect("read directly");
    assert!(!reply.fenced && !reply.nil);
    assert_eq!(reply.before.as_deref(), Some("4-0"));
    let Entries {
        messages,
        malformed,
        ids,
    } = &reply.entries;
    assert_eq!(ids, &["5-1", "5-2"]);
    let [m] = &messages[..] else {
        panic!("{messages:?}");
    };
    assert_eq!((m.id.as_str(), m.topic.as_str(), m.partition), ("5-1", TOPIC, PARTITION));
    assert_eq!(
        (&m.payload[..], m.timestamp_ms, m.key.as_deref()),
        (&b"\x00\xff"[..], -7, Some("key"))
    );
    let [e] = &malformed[..] else {
        panic!("{malformed:?}");
    };
    assert_eq!((e.entry.id.as_str(), e.after), ("5-2", 1));
    assert_eq!(e.entry.fields, vec![(b"p".to_vec(), b"x".to_vec())]);
    assert!(e.reason.contains("missing field `ts`"), "{}", e.reason);
    assert_eq!(Ok(reply), general(&f, true));
    let last_only = from_frames(&f, AT, false).unwrap();
    assert_eq!(last_only.entries.ids, ["5-2"]);
    assert_eq!(Ok(last_only), general(&f, false));
}

#[test]
fn errors_are_redis_rs_errors() {
    let mut tx = sample();
    tx[4] = Resp::Array(vec![
        Resp::Bulk(Vec::new()),
        Resp::Error("NOGROUP No such key 's' or consumer group 'g'".into()),
        Resp::Int(1),
    ]);
    let bytes = bytes_of(&tx);
    let f = frames(&bytes, 5).unwrap();
    let Err(Error::Redis { source, .. }) = from_frames(&f, AT, true) else {
        panic!("not a Redis error");
    };
    assert_eq!(source.code(), Some("NOGROUP"));
    tx[2] = Resp::Error("ERR unknown command".into());
    let bytes = bytes_of(&tx);
    let f = frames(&bytes, 5).unwrap();
    let e = from_frames(&f, AT, true).unwrap_err();
    assert!(e.to_string().contains("unknown command"), "{e}");
}

#[test]
fn a_fenced_read_is_fenced_whichever_script_refused() {
    for (guard, undo) in [(&b"fenced"[..], Resp::Int(1)), (b"", Resp::Bulk(b"fenced".to_vec()))] {
        let mut tx = sample();
        if let Resp::Array(items) = &mut tx[4] {
            items[0] = Resp::Bulk(guard.to_vec());
            items[2] = undo;
        }
        let bytes = bytes_of(&tx);
        let f = frames(&bytes, 5).unwrap();
        let reply = from_frames(&f, AT, true).unwrap();
        assert!(reply.fenced && reply.entries.is_empty() && reply.before.is_none());
    }
}

#[test]
fn deep_nesting_is_framed_without_recursion() {
    let mut bytes = b"*1\r\n".repeat(200_000);
    bytes.extend(b":1\r\n");
    assert_eq!(frame_end(&bytes, 0), Ok(Some(bytes.len())));
    let f = [&b"+OK\r\n"[..], b"+QUEUED\r\n", b"+QUEUED\r\n", b"+QUEUED\r\n", &bytes];
    assert!(from_frames(&f, AT, true).is_err());
}
