//! Redis Cluster hash slots: the slot of a key, and the check that a script, a
//! transaction or a multi-key command touches keys of one slot only.
//!
//! The slot of a key is `CRC16(tag) mod 16384` (CRC16-XMODEM, the cluster specification's
//! CRC16), where `tag` is the key's hash tag — the bytes between the first `{` and the
//! first `}` after it, when that is not empty — or else the whole key.

/// The number of hash slots of a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster hashes keys.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: its hash tag when it has a non-empty one, else all.
fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key` (0..16384).
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    crc16(hashed_part(key)) % SLOTS
}

/// The keys `cmd` names, as far as this crate's commands go: the `KEYS` of `EVAL`,
/// `EVALSHA` and `FCALL`, the streams of `XREAD`/`XREADGROUP`, every argument of the
/// multi-key `DEL`, `UNLINK`, `EXISTS`, `TOUCH`, `MGET`, `WATCH`, none for keyless
/// commands, else the first argument.
pub(crate) fn command_keys(cmd: &redis::Cmd) -> Vec<&[u8]> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b,
            redis::Arg::Cursor => &b""[..],
        })
        .collect();
    let Some(name) = args.first().map(|n| n.to_ascii_uppercase()) else {
        return Vec::new();
    };
    match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let n = args
                .get(2)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            args.iter().skip(3).take(n).copied().collect()
        }
        b"XREAD" | b"XREADGROUP" => {
            let Some(at) = args.iter().position(|a| a.eq_ignore_ascii_case(b"STREAMS")) else {
                return Vec::new();
            };
            let rest = &args[at + 1..];
            rest[..rest.len() / 2].to_vec()
        }
        b"DEL" | b"UNLINK" | b"EXISTS" | b"TOUCH" | b"MGET" | b"WATCH" => args[1..].to_vec(),
        b"PING" | b"INFO" | b"MULTI" | b"EXEC" | b"DISCARD" | b"SCRIPT" | b"CLUSTER" | b"TIME"
        | b"CLIENT" | b"HELLO" | b"AUTH" | b"SELECT" | b"READONLY" | b"READWRITE" | b"SCAN"
        | b"KEYS" | b"DBSIZE" | b"FLUSHALL" | b"FLUSHDB" | b"CONFIG" | b"WAIT" | b"ECHO" => {
            Vec::new()
        }
        _ => args.get(1).map(|k| vec![*k]).unwrap_or_default(),
    }
}

/// The one slot every key of `cmds` hashes to (`Ok(None)` when they name no key), or
/// the keys of the first two slots found, as an error message.
pub(crate) fn one_slot<'a>(
    cmds: impl IntoIterator<Item = &'a redis::Cmd>,
) -> Result<Option<u16>, String> {
    let mut first: Option<(u16, String)> = None;
    for cmd in cmds {
        for key in command_keys(cmd) {
            let slot = key_slot(key);
            match &first {
                None => first = Some((slot, String::from_utf8_lossy(key).into_owned())),
                Some((s, k)) if *s != slot => {
                    return Err(format!(
                        "keys of two hash slots in one atomic call: `{k}` (slot {s}) and `{}` (slot {slot})",
                        String::from_utf8_lossy(key)
                    ));
                }
                Some(_) => {}
            }
        }
    }
    Ok(first.map(|(s, _)| s))
}

/// Whether `cmd` must keep its keys in one slot on any deployment: a script (`EVAL*`,
/// `FCALL*`) runs on one node and may touch one slot only.
pub(crate) fn is_script(cmd: &redis::Cmd) -> bool {
    cmd.args_iter().next().is_some_and(|a| match a {
        redis::Arg::Simple(n) => {
            let n = n.to_ascii_uppercase();
            n.starts_with(b"EVAL") || n.starts_with(b"FCALL")
        }
        redis::Arg::Cursor => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_the_cluster_specification() {
        // The specification's CRC16 check value, and slots `CLUSTER KEYSLOT` reports.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") % SLOTS);
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }

    #[test]
    fn one_slot_names_the_keys_of_two_slots() {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg("abc")
            .arg(2)
            .arg("mq:{t:1}:s")
            .arg("mq:{t:1}:acked:g")
            .arg("x");
        assert_eq!(one_slot([&eval]), Ok(Some(key_slot(b"t:1"))));
        let mut bad = redis::cmd("EVALSHA");
        bad.arg("abc").arg(2).arg("mq:{t:1}:s").arg("mq:{t:2}:s");
        let e = one_slot([&bad]).unwrap_err();
        assert!(e.contains("mq:{t:1}:s") && e.contains("mq:{t:2}:s"), "{e}");
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP").arg("g").arg("c").arg("STREAMS");
        read.arg("a{t:1}").arg("b{t:2}").arg(">").arg(">");
        assert!(one_slot([&read]).is_err());
        assert_eq!(one_slot([&redis::cmd("PING")]), Ok(None));
        let mut get = redis::cmd("GET");
        get.arg("x{t:2}");
        assert!(
            one_slot([&eval, &get]).is_err(),
            "a transaction across slots"
        );
        assert!(is_script(&eval) && !is_script(&get));
    }
}
