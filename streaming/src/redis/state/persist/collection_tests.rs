//! Collection states of a keyed process operator on the Redis engine: loaded per key,
//! drained element by element, rolled back per key.

use super::*;
use crate::api::state::CollectionKind;
use crate::api::{
    KeyedContext, ListStateDescriptor, MapStateDescriptor, SetStateDescriptor, ValueStateDescriptor,
};
use crate::ops::process::ContextTimes;
use crate::ops::ProcessState;
use crate::redis::state::process_state::ProcessChanges;
use tests::drained;

const LAST: MapStateDescriptor<String, u32> = MapStateDescriptor::persistent("last");
const SEEN: SetStateDescriptor<u32> = SetStateDescriptor::persistent("seen");
const LOG: ListStateDescriptor<u32> = ListStateDescriptor::persistent("log");
const COUNT: ValueStateDescriptor<u64> = ValueStateDescriptor::persistent("count", 0);

type Tracked = ProcessState<String, ProcessChanges<String>>;

fn tracked() -> Tracked {
    Tracked::new(&OperatorId::new("s", 2, "process"))
}

fn with<R>(st: &mut Tracked, key: &str, f: impl FnOnce(&mut KeyedContext<'_, String>) -> R) -> R {
    let times = ContextTimes {
        timestamp: 0,
        watermark: 0,
        processing_time: 0,
        event_time: true,
    };
    st.with_context(&key.to_string(), times, &mut Vec::new(), f, |_| false)
        .expect("the key is not poisoned")
}

/// One collection write: state, key, replaced, size, added (map: `field=value`; sorted
/// but for a list), removed (sorted).
type Written = (String, String, bool, usize, Vec<String>, Vec<String>);

fn collections(st: &mut Tracked) -> Vec<Written> {
    let mut out = Vec::new();
    st.drain_collections("op", &mut |w| {
        let c = w.changes;
        let mut added: Vec<String> = match w.kind {
            CollectionKind::Map => c.added.chunks(2).map(|p| p.join("=")).collect(),
            _ => c.added,
        };
        if w.kind != CollectionKind::List {
            added.sort();
        }
        let mut removed = c.removed;
        removed.sort();
        out.push((w.state.into(), w.key, c.replaced, c.size, added, removed));
    })
    .unwrap();
    out.sort();
    out
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn written(state: &str, replaced: bool, size: usize, added: &[&str], removed: &[&str]) -> Written {
    let key = "\"k\"".to_string();
    (
        state.into(),
        key,
        replaced,
        size,
        strings(added),
        strings(removed),
    )
}

/// Opens the three collections of key `k` and loads their stored elements.
fn loaded() -> Tracked {
    let mut st = tracked();
    with(&mut st, "k", |c| {
        c.state(&LAST).map(|_| ()).unwrap();
        c.state(&SEEN).map(|_| ()).unwrap();
        c.state(&LOG).map(|_| ()).unwrap();
    });
    let map: Vec<String> = (0..1000)
        .flat_map(|i| [format!("\"e{i}\""), i.to_string()])
        .collect();
    st.load_collection("op", "last", "\"k\"", map).unwrap();
    st.load_collection("op", "seen", "\"k\"", strings(&["1", "2"]))
        .unwrap();
    st.load_collection("op", "log", "\"k\"", strings(&["5", "6"]))
        .unwrap();
    st
}

#[test]
fn a_batch_drains_only_the_elements_it_changed() {
    let mut st = loaded();
    with(&mut st, "k", |c| {
        let mut m = c.state(&LAST).unwrap();
        assert_eq!((m.len(), m.get(&"e3".to_string())), (1000, Some(&3)));
        m.put("e7".into(), 70);
        m.put("new".into(), 1);
        m.remove(&"e8".to_string());
        let mut s = c.state(&SEEN).unwrap();
        assert!(!s.add(1), "already a member: no change");
        s.add(3);
        s.remove(&2);
        let mut l = c.state(&LOG).unwrap();
        assert_eq!(l.get(), [5, 6]);
        l.add(7);
        l.add(8);
    });
    assert_eq!(
        collections(&mut st),
        [
            written(
                "last",
                false,
                1000,
                &["\"e7\"=70", "\"new\"=1"],
                &["\"e8\""]
            ),
            written("log", false, 4, &["7", "8"], &[]),
            written("seen", false, 2, &["3"], &["2"]),
        ]
    );
    assert!(collections(&mut st).is_empty(), "drained");
    assert!(drained(&mut st).is_empty(), "no value state changed");
}

#[test]
fn clear_and_update_replace_the_stored_collection() {
    let mut st = loaded();
    with(&mut st, "k", |c| {
        c.state(&LAST).unwrap().clear();
        c.state(&LAST).unwrap().put("only".into(), 1);
        c.state(&SEEN).unwrap().clear();
        c.state(&LOG).unwrap().update(vec![9]);
    });
    assert_eq!(
        collections(&mut st),
        [
            written("last", true, 1, &["\"only\"=1"], &[]),
            written("log", true, 1, &["9"], &[]),
            written("seen", true, 0, &[], &[]),
        ]
    );
}

#[test]
fn removing_the_last_element_empties_the_key() {
    let mut st = tracked();
    with(&mut st, "k", |c| {
        c.state(&SEEN).unwrap().add(4);
    });
    assert_eq!(
        collections(&mut st),
        [written("seen", false, 1, &["4"], &[])]
    );
    with(&mut st, "k", |c| {
        c.state(&SEEN).unwrap().remove(&4);
    });
    assert_eq!(
        collections(&mut st),
        [written("seen", false, 0, &[], &["4"])]
    );
}

#[test]
fn a_rollback_forgets_the_changed_keys_and_wants_them_again() {
    let mut st = loaded();
    st.stored("last");
    with(&mut st, "k", |c| {
        c.state(&LAST).unwrap().put("e1".into(), 100);
    });
    with(&mut st, "z", |c| c.state(&COUNT).unwrap().update(1));
    st.roll_back("op", &[]).unwrap();
    assert!(
        collections(&mut st).is_empty(),
        "the changes went with the keys"
    );
    let mut wanted = Vec::new();
    st.wanted_collections("op", &mut |s, k, kind| {
        wanted.push((s.to_string(), k, kind))
    })
    .unwrap();
    wanted.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        wanted[0],
        ("last".into(), "\"k\"".into(), CollectionKind::Map)
    );
    // Fetched again: the committed map, without the rolled-back put.
    st.load_collection("op", "last", "\"k\"", strings(&["\"e1\"", "1"]))
        .unwrap();
    st.fetched();
    let e1 = with(&mut st, "k", |c| {
        c.state(&LAST).unwrap().get(&"e1".into()).copied()
    });
    assert_eq!(e1, Some(1));
}

#[test]
fn sizes_fetched_before_a_collection_opened_make_its_keys_fetched_again() {
    let mut st = tracked();
    st.stored("seen");
    with(&mut st, "k", |_| ());
    let mut wanted = Vec::new();
    st.wanted("op", &mut |s, f| wanted.push((s.to_string(), f)))
        .unwrap();
    assert_eq!(wanted, [("seen".to_string(), "\"k\"".to_string())]);
    // Not opened yet: what the state's hash holds, the key's size, waits for the kind.
    st.load("op", "seen", vec![("\"k\"".into(), "2".into())])
        .unwrap();
    st.fetched();
    assert!(!st.has_wanted());
    let mut wanted = Vec::new();
    with(&mut st, "k", |c| c.state(&SEEN).map(|_| ()).unwrap());
    assert!(
        st.has_wanted(),
        "the key's members are fetched once the kind is known"
    );
    st.wanted("op", &mut |s, f| wanted.push((s.to_string(), f)))
        .unwrap();
    assert!(
        wanted.is_empty(),
        "no size is fetched for a known collection"
    );
    st.wanted_collections("op", &mut |s, k, _| wanted.push((s.to_string(), k)))
        .unwrap();
    assert_eq!(wanted, [("seen".to_string(), "\"k\"".to_string())]);
}

#[test]
fn the_memory_engine_logs_no_element_changes() {
    use crate::ops::NoChanges;
    let mut st = ProcessState::<String, NoChanges>::new(&OperatorId::new("s", 2, "process"));
    let times = ContextTimes {
        timestamp: 0,
        watermark: 0,
        processing_time: 0,
        event_time: true,
    };
    st.with_context(
        &"k".to_string(),
        times,
        &mut Vec::new(),
        |c| {
            let m = c.state(&LAST).unwrap();
            assert!(m.delta.is_none());
        },
        |_| false,
    )
    .expect("the key is not poisoned");
}
