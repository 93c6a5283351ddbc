//! CSV text split into the fields the loader reads: quote-free text (the data file) at
//! commas and line feeds directly, eight bytes at a time, as it arrives in pieces cut
//! anywhere; other text with the `csv` crate.

/// The columns the loader reads; a row's [`Fields`] hold them in this order.
pub(super) const NEEDED: [&str; 6] = [
    "dep_time",
    "dep_delay",
    "carrier",
    "tailnum",
    "minute",
    "time_hour",
];
pub(super) const DEP_TIME: usize = 0;
pub(super) const DEP_DELAY: usize = 1;
pub(super) const CARRIER: usize = 2;
pub(super) const TAILNUM: usize = 3;
pub(super) const MINUTE: usize = 4;
pub(super) const TIME_HOUR: usize = 5;

/// The needed fields of one row, in the order of [`NEEDED`].
pub(super) type Fields<'a> = [&'a [u8]; NEEDED.len()];

/// Where the needed columns are in a row, from the header.
struct Columns {
    /// For each column of the header, its index in [`Fields`] when it is needed.
    slots: Vec<Option<usize>>,
}

impl Columns {
    fn of<'a>(header: impl Iterator<Item = &'a [u8]>) -> Result<Self, String> {
        let slots: Vec<Option<usize>> = header
            .map(|name| NEEDED.iter().position(|n| n.as_bytes() == name))
            .collect();
        for (slot, name) in NEEDED.iter().enumerate() {
            if !slots.contains(&Some(slot)) {
                return Err(format!("no `{name}` column in the header"));
            }
        }
        Ok(Columns { slots })
    }

    fn count(&self) -> usize {
        self.slots.len()
    }
}

/// Splits any CSV text with the `csv` crate and calls `row` with the needed fields of each
/// data row.
///
/// # Errors
/// What the `csv` crate finds wrong, a missing column, or an error of `row`.
pub(super) fn split_with_csv(
    bytes: &[u8],
    mut row: impl FnMut(&Fields<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(bytes);
    let columns = Columns::of(reader.byte_headers().map_err(|e| e.to_string())?.iter())?;
    let mut record = csv::ByteRecord::new();
    while reader
        .read_byte_record(&mut record)
        .map_err(|e| e.to_string())?
    {
        let mut fields: Fields<'_> = [&[]; NEEDED.len()];
        // The reader rejects a record whose length differs from the header's.
        for (field, slot) in record.iter().zip(&columns.slots) {
            if let Some(slot) = *slot {
                fields[slot] = field;
            }
        }
        row(&fields)?;
    }
    Ok(())
}

/// Splits CSV text without quotes, carriage returns or a byte order mark, piece by piece:
/// fields end at `,`, records at `\n`; as with the `csv` crate, empty lines are no records
/// and a record of another length than the header is an error.
#[derive(Default)]
pub(super) struct PlainText {
    /// From the header line, once it is complete.
    columns: Option<Columns>,
    /// The start of a line that a later piece completes.
    carry: Vec<u8>,
    /// Records read (data rows; the header and empty lines are none).
    records: usize,
}

impl PlainText {
    /// Hands the records of the lines that `piece` completes to `row`. `false`, and nothing
    /// read, when the text is not quote-free: this piece has a quote or a carriage return,
    /// or the header starts with a byte order mark.
    ///
    /// # Errors
    /// As [`super::parse_csv`], or an error of `row`.
    pub(super) fn feed(
        &mut self,
        mut piece: &[u8],
        row: &mut impl FnMut(&Fields<'_>) -> Result<(), String>,
    ) -> Result<bool, String> {
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
            if !self.lines(&line, row)? {
                return Ok(false);
            }
        }
        let end = memchr::memrchr(b'\n', piece).map_or(0, |i| i + 1);
        if !self.lines(&piece[..end], row)? {
            return Ok(false);
        }
        self.carry.extend_from_slice(&piece[end..]);
        Ok(true)
    }

    /// Hands the record of the last line (one without a line feed) at the end of the text
    /// to `row`. `false` as for [`feed`](Self::feed).
    ///
    /// # Errors
    /// As [`super::parse_csv`], or an error of `row`.
    pub(super) fn finish(
        mut self,
        row: &mut impl FnMut(&Fields<'_>) -> Result<(), String>,
    ) -> Result<bool, String> {
        let last = std::mem::take(&mut self.carry);
        if self.columns.is_none() {
            // The text is a header line without a line feed (or nothing).
            return self.header(&last);
        }
        self.lines(&last, row)
    }

    /// Reads whole lines; the last one lacks its line feed only at the end of the text.
    fn lines(
        &mut self,
        mut text: &[u8],
        row: &mut impl FnMut(&Fields<'_>) -> Result<(), String>,
    ) -> Result<bool, String> {
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
                        self.records + 2,
                        columns.count()
                    ));
                }
                row(&fields)?;
                self.records += 1;
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
