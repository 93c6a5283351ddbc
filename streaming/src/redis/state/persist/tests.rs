//! Tests of the stores' loading, change tracking and lazy state.
use super::*;
use crate::redis::config::SchemaMismatchPolicy;
use std::collections::HashMap;

pub(crate) fn drained(p: &mut dyn Persist) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    p.drain("op", &mut |(s, f, v)| out.push((s.to_string(), f, v)))
        .unwrap();
    out.sort();
    out
}

#[test]
fn keyed_table_loads_and_drains_only_changed_keys_as_json() {
    let mut t: KeyedTable<String, Option<i64>, ChangedKeys<String>> = KeyedTable::default();
    t.load(
        "op",
        ROLLING_STATE,
        vec![("\"a\"".into(), "1".into()), ("\"b\"".into(), "2".into())],
    )
    .unwrap();
    assert_eq!(t.map.get("a"), Some(&Some(1)));
    assert!(drained(&mut t).is_empty(), "loading is not a change");
    t.changes.mark(&"a".to_string());
    t.map.insert("a".into(), Some(5));
    t.changes.mark(&"c".to_string());
    assert_eq!(
        drained(&mut t),
        [
            ("rolling".into(), "\"a\"".into(), Some("5".into())),
            ("rolling".into(), "\"c\"".into(), None),
        ]
    );
    assert!(drained(&mut t).is_empty());
    // A field that is no key's JSON: no record can use it, it is skipped.
    t.load("op", ROLLING_STATE, vec![("not json".into(), "1".into())])
        .unwrap();
    assert_eq!(t.map.len(), 2);
}

fn wanted(p: &mut dyn Persist) -> Vec<(String, String)> {
    let mut out = Vec::new();
    p.wanted("op", &mut |s, f| out.push((s.to_string(), f)))
        .unwrap();
    out.sort();
    out
}

type Table = KeyedTable<String, i64, ChangedKeys<String>>;

/// What the sum operator does for one element of `key`.
fn try_add(t: &mut Table, key: &str, v: i64) -> Result<(), Error> {
    let key = key.to_string();
    t.changes.mark(&key);
    match t.map.get_mut(&key) {
        Some(acc) => *acc += v,
        None => {
            t.changes.missing(&key)?;
            t.map.insert(key, v);
        }
    }
    Ok(())
}

fn add(t: &mut Table, key: &str, v: i64) {
    try_add(t, key, v).unwrap();
}

#[test]
fn a_table_without_stored_state_misses_nothing() {
    let mut t = Table::default();
    add(&mut t, "a", 1);
    assert!(!t.has_wanted(), "nothing stored: a new key is new");
    assert_eq!(t.cached(), 1);
}

#[test]
fn a_stored_table_wants_unknown_keys_once_and_knows_fetched_absent_ones() {
    let mut t = Table::default();
    t.stored(ROLLING_STATE);
    add(&mut t, "a", 1);
    add(&mut t, "b", 1);
    assert!(t.has_wanted());
    assert_eq!(
        wanted(&mut t),
        [
            ("rolling".into(), "\"a\"".into()),
            ("rolling".into(), "\"b\"".into())
        ]
    );
    // The engine rolls back, fetches ("a" is stored, "b" is not) and runs again.
    t.roll_back("op", &[]).unwrap();
    assert!(t.map.is_empty());
    t.load("op", ROLLING_STATE, vec![("\"a\"".into(), "41".into())])
        .unwrap();
    t.fetched();
    assert!(!t.has_wanted());
    add(&mut t, "a", 1);
    add(&mut t, "b", 1);
    assert!(!t.has_wanted(), "both keys are known now");
    assert_eq!(t.map.get("a"), Some(&42));
    assert_eq!(t.map.get("b"), Some(&1));
    assert_eq!(
        drained(&mut t),
        [
            ("rolling".into(), "\"a\"".into(), Some("42".into())),
            ("rolling".into(), "\"b\"".into(), Some("1".into())),
        ]
    );
    assert_eq!(t.cached(), 2, "b is in the map, no more known as absent");
}

#[test]
fn a_rollback_forgets_changed_and_already_written_keys_only() {
    let mut t = Table::default();
    t.load(
        "op",
        ROLLING_STATE,
        vec![
            ("\"a\"".into(), "1".into()),
            ("\"b\"".into(), "2".into()),
            ("\"c\"".into(), "3".into()),
        ],
    )
    .unwrap();
    add(&mut t, "a", 10);
    add(&mut t, "b", 10);
    t.roll_back("op", &[("rolling", "\"c\""), ("other", "\"b\"")])
        .unwrap();
    // a: still marked; c: already drained into the batch's writes; b's entry of another
    // state is not this state's.
    assert_eq!(t.map.len(), 0, "{:?}", t.map);
    assert_eq!(
        wanted(&mut t),
        [
            ("rolling".into(), "\"a\"".into()),
            ("rolling".into(), "\"b\"".into()),
            ("rolling".into(), "\"c\"".into())
        ]
    );
    let e = t.roll_back("op", &[("rolling", "not json")]).unwrap_err();
    assert!(matches!(e, Error::StateDecode { .. }), "{e}");
}

#[test]
fn trimming_evicts_down_to_seven_eighths_and_later_lookups_fetch() {
    let mut t = Table::default();
    for i in 0..100 {
        add(&mut t, &format!("k{i}"), 1);
    }
    let _ = drained(&mut t);
    t.trim(0);
    assert_eq!(t.cached(), 100, "0 = unbounded");
    t.trim(100);
    assert_eq!(t.cached(), 100, "at the bound");
    t.trim(64);
    assert_eq!(t.cached(), 56);
    let evicted = (0..100)
        .map(|i| format!("k{i}"))
        .find(|k| !t.map.contains_key(k))
        .unwrap();
    add(&mut t, &evicted, 1);
    assert_eq!(
        wanted(&mut t),
        [("rolling".into(), format!("\"{evicted}\""))]
    );
}

#[test]
fn adopting_swaps_contents_of_the_same_type_only() {
    let mut old = Table::default();
    add(&mut old, "a", 5);
    let mut new = Table::default();
    assert!(new.adopt(old.as_any()));
    assert_eq!(new.map.get("a"), Some(&5));
    let mut other: KeyedTable<String, u8, ChangedKeys<String>> = KeyedTable::default();
    assert!(!other.adopt(new.as_any()));
}

#[test]
fn a_value_that_does_not_decode_fails_its_key_until_the_batch_commits() {
    let mut t = Table::default();
    t.stored(ROLLING_STATE);
    add(&mut t, "a", 1);
    add(&mut t, "p", 1);
    t.roll_back("op", &[]).unwrap();
    let stored = vec![
        ("\"a\"".into(), "41".into()),
        ("\"p\"".into(), "oops".into()),
    ];
    t.load("op", ROLLING_STATE, stored).unwrap();
    t.fetched();
    add(&mut t, "a", 1);
    assert_eq!(t.map.get("a"), Some(&42), "the other key loaded");
    let e = try_add(&mut t, "p", 1).unwrap_err().to_string();
    for part in ["`op`", "state `rolling`", "key \"p\"", "does not decode"] {
        assert!(e.contains(part), "{part} not in {e}");
    }
    // The record's rollback does not fetch `p` again: its records fail in this batch.
    t.roll_back("op", &[]).unwrap();
    assert_eq!(wanted(&mut t), [("rolling".into(), "\"a\"".into())]);
    t.load("op", ROLLING_STATE, vec![("\"a\"".into(), "41".into())])
        .unwrap();
    t.fetched();
    assert!(try_add(&mut t, "p", 1).is_err());
    t.roll_back("op", &[]).unwrap();
    add(&mut t, "a", 1);
    assert!(
        drained(&mut t).iter().all(|(_, f, _)| f != "\"p\""),
        "p is never written"
    );
    // After the commit, the next record of `p` fetches it again (now fixed).
    t.committed();
    add(&mut t, "p", 1);
    assert_eq!(wanted(&mut t), [("rolling".into(), "\"p\"".into())]);
    t.roll_back("op", &[]).unwrap();
    t.load("op", ROLLING_STATE, vec![("\"p\"".into(), "9".into())])
        .unwrap();
    t.fetched();
    add(&mut t, "p", 1);
    assert_eq!(t.map.get("p"), Some(&10));
}

type Panes = WindowState<String, i64, (), ChangedKeys<String>>;

/// The panes of `key` in memory (none when it has no entry).
fn panes_of<'w>(w: &'w Panes, key: &str) -> &'w [Bucket<i64, ()>] {
    w.keys.get(key).map_or(&[], |e| &e.panes)
}

/// The windows of `key`'s written panes.
fn written_of(w: &Panes, key: &str) -> Vec<(i64, i64)> {
    let written = w.keys.get(key).map(|e| &e.written[..]).unwrap_or_default();
    written.iter().map(|(w, _)| (w.start(), w.end())).collect()
}

fn pane(key: &str, start: i64, end: i64, acc: i64) -> (String, String) {
    (
        format!("[\"{key}\",{start},{end}]"),
        format!("[{acc},null,3,[{}],0]", end - 1),
    )
}

#[test]
fn window_rollback_drops_the_keys_panes_and_queued_timers() {
    let mut w = Panes::default();
    let a = pane("a", 0, 10, 3);
    w.load("op", PANES_STATE, vec![a.clone(), pane("b", 0, 10, 3), a])
        .unwrap();
    assert_eq!(w.timers.len(), 2, "a field HSCAN returned twice loads once");
    assert_eq!(panes_of(&w, "a")[0].acc, 3);
    assert!(panes_of(&w, "a")[0].has_content && panes_of(&w, "a")[0].pending);
    w.changes.mark(&"a".to_string());
    w.roll_back("op", &[]).unwrap();
    assert!(panes_of(&w, "a").is_empty());
    assert_eq!(
        written_of(&w, "a"),
        [(0, 10)],
        "the stored pane stays known"
    );
    assert_eq!(w.timers.len(), 1);
    // The committed panes of `a` are fetched again, field by field.
    assert_eq!(wanted(&mut w), [("panes".into(), "[\"a\",0,10]".into())]);
    w.fetched();
    assert!(!w.has_wanted());
}

#[test]
fn a_pane_that_does_not_decode_leaves_none_of_its_keys_panes_in_memory() {
    let mut w = Panes::default();
    let bad = ("[\"p\",10,20]".to_string(), "\"oops\"".to_string());
    let panes = vec![
        pane("p", 0, 10, 1),
        bad,
        pane("a", 0, 10, 3),
        pane("p", 20, 30, 1),
    ];
    w.load("op", PANES_STATE, panes).unwrap();
    assert!(panes_of(&w, "p").is_empty());
    assert_eq!(w.timers.len(), 1, "only a's pane is queued");
    assert_eq!(panes_of(&w, "a")[0].acc, 3);
    let e = w.changes.missing(&"p".to_string()).unwrap_err().to_string();
    assert!(
        e.contains("key \"p\" (pane field [\"p\",10,20])") && e.contains("state `panes`"),
        "{e}"
    );
    // After the commit, a record of `p` wants it again: every pane of it is fetched.
    w.committed();
    w.changes.missing(&"p".to_string()).unwrap();
    assert_eq!(
        wanted(&mut w),
        [
            ("panes".into(), "[\"p\",0,10]".into()),
            ("panes".into(), "[\"p\",10,20]".into()),
            ("panes".into(), "[\"p\",20,30]".into()),
        ]
    );
}

#[test]
fn a_batch_writes_only_the_panes_that_changed_and_deletes_those_gone() {
    let mut w = Panes::default();
    w.load(
        "op",
        PANES_STATE,
        vec![
            pane("a", 0, 10, 1),
            pane("a", 10, 20, 2),
            pane("b", 0, 10, 5),
        ],
    )
    .unwrap();
    // `a`: the second pane changes, the first is cleaned up; `b` is marked but unchanged.
    let k = "a".to_string();
    w.changes.mark(&k);
    w.changes.mark(&"b".to_string());
    let panes = &mut w.keys.get_mut(&k).unwrap().panes;
    panes.retain(|p| p.window.start() == 10);
    panes[0].acc = 7;
    assert_eq!(
        drained(&mut w),
        [
            ("panes".into(), "[\"a\",0,10]".into(), None),
            (
                "panes".into(),
                "[\"a\",10,20]".into(),
                Some("[7,null,3,[19],0]".into())
            ),
        ]
    );
    // A second drain in the same batch compares with what the first wrote.
    w.changes.mark(&k);
    assert!(drained(&mut w).is_empty());
    w.committed();
    assert_eq!(written_of(&w, "a"), [(10, 20)]);
    // After the commit a rollback fetches the committed pane only.
    w.changes.mark(&k);
    w.roll_back("op", &[]).unwrap();
    assert_eq!(wanted(&mut w), [("panes".into(), "[\"a\",10,20]".into())]);
    // A field that is no pane's (end <= start): no record can use it, it is skipped.
    w.load(
        "op",
        PANES_STATE,
        vec![("[\"a\",5,5]".into(), "[1,null,1,[],0]".into())],
    )
    .unwrap();
    assert!(panes_of(&w, "a").is_empty());
}

/// A drain updates the written panes in place; a rollback before the commit puts them
/// back, so the same change made again (after the key is fetched again) is written again.
#[test]
fn a_rollback_after_a_drain_puts_the_written_panes_back() {
    let mut w = Panes::default();
    w.load("op", PANES_STATE, vec![pane("a", 0, 10, 1)])
        .unwrap();
    let k = "a".to_string();
    let change = |w: &mut Panes| {
        w.changes.mark(&k);
        w.keys.get_mut(&k).unwrap().panes[0].acc = 2;
    };
    let write = (
        "panes".to_string(),
        "[\"a\",0,10]".to_string(),
        Some("[2,null,3,[9],0]".to_string()),
    );
    change(&mut w);
    assert_eq!(drained(&mut w), std::slice::from_ref(&write));
    w.roll_back("op", &[("panes", "[\"a\",0,10]")]).unwrap();
    assert_eq!(wanted(&mut w), [("panes".into(), "[\"a\",0,10]".into())]);
    w.load("op", PANES_STATE, vec![pane("a", 0, 10, 1)])
        .unwrap();
    w.fetched();
    change(&mut w);
    assert_eq!(drained(&mut w), [write]);
    w.committed();
    assert!(w.undo.is_empty());
}

#[test]
fn rolling_tables_are_checked_when_the_gate_is_handed_over() {
    let g = SchemaGate::new(
        SchemaMismatchPolicy::Fail,
        "job".into(),
        HashMap::from([(
            "op/rolling".to_string(),
            "rolling<Option<u64>> by String".into(),
        )]),
    );
    let mut same: KeyedTable<String, Option<u64>, ChangedKeys<String>> = KeyedTable::default();
    same.schema("op", &g).unwrap();
    let mut other: KeyedTable<String, Option<i64>, ChangedKeys<String>> = KeyedTable::default();
    let e = other.schema("op", &g).unwrap_err();
    assert!(
        e.to_string().contains("`rolling<Option<i64>> by String`"),
        "{e}"
    );
}
