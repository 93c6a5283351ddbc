//! The flights data: the [`Dataset`] of [`Flight`]s sorted by scheduled departure, where
//! the file is found, why it could not be loaded, and the text of times.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::format::{Item, Numeric, Pad};

/// The environment variable naming the directory that holds `flights.csv.zip`, for the
/// examples and tests (see [`default_data_path`]).
pub const DATA_DIR_ENV: &str = "STREAMING_DATA_DIR";

/// The data file's path as the examples and tests find it by default:
/// `$STREAMING_DATA_DIR/flights.csv.zip` when [`DATA_DIR_ENV`] is set and not empty (a
/// relative directory is relative to the working directory), else
/// `../shared/data/flights.csv.zip` relative to the repository root.
pub fn default_data_path() -> PathBuf {
    data_path_in(std::env::var_os(DATA_DIR_ENV))
}

/// `flights.csv.zip` in `dir`, or in `../shared/data` of the repository without one.
fn data_path_in(dir: Option<OsString>) -> PathBuf {
    match dir.filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("flights.csv.zip"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/flights.csv.zip"),
    }
}

/// One departed flight (a row whose `dep_time` and `dep_delay` are not `NA`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flight {
    /// Two-letter carrier code (`carrier` column).
    pub carrier: Arc<str>,
    /// The plane's tail number; `None` when the row says `NA`.
    pub tailnum: Option<Arc<str>>,
    /// Scheduled departure, epoch ms UTC: `time_hour` + `minute` minutes.
    pub sched_ms: i64,
    /// Departure delay in minutes (negative = early).
    pub dep_delay: i64,
    /// The row's 0-based index among the file's data rows (the header is not counted).
    pub row: usize,
}

impl Flight {
    /// Actual departure, epoch ms UTC: scheduled departure + `dep_delay` minutes.
    pub fn actual_ms(&self) -> i64 {
        self.sched_ms + self.dep_delay * 60_000
    }
}

/// The flights of the data file, sorted by scheduled departure (stable: ties keep file
/// order), and what was left out.
#[derive(Clone, Debug, Default)]
pub struct Dataset {
    /// Every row with a `dep_time` and a `dep_delay`, sorted by [`Flight::sched_ms`].
    pub flights: Vec<Flight>,
    /// Data rows in the file.
    pub rows: usize,
    /// Rows left out because `dep_time` or `dep_delay` is `NA` (cancelled flights).
    pub skipped_na_departure: usize,
}

impl Dataset {
    /// Flights (among [`flights`](Self::flights)) whose `tailnum` is `NA`.
    pub fn na_tailnum(&self) -> usize {
        self.flights.iter().filter(|f| f.tailnum.is_none()).count()
    }
}

/// Why the data file could not be loaded.
#[derive(Debug)]
pub struct LoadError {
    path: PathBuf,
    message: String,
}

impl LoadError {
    pub(super) fn new(path: &Path, message: impl Into<String>) -> Self {
        LoadError {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot load the flights data {} (set it with --data PATH): {}",
            self.path.display(),
            self.message
        )
    }
}

impl std::error::Error for LoadError {}

/// The `time_hour` column's format, and the output's, `%Y-%m-%dT%H:%M:%SZ` (UTC), as
/// chrono's items: `format` would parse the format string on every call.
const UTC_ITEMS: &[Item<'static>] = &[
    Item::Numeric(Numeric::Year, Pad::Zero),
    Item::Literal("-"),
    Item::Numeric(Numeric::Month, Pad::Zero),
    Item::Literal("-"),
    Item::Numeric(Numeric::Day, Pad::Zero),
    Item::Literal("T"),
    Item::Numeric(Numeric::Hour, Pad::Zero),
    Item::Literal(":"),
    Item::Numeric(Numeric::Minute, Pad::Zero),
    Item::Literal(":"),
    Item::Numeric(Numeric::Second, Pad::Zero),
    Item::Literal("Z"),
];

/// Parses `YYYY-MM-DDTHH:MM:SSZ` (ASCII digits, no sign) into epoch ms; `None` for
/// anything else (another length or separator, a date or time that does not exist).
pub(super) fn parse_time_hour(b: &[u8]) -> Option<i64> {
    let b: &[u8; 20] = b.try_into().ok()?;
    let separators = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'Z'),
    ];
    if separators.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let num = |from: usize, to: usize| {
        b[from..to].iter().try_fold(0u32, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let year = i32::try_from(num(0, 4)?).ok()?;
    let t = chrono::NaiveDate::from_ymd_opt(year, num(5, 7)?, num(8, 10)?)?.and_hms_opt(
        num(11, 13)?,
        num(14, 16)?,
        num(17, 19)?,
    )?;
    Some(t.and_utc().timestamp_millis())
}

/// Formats epoch ms as `YYYY-MM-DDTHH:MM:SSZ` (UTC; milliseconds are truncated). A time
/// outside chrono's range (about ±262,000 years) is written as its number of ms.
pub fn format_utc(ms: i64) -> String {
    UtcTime(ms).to_string()
}

/// Epoch ms displayed as [`format_utc`] formats them, without a `String` of its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UtcTime(pub(crate) i64);

impl fmt::Display for UtcTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use chrono::{Datelike, Timelike};
        let Some(t) = chrono::DateTime::from_timestamp_millis(self.0) else {
            return write!(f, "{}ms", self.0);
        };
        let year = match u32::try_from(t.year()) {
            Ok(year) if year <= 9999 => year,
            // chrono writes these years with a sign; the others, digits by hand, below.
            _ => return write!(f, "{}", t.format_with_items(UTC_ITEMS.iter())),
        };
        let mut text = *b"0000-00-00T00:00:00Z";
        let fields = [
            (0, 4, year),
            (5, 2, t.month()),
            (8, 2, t.day()),
            (11, 2, t.hour()),
            (14, 2, t.minute()),
            (17, 2, t.second()),
        ];
        for (at, digits, mut n) in fields {
            for byte in text[at..at + digits].iter_mut().rev() {
                *byte = b'0' + (n % 10) as u8;
                n /= 10;
            }
        }
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UTC_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

    #[test]
    fn the_data_directory_comes_from_the_environment_when_set() {
        assert_eq!(
            data_path_in(Some("/srv/data".into())),
            Path::new("/srv/data/flights.csv.zip")
        );
        let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/flights.csv.zip");
        assert_eq!(data_path_in(None), default);
        assert_eq!(data_path_in(Some("".into())), default, "empty is unset");
    }

    #[test]
    fn times_are_written_as_chrono_writes_them() {
        let year_10000 = 253_402_300_800_000;
        let mut times = vec![0, -1, 1, -62_200_000_000_000, year_10000 - 1, year_10000];
        times.extend((-40..40).map(|i: i64| i * 7_919_993_017_123 + 59_999));
        for ms in times {
            let t = chrono::DateTime::from_timestamp_millis(ms).unwrap();
            assert_eq!(format_utc(ms), t.format(UTC_FORMAT).to_string(), "{ms}");
        }
        assert_eq!(format_utc(i64::MAX), format!("{}ms", i64::MAX));
    }

    #[test]
    fn times_round_trip() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2013-01-01T10:00:00Z",
            "2012-02-29T23:59:59Z",
            "2000-03-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            let ms = parse_time_hour(s.as_bytes()).unwrap();
            assert_eq!(format_utc(ms), s);
        }
        assert_eq!(
            parse_time_hour(b"2013-01-01T10:00:00Z"),
            Some(1_357_034_400_000)
        );
        assert_eq!(
            chrono::format::StrftimeItems::new(UTC_FORMAT).parse(),
            Ok(UTC_ITEMS.to_vec())
        );
        for bad in [
            "2013-02-29T00:00:00Z",
            "2013-01-01 10:00:00Z",
            "2013-13-01T00:00:00Z",
            "2013-01-01T10:00:00",
            "2013-01-01T24:00:00Z",
            "2013-01-01T10:60:00Z",
            "+013-01-01T10:00:00Z",
            "2013-1-01T10:00:00ZZ",
            "NA",
        ] {
            assert_eq!(parse_time_hour(bad.as_bytes()), None, "{bad}");
        }
    }
}
