//! The runner without Redis: runs, misses, fetched state, failed records and rollback.

use super::*;
use crate::redis::partition::wanted::{Fetch, Fetched};
use crate::redis::state::chain::{build_chain, chain_settings};
use crate::redis::state::persist::ROLLING_STATE;
use crate::redis::{RedisEnv, RedisRuntimeConfig};

/// No check of the records' writes.
struct NoCheck;

impl WriteCheck for NoCheck {
    fn armed(&self) -> bool {
        false
    }

    fn check(&self, _: &Pending, _: &[usize]) -> Result<(), Error> {
        Ok(())
    }
}

type Sums = Vec<(String, i64)>;

/// A runner of `payload as i64 → key_by(message key) → rolling sum`, emitting
/// `(key, sum so far)`; a payload that is not a number fails its record.
fn summing() -> Runner<impl Operator<Message>, (String, i64)> {
    let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
    let config = RedisRuntimeConfig::default();
    let env = RedisEnv::with_client(client, config.clone());
    let plan = (env.from_mq_topic("t", "g"))
        .try_map(|m: Message| {
            let n: i64 = m.text()?.parse().map_err(|_| "not a number")?;
            Ok::<_, crate::BoxError>((m.key.unwrap_or_default().to_string(), n))
        })
        .key_by(|(k, _): &(String, i64)| k.clone())
        .sum_by(|(_, n): &(String, i64)| *n)
        .plan;
    let settings = chain_settings(&config);
    let make: MakeChain<_, _> =
        Rc::new(move |out: &Rc<RefCell<Vec<_>>>| build_chain(&plan, out, settings));
    let keys = StateKeys::new("s", "job", "{t:0}", "g", 1);
    Runner::new(make, keys).unwrap()
}

fn records(items: &[(&str, &str)]) -> Vec<Message> {
    (items.iter().enumerate())
        .map(|(i, (k, v))| {
            Message::new(v.to_string())
                .with_key(*k)
                .with_id(format!("1-{i}"))
        })
        .collect()
}

/// The sum's state writes of `pending`, as (field, value).
fn writes(pending: &mut Pending) -> Vec<(String, Option<String>)> {
    pending.dedup();
    let mut all: Vec<_> = (pending.hashes.iter())
        .filter(|h| h.state == ROLLING_STATE)
        .flat_map(|h| h.fields.iter().map(|(f, v)| (f.clone(), v.clone())))
        .collect();
    all.sort();
    all
}

/// The sum's state hash.
fn sum_hash<C, O>(r: &Runner<C, O>) -> String {
    let op = r.stores()[0].0.as_str().to_string();
    r.keys().hash(&op, ROLLING_STATE, "\"a\"")
}

#[test]
fn a_run_with_nothing_stored_emits_and_leaves_its_writes_to_drain() {
    let mut r = summing();
    let msgs = records(&[("a", "1"), ("b", "2"), ("a", "3")]);
    let outcome = r.run(&msgs, &HashSet::new(), &RecordSpans::off(), &NoCheck);
    assert!(outcome.failed.is_none() && !outcome.missed);
    let out: Sums = r.take_outputs();
    assert_eq!(out, [("a".into(), 1), ("b".into(), 2), ("a".into(), 4)]);
    let mut pending = outcome.pending;
    r.drain(&mut pending).unwrap();
    assert_eq!(
        writes(&mut pending),
        [
            ("\"a\"".into(), Some("4".into())),
            ("\"b\"".into(), Some("2".into()))
        ]
    );
}

#[test]
fn a_run_that_misses_stored_keys_is_rolled_back_and_runs_again_on_the_fetched_state() {
    let mut r = summing();
    let hash = sum_hash(&r);
    assert!(r
        .stored(std::slice::from_ref(&hash), |_, _| false)
        .is_empty());
    let msgs = records(&[("a", "1"), ("b", "2"), ("a", "3")]);
    let first = r.run(&msgs, &HashSet::new(), &RecordSpans::off(), &NoCheck);
    assert!(
        first.missed,
        "keys a and b may be stored: the run went on a guess"
    );
    r.roll_back(&first.pending).unwrap();
    assert!(
        r.take_outputs().is_empty(),
        "a rolled-back run emits nothing"
    );
    let wanted = r.wanted().unwrap();
    let sums: Vec<&Fetch> = (wanted.fetches.iter()).filter(|f| f.hash == hash).collect();
    assert_eq!(sums.len(), 1, "one HMGET of the sum's hash");
    let mut fields = sums[0].fields.clone();
    fields.sort();
    assert_eq!(fields, ["\"a\"", "\"b\""]);
    // Redis holds a = 10; b is new (and nothing else is stored).
    let entries = (wanted.fetches.iter())
        .map(|f| match f.hash == hash {
            true => vec![("\"a\"".into(), "10".into())],
            false => Vec::new(),
        })
        .collect();
    let fetched = Fetched {
        entries,
        collections: Vec::new(),
    };
    r.load_fetched(wanted, fetched).unwrap();
    let again = r.run(&msgs, &HashSet::new(), &RecordSpans::off(), &NoCheck);
    assert!(again.failed.is_none() && !again.missed);
    let out: Sums = r.take_outputs();
    assert_eq!(out, [("a".into(), 11), ("b".into(), 2), ("a".into(), 14)]);
}

#[test]
fn a_failed_record_stops_the_run_and_the_rerun_without_it_has_none_of_its_effects() {
    let mut r = summing();
    let msgs = records(&[("a", "1"), ("a", "x"), ("a", "3")]);
    let outcome = r.run(&msgs, &HashSet::new(), &RecordSpans::off(), &NoCheck);
    let (i, e) = outcome.failed.expect("the record `x` fails");
    assert_eq!(i, 1);
    assert!(e.to_string().contains("not a number"), "{e}");
    r.roll_back(&outcome.pending).unwrap();
    // The rollback forgot key a (changed by the run): it is fetched again.
    let wanted = r.wanted().unwrap();
    let hash = sum_hash(&r);
    assert!(wanted
        .fetches
        .iter()
        .any(|f| f.hash == hash && f.fields == ["\"a\""]));
    let entries = wanted.fetches.iter().map(|_| Vec::new()).collect();
    let nothing = Fetched {
        entries,
        collections: Vec::new(),
    };
    r.load_fetched(wanted, nothing).unwrap();
    let skip: HashSet<usize> = [1].into();
    let again = r.run(&msgs, &skip, &RecordSpans::off(), &NoCheck);
    assert!(again.failed.is_none() && !again.missed);
    let out: Sums = r.take_outputs();
    assert_eq!(out, [("a".into(), 1), ("a".into(), 4)]);
}

/// Fails every record that writes while armed.
struct RejectAll;

impl WriteCheck for RejectAll {
    fn armed(&self) -> bool {
        true
    }

    fn check(&self, pending: &Pending, touched: &[usize]) -> Result<(), Error> {
        match touched.first() {
            Some(&i) => Err(Error::Engine {
                op: "check",
                reason: format!("wrote {}", pending.hashes[i].state),
            }),
            None => Ok(()),
        }
    }
}

#[test]
fn an_armed_check_sees_each_records_writes_and_fails_the_record() {
    let mut r = summing();
    let msgs = records(&[("a", "1")]);
    let outcome = r.run(&msgs, &HashSet::new(), &RecordSpans::off(), &RejectAll);
    let (i, e) = outcome.failed.expect("the check fails the record");
    assert_eq!(i, 0);
    assert!(e.to_string().contains("wrote rolling"), "{e}");
}
