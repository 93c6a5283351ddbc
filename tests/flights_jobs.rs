//! The `flights` example's jobs checked against values computed here, independently of the
//! library: the zip is read and split by hand (no `csv`, no `chrono`, not the example's
//! loader), and counts, sums, late flights and sessions come from plain maps and a plain
//! model of the watermark rules of DESIGN.md invariant 2.
//!
//! The data file (`../shared/data/flights.csv.zip`, or in `$STREAMING_DATA_DIR`) is read
//! once per test binary.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::OnceLock;
use streaming_suite::flights::{
    self, Dataset, DelaysOptions, DelaysSummary, EventTime, SessionsOptions, SessionsSummary,
};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;
/// Facts of the data (the check figures).
const ROWS: usize = 336_776;
const SKIPPED: usize = 8_255;
const FLIGHTS: u64 = 328_521;
const DELAY_SUM: i64 = 4_152_200;
const HOUR_WINDOWS: usize = 59_704;

/// One data row as read here.
#[derive(Clone, Debug)]
struct Row {
    index: usize,
    carrier: String,
    tailnum: String,
    /// Scheduled departure, epoch ms.
    sched: i64,
    /// `None` when `dep_time` or `dep_delay` is `NA`.
    delay: Option<i64>,
}

impl Row {
    fn actual(&self) -> i64 {
        self.sched + self.delay.expect("departed") * MINUTE
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` → epoch ms.
fn parse_iso(s: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| {
        s[r].parse::<i64>()
            .unwrap_or_else(|_| panic!("bad time {s}"))
    };
    assert_eq!(
        (s.len(), &s[10..11], &s[19..]),
        (20, "T", "Z"),
        "bad time {s}"
    );
    let days = days_from_civil(n(0..4), n(5..7), n(8..10));
    ((days * 24 + n(11..13)) * 60 + n(14..16)) * MINUTE + n(17..19) * 1000
}

/// epoch ms → `YYYY-MM-DDTHH:MM:SSZ`.
fn iso(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000) / 1000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn rows() -> &'static [Row] {
    static ROWS_CELL: OnceLock<Vec<Row>> = OnceLock::new();
    ROWS_CELL.get_or_init(|| {
        let file = std::fs::File::open(flights::default_data_path()).expect("data file");
        let mut zip = zip::ZipArchive::new(file).expect("zip");
        let mut text = String::new();
        zip.by_name("flights.csv")
            .expect("flights.csv")
            .read_to_string(&mut text)
            .expect("utf-8");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
        let (dep_time, dep_delay, carrier, tailnum, minute, time_hour) = (
            col("dep_time"),
            col("dep_delay"),
            col("carrier"),
            col("tailnum"),
            col("minute"),
            col("time_hour"),
        );
        lines
            .enumerate()
            .map(|(index, line)| {
                let f: Vec<&str> = line.split(',').collect();
                assert_eq!(f.len(), header.len(), "line {}", index + 2);
                let departed = f[dep_time] != "NA" && f[dep_delay] != "NA";
                Row {
                    index,
                    carrier: f[carrier].to_string(),
                    tailnum: f[tailnum].to_string(),
                    sched: parse_iso(f[time_hour])
                        + f[minute].parse::<i64>().expect("minute") * MINUTE,
                    delay: departed.then(|| f[dep_delay].parse().expect("dep_delay")),
                }
            })
            .collect()
    })
}

/// Departed flights in replay order: by scheduled departure, ties in file order.
fn replay() -> &'static [Row] {
    static REPLAY: OnceLock<Vec<Row>> = OnceLock::new();
    REPLAY.get_or_init(|| {
        let mut v: Vec<Row> = rows()
            .iter()
            .filter(|r| r.delay.is_some())
            .cloned()
            .collect();
        v.sort_by(|a, b| a.sched.cmp(&b.sched).then(a.index.cmp(&b.index)));
        v
    })
}

fn dataset() -> &'static Dataset {
    static DATA: OnceLock<Dataset> = OnceLock::new();
    DATA.get_or_init(|| flights::load(&flights::default_data_path()).expect("load"))
}

/// Runs `delays`, returning its lines split into fields, and its summary.
fn run_delays(opts: DelaysOptions) -> (Vec<(String, String, u64, i64)>, DelaysSummary) {
    run_delays_in(opts, 1)
}

/// Runs `delays` on `partitions` partitions keyed by carrier.
fn run_delays_in(
    opts: DelaysOptions,
    partitions: u32,
) -> (Vec<(String, String, u64, i64)>, DelaysSummary) {
    let mut lines = Vec::new();
    let summary = flights::delays_partitioned(dataset(), &opts, partitions, |l| {
        lines.push(l.to_string());
        Ok::<(), std::io::Error>(())
    })
    .expect("delays");
    let parsed = lines
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 4, "{l}");
            (
                f[0].to_string(),
                f[1].to_string(),
                f[2].parse().expect(l),
                f[3].parse().expect(l),
            )
        })
        .collect();
    (parsed, summary)
}

/// What `delays` must print, from the watermark rules: per (carrier, window start) the
/// totals of its firings in order, and the number of late flights.
///
/// Flights come in replay order. Before a flight with event time `t`, the watermark `wm` is
/// the max of `t' - ooo` over the flights before it (`i64::MIN` at first). The flight's
/// window `[s, s + 1h)` has `max_ts = s + 1h - 1`; the flight is late when
/// `max_ts + lateness <= wm`. A window fires once when the watermark reaches `max_ts` with
/// the flights it has then (at end of input if the watermark never does), and once more,
/// with updated totals, for every flight that arrives after that without being late.
#[allow(clippy::type_complexity)]
fn expected_delays(opts: DelaysOptions) -> (BTreeMap<(String, String), Vec<(u64, i64)>>, u64) {
    expected_delays_in(opts, 1)
}

/// [`expected_delays`] with the replay split into `partitions` by carrier (FNV-1a of the
/// carrier code modulo `partitions`, as the Redis producer does), one watermark per
/// partition.
#[allow(clippy::type_complexity)]
fn expected_delays_in(
    opts: DelaysOptions,
    partitions: u32,
) -> (BTreeMap<(String, String), Vec<(u64, i64)>>, u64) {
    #[derive(Default)]
    struct Pane {
        n: u64,
        sum: i64,
        fired: bool,
        firings: Vec<(u64, i64)>,
    }
    let ooo = opts.out_of_orderness_min as i64 * MINUTE;
    let lateness = opts.lateness_min as i64 * MINUTE;
    let mut wms = vec![i64::MIN; partitions as usize];
    let mut late = 0u64;
    let mut panes: HashMap<(&str, i64), Pane> = HashMap::new();
    for r in replay() {
        let wm = &mut wms[fnv1a(&r.carrier, partitions)];
        let t = match opts.event_time {
            EventTime::Scheduled => r.sched,
            EventTime::Actual => r.actual(),
        };
        let start = t.div_euclid(HOUR) * HOUR;
        let max_ts = start + HOUR - 1;
        if max_ts + lateness <= *wm {
            late += 1;
        } else {
            let p = panes.entry((r.carrier.as_str(), start)).or_default();
            if max_ts <= *wm {
                // The window is due: its on-time firing came first; this flight fires it again.
                if !p.fired && p.n > 0 {
                    p.firings.push((p.n, p.sum));
                }
                p.fired = true;
                p.n += 1;
                p.sum += r.delay.expect("departed");
                p.firings.push((p.n, p.sum));
            } else {
                p.n += 1;
                p.sum += r.delay.expect("departed");
            }
        }
        *wm = (*wm).max(t - ooo);
    }
    let windows = panes
        .into_iter()
        .map(|((carrier, start), mut p)| {
            if !p.fired {
                p.firings.push((p.n, p.sum));
            }
            ((carrier.to_string(), iso(start)), p.firings)
        })
        .collect();
    (windows, late)
}

/// The firings of each (carrier, window) in output order.
#[allow(clippy::type_complexity)]
fn by_window(lines: &[(String, String, u64, i64)]) -> BTreeMap<(String, String), Vec<(u64, i64)>> {
    let mut m: BTreeMap<(String, String), Vec<(u64, i64)>> = BTreeMap::new();
    for (c, w, n, s) in lines {
        m.entry((c.clone(), w.clone())).or_default().push((*n, *s));
    }
    m
}

fn final_flights(windows: &BTreeMap<(String, String), Vec<(u64, i64)>>) -> u64 {
    windows.values().map(|f| f.last().expect("fired").0).sum()
}

#[test]
fn reference_reader_agrees_with_the_data_facts() {
    let rows = rows();
    assert_eq!(rows.len(), ROWS);
    assert_eq!(rows.iter().filter(|r| r.delay.is_none()).count(), SKIPPED);
    assert_eq!(replay().len() as u64, FLIGHTS);
    assert_eq!(
        replay().iter().map(|r| r.delay.unwrap()).sum::<i64>(),
        DELAY_SUM
    );
    // The formatter and parser here are inverse, and agree with the library's formatter.
    for ms in [0, 1_356_998_400_000, 1_388_534_340_000, replay()[0].sched] {
        assert_eq!(parse_iso(&iso(ms)), ms);
        assert_eq!(flights::format_utc(ms), iso(ms));
    }
    assert_eq!(iso(1_356_998_400_000), "2013-01-01T00:00:00Z");
    // A third opinion on the date arithmetic: chrono.
    for r in replay().iter().step_by(997) {
        let t = chrono::DateTime::from_timestamp_millis(r.sched).expect("in range");
        assert_eq!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string(), iso(r.sched));
    }
}

#[test]
fn loader_skips_na_and_replays_in_scheduled_order_ties_in_file_order() {
    let data = dataset();
    assert_eq!(data.rows, ROWS);
    assert_eq!(data.skipped_na_departure, SKIPPED);
    assert_eq!(data.flights.len(), replay().len());
    for (f, r) in data.flights.iter().zip(replay()) {
        assert_eq!(f.row, r.index, "replay order");
        assert_eq!(
            (&*f.carrier, f.sched_ms, f.dep_delay),
            (r.carrier.as_str(), r.sched, r.delay.unwrap())
        );
        assert_eq!(f.tailnum.as_deref().unwrap_or("NA"), r.tailnum);
        assert_eq!(f.actual_ms(), r.actual());
    }
}

#[test]
fn delays_defaults_match_the_check_figures_and_every_line() {
    let (lines, summary) = run_delays(DelaysOptions::default());
    assert_eq!(summary.to_string(), "# skipped=8255 late=0 windows=59704");
    assert_eq!(
        (summary.skipped, summary.late, summary.windows),
        (SKIPPED, 0, HOUR_WINDOWS)
    );
    assert_eq!(
        lines.len(),
        HOUR_WINDOWS,
        "one firing per window: the replay is in event-time order"
    );
    assert_eq!(lines.iter().map(|l| l.2).sum::<u64>(), FLIGHTS);
    assert_eq!(lines.iter().map(|l| l.3).sum::<i64>(), DELAY_SUM);
    // Every line is a plain (carrier, hour) count and sum of the data.
    let mut expected: BTreeMap<(String, String), (u64, i64)> = BTreeMap::new();
    for r in replay() {
        let e = expected
            .entry((r.carrier.clone(), iso(r.sched.div_euclid(HOUR) * HOUR)))
            .or_default();
        e.0 += 1;
        e.1 += r.delay.unwrap();
    }
    let got: BTreeMap<(String, String), (u64, i64)> = lines
        .iter()
        .map(|(c, w, n, s)| ((c.clone(), w.clone()), (*n, *s)))
        .collect();
    assert_eq!(got, expected);
    // Windows fire as the watermark passes them: in order of window start.
    assert!(
        lines.windows(2).all(|p| p[0].1 <= p[1].1),
        "firings in event-time order"
    );
}

#[test]
fn delays_actual_time_without_slack_sends_flights_late_and_loses_none() {
    let opts = DelaysOptions {
        event_time: EventTime::Actual,
        out_of_orderness_min: 0,
        lateness_min: 0,
    };
    let (lines, summary) = run_delays(opts);
    let got = by_window(&lines);
    assert!(
        got.values().all(|f| f.len() == 1),
        "no allowed lateness: every window fires once"
    );
    assert!(summary.late > 0);
    assert_eq!(
        final_flights(&got) + summary.late,
        FLIGHTS,
        "every flight is in a window or late"
    );
    assert_eq!(summary.windows, got.len());
    let (expected, late) = expected_delays(opts);
    assert_eq!(summary.late, late);
    assert_eq!(got, expected);

    // More out-of-orderness: fewer late flights, still none lost.
    let opts600 = DelaysOptions {
        out_of_orderness_min: 600,
        ..opts
    };
    let (lines600, summary600) = run_delays(opts600);
    let got600 = by_window(&lines600);
    assert!(
        summary600.late < summary.late,
        "{} < {}",
        summary600.late,
        summary.late
    );
    assert_eq!(final_flights(&got600) + summary600.late, FLIGHTS);
    let (expected600, late600) = expected_delays(opts600);
    assert_eq!(summary600.late, late600);
    assert_eq!(got600, expected600);
}

#[test]
fn delays_allowed_lateness_refires_windows_with_growing_totals() {
    let opts = DelaysOptions {
        event_time: EventTime::Actual,
        out_of_orderness_min: 0,
        lateness_min: 60,
    };
    let (lines, summary) = run_delays(opts);
    let got = by_window(&lines);
    assert!(got.values().any(|f| f.len() > 1), "some windows fire again");
    for (window, firings) in &got {
        for pair in firings.windows(2) {
            assert!(
                pair[1].0 > pair[0].0,
                "{window:?}: counts grow: {firings:?}"
            );
        }
    }
    assert_eq!(summary.windows, got.len());
    assert_eq!(summary.firings as usize, lines.len());
    assert_eq!(final_flights(&got) + summary.late, FLIGHTS);
    let (expected, late) = expected_delays(opts);
    assert_eq!(summary.late, late);
    assert_eq!(got, expected);
    // Lateness lets in flights that were late without it.
    let (_, strict) = run_delays(DelaysOptions {
        lateness_min: 0,
        ..opts
    });
    assert!(summary.late < strict.late);
}

/// Sessions as (tailnum, start, end, flights), from a plain scan of each plane's flights
/// in replay order. Windows `[t, t + gap)` merge when they intersect or touch, so
/// consecutive flights `t1 <= t2` share a session when `t2 - t1 <= gap`. With
/// `watermark_splits_ties`, a flight exactly `gap` after the previous one of its plane
/// starts a new session when the flight just before it in the replay (any plane) has
/// the same scheduled time: that flight set the watermark to `t2 >= t1 + gap - 1`, the
/// earlier session's `max_timestamp`, so the session had fired and been cleaned up.
fn expected_sessions(gap_min: i64, watermark_splits_ties: bool) -> Vec<(String, i64, i64, u64)> {
    expected_sessions_in(gap_min, watermark_splits_ties, 1)
}

/// [`expected_sessions`] with the replay split into `partitions` by tail number: "the
/// flight just before it" is the one before it in its partition.
fn expected_sessions_in(
    gap_min: i64,
    watermark_splits_ties: bool,
    partitions: u32,
) -> Vec<(String, i64, i64, u64)> {
    let mut done: Vec<_> = (0..partitions as usize)
        .flat_map(|p| {
            let stream: Vec<&Row> = replay()
                .iter()
                .filter(|r| r.tailnum != "NA" && fnv1a(&r.tailnum, partitions) == p)
                .collect();
            sessions_of(&stream, gap_min * MINUTE, watermark_splits_ties)
        })
        .collect();
    done.sort();
    done
}

/// Partition of `key` among `n`: 64-bit FNV-1a modulo `n`, written out here.
fn fnv1a(key: &str, n: u32) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    (h % u64::from(n)) as usize
}

fn sessions_of(
    stream: &[&Row],
    gap: i64,
    watermark_splits_ties: bool,
) -> Vec<(String, i64, i64, u64)> {
    let mut open: HashMap<&str, (i64, i64, u64)> = HashMap::new(); // tail -> (start, last, n)
    let mut done = Vec::new();
    for (i, r) in stream.iter().enumerate() {
        let wm_tie = i > 0 && stream[i - 1].sched == r.sched;
        match open.get_mut(r.tailnum.as_str()) {
            Some((_, last, n))
                if r.sched - *last < gap
                    || (r.sched - *last == gap && !(watermark_splits_ties && wm_tie)) =>
            {
                *last = r.sched;
                *n += 1;
            }
            _ => {
                if let Some((s, last, n)) = open.insert(&r.tailnum, (r.sched, r.sched, 1)) {
                    done.push((r.tailnum.clone(), s, last + gap, n));
                }
            }
        }
    }
    done.extend(
        open.into_iter()
            .map(|(t, (s, last, n))| (t.to_string(), s, last + gap, n)),
    );
    done.sort();
    done
}

fn run_sessions(gap_min: u64) -> (Vec<(String, i64, i64, u64)>, SessionsSummary) {
    run_sessions_in(gap_min, 1)
}

/// Runs `sessions` on `partitions` partitions keyed by tail number; lines sorted.
fn run_sessions_in(
    gap_min: u64,
    partitions: u32,
) -> (Vec<(String, i64, i64, u64)>, SessionsSummary) {
    let mut lines = Vec::new();
    let opts = SessionsOptions { gap_min };
    let summary = flights::sessions_partitioned(dataset(), &opts, partitions, |l| {
        lines.push(l.to_string());
        Ok::<(), std::io::Error>(())
    })
    .expect("sessions");
    let mut parsed: Vec<(String, i64, i64, u64)> = lines
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 4, "{l}");
            (
                f[0].to_string(),
                parse_iso(f[1]),
                parse_iso(f[2]),
                f[3].parse().expect(l),
            )
        })
        .collect();
    parsed.sort();
    (parsed, summary)
}

fn check_sessions(gap_min: u64) {
    let (got, summary) = run_sessions(gap_min);
    let na_tail = rows()
        .iter()
        .filter(|r| r.delay.is_some() && r.tailnum == "NA")
        .count();
    assert_eq!(summary.skipped, SKIPPED + na_tail);
    assert_eq!(summary.late, 0, "the replay is in event-time order");
    assert_eq!(summary.sessions as usize, got.len());
    assert_eq!(
        got.iter().map(|s| s.3).sum::<u64>() as usize,
        ROWS - summary.skipped,
        "every kept flight in one session"
    );
    assert_eq!(
        got,
        expected_sessions(gap_min as i64, true),
        "gap {gap_min}"
    );

    // Against the pure "intersect or touch" sessions, the only differences are splits at
    // flights exactly one gap after the previous flight of their plane.
    let pure = expected_sessions(gap_min as i64, false);
    assert!(got.len() >= pure.len());
    let mut i = 0;
    for (tail, start, end, n) in &pure {
        let (mut covered, mut prev_end) = (0, None);
        while covered < *n {
            let g = &got[i];
            assert_eq!(
                (&g.0, g.1 >= *start, g.2 <= *end),
                (tail, true, true),
                "{g:?} inside {tail} [{start}, {end})"
            );
            if let Some(pe) = prev_end {
                assert_eq!(
                    g.1, pe,
                    "{tail}: split exactly one gap after the previous flight"
                );
            }
            prev_end = Some(g.2);
            covered += g.3;
            i += 1;
        }
        assert_eq!(covered, *n);
    }
    assert_eq!(i, got.len());
    eprintln!(
        "gap {gap_min} min: {} sessions ({} with touching flights always merged)",
        got.len(),
        pure.len()
    );
}

#[test]
fn sessions_default_gap() {
    check_sessions(1440);
}

#[test]
fn sessions_one_hour_gap() {
    check_sessions(60);
}

#[test]
fn partition_model_is_the_library_partitioner() {
    for key in ["AA", "UA", "N0EGMQ", "", "ü"] {
        for n in [1, 3, 4, 8] {
            assert_eq!(
                fnv1a(key, n),
                streaming::mq::partition_for_key(key, n) as usize
            );
        }
    }
}

#[test]
fn delays_on_four_partitions_in_event_time_order_equal_one_partition() {
    let (one, one_summary) = run_delays(DelaysOptions::default());
    let (four, four_summary) = run_delays_in(DelaysOptions::default(), 4);
    // No flight is late (the replay is in event-time order) and every window fires once
    // at the same totals: the lines are the same, only their order differs.
    assert_eq!(four_summary, one_summary);
    assert_eq!(
        four_summary.to_string(),
        "# skipped=8255 late=0 windows=59704"
    );
    assert_eq!(four.len(), HOUR_WINDOWS);
    assert_ne!(four, one, "partition by partition, not in event-time order");
    let (mut one_sorted, mut four_sorted) = (one.clone(), four.clone());
    one_sorted.sort();
    four_sorted.sort();
    assert_eq!(four_sorted, one_sorted);
    // Partition 0's lines first, then 1's, …; event-time order within a partition.
    let part = |l: &(String, String, u64, i64)| fnv1a(&l.0, 4);
    assert!(four.windows(2).all(|p| part(&p[0]) <= part(&p[1])));
    assert!(four
        .windows(2)
        .all(|p| part(&p[0]) != part(&p[1]) || p[0].1 <= p[1].1));
    let per_partition: Vec<usize> = (0..4)
        .map(|p| four.iter().filter(|l| part(l) == p).count())
        .collect();
    assert_eq!(per_partition.iter().sum::<usize>(), HOUR_WINDOWS);
}

#[test]
fn delays_actual_time_per_partition_watermarks_send_fewer_flights_late() {
    let opts = DelaysOptions {
        event_time: EventTime::Actual,
        out_of_orderness_min: 0,
        lateness_min: 0,
    };
    let (one, one_summary) = run_delays(opts);
    let (four, four_summary) = run_delays_in(opts, 4);
    // One watermark for all carriers: any carrier's most delayed flight so far makes the
    // others late. One per partition: only the carriers of the same partition do.
    assert_eq!((one_summary.late, four_summary.late), (284_558, 200_307));
    assert_eq!(
        (one_summary.windows, four_summary.windows),
        (18_643, 38_056)
    );
    let (expected, late) = expected_delays_in(opts, 4);
    assert_eq!(four_summary.late, late);
    assert_eq!(by_window(&four), expected);
    assert_eq!(
        final_flights(&by_window(&four)) + four_summary.late,
        FLIGHTS
    );
    assert_eq!(by_window(&one), expected_delays(opts).0);

    // With slack and lateness too (the CLI's `--ooo 30 --lateness 15`).
    let opts = DelaysOptions {
        out_of_orderness_min: 30,
        lateness_min: 15,
        ..opts
    };
    let (four, four_summary) = run_delays_in(opts, 4);
    let (expected, late) = expected_delays_in(opts, 4);
    assert_eq!((four_summary.late, late), (124_701, 124_701));
    assert_eq!(by_window(&four), expected);
    assert_eq!(run_delays(opts).1.late, 225_396);
}

#[test]
fn sessions_on_four_partitions_merge_more_touching_flights() {
    let (one, one_summary) = run_sessions(1440);
    let (four, four_summary) = run_sessions_in(1440, 4);
    // Fewer planes share a watermark, so fewer flights exactly one gap after their plane's
    // previous flight find that session already fired: 1 354 more merges.
    assert_eq!(
        (one_summary.sessions, four_summary.sessions),
        (172_931, 171_577)
    );
    assert_eq!(four_summary.skipped, one_summary.skipped);
    assert_eq!(four_summary.late, 0);
    assert_eq!(four, expected_sessions_in(1440, true, 4));
    assert_eq!(one, expected_sessions(1440, true));
    let flights = |v: &[(String, i64, i64, u64)]| v.iter().map(|s| s.3).sum::<u64>();
    assert_eq!(flights(&four), flights(&one));
    // Still never fewer sessions than "touching always merges".
    assert!(four.len() >= expected_sessions(1440, false).len());
}
