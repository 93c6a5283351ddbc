//! `flights.csv` out of its zip archive: a deflated entry (the usual case) is read raw and
//! inflated here, in pieces that the parser can take while the next ones are inflated, and
//! checked against the entry's stated size and CRC-32.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The bytes of an inflated piece (the last one may be shorter).
const PIECE: usize = 1 << 20;

/// The `flights.csv` entry of the archive.
pub(super) enum Entry {
    /// Deflated (the usual case): inflate it with [`Deflated::inflate`].
    Deflated(Deflated),
    /// Stored another way: the text, as the zip reader gave it.
    Text(Vec<u8>),
}

/// A deflated entry, not inflated yet.
pub(super) struct Deflated {
    deflated: Vec<u8>,
    /// Stated size of the inflated text, bytes.
    size: u64,
    crc32: u32,
}

/// Reads the `flights.csv` entry of the zip archive at `path`.
///
/// # Errors
/// The file cannot be read, is not a zip archive, or has no `flights.csv`.
pub(super) fn read_entry(path: &Path) -> Result<Entry, String> {
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
    /// Inflates the entry into pieces of [`PIECE`] bytes (cut anywhere) and hands them to
    /// `piece` in order until it returns `false` (then the rest is not inflated and not
    /// checked). At the end, checks the stated size and CRC-32.
    ///
    /// # Errors
    /// The entry is damaged: its data is not a deflate stream, ends early, or inflates to
    /// another size or CRC-32 than the archive states.
    pub(super) fn inflate(&self, mut piece: impl FnMut(Vec<u8>) -> bool) -> Result<(), String> {
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
