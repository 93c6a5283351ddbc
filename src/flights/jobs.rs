//! The example's two windowed jobs on the in-memory engine, written with
//! [`streaming::pipeline!`]: per-carrier hourly delays and per-plane sessions. Their
//! pipelines are fragments ([`delays_fragment`], [`sessions_fragment`]) that the Redis
//! engine's runs in `windows_redis` splice behind their topic.

use super::data::{Dataset, Flight, UtcTime};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use streaming::api::{AggregateFunction, Sink};
use streaming::fragment::{Fragment, Input};
use streaming::time::{
    BoundedOutOfOrderness, EventTimeSessionWindows, NoEventTime, TimeWindow,
    TumblingEventTimeWindows,
};
use streaming::{pipeline, BoxError, Error, MemoryEnv};

/// Which time of a flight is its event time (`--event-time sched|actual`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EventTime {
    /// Scheduled departure (the replay order: the stream is in order).
    #[default]
    #[value(name = "sched")]
    Scheduled,
    /// Actual departure = scheduled + `dep_delay` (the stream is out of order).
    Actual,
}

impl EventTime {
    /// The flight's event time in epoch ms.
    pub fn of(self, f: &Flight) -> i64 {
        match self {
            EventTime::Scheduled => f.sched_ms,
            EventTime::Actual => f.actual_ms(),
        }
    }
}

/// Settings of the `delays` job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelaysOptions {
    /// Event time of a flight.
    pub event_time: EventTime,
    /// Bounded out-of-orderness of the watermark, in minutes.
    pub out_of_orderness_min: u64,
    /// Allowed lateness of the windows, in minutes.
    pub lateness_min: u64,
}

/// Settings of the `sessions` job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionsOptions {
    /// Session gap in minutes (at least 1).
    pub gap_min: u64,
}

impl Default for SessionsOptions {
    fn default() -> Self {
        SessionsOptions { gap_min: 1440 }
    }
}

pub(crate) fn minutes(m: u64) -> Duration {
    Duration::from_secs(m.saturating_mul(60))
}

/// One firing of a (carrier, hour) window of the `delays` job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayLine {
    /// The key.
    pub carrier: Arc<str>,
    /// Window start, epoch ms.
    pub window_start_ms: i64,
    /// Flights in the window so far.
    pub flights: u64,
    /// Sum of their `dep_delay`, minutes.
    pub sum_dep_delay: i64,
}

/// `carrier,window_start,flights,sum_dep_delay`, the start as `YYYY-MM-DDTHH:MM:SSZ`.
impl fmt::Display for DelayLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{}",
            self.carrier,
            UtcTime(self.window_start_ms),
            self.flights,
            self.sum_dep_delay
        )
    }
}

/// What the `delays` job reports after its lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelaysSummary {
    /// Rows skipped because `dep_time` or `dep_delay` is `NA`.
    pub skipped: usize,
    /// Flights that arrived after their window's allowed lateness (the late side output).
    pub late: u64,
    /// Distinct (carrier, window) pairs that fired.
    pub windows: usize,
    /// Window firings (= lines), re-firings of late-but-allowed flights included.
    pub firings: u64,
}

/// `# skipped=N late=N windows=N`.
impl fmt::Display for DelaysSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "# skipped={} late={} windows={}",
            self.skipped, self.late, self.windows
        )
    }
}

/// One session of a plane in the `sessions` job.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionLine {
    /// The key.
    pub tailnum: Arc<str>,
    /// Session start: the first flight's scheduled departure, epoch ms.
    pub start_ms: i64,
    /// Session end (exclusive): the last flight's scheduled departure + gap, epoch ms.
    pub end_ms: i64,
    /// Flights in the session.
    pub flights: u64,
}

/// `tailnum,session_start,session_end,flights`, times as `YYYY-MM-DDTHH:MM:SSZ`.
impl fmt::Display for SessionLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{},{}",
            self.tailnum,
            UtcTime(self.start_ms),
            UtcTime(self.end_ms),
            self.flights
        )
    }
}

/// What the `sessions` job reports after its lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionsSummary {
    /// Rows skipped because `dep_time`, `dep_delay` or `tailnum` is `NA`.
    pub skipped: usize,
    /// Sessions emitted (= lines).
    pub sessions: u64,
    /// Flights that reached the late side output (0 for a stream in event-time order).
    pub late: u64,
}

/// `# skipped=N sessions=N`.
impl fmt::Display for SessionsSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "# skipped={} sessions={}", self.skipped, self.sessions)
    }
}

/// Count and sum of `dep_delay`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountAndSum;

impl AggregateFunction<Flight> for CountAndSum {
    type Acc = (u64, i64);
    type Out = (u64, i64);

    fn create_accumulator(&self) -> (u64, i64) {
        (0, 0)
    }
    fn add(&self, acc: &mut (u64, i64), f: Flight) {
        acc.0 += 1;
        acc.1 += f.dep_delay;
    }
    fn get_result(&self, acc: &(u64, i64)) -> (u64, i64) {
        *acc
    }
    fn merge(&self, a: (u64, i64), b: (u64, i64)) -> (u64, i64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

/// Count of flights.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountFlights;

impl AggregateFunction<Flight> for CountFlights {
    type Acc = u64;
    type Out = u64;

    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add(&self, acc: &mut u64, _f: Flight) {
        *acc += 1;
    }
    fn get_result(&self, acc: &u64) -> u64 {
        *acc
    }
    fn merge(&self, a: u64, b: u64) -> u64 {
        a + b
    }
}

/// A sink from a fallible closure (so a closed stdout stops the job with an error).
struct TrySink<F>(F);

impl<T, E: Into<BoxError>, F: FnMut(T) -> Result<(), E>> Sink<T> for TrySink<F> {
    fn invoke(&mut self, value: T) -> Result<(), BoxError> {
        (self.0)(value).map_err(Into::into)
    }
}

/// The late side output of the windowed jobs: counts the flights it receives. Clones share
/// the count (one clone runs per partition).
#[derive(Clone, Debug, Default)]
pub struct LateCounter(Arc<AtomicU64>);

impl LateCounter {
    /// Flights received so far, over all clones.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Sink<Flight> for LateCounter {
    fn invoke(&mut self, _value: Flight) -> Result<(), BoxError> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The `delays` pipeline, written once for both engines: event time and watermark, the
/// hourly windows per carrier with their late side output (`late`, a [`LateCounter`]) and
/// the aggregate. The memory job splices it behind a partitioned collection, the Redis job
/// behind its topic (after parsing messages into flights).
pub fn delays_fragment(
    flights: Input<Flight, NoEventTime>,
    opts: DelaysOptions,
    late: LateCounter,
) -> impl Fragment<Flight, NoEventTime, Out = DelayLine> {
    let event_time = opts.event_time;
    pipeline! {
        flights
            .assign_timestamps_and_watermarks_with(
                move |f: &Flight, _| event_time.of(f),
                BoundedOutOfOrderness::new(minutes(opts.out_of_orderness_min)),
            )
            .key_by(|f: &Flight| Arc::clone(&f.carrier))
            .window(TumblingEventTimeWindows::of(Duration::from_secs(3600)))
            .allowed_lateness(minutes(opts.lateness_min))
            .side_output_late_data(late)
            .aggregate_with(CountAndSum, |carrier: &Arc<str>, w: &TimeWindow, (flights, sum_dep_delay)| {
                DelayLine {
                    carrier: Arc::clone(carrier),
                    window_start_ms: w.start(),
                    flights,
                    sum_dep_delay,
                }
            })
    }
}

/// The `sessions` pipeline, written once for both engines (see [`delays_fragment`]):
/// flights with a tail number, event time = scheduled departure, session windows per plane.
pub fn sessions_fragment(
    flights: Input<Flight, NoEventTime>,
    opts: SessionsOptions,
    late: LateCounter,
) -> impl Fragment<Flight, NoEventTime, Out = SessionLine> {
    pipeline! {
        flights
            .filter(|f: &Flight| f.tailnum.is_some())
            .assign_timestamps_and_watermarks_with(
                |f: &Flight, _| f.sched_ms,
                BoundedOutOfOrderness::new(Duration::ZERO),
            )
            .key_by(|f: &Flight| f.tailnum.clone().unwrap_or_else(|| Arc::from("NA")))
            .window(EventTimeSessionWindows::with_gap(minutes(opts.gap_min)))
            .side_output_late_data(late)
            .aggregate_with(CountFlights, |tailnum: &Arc<str>, w: &TimeWindow, flights| {
                SessionLine {
                    tailnum: Arc::clone(tailnum),
                    start_ms: w.start(),
                    end_ms: w.end(),
                    flights,
                }
            })
    }
}

/// The `delays` job: flights replayed in scheduled order, keyed by carrier, 1-hour tumbling
/// event-time windows with the default event-time trigger; `out` receives one
/// [`DelayLine`] per firing, in firing order.
///
/// # Errors
/// An invalid setting (too large a duration) or an error returned by `out`.
pub fn delays<E: Into<BoxError>>(
    data: &Dataset,
    opts: &DelaysOptions,
    out: impl FnMut(&DelayLine) -> Result<(), E>,
) -> Result<DelaysSummary, Error> {
    delays_partitioned(data, opts, 1, out)
}

/// The `delays` job with the flights replayed as `partitions` partitions keyed by carrier
/// (as a Redis topic with that many partitions would hold them): each partition has its
/// own windows and watermark. `out` receives partition 0's firings, then partition 1's, …
/// (firing order within a partition); with 1 partition this is [`delays`].
///
/// # Errors
/// As [`delays`].
///
/// # Panics
/// If `partitions` is 0.
pub fn delays_partitioned<E: Into<BoxError>>(
    data: &Dataset,
    opts: &DelaysOptions,
    partitions: u32,
    mut out: impl FnMut(&DelayLine) -> Result<(), E>,
) -> Result<DelaysSummary, Error> {
    let late = LateCounter::default();
    // One insert per firing: a fast hash (no untrusted keys here).
    let mut fired: foldhash::HashSet<(Arc<str>, i64)> = foldhash::HashSet::default();
    let mut firings = 0u64;
    let env = MemoryEnv::new();
    let opts = *opts;
    let job = env
        .from_collection_partitioned(data.flights.iter().cloned(), partitions, |f: &Flight| {
            Some(Arc::clone(&f.carrier))
        })
        .transform(|flights| delays_fragment(flights, opts, late.clone()))
        .sink(TrySink(|line: DelayLine| {
            firings += 1;
            let r = out(&line);
            fired.insert((line.carrier, line.window_start_ms));
            r
        }))?;
    let late = late.get();
    if job.late_elements != late {
        tracing::warn!(
            counted = job.late_elements,
            side_output = late,
            "late counters disagree"
        );
    }
    Ok(DelaysSummary {
        skipped: data.skipped_na_departure,
        late,
        windows: fired.len(),
        firings,
    })
}

/// The `sessions` job: flights with a tail number, keyed by it, event time = scheduled
/// departure, watermark = event time (no out-of-orderness), session windows of `gap`;
/// `out` receives one [`SessionLine`] per session, in firing order.
///
/// Sessions that touch merge only while the earlier one is open: a flight exactly `gap`
/// after its plane's previous flight starts a new session when an earlier flight in the
/// replay has the same scheduled time (it set the watermark to that time, past the
/// earlier session's `max_timestamp`, so that session had fired and been cleaned up).
///
/// # Errors
/// An invalid gap (0 or too large) or an error returned by `out`.
pub fn sessions<E: Into<BoxError>>(
    data: &Dataset,
    opts: &SessionsOptions,
    out: impl FnMut(&SessionLine) -> Result<(), E>,
) -> Result<SessionsSummary, Error> {
    sessions_partitioned(data, opts, 1, out)
}

/// The `sessions` job with the flights replayed as `partitions` partitions keyed by tail
/// number (flights without one go round robin, as keyless messages do on Redis, and are
/// filtered out): each partition has its own sessions and watermark. `out` receives
/// partition 0's sessions, then partition 1's, …; with 1 partition this is [`sessions`].
///
/// # Errors
/// As [`sessions`].
///
/// # Panics
/// If `partitions` is 0.
pub fn sessions_partitioned<E: Into<BoxError>>(
    data: &Dataset,
    opts: &SessionsOptions,
    partitions: u32,
    mut out: impl FnMut(&SessionLine) -> Result<(), E>,
) -> Result<SessionsSummary, Error> {
    let late = LateCounter::default();
    let mut sessions = 0u64;
    let env = MemoryEnv::new();
    let opts = *opts;
    env.from_collection_partitioned(data.flights.iter().cloned(), partitions, |f: &Flight| {
        f.tailnum.clone()
    })
    .transform(|flights| sessions_fragment(flights, opts, late.clone()))
    .sink(TrySink(|line: SessionLine| {
        sessions += 1;
        out(&line)
    }))?;
    Ok(sessions_summary(data, sessions, late.get()))
}

/// The `sessions` summary: `skipped` = cancelled flights + flights without a tail number.
pub(crate) fn sessions_summary(data: &Dataset, sessions: u64, late: u64) -> SessionsSummary {
    if late > 0 {
        tracing::warn!(
            late,
            "flights reached the late side output of the sessions job"
        );
    }
    SessionsSummary {
        skipped: data.skipped_na_departure + data.na_tailnum(),
        sessions,
        late,
    }
}
