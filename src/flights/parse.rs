//! The CSV text of `flights.csv` into a [`Dataset`]: only the six columns the jobs use are
//! decoded, carrier and tail-number codes are allocated once each, and the flights are
//! sorted by scheduled departure as compact rows before they become [`Flight`]s.

use super::data::{parse_time_hour, Dataset, Flight};
use super::split::{
    split_with_csv, Fields, PlainText, CARRIER, DEP_DELAY, DEP_TIME, MINUTE, NEEDED, TAILNUM,
    TIME_HOUR,
};
use std::sync::Arc;

/// Parses the CSV text of `flights.csv` (with its header line).
///
/// Text without a quote (`"`), a carriage return or a byte order mark — the data file — is
/// split at commas and line feeds directly; other text goes through the `csv` crate. Both
/// give the same rows, skip empty lines and reject a row whose number of fields differs
/// from the header's.
///
/// # Errors
/// A missing column, a row of the wrong length, or a malformed value (other than `NA`) in a
/// needed column, as a message naming the line.
pub fn parse_csv(bytes: &[u8]) -> Result<Dataset, String> {
    match parse_pieces([bytes])? {
        Some(data) => Ok(data),
        None => {
            let mut rows = Rows::default();
            split_with_csv(bytes, |fields| rows.add(fields))?;
            Ok(rows.into_dataset())
        }
    }
}

/// Parses quote-free CSV text of `flights.csv` that arrives in pieces cut anywhere (as it
/// is inflated); `None` when a piece is not quote-free text (see [`parse_csv`], which
/// reads any text).
///
/// # Errors
/// As [`parse_csv`].
pub(super) fn parse_pieces<P: AsRef<[u8]>>(
    pieces: impl IntoIterator<Item = P>,
) -> Result<Option<Dataset>, String> {
    let (mut text, mut rows) = (PlainText::default(), Rows::default());
    let mut row = |fields: &Fields<'_>| rows.add(fields);
    for piece in pieces {
        if !text.feed(piece.as_ref(), &mut row)? {
            return Ok(None);
        }
    }
    Ok(text.finish(&mut row)?.then(|| rows.into_dataset()))
}

/// The rows read so far: the departed flights as compact [`Parsed`] rows, the codes they
/// refer to, and the counts of the [`Dataset`].
#[derive(Default)]
struct Rows {
    parsed: Vec<Parsed>,
    codes: Codes,
    hours: HourCache,
    /// Data rows read.
    rows: usize,
    skipped_na_departure: usize,
}

/// A departed flight as parsed, before sorting; codes are indices into [`Codes`].
struct Parsed {
    sched_ms: i64,
    dep_delay: i64,
    row: usize,
    carrier: u32,
    /// [`NO_TAILNUM`] when the row says `NA`.
    tailnum: u32,
}

const NO_TAILNUM: u32 = u32::MAX;

impl Rows {
    /// Reads the next data row.
    fn add(&mut self, fields: &Fields<'_>) -> Result<(), String> {
        let row = self.rows;
        self.rows += 1;
        if is_na(fields[DEP_TIME]) || is_na(fields[DEP_DELAY]) {
            self.skipped_na_departure += 1;
            return Ok(());
        }
        // Line numbers count the header as line 1.
        let line = row + 2;
        let int = |slot: usize| {
            parse_int(fields[slot]).ok_or_else(|| {
                format!(
                    "line {line}: `{}` is not an integer: {:?}",
                    NEEDED[slot],
                    String::from_utf8_lossy(fields[slot])
                )
            })
        };
        let (dep_delay, minute) = (int(DEP_DELAY)?, int(MINUTE)?);
        let hour_ms = self.hours.parse(fields[TIME_HOUR]).ok_or_else(|| {
            format!(
                "line {line}: `time_hour` is not YYYY-MM-DDTHH:MM:SSZ: {:?}",
                String::from_utf8_lossy(fields[TIME_HOUR])
            )
        })?;
        let sched_ms = minute
            .checked_mul(60_000)
            .and_then(|m| m.checked_add(hour_ms))
            .ok_or_else(|| format!("line {line}: `minute` is out of range: {minute}"))?;
        let carrier = self.codes.intern(fields[CARRIER], line)?;
        let tailnum = match fields[TAILNUM] {
            tailnum if is_na(tailnum) => NO_TAILNUM,
            tailnum => self.codes.intern(tailnum, line)?,
        };
        self.parsed.push(Parsed {
            sched_ms,
            dep_delay,
            row,
            carrier,
            tailnum,
        });
        Ok(())
    }

    /// The flights sorted by scheduled departure, ties in file order.
    fn into_dataset(mut self) -> Dataset {
        // (sched_ms, row) is unique, so the unstable sort gives the stable order by
        // sched_ms, and it sorts these small rows rather than the flights.
        self.parsed.sort_unstable_by_key(|p| (p.sched_ms, p.row));
        let code = |i: u32| Arc::clone(&self.codes.codes[i as usize]);
        let flights = self
            .parsed
            .iter()
            .map(|p| Flight {
                carrier: code(p.carrier),
                tailnum: (p.tailnum != NO_TAILNUM).then(|| code(p.tailnum)),
                sched_ms: p.sched_ms,
                dep_delay: p.dep_delay,
                row: p.row,
            })
            .collect();
        Dataset {
            flights,
            rows: self.rows,
            skipped_na_departure: self.skipped_na_departure,
        }
    }
}

/// `NA`, compared without a call to `memcmp`.
fn is_na(field: &[u8]) -> bool {
    matches!(field, [b'N', b'A'])
}

/// An optionally signed decimal integer (what `str::parse::<i64>` accepts).
fn parse_int(b: &[u8]) -> Option<i64> {
    let (negative, digits) = match b {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0i64, |n, &d| {
        let d = i64::from(d.wrapping_sub(b'0'));
        if d > 9 {
            return None;
        }
        let n = n.checked_mul(10)?;
        if negative {
            n.checked_sub(d)
        } else {
            n.checked_add(d)
        }
    })
}

/// Carrier and tail-number codes, each allocated once and shared by every flight with it.
#[derive(Default)]
struct Codes {
    /// Codes of up to seven bytes (all of the data's), by [`Codes::short_key`]: one word to
    /// hash and compare.
    short: foldhash::HashMap<u64, u32>,
    /// Longer codes.
    long: foldhash::HashMap<Vec<u8>, u32>,
    codes: Vec<Arc<str>>,
}

impl Codes {
    fn intern(&mut self, b: &[u8], line: usize) -> Result<u32, String> {
        let key = Self::short_key(b);
        let found = match key {
            Some(key) => self.short.get(&key),
            None => self.long.get(b),
        };
        if let Some(&i) = found {
            return Ok(i);
        }
        let s = std::str::from_utf8(b).map_err(|e| format!("line {line}: {e}"))?;
        let i = u32::try_from(self.codes.len())
            .ok()
            .filter(|&i| i != NO_TAILNUM)
            .ok_or_else(|| format!("line {line}: more than {NO_TAILNUM} distinct codes"))?;
        self.codes.push(s.into());
        match key {
            Some(key) => self.short.insert(key, i),
            None => self.long.insert(b.to_vec(), i),
        };
        Ok(i)
    }

    /// The bytes of a code of up to seven bytes and its length, as one word.
    fn short_key(b: &[u8]) -> Option<u64> {
        let mut word = [0; 8];
        word.get_mut(..b.len())
            .filter(|_| b.len() < 8)?
            .copy_from_slice(b);
        word[7] = b.len() as u8;
        Some(u64::from_le_bytes(word))
    }
}

/// The last `time_hour` parsed and its value: rows come in runs of the same hour.
#[derive(Default)]
struct HourCache {
    last: Option<([u8; 20], i64)>,
}

impl HourCache {
    fn parse(&mut self, b: &[u8]) -> Option<i64> {
        // A fixed-size comparison, done inline.
        let text: &[u8; 20] = b.try_into().ok()?;
        match self.last {
            Some((last, ms)) if last == *text => Some(ms),
            _ => {
                let ms = parse_time_hour(text)?;
                self.last = Some((*text, ms));
                Some(ms)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "year,dep_time,dep_delay,carrier,tailnum,minute,time_hour\n";

    fn flights(d: &Dataset) -> Vec<(String, Option<String>, i64, i64, usize)> {
        d.flights
            .iter()
            .map(|f| {
                let tail = f.tailnum.as_ref().map(|t| t.to_string());
                (f.carrier.to_string(), tail, f.sched_ms, f.dep_delay, f.row)
            })
            .collect()
    }

    #[test]
    fn plain_and_quoted_text_give_the_same_flights_sorted_ties_in_file_order() {
        let plain = format!(
            "{HEADER}2013,517,2,UA,N14228,15,2013-01-01T10:00:00Z\n\
             2013,NA,NA,AA,N1,0,2013-01-01T10:00:00Z\n\
             \n\
             2013,500,-5,B6,NA,0,2013-01-01T10:00:00Z\n\
             2013,600,+7,UA,N14228,15,2013-01-01T10:00:00Z\n\
             2013,700,0,AA,N1,59,2013-01-01T09:00:00Z"
        );
        let quoted = plain.replace("UA", "\"UA\"").replace('\n', "\r\n");
        let (a, b) = (parse_csv(plain.as_bytes()), parse_csv(quoted.as_bytes()));
        let (a, b) = (a.unwrap(), b.unwrap());
        let expected = vec![
            ("AA".into(), Some("N1".into()), 1_357_034_340_000, 0, 4),
            ("B6".into(), None, 1_357_034_400_000, -5, 2),
            ("UA".into(), Some("N14228".into()), 1_357_035_300_000, 2, 0),
            ("UA".into(), Some("N14228".into()), 1_357_035_300_000, 7, 3),
        ];
        assert_eq!(flights(&a), expected);
        assert_eq!(flights(&b), expected);
        assert_eq!((a.rows, a.skipped_na_departure), (5, 1));
        assert_eq!((b.rows, b.skipped_na_departure), (5, 1));
        assert!(Arc::ptr_eq(&a.flights[2].carrier, &a.flights[3].carrier));
    }

    #[test]
    fn bad_rows_name_their_line() {
        let err = |body: &str| parse_csv(format!("{HEADER}{body}").as_bytes()).unwrap_err();
        let ok = "2013,517,2,UA,N1,15,2013-01-01T10:00:00Z\n";
        assert_eq!(
            err(&format!("{ok}2013,517,x,UA,N1,15,2013-01-01T10:00:00Z\n")),
            "line 3: `dep_delay` is not an integer: \"x\""
        );
        assert_eq!(
            err("2013,517,2,UA,N1,15,2013-01-01 10:00:00Z\n"),
            "line 2: `time_hour` is not YYYY-MM-DDTHH:MM:SSZ: \"2013-01-01 10:00:00Z\""
        );
        assert_eq!(
            err(&format!("{ok}2013,517,2,UA,N1,15\n")),
            "line 3: 6 fields, but the header has 7"
        );
        assert_eq!(
            parse_csv(b"year,dep_time\n1,2\n").unwrap_err(),
            "no `dep_delay` column in the header"
        );
    }

    #[test]
    fn pieces_cut_anywhere_parse_as_the_whole_text() {
        let text = format!(
            "{HEADER}2013,517,2,UA,N14228,15,2013-01-01T10:00:00Z\n\n\
             2013,NA,NA,AA,N1,0,2013-01-01T10:00:00Z\n\
             2013,500,-5,B6,LONGTAIL99,0,2013-01-01T10:00:00Z\n\
             2013,600,+7,UA,LONGTAIL99,15,2013-01-01T10:00:00Z"
        );
        let whole = flights(&parse_csv(text.as_bytes()).unwrap());
        assert_eq!(whole.len(), 3);
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let two = [&bytes[..cut], &bytes[cut..]];
            let data = parse_pieces(two).unwrap().unwrap();
            assert_eq!(flights(&data), whole, "cut at {cut}");
            assert_eq!(data.rows, 4);
        }
        for size in 1..9 {
            let data = parse_pieces(bytes.chunks(size)).unwrap().unwrap();
            assert_eq!(flights(&data), whole, "pieces of {size}");
            // Codes longer than seven bytes are shared as well.
            assert!(Arc::ptr_eq(
                data.flights[0].tailnum.as_ref().unwrap(),
                data.flights[2].tailnum.as_ref().unwrap()
            ));
        }
        let quoted = [&bytes[..50], b"\"", &bytes[50..]];
        assert!(parse_pieces(quoted).unwrap().is_none());
        assert_eq!(
            parse_pieces([&b"dep_time,dep_"[..], b"delay"]).unwrap_err(),
            "no `carrier` column in the header"
        );
    }

    #[test]
    fn integers_parse_as_std_does() {
        for s in ["0", "-0", "+15", "-43", "1301", "9223372036854775807"] {
            assert_eq!(parse_int(s.as_bytes()), s.parse().ok(), "{s}");
        }
        for s in [
            "",
            "-",
            "+",
            "1.5",
            " 1",
            "1 ",
            "NA",
            "9223372036854775808",
            "--1",
        ] {
            assert_eq!(parse_int(s.as_bytes()), None, "{s}");
        }
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
    }
}
