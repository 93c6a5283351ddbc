//! The `dlq.fields` value: a dead-lettered entry's fields packed into one MessagePack
//! array `[field, value, ...]` (what Redis's `cmsgpack.pack` writes in `dead_letter.lua`).

/// The dead-letter field holding an entry's fields packed.
pub(crate) const PACKED_FIELD: &[u8] = b"dlq.fields";

/// The length of a MessagePack array (`fixarray`, `array 16`, `array 32`) and the size of
/// its header, if `bytes` starts with one.
pub(crate) fn array_len(bytes: &[u8]) -> Option<(usize, usize)> {
    match *bytes.first()? {
        b @ 0x90..=0x9f => Some((usize::from(b & 0x0f), 1)),
        0xdc => Some((usize::from(u16::from_be_bytes(be(bytes, 1)?)), 3)),
        0xdd => Some((usize::try_from(u32::from_be_bytes(be(bytes, 1)?)).ok()?, 5)),
        _ => None,
    }
}

/// The `N` bytes of `bytes` at `at`.
fn be<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// One MessagePack string (`fixstr`, `str 8/16/32`) or binary (`bin 8/16/32`) at the
/// start of `bytes`: its content and the rest of `bytes`.
fn byte_string(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, header) = match *bytes.first()? {
        b @ 0xa0..=0xbf => (usize::from(b & 0x1f), 1),
        0xc4 | 0xd9 => (usize::from(*bytes.get(1)?), 2),
        0xc5 | 0xda => (usize::from(u16::from_be_bytes(be(bytes, 1)?)), 3),
        0xc6 | 0xdb => (usize::try_from(u32::from_be_bytes(be(bytes, 1)?)).ok()?, 5),
        _ => return None,
    };
    let rest = &bytes[header..];
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// The (field, value) pairs packed in `packed`, in order; `None` unless it is exactly one
/// array of an even number of strings.
pub(crate) fn unpack_fields(packed: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let (n, header) = array_len(packed)?;
    if n % 2 != 0 || n > packed.len() {
        return None;
    }
    let mut rest = &packed[header..];
    let mut fields = Vec::with_capacity(n / 2);
    for _ in 0..n / 2 {
        let (field, after) = byte_string(rest)?;
        let (value, after) = byte_string(after)?;
        fields.push((field.to_vec(), value.to_vec()));
        rest = after;
    }
    rest.is_empty().then_some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `s` as a MessagePack `str` the way `cmsgpack.pack` writes it (shortest header).
    fn str_(s: &[u8]) -> Vec<u8> {
        let n = s.len();
        let mut out = match n {
            0..32 => vec![0xa0 | n as u8],
            32..=0xff => vec![0xd9, n as u8],
            0x100..=0xffff => [vec![0xda], (n as u16).to_be_bytes().to_vec()].concat(),
            _ => [vec![0xdb], (n as u32).to_be_bytes().to_vec()].concat(),
        };
        out.extend_from_slice(s);
        out
    }

    fn array(header: &[u8], items: &[&[u8]]) -> Vec<u8> {
        let mut out = header.to_vec();
        for i in items {
            out.extend(str_(i));
        }
        out
    }

    #[test]
    fn unpacks_every_string_size_in_order() {
        let (long, huge) = (vec![b'x'; 300], vec![0xff; 70_000]);
        let items: [&[u8]; 8] = [b"p", &long, b"", &[7; 40], b"h", &huge, b"ts", b"-1"];
        let fields = unpack_fields(&array(&[0x98], &items)).unwrap();
        let pairs: Vec<_> = items.chunks(2).map(|c| (c[0].to_vec(), c[1].to_vec())).collect();
        assert_eq!(fields, pairs);
        let wide = array(&[0xdc, 0, 8], &items);
        assert_eq!(unpack_fields(&wide).unwrap(), pairs);
        assert_eq!(unpack_fields(&array(&[0xdd, 0, 0, 0, 8], &items)).unwrap(), pairs);
        assert_eq!(array_len(&wide), Some((8, 3)));
        // `bin` values too.
        assert_eq!(
            unpack_fields(&[0x92, 0xc4, 1, b'k', 0xc5, 0, 2, 1, 2]).unwrap(),
            vec![(b"k".to_vec(), vec![1, 2])]
        );
    }

    #[test]
    fn anything_else_is_not_unpacked() {
        assert_eq!(unpack_fields(&[0x90]), Some(Vec::new()));
        for bad in [
            &[][..],
            &[0x91, 0xa1, b'a'],              // odd count
            &[0x92, 0xa1, b'a'],              // value missing
            &[0x92, 0xa1, b'a', 0xa2, b'b'],  // value cut short
            &[0x92, 0xa1, b'a', 0x01],        // a number, not a string
            &[0x92, 0xa1, b'a', 0xa0, 0xa0],  // trailing bytes
            &[0xdd, 0xff, 0xff, 0xff, 0xfe],  // more items than bytes
            b"not msgpack",
        ] {
            assert_eq!(unpack_fields(bad), None, "{bad:?}");
        }
    }
}
