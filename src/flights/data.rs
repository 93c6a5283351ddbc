//! Loading `flights.csv.zip` into [`Flight`]s sorted by scheduled departure.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    fn new(path: &Path, message: impl Into<String>) -> Self {
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

/// Reads `flights.csv` from the zip archive at `path`.
///
/// # Errors
/// The file is missing, is not a zip with a `flights.csv`, lacks a needed column, or has a
/// malformed value (other than `NA`) in a needed column (the error names the line).
pub fn load(path: &Path) -> Result<Dataset, LoadError> {
    let file = File::open(path).map_err(|e| LoadError::new(path, e.to_string()))?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| LoadError::new(path, e.to_string()))?;
    let mut entry = archive
        .by_name("flights.csv")
        .map_err(|e| LoadError::new(path, format!("flights.csv in the archive: {e}")))?;
    let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
    entry
        .read_to_end(&mut bytes)
        .map_err(|e| LoadError::new(path, e.to_string()))?;
    parse_csv(&bytes).map_err(|m| LoadError::new(path, m))
}

/// Parses the CSV text of `flights.csv` (with its header line).
///
/// # Errors
/// A missing column or a malformed value, as a message naming the line.
pub fn parse_csv(bytes: &[u8]) -> Result<Dataset, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes);
    let headers = reader.byte_headers().map_err(|e| e.to_string())?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name.as_bytes())
            .ok_or_else(|| format!("no `{name}` column in the header"))
    };
    let (dep_time, dep_delay, carrier, tailnum, minute, time_hour) = (
        col("dep_time")?,
        col("dep_delay")?,
        col("carrier")?,
        col("tailnum")?,
        col("minute")?,
        col("time_hour")?,
    );

    let mut interned: HashMap<Vec<u8>, Arc<str>> = HashMap::new();
    let mut intern = |b: &[u8]| -> Result<Arc<str>, String> {
        if let Some(s) = interned.get(b) {
            return Ok(Arc::clone(s));
        }
        let s: Arc<str> = std::str::from_utf8(b).map_err(|e| e.to_string())?.into();
        interned.insert(b.to_vec(), Arc::clone(&s));
        Ok(s)
    };

    let mut data = Dataset::default();
    let mut record = csv::ByteRecord::new();
    let mut row = 0usize;
    while reader
        .read_byte_record(&mut record)
        .map_err(|e| e.to_string())?
    {
        // Line numbers count the header as line 1.
        let line = row + 2;
        let field = |i: usize| {
            record
                .get(i)
                .ok_or_else(|| format!("line {line}: missing column {}", i + 1))
        };
        data.rows += 1;
        let this_row = row;
        row += 1;
        if field(dep_time)? == b"NA" || field(dep_delay)? == b"NA" {
            data.skipped_na_departure += 1;
            continue;
        }
        let int = |i: usize, name: &str| -> Result<i64, String> {
            let b = field(i)?;
            std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| {
                    format!(
                        "line {line}: `{name}` is not an integer: {:?}",
                        String::from_utf8_lossy(b)
                    )
                })
        };
        let delay = int(dep_delay, "dep_delay")?;
        let minute = int(minute, "minute")?;
        let hour_ms = parse_time_hour(field(time_hour)?).ok_or_else(|| {
            format!(
                "line {line}: `time_hour` is not YYYY-MM-DDTHH:MM:SSZ: {:?}",
                String::from_utf8_lossy(field(time_hour).unwrap_or(b""))
            )
        })?;
        let tail = field(tailnum)?;
        data.flights.push(Flight {
            carrier: intern(field(carrier)?)?,
            tailnum: if tail == b"NA" {
                None
            } else {
                Some(intern(tail)?)
            },
            sched_ms: hour_ms + minute * 60_000,
            dep_delay: delay,
            row: this_row,
        });
    }
    // `sort_by_key` is stable: flights with the same scheduled departure keep file order.
    data.flights.sort_by_key(|f| f.sched_ms);
    Ok(data)
}

/// The `time_hour` column's format, and the output's: `YYYY-MM-DDTHH:MM:SSZ` (UTC).
const UTC_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// Parses `YYYY-MM-DDTHH:MM:SSZ` into epoch ms; `None` for anything else (another
/// length, a date that does not exist).
fn parse_time_hour(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok().filter(|s| s.len() == 20)?;
    let t = chrono::NaiveDateTime::parse_from_str(s, UTC_FORMAT).ok()?;
    Some(t.and_utc().timestamp_millis())
}

/// Formats epoch ms as `YYYY-MM-DDTHH:MM:SSZ` (UTC; milliseconds are truncated). A time
/// outside chrono's range (about ±262,000 years) is written as its number of ms.
pub fn format_utc(ms: i64) -> String {
    match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => t.format(UTC_FORMAT).to_string(),
        None => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for bad in [
            "2013-02-29T00:00:00Z",
            "2013-01-01 10:00:00Z",
            "2013-13-01T00:00:00Z",
            "2013-01-01T10:00:00",
            "NA",
        ] {
            assert_eq!(parse_time_hour(bad.as_bytes()), None, "{bad}");
        }
    }
}
