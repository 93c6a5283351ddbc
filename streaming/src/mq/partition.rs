//! Which partition a message key lands in; shared by the producer and the memory engine's
//! partitioned sources, so both split keys alike.

/// The partition of `key` among `partitions`: 64-bit FNV-1a of the key's UTF-8 bytes
/// (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`), modulo `partitions`.
///
/// Stable across processes, versions and platforms (fixed vectors are tested), so a key
/// always lands in the same partition of a topic with the same partition count.
///
/// # Panics
/// If `partitions` is 0.
pub fn partition_for_key(key: &str, partitions: u32) -> u32 {
    assert!(partitions > 0, "partitions must be ≥ 1");
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The remainder is < partitions ≤ u32::MAX.
    (h % u64::from(partitions)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_fixed_vectors() {
        // FNV-1a 64 reference values: "" -> cbf29ce484222325, "a" -> af63dc4c8601ec8c,
        // "foobar" -> 85944171f73967e8.
        assert_eq!(
            partition_for_key("", u32::MAX),
            (0xcbf29ce484222325u64 % u64::from(u32::MAX)) as u32
        );
        assert_eq!(
            partition_for_key("a", 1000),
            (0xaf63dc4c8601ec8cu64 % 1000) as u32
        );
        assert_eq!(
            partition_for_key("foobar", 7),
            (0x85944171f73967e8u64 % 7) as u32
        );
        let got: Vec<u32> = ["user-1", "user-2", "order:42", "ü"]
            .iter()
            .map(|k| partition_for_key(k, 8))
            .collect();
        assert_eq!(got, FIXED);
        assert_eq!(partition_for_key("anything", 1), 0);
    }

    const FIXED: [u32; 4] = [4, 5, 1, 2];
}
