//! Property test: the window operator against a small reference model of Flink's
//! event-time semantics (DESIGN invariant 2) — tumbling, sliding and session windows with
//! out-of-order input, bounded-out-of-orderness watermarks and allowed lateness.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;
use streaming::time::{
    BoundedOutOfOrderness, EventTimeSessionWindows, SlidingEventTimeWindows, TimeWindow,
    TumblingEventTimeWindows,
};
use streaming::MemoryEnv;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Tumbling { size: i64, offset: i64 },
    Sliding { size: i64, slide: i64 },
    Session { gap: i64 },
}

/// One firing: (key, start, end, count).
type Firing = (u8, i64, i64, u64);

struct Pane {
    count: u64,
    /// The event-time timer at max_timestamp is still pending.
    timer: bool,
}

/// The reference: a direct transcription of the rules, with no shared code.
fn model(kind: Kind, ooo: i64, lateness: i64, input: &[(u8, i64)]) -> (Vec<Firing>, u64) {
    let mut panes: BTreeMap<(u8, i64, i64), Pane> = BTreeMap::new();
    let mut out = Vec::new();
    let mut late = 0;
    let mut wm = i64::MIN;
    let floor = |t: i64, off: i64, size: i64| t - (t - off).rem_euclid(size);
    let advance = |panes: &mut BTreeMap<(u8, i64, i64), Pane>, out: &mut Vec<Firing>, wm: i64| {
        for (&(k, s, e), p) in panes.iter_mut() {
            if p.timer && e - 1 <= wm {
                p.timer = false;
                out.push((k, s, e, p.count));
            }
        }
        panes.retain(|&(_, _, e), _| e - 1 + lateness > wm);
    };
    for &(key, t) in input {
        match kind {
            Kind::Tumbling { .. } | Kind::Sliding { .. } => {
                let windows: Vec<(i64, i64)> = match kind {
                    Kind::Tumbling { size, offset } => {
                        vec![(floor(t, offset, size), floor(t, offset, size) + size)]
                    }
                    Kind::Sliding { size, slide } => {
                        let mut v = Vec::new();
                        let mut s = floor(t, 0, slide);
                        while s > t - size {
                            v.push((s, s + size));
                            s -= slide;
                        }
                        v
                    }
                    Kind::Session { .. } => unreachable!(),
                };
                let live: Vec<_> = windows
                    .into_iter()
                    .filter(|&(_, e)| e - 1 + lateness > wm)
                    .collect();
                if live.is_empty() {
                    late += 1;
                }
                for (s, e) in live {
                    let p = panes.entry((key, s, e)).or_insert(Pane {
                        count: 0,
                        timer: e - 1 > wm,
                    });
                    p.count += 1;
                    if e - 1 <= wm {
                        out.push((key, s, e, p.count));
                    }
                }
            }
            Kind::Session { gap } => {
                let (mut s, mut e) = (t, t + gap);
                let mut parts: Vec<(i64, i64)> = Vec::new();
                loop {
                    let found: Vec<_> = panes
                        .keys()
                        .filter(|&&(k, ps, pe)| {
                            k == key && !parts.contains(&(ps, pe)) && ps <= e && pe >= s
                        })
                        .map(|&(_, ps, pe)| (ps, pe))
                        .collect();
                    if found.is_empty() {
                        break;
                    }
                    for (ps, pe) in found {
                        s = s.min(ps);
                        e = e.max(pe);
                        parts.push((ps, pe));
                    }
                }
                if e - 1 + lateness <= wm {
                    late += 1;
                } else {
                    let contained = parts.len() == 1 && parts[0] == (s, e);
                    let mut count = 0;
                    let mut timer = e - 1 > wm;
                    for (ps, pe) in &parts {
                        let p = panes.remove(&(key, *ps, *pe)).unwrap();
                        count += p.count;
                        if contained {
                            timer = p.timer || e - 1 > wm;
                        }
                    }
                    count += 1;
                    panes.insert((key, s, e), Pane { count, timer });
                    if e - 1 <= wm {
                        out.push((key, s, e, count));
                    }
                }
            }
        }
        wm = wm.max(t - ooo);
        advance(&mut panes, &mut out, wm);
    }
    advance(&mut panes, &mut out, i64::MAX);
    out.sort_unstable();
    (out, late)
}

fn engine(kind: Kind, ooo: i64, lateness: i64, input: &[(u8, i64)]) -> (Vec<Firing>, u64) {
    let env = MemoryEnv::new();
    let ms = |n: i64| Duration::from_millis(n as u64);
    let stream = env
        .from_collection(input.to_vec())
        .assign_timestamps_and_watermarks_with(
            |e: &(u8, i64), _| e.1,
            BoundedOutOfOrderness::new(ms(ooo)).unwrap(),
        )
        .key_by(|e| e.0);
    let mut out = Vec::new();
    let sink = |(k, w, n): (u8, TimeWindow, u64)| out.push((k, w.start(), w.end(), n));
    let summary = match kind {
        Kind::Tumbling { size, offset } => stream
            .window(TumblingEventTimeWindows::with_offset(ms(size), offset).unwrap())
            .allowed_lateness(ms(lateness))
            .count()
            .sink(sink),
        Kind::Sliding { size, slide } => stream
            .window(SlidingEventTimeWindows::of(ms(size), ms(slide)).unwrap())
            .allowed_lateness(ms(lateness))
            .count()
            .sink(sink),
        Kind::Session { gap } => stream
            .window(EventTimeSessionWindows::with_gap(ms(gap)).unwrap())
            .allowed_lateness(ms(lateness))
            .count()
            .sink(sink),
    }
    .unwrap();
    out.sort_unstable();
    (out, summary.late_elements)
}

fn kinds() -> impl Strategy<Value = Kind> {
    prop_oneof![
        (1i64..40)
            .prop_flat_map(|size| (Just(size), -(size - 1)..size))
            .prop_map(|(size, offset)| Kind::Tumbling { size, offset }),
        (1i64..30, 1i64..30).prop_map(|(size, slide)| Kind::Sliding {
            size: size.max(slide),
            slide
        }),
        (1i64..25).prop_map(|gap| Kind::Session { gap }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn windows_match_the_reference_model(
        kind in kinds(),
        ooo in 0i64..20,
        lateness in 0i64..20,
        input in prop::collection::vec((0u8..3, -50i64..150), 0..60),
    ) {
        let expected = model(kind, ooo, lateness, &input);
        let actual = engine(kind, ooo, lateness, &input);
        prop_assert_eq!(&actual, &expected, "kind {:?} ooo {} lateness {} input {:?}", kind, ooo, lateness, input);
        // Nothing lost: every element is counted in a final firing or as late.
        if let Kind::Tumbling { .. } = kind {
            let mut last: BTreeMap<(u8, i64), u64> = BTreeMap::new();
            for &(k, s, _, n) in &actual.0 {
                let e = last.entry((k, s)).or_default();
                *e = (*e).max(n);
            }
            prop_assert_eq!(last.values().sum::<u64>() + actual.1, input.len() as u64);
        }
    }
}
