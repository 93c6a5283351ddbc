//! The Redis protocol (RESP2 and RESP3) read straight from bytes: where a reply ends
//! ([`Framer`], for a connection that reads replies itself), and a strict cursor over a
//! complete reply ([`Cursor`]) for the reply shapes Redis sends for a stream read.
//!
//! [`Framer`] puts a reply's end where redis-rs's parser does for every reply that
//! parser accepts (lines end at the first `\r\n`, integers are read after trimming
//! whitespace, `*`/`~`/`>` hold n values, `%` 2n, `|` 2n + 1, `$` n bytes and `\r\n`,
//! `*-1`, `$-1`, `~-1` are nil); it never allocates by a length the bytes declare and
//! walks nesting without recursion, so no input makes it panic or overflow the stack.
//! What it accepts that redis-rs would reject (text that is not UTF-8, a nesting deeper
//! than redis-rs allows) is framed, and the caller's parse of the frame reports it.

/// Bytes that are not the Redis protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub(crate) &'static str);

/// The end of the first `\r\n`-terminated line at or after `from`: the index of its `\r`.
/// `None` while the line is incomplete.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    loop {
        let cr = i + buf.get(i..)?.iter().position(|&b| b == b'\r')?;
        match buf.get(cr + 1) {
            None => return None,
            Some(b'\n') => return Some(cr),
            Some(_) => i = cr + 1,
        }
    }
}

/// A protocol integer as redis-rs reads it (`str::parse::<i64>` of the trimmed line).
fn integer(line: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .ok_or(ProtocolError("a length or integer that is not a number"))
}

/// A line at `buf[at..]` written as Redis writes integers (an optional `-`, 1 to 18
/// digits, `\r\n`): the integer and where the line ends (after its `\r\n`). `None` for
/// any other line, and while the line is incomplete.
fn canonical_integer(buf: &[u8], at: usize) -> Option<(i64, usize)> {
    let negative = buf.get(at) == Some(&b'-');
    let start = at + usize::from(negative);
    let mut n = 0i64;
    let mut i = start;
    while let Some(d) = buf.get(i).filter(|d| d.is_ascii_digit()) {
        if i - start == 18 {
            return None;
        }
        n = n * 10 + i64::from(d - b'0');
        i += 1;
    }
    if i == start || buf.get(i..i + 2) != Some(b"\r\n") {
        return None;
    }
    Some((if negative { -n } else { n }, i + 2))
}

/// The integer line at `buf[at..]` and where it ends, read as redis-rs reads it; `None`
/// while it is incomplete.
fn integer_line(buf: &[u8], at: usize) -> Result<Option<(i64, usize)>, ProtocolError> {
    if let Some(read) = canonical_integer(buf, at) {
        return Ok(Some(read));
    }
    match line_end(buf, at) {
        None => Ok(None),
        Some(eol) => Ok(Some((integer(&buf[at..eol])?, eol + 2))),
    }
}

/// Where the reply starting at `buf[from]` ends (the index after its last byte); `None`
/// while it is incomplete.
///
/// # Errors
/// As [`Framer::advance`].
#[cfg(test)]
pub(crate) fn frame_end(buf: &[u8], from: usize) -> Result<Option<usize>, ProtocolError> {
    Framer::at(from).advance(buf)
}

/// Finds where a reply ends, one value at a time, and goes on from the value it stopped
/// at when more bytes arrive (a large reply read in several chunks is walked once).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Framer {
    /// Where the next value starts.
    pos: usize,
    /// Values still to read: nesting adds its children's count instead of recursing.
    remaining: u64,
}

impl Framer {
    /// A framer of the reply starting at `buf[from]`.
    pub(crate) fn at(from: usize) -> Self {
        Self {
            pos: from,
            remaining: 1,
        }
    }

    /// Reads on as far as `buf` (the bytes seen before, and maybe more) goes: where the
    /// reply ends once it is complete; `None` while it is not (call again with more bytes).
    ///
    /// # Errors
    /// [`ProtocolError`] for bytes redis-rs cannot read as a reply either (an unknown type
    /// byte, a malformed length, a bulk string not followed by `\r\n`).
    pub(crate) fn advance(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        while self.remaining > 0 {
            let Some((next, children)) = value_head(buf, self.pos)? else {
                return Ok(None);
            };
            self.pos = next;
            self.remaining = (self.remaining - 1).saturating_add(children);
        }
        Ok(Some(self.pos))
    }
}

/// The value starting at `buf[pos]` up to its children: where they start (or where a
/// value without children ends) and how many values they are. `None` while incomplete.
fn value_head(buf: &[u8], pos: usize) -> Result<Option<(usize, u64)>, ProtocolError> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    if matches!(kind, b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(') {
        return Ok(line_end(buf, pos + 1).map(|eol| (eol + 2, 0)));
    }
    if !matches!(kind, b'$' | b'!' | b'=' | b'*' | b'~' | b'>' | b'%' | b'|') {
        return Err(ProtocolError("an unknown reply type"));
    }
    let Some((n, next)) = integer_line(buf, pos + 1)? else {
        return Ok(None);
    };
    match kind {
        b'$' | b'!' | b'=' => {
            if n < 0 {
                return match kind {
                    b'$' => Ok(Some((next, 0))),
                    _ => Err(ProtocolError("a negative blob length")),
                };
            }
            let end = usize::try_from(n)
                .ok()
                .and_then(|n| next.checked_add(n))
                .and_then(|e| e.checked_add(2))
                .ok_or(ProtocolError("a blob length out of range"))?;
            if buf.len() < end {
                return Ok(None);
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err(ProtocolError("a blob not followed by CRLF"));
            }
            Ok(Some((end, 0)))
        }
        b'*' | b'~' | b'>' => Ok(Some((next, n.max(0).unsigned_abs()))),
        _ => {
            let pairs = u64::try_from(n)
                .ok()
                .and_then(|n| n.checked_mul(2))
                .ok_or(ProtocolError("a map length out of range"))?;
            // An attribute map comes before the value it describes.
            let attribute_data = u64::from(kind == b'|');
            Ok(Some((next, pairs.saturating_add(attribute_data))))
        }
    }
}

/// A cursor over one complete reply that reads only the shapes asked for, written the way
/// Redis writes them (canonical lengths, bulk strings, arrays); anything else is `None`,
/// after which the cursor's position is unspecified: the caller drops it and reads the
/// reply the general way instead.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Whether every byte was read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    /// How many bytes are left to read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// A header `<kind><canonical integer>\r\n`.
    fn header(&mut self, kind: u8) -> Option<i64> {
        if *self.buf.get(self.pos)? != kind {
            return None;
        }
        let (n, next) = canonical_integer(self.buf, self.pos + 1)?;
        self.pos = next;
        Some(n)
    }

    /// An array's length; `Some(None)` for the nil array `*-1`.
    pub(crate) fn array(&mut self) -> Option<Option<usize>> {
        match self.header(b'*')? {
            -1 => Some(None),
            n => usize::try_from(n).ok().map(Some),
        }
    }

    /// A bulk string (not nil).
    pub(crate) fn bulk(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.header(b'$')?).ok()?;
        let end = self.pos.checked_add(n)?;
        let value = self.buf.get(self.pos..end)?;
        if self.buf.get(end..end.checked_add(2)?)? != b"\r\n" {
            return None;
        }
        self.pos = end + 2;
        Some(value)
    }

    /// An integer reply `:<n>\r\n`.
    pub(crate) fn int(&mut self) -> Option<i64> {
        self.header(b':')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(bytes: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            at = frame_end(bytes, at).unwrap().unwrap();
            out.push(at);
        }
        out
    }

    #[test]
    fn frames_end_where_their_values_end() {
        let r = b"+OK\r\n+QUEUED\r\n*2\r\n$3\r\na\r\n\r\n*-1\r\n:-12\r\n$-1\r\n";
        assert_eq!(ends(r), vec![5, 14, 32, 38, 43]);
        let nested = b"*2\r\n*1\r\n%1\r\n+k\r\n~2\r\n_\r\n#t\r\n|1\r\n+a\r\n:1\r\n,1.5\r\n";
        assert_eq!(ends(nested), vec![nested.len()]);
        let push = b">0\r\n:1\r\n";
        assert_eq!(ends(push), vec![4, 8]);
    }

    #[test]
    fn a_partial_frame_is_incomplete_at_every_cut() {
        let r = b"*2\r\n$5\r\nhello\r\n*1\r\n:7\r\n";
        for cut in 0..r.len() {
            assert_eq!(frame_end(&r[..cut], 0), Ok(None), "cut at {cut}");
        }
        assert_eq!(frame_end(r, 0), Ok(Some(r.len())));
        // A lone `\r` belongs to the line, as in redis-rs.
        assert_eq!(frame_end(b"+a\rb\r\n", 0), Ok(Some(6)));
    }

    #[test]
    fn lengths_are_read_as_redis_rs_reads_them() {
        assert_eq!(frame_end(b"$ 2 \r\nab\r\n", 0), Ok(Some(10)));
        assert_eq!(frame_end(b"*+1\r\n:1\r\n", 0), Ok(Some(9)));
        assert!(frame_end(b"$x\r\n", 0).is_err());
        assert!(frame_end(b"$2\r\nabc\r\n", 0).is_err());
        assert!(frame_end(b"?\r\n", 0).is_err());
        assert!(frame_end(b"%-1\r\n", 0).is_err());
        assert!(frame_end(b"!-1\r\n", 0).is_err());
        assert_eq!(frame_end(b"$99999999999999\r\n", 0), Ok(None));
        assert_eq!(frame_end(b"$9223372036854775807\r\n", 0), Ok(None));
        assert_eq!(frame_end(b"*9223372036854775807\r\n", 0), Ok(None));
    }

    #[test]
    fn the_cursor_reads_canonical_shapes_only() {
        let mut c = Cursor::new(b"*2\r\n$3\r\nabc\r\n:1\r\n*-1\r\n");
        assert_eq!(c.array(), Some(Some(2)));
        assert_eq!(c.bulk(), Some(&b"abc"[..]));
        assert_eq!(c.int(), Some(1));
        assert_eq!(c.array(), Some(None));
        assert!(c.at_end());
        assert_eq!(Cursor::new(b"$ 3\r\nabc\r\n").bulk(), None);
        assert_eq!(Cursor::new(b"$-1\r\n").bulk(), None);
        assert_eq!(Cursor::new(b":1\r\n").bulk(), None);
        assert_eq!(Cursor::new(b"$3\r\nab").bulk(), None);
        assert_eq!(Cursor::new(b"*+1\r\n").array(), None);
    }
}
