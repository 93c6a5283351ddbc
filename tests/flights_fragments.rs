//! Unit tests of the flights jobs' business logic: their fragments under the test driver,
//! a few hand-made flights each, no data file and no Redis.

use std::sync::Arc;
use streaming::testing::TestDriver;
use streaming::Error;
use streaming_suite::flights::{
    count_by_carrier, delays_fragment, sessions_fragment, DelayLine, DelaysOptions, EventTime,
    Flight, LateCounter, SessionLine, SessionsOptions,
};

const HOUR: i64 = 3_600_000;

fn flight(carrier: &str, tailnum: &str, sched_ms: i64, dep_delay: i64) -> (Flight, i64) {
    let f = Flight {
        carrier: Arc::from(carrier),
        tailnum: Some(Arc::from(tailnum)),
        sched_ms,
        dep_delay,
        row: 0,
    };
    (f, sched_ms)
}

#[test]
fn delays_sum_each_carriers_hour_and_count_late_flights() -> Result<(), Error> {
    let late = LateCounter::default();
    let opts = DelaysOptions {
        event_time: EventTime::Scheduled,
        out_of_orderness_min: 0,
        lateness_min: 0,
    };
    let mut driver = TestDriver::new(|f| delays_fragment(f, opts, late.clone()))?;
    driver.push_all([
        flight("UA", "N1", 10 * 60_000, 5),
        flight("AA", "N2", 20 * 60_000, -3),
        flight("UA", "N3", 50 * 60_000, 15),
    ])?;
    assert!(driver.output().is_empty(), "the hour is still open");
    // A flight in the next hour moves the watermark past the first hour.
    driver.push_all([flight("UA", "N4", HOUR + 60_000, 1)])?;
    let line = |carrier: &str, window_start_ms, flights, sum_dep_delay| DelayLine {
        carrier: Arc::from(carrier),
        window_start_ms,
        flights,
        sum_dep_delay,
    };
    let mut first_hour = driver.output();
    first_hour.sort_by(|a, b| a.carrier.cmp(&b.carrier));
    assert_eq!(first_hour, [line("AA", 0, 1, -3), line("UA", 0, 2, 20)]);
    // A flight of the closed hour is late: it goes to the side output only.
    driver.push_all([flight("AA", "N5", 30 * 60_000, 60)])?;
    assert_eq!((late.get(), driver.summary().late_elements), (1, 1));
    driver.finish()?;
    assert_eq!(driver.output(), [line("UA", HOUR, 1, 1)]);
    Ok(())
}

#[test]
fn sessions_close_after_the_gap_per_plane() -> Result<(), Error> {
    let late = LateCounter::default();
    let opts = SessionsOptions { gap_min: 60 };
    let mut driver = TestDriver::new(|f| sessions_fragment(f, opts, late.clone()))?;
    driver.push_all([
        flight("UA", "N1", 0, 0),
        flight("UA", "N1", 30 * 60_000, 0),
        flight("UA", "N2", 40 * 60_000, 0),
        // N1 again 2 h after its last flight: the first session has closed.
        flight("UA", "N1", 150 * 60_000, 0),
    ])?;
    let session = |tailnum: &str, start_ms, end_ms, flights| SessionLine {
        tailnum: Arc::from(tailnum),
        start_ms,
        end_ms,
        flights,
    };
    let mut closed = driver.output();
    closed.sort();
    assert_eq!(
        closed,
        [
            session("N1", 0, 90 * 60_000, 2),
            session("N2", 40 * 60_000, 100 * 60_000, 1)
        ]
    );
    driver.finish()?;
    assert_eq!(
        driver.output(),
        [session("N1", 150 * 60_000, 210 * 60_000, 1)]
    );
    assert_eq!(late.get(), 0);
    Ok(())
}

#[test]
fn counts_keep_a_running_count_per_carrier_in_value_state() -> Result<(), Error> {
    let mut driver = TestDriver::new(count_by_carrier)?;
    for (i, carrier) in ["UA", "AA", "UA", "UA"].into_iter().enumerate() {
        driver.push(carrier.to_string(), i as i64)?;
    }
    assert_eq!(
        driver.output(),
        [
            ("UA".into(), 1),
            ("AA".into(), 1),
            ("UA".into(), 2),
            ("UA".into(), 3)
        ]
    );
    let flights = driver.with_keyed_state("process", &"UA".to_string(), |ctx| {
        ctx.state(&streaming::api::ValueStateDescriptor::<u64>::persistent(
            "flights", 0,
        ))
        .map(|s| s.value())
    })??;
    assert_eq!(flights, 3);
    Ok(())
}
