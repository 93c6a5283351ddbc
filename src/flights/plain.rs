//! Quote-free CSV text (the data file) split at commas and line feeds directly, eight bytes
//! at a time, as it arrives in pieces cut anywhere.

use super::parse::{Columns, Fields, Rows, NEEDED};

/// Splits CSV text without quotes, carriage returns or a byte order mark, piece by piece:
/// fields end at `,`, records at `\n`; as with the `csv` crate, empty lines are no records
/// and a record of another length than the header is an error.
#[derive(Default)]
pub(super) struct PlainText {
    /// From the header line, once it is complete.
    columns: Option<Columns>,
    /// The start of a line that a later piece completes.
    carry: Vec<u8>,
}

impl PlainText {
    /// Reads the lines that `piece` completes into `rows`. `false`, and nothing read, when
    /// the text is not quote-free: this piece has a quote or a carriage return, or the
    /// header starts with a byte order mark.
    ///
    /// # Errors
    /// As [`super::parse_csv`].
    pub(super) fn feed(&mut self, mut piece: &[u8], rows: &mut Rows) -> Result<bool, String> {
        if memchr::memchr2(b'"', b'\r', piece).is_some() {
            return Ok(false);
        }
        if !self.carry.is_empty() || self.columns.is_none() {
            let Some(end) = memchr::memchr(b'\n', piece) else {
                self.carry.extend_from_slice(piece);
                return Ok(true);
            };
            let mut line = std::mem::take(&mut self.carry);
            line.extend_from_slice(&piece[..=end]);
            piece = &piece[end + 1..];
            if !self.lines(&line, rows)? {
                return Ok(false);
            }
        }
        let end = memchr::memrchr(b'\n', piece).map_or(0, |i| i + 1);
        if !self.lines(&piece[..end], rows)? {
            return Ok(false);
        }
        self.carry.extend_from_slice(&piece[end..]);
        Ok(true)
    }

    /// Reads the last line (one without a line feed) at the end of the text. `false` as for
    /// [`feed`](Self::feed).
    ///
    /// # Errors
    /// As [`super::parse_csv`].
    pub(super) fn finish(mut self, rows: &mut Rows) -> Result<bool, String> {
        let last = std::mem::take(&mut self.carry);
        if self.columns.is_none() {
            // The text is a header line without a line feed (or nothing).
            return self.header(&last);
        }
        self.lines(&last, rows)
    }

    /// Reads whole lines; the last one lacks its line feed only at the end of the text.
    fn lines(&mut self, mut text: &[u8], rows: &mut Rows) -> Result<bool, String> {
        if self.columns.is_none() {
            let Some(end) = memchr::memchr(b'\n', text) else {
                return Ok(true);
            };
            if !self.header(&text[..end])? {
                return Ok(false);
            }
            text = &text[end + 1..];
        }
        let Some(columns) = &self.columns else {
            return Ok(true);
        };
        let mut fields: Fields<'_> = [&[]; NEEDED.len()];
        let (mut start, mut column) = (0, 0);
        let last = (text.last().is_some_and(|&b| b != b'\n')).then_some(text.len());
        for end in Separators::new(text).chain(last) {
            let field = &text[start..end];
            if let Some(&Some(slot)) = columns.slots.get(column) {
                fields[slot] = field;
            }
            column += 1;
            start = end + 1;
            if text.get(end) == Some(&b',') {
                continue;
            }
            // The end of a line. An empty line is no record.
            if column > 1 || !field.is_empty() {
                if column != columns.count() {
                    return Err(format!(
                        "line {}: {column} fields, but the header has {}",
                        rows.rows + 2,
                        columns.count()
                    ));
                }
                rows.add(&fields)?;
            }
            column = 0;
        }
        Ok(true)
    }

    /// Reads the header line; `false` when it starts with a byte order mark.
    fn header(&mut self, line: &[u8]) -> Result<bool, String> {
        if line.starts_with(b"\xEF\xBB\xBF") {
            return Ok(false);
        }
        self.columns = Some(Columns::of(line.split(|&b| b == b','))?);
        Ok(true)
    }
}

/// The positions of the `,` and `\n` bytes of a text, in order, found eight bytes at a time
/// (fields are a few bytes long: searching for each one would cost more).
struct Separators<'a> {
    words: std::slice::ChunksExact<'a, u8>,
    /// The last bytes, fewer than eight, padded with zeros.
    rest: Option<[u8; 8]>,
    /// The position of the current word's first byte + 8.
    base: usize,
    /// The high bit of each separator byte of the current word not returned yet.
    hits: u64,
}

impl<'a> Separators<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let words = bytes.chunks_exact(8);
        let mut rest = [0; 8];
        rest[..words.remainder().len()].copy_from_slice(words.remainder());
        Separators {
            words,
            rest: Some(rest),
            base: 0,
            hits: 0,
        }
    }
}

impl Iterator for Separators<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
        const COMMAS: u64 = u64::from_ne_bytes([b','; 8]);
        const LINE_FEEDS: u64 = u64::from_ne_bytes([b'\n'; 8]);
        // The high bit of each zero byte of `x`, exactly (no carries between bytes).
        let zero_bytes = |x: u64| !(((x & LOW7) + LOW7) | x | LOW7);
        while self.hits == 0 {
            let word = match self.words.next() {
                Some(word) => word.try_into().unwrap_or_default(),
                None => self.rest.take()?,
            };
            let w = u64::from_le_bytes(word);
            self.hits = zero_bytes(w ^ COMMAS) | zero_bytes(w ^ LINE_FEEDS);
            self.base += 8;
        }
        // Little-endian: byte i of the word is bits 8i..8i+8.
        let at = self.base - 8 + self.hits.trailing_zeros() as usize / 8;
        self.hits &= self.hits - 1;
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_are_every_comma_and_line_feed_in_order() {
        let text = b"a,bc,\n,,defghijk,l\nmnopqrstuvw,x";
        let expected: Vec<usize> = (0..text.len())
            .filter(|&i| matches!(text[i], b',' | b'\n'))
            .collect();
        for len in 0..=text.len() {
            let found: Vec<usize> = Separators::new(&text[..len]).collect();
            let want: Vec<usize> = expected.iter().copied().filter(|&i| i < len).collect();
            assert_eq!(found, want, "{len} bytes");
        }
        let high = [
            0xFF,
            0x80,
            b',',
            0xAC,
            0x8A,
            b'\n',
            0x2C ^ 0x80,
            0x0A ^ 0x80,
            b',',
        ];
        assert_eq!(Separators::new(&high).collect::<Vec<_>>(), [2, 5, 8]);
    }
}
