//! `flights.csv` out of its zip archive: a deflated entry (the usual case) is read raw and
//! inflated here, in pieces that the parser can take while the next ones are inflated, and
//! checked against the entry's stated size and CRC-32.

use super::data::{Dataset, LoadError};
use super::parse::{parse_csv, parse_pieces};
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc;

/// The bytes of an inflated piece (the last one may be shorter).
const PIECE: usize = 1 << 20;

/// Inflated pieces waiting for the parser at most (the inflater then waits).
const PIECES_AHEAD: usize = 8;

/// Reads `flights.csv` from the zip archive at `path`.
///
/// A deflated entry is inflated on a second thread while this one parses the text already
/// inflated.
///
/// # Errors
/// The file is missing, is not a zip with a `flights.csv` (or that entry is damaged: its
/// data does not inflate to its stated size and CRC-32), lacks a needed column, or has a
/// malformed value (other than `NA`) in a needed column (the error names the line).
pub fn load(path: &Path) -> Result<Dataset, LoadError> {
    let read = match read_entry(path) {
        Ok(Entry::Deflated(entry)) => entry.parse(),
        Ok(Entry::Text(text)) => parse_csv(&text),
        Err(e) => Err(e),
    };
    read.map_err(|message| LoadError::new(path, message))
}

/// The `flights.csv` entry of the archive.
enum Entry {
    /// Deflated (the usual case): inflate it with [`Deflated::inflate`].
    Deflated(Deflated),
    /// Stored another way: the text, as the zip reader gave it.
    Text(Vec<u8>),
}

/// A deflated entry, not inflated yet.
struct Deflated {
    deflated: Vec<u8>,
    /// Stated size of the inflated text, bytes.
    size: u64,
    crc32: u32,
}

/// Reads the `flights.csv` entry of the zip archive at `path`.
///
/// # Errors
/// The file cannot be read, is not a zip archive, or has no `flights.csv`.
fn read_entry(path: &Path) -> Result<Entry, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| e.to_string())?;
    let in_archive = |e: zip::result::ZipError| format!("flights.csv in the archive: {e}");
    let index = archive
        .index_for_name("flights.csv")
        .ok_or_else(|| in_archive(zip::result::ZipError::FileNotFound))?;
    let mut raw = archive.by_index_raw(index).map_err(in_archive)?;
    if raw.compression() == zip::CompressionMethod::Deflated {
        let (size, crc32) = (raw.size(), raw.crc32());
        let mut deflated = Vec::with_capacity(usize::try_from(raw.compressed_size()).unwrap_or(0));
        raw.read_to_end(&mut deflated).map_err(|e| e.to_string())?;
        return Ok(Entry::Deflated(Deflated {
            deflated,
            size,
            crc32,
        }));
    }
    drop(raw);
    let mut entry = archive.by_index(index).map_err(in_archive)?;
    let mut text = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
    entry.read_to_end(&mut text).map_err(|e| e.to_string())?;
    Ok(Entry::Text(text))
}

impl Deflated {
    /// Parses the pieces of the entry while the next ones are inflated on another thread
    /// (each takes about as long as the other). Text that is not quote-free, or all of it
    /// when no thread can be started, is inflated whole and parsed with [`parse_csv`].
    fn parse(&self) -> Result<Dataset, String> {
        let parsed = std::thread::scope(|scope| {
            let (pieces, inflated) = mpsc::sync_channel(PIECES_AHEAD);
            let inflating = std::thread::Builder::new()
                .name("flights-inflate".into())
                .spawn_scoped(scope, move || {
                    self.inflate(|piece| pieces.send(piece).is_ok())
                });
            // Without a second thread, the text is inflated whole below.
            let Ok(inflating) = inflating else {
                return Ok(None);
            };
            let parsed = parse_pieces(inflated);
            let inflated = inflating
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            inflated.and(parsed)
        });
        match parsed {
            Ok(Some(data)) => Ok(data),
            // Not quote-free text, or no second thread.
            Ok(None) => {
                let mut text = Vec::new();
                self.inflate(|piece| {
                    text.extend_from_slice(&piece);
                    true
                })?;
                parse_csv(&text)
            }
            // The parser stopped the inflater early: a damaged entry would explain what the
            // parser found, so check the whole entry before blaming the text.
            Err(e) => self.inflate(|_| true).and(Err(e)),
        }
    }

    /// Inflates the entry into pieces of [`PIECE`] bytes (cut anywhere) and hands them to
    /// `piece` in order until it returns `false` (then the rest is not inflated and not
    /// checked). At the end, checks the stated size and CRC-32.
    ///
    /// # Errors
    /// The entry is damaged: its data is not a deflate stream, ends early, or inflates to
    /// another size or CRC-32 than the archive states.
    fn inflate(&self, mut piece: impl FnMut(Vec<u8>) -> bool) -> Result<(), String> {
        let damaged = |what: String| format!("flights.csv in the archive is damaged: {what}");
        let mut inflate = zlib_rs::Inflate::new(false, 15);
        let mut crc32 = crc32fast::Hasher::new();
        let mut input = self.deflated.as_slice();
        loop {
            let (total_in, total_out) = (inflate.total_in(), inflate.total_out());
            let mut out = vec![0; PIECE];
            let status = inflate
                .decompress(input, &mut out, zlib_rs::InflateFlush::NoFlush)
                .map_err(|e| damaged(format!("inflating it failed ({})", e.as_str())))?;
            let consumed = usize::try_from(inflate.total_in() - total_in).unwrap_or(usize::MAX);
            let produced = usize::try_from(inflate.total_out() - total_out).unwrap_or(usize::MAX);
            input = input.get(consumed..).unwrap_or_default();
            out.truncate(produced);
            crc32.update(&out);
            let end = status == zlib_rs::Status::StreamEnd;
            if !end && consumed == 0 && produced == 0 {
                return Err(damaged("its data ends early".into()));
            }
            let stated = |what: &str| {
                damaged(format!(
                    "it inflates to {what} bytes, not the stated {}",
                    self.size
                ))
            };
            if inflate.total_out() > self.size {
                return Err(stated("more"));
            }
            // The parser stopped (its error or its other way of reading the text wins).
            if !piece(out) {
                return Ok(());
            }
            if end {
                if inflate.total_out() < self.size {
                    return Err(stated("fewer"));
                }
                break;
            }
        }
        if crc32.finalize() != self.crc32 {
            return Err(damaged("its CRC-32 does not match".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const TEXT: &str = "dep_time,dep_delay,carrier,tailnum,minute,time_hour\n\
                        517,2,UA,N14228,15,2013-01-01T10:00:00Z\n\
                        NA,NA,AA,N1,0,2013-01-01T10:00:00Z\n\
                        500,-5,B6,NA,0,2013-01-01T09:00:00Z\n";

    /// A zip archive holding `text` as `flights.csv`, compressed with `method`, repeated
    /// so that it spans several pieces.
    fn zip_of(text: &str, method: zip::CompressionMethod) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        zip.start_file("flights.csv", options).unwrap();
        zip.write_all(text.as_bytes()).unwrap();
        zip.finish().unwrap().into_inner()
    }

    /// Many rows: about 3.5 pieces of text.
    fn long_text(row: &str) -> String {
        let header = TEXT.lines().next().unwrap();
        let rows = row.repeat(PIECE * 7 / 2 / row.len());
        format!("{header}\n{rows}")
    }

    fn load_bytes(zip: &[u8]) -> Result<Dataset, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flights.csv.zip");
        std::fs::write(&path, zip).unwrap();
        load(&path).map_err(|e| e.to_string())
    }

    #[test]
    fn deflated_and_stored_entries_read_the_same() {
        for method in [
            zip::CompressionMethod::Deflated,
            zip::CompressionMethod::Stored,
        ] {
            let data = load_bytes(&zip_of(TEXT, method)).unwrap();
            assert_eq!((data.rows, data.skipped_na_departure), (3, 1), "{method}");
            let carriers: Vec<&str> = data.flights.iter().map(|f| &*f.carrier).collect();
            assert_eq!(carriers, ["B6", "UA"], "{method}");
        }
    }

    #[test]
    fn text_over_several_pieces_parses_as_one_text() {
        let row = "517,2,UA,N14228,15,2013-01-01T10:00:00Z\n600,-3,B6,NA,7,2013-01-01T09:00:00Z\n";
        let text = long_text(row);
        let data = load_bytes(&zip_of(&text, zip::CompressionMethod::Deflated)).unwrap();
        let whole = parse_csv(text.as_bytes()).unwrap();
        assert!(text.len() > 3 * PIECE);
        assert_eq!(data.rows, whole.rows);
        assert_eq!(data.flights, whole.flights);
        // A quote in the last piece only: the text is read again by the `csv` crate.
        let quoted = format!("{text}600,-3,\"B6\",NA,7,2013-01-01T09:00:00Z\n");
        let data = load_bytes(&zip_of(&quoted, zip::CompressionMethod::Deflated)).unwrap();
        assert_eq!(data.rows, whole.rows + 1);
        assert_eq!(data.flights.last().map(|f| &*f.carrier), Some("UA"));
        assert_eq!(data.flights.first().map(|f| f.row), Some(1));
    }

    #[test]
    fn a_damaged_entry_is_reported_as_damaged_not_as_bad_text() {
        let row = "517,2,UA,N14228,15,2013-01-01T10:00:00Z\n";
        let mut zip = zip_of(&long_text(row), zip::CompressionMethod::Deflated);
        // The local header is 30 bytes + the name (11 bytes); the deflated data follows.
        for at in [41 + 200, 41 + 5_000] {
            zip[at] ^= 0x55;
        }
        let error = load_bytes(&zip).unwrap_err();
        assert!(
            error.contains("): flights.csv in the archive is damaged: "),
            "{error}"
        );
    }

    #[test]
    fn an_archive_without_flights_csv_says_so() {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file("other.csv", zip::write::SimpleFileOptions::default())
            .unwrap();
        let zip = zip.finish().unwrap().into_inner();
        let error = load_bytes(&zip).unwrap_err();
        assert!(
            error.ends_with("): flights.csv in the archive: specified file not found in archive"),
            "{error}"
        );
    }
}
