//! The Redis keys of a partition's state, and the hashes that place state fields in
//! shards and pick the messages a tracing span follows.

use redis::{RedisWrite, ToRedisArgs};

/// The state keys of one (job, topic, group, partition).
///
/// - state hash of (operator, state): `{prefix}:{job}:{T:n}:{group}:{operator}:{state}`,
///   fields = the key as JSON, values = the value as JSON; with `keyed_state_shard_count`
///   N > 1, N hashes `...:{state}:s{i}`, a field going to shard
///   `i = FNV-1a-64(field bytes) % N` ([`shard_of`]);
/// - a collection state (list, map, set) of a keyed process operator: its state hash
///   holds each key's size, and each key's elements are in their own Redis key
///   `{prefix}:{job}:{T:n}:{group}:{operator}:{state}:k:{key as JSON}` (a list, a hash
///   of map key → value, a set), not in the index;
/// - index of the state hashes (a set): `{prefix}:{job}:{T:n}:{group}:index`;
/// - schema fingerprints (a hash): `{prefix}:{job}:{T:n}:{group}:schema`.
///
/// `{T:n}` is the partition's hash tag, shared with its stream, so one script can commit
/// them together on Redis Cluster.
#[derive(Clone, Debug)]
pub(crate) struct StateKeys {
    base: String,
    shards: u32,
}

/// FNV-1a, 64 bits, of `bytes`.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The shard of a state field (the key as JSON) among `shards` hashes.
pub(crate) fn shard_of(field: &str, shards: u32) -> u32 {
    (fnv1a64(field.as_bytes()) % u64::from(shards.max(1))) as u32
}

/// MurmurHash3's 64-bit finalizer (`fmix64`): spreads every input bit over the high bits.
/// FNV-1a alone barely changes its high bits when only the last bytes differ, as in stream
/// ids of one millisecond (`…-0`, `…-1`), so sampling by its top bits took all or none.
pub(crate) fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Whether message `id` gets a tracing span at `mdc_sample_rate` `rate`: the top 53 bits
/// of `fmix64(FNV-1a 64 of the id)`, as a fraction of 2^53, below `rate` (deterministic
/// per id).
pub(crate) fn mdc_sampled(id: &str, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    if rate <= 0.0 {
        return false;
    }
    ((fmix64(fnv1a64(id.as_bytes())) >> 11) as f64 / (1u64 << 53) as f64) < rate
}

impl StateKeys {
    pub(crate) fn new(prefix: &str, job: &str, tag: &str, group: &str, shards: u32) -> Self {
        StateKeys {
            base: format!("{prefix}:{job}:{tag}:{group}"),
            shards: shards.max(1),
        }
    }

    /// Whether every field of one (operator, state) is in one hash.
    pub(crate) fn single_hash(&self) -> bool {
        self.shards == 1
    }

    /// `{prefix}:{job}:{T:n}:{group}`: what every state key of the partition starts with.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The shard count of state hashes.
    pub(crate) fn shards(&self) -> u32 {
        self.shards
    }

    pub(crate) fn index(&self) -> String {
        format!("{}:index", self.base)
    }

    /// The hash of the partition's state schema fingerprints (see the `schema` module).
    pub(crate) fn schema(&self) -> String {
        format!("{}:schema", self.base)
    }

    /// The unsharded hash name of (operator, state); shards append `:s{i}`.
    pub(crate) fn unsharded(&self, operator: &str, state: &str) -> String {
        format!("{}:{operator}:{state}", self.base)
    }

    /// The hash holding `field` of (operator, state).
    pub(crate) fn hash(&self, operator: &str, state: &str, field: &str) -> String {
        if self.shards == 1 {
            format!("{}:{operator}:{state}", self.base)
        } else {
            let i = shard_of(field, self.shards);
            format!("{}:{operator}:{state}:s{i}", self.base)
        }
    }

    /// The Redis key of one key's collection in (operator, state) (`key`: the key as JSON):
    /// `{unsharded hash}:k:{key}`. Not listed in the index: the state's hash lists the
    /// keys (field = key as JSON, value = the collection's size).
    pub(crate) fn collection(&self, operator: &str, state: &str, key: &str) -> String {
        format!("{}:{operator}:{state}:k:{key}", self.base)
    }

    /// The state name of `key` when it is a hash (or, sharded, a shard hash) of `operator`.
    pub(crate) fn state_of<'k>(&self, key: &'k str, operator: &str) -> Option<&'k str> {
        let rest = key
            .strip_prefix(self.base.as_str())?
            .strip_prefix(':')?
            .strip_prefix(operator)?
            .strip_prefix(':')?;
        if self.shards == 1 {
            return Some(rest);
        }
        let (state, shard) = rest.rsplit_once(":s")?;
        (!shard.is_empty() && shard.bytes().all(|b| b.is_ascii_digit())).then_some(state)
    }
}

impl crate::redis::RedisRuntimeConfig {
    /// The Redis hash in which the engine keeps one key's value of keyed state `state` of
    /// operator `operator` (its [`OperatorId`](crate::OperatorId), e.g.
    /// `orders.billing/2:process`), for partition `partition` of `topic` read by consumer
    /// group `group`, under this configuration's state key prefix, job name and shard
    /// count: `{prefix}:{job}:{T:n}:{group}:{operator}:{state}`, with `:s{i}` appended when
    /// `keyed_state_shard_count` is above 1.
    ///
    /// `field` is the key as the engine writes it, `serde_json::to_string(&key)` (it also
    /// picks the shard); the hash maps that field to the value as JSON (a list, map or
    /// set state's whole collection is one value).
    pub fn keyed_state_hash(
        &self,
        (topic, partition, group): (&str, u32, &str),
        operator: &str,
        state: &str,
        field: &str,
    ) -> String {
        let tag = crate::mq::KeySpace::new("").hash_tag(topic, partition);
        let keys = StateKeys::new(
            self.state_key_prefix(),
            self.job_name(),
            &tag,
            group,
            self.keyed_state_shard_count(),
        );
        keys.hash(operator, state, field)
    }
}

/// The Redis type a written key must have, or have none (as `TYPE` names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyType {
    Hash,
    Set,
    List,
    Stream,
    SortedSet,
    String,
}

impl KeyType {
    /// Its name as `TYPE` replies it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            KeyType::Hash => "hash",
            KeyType::Set => "set",
            KeyType::List => "list",
            KeyType::Stream => "stream",
            KeyType::SortedSet => "zset",
            KeyType::String => "string",
        }
    }
}

impl ToRedisArgs for KeyType {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        out.write_arg(self.name().as_bytes());
    }
}

/// A written key: its name and the type it must have.
pub(crate) type Written<'a> = (&'a str, KeyType);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_keys_carry_the_partition_tag_and_parse_back() {
        let k = StateKeys::new("streaming:runtime", "job", "{orders:3}", "billing", 1);
        assert_eq!(k.index(), "streaming:runtime:job:{orders:3}:billing:index");
        let h = k.hash("orders.billing/2:process", "count", "\"k\"");
        assert_eq!(
            h,
            "streaming:runtime:job:{orders:3}:billing:orders.billing/2:process:count"
        );
        assert_eq!(k.state_of(&h, "orders.billing/2:process"), Some("count"));
        assert_eq!(k.state_of(&h, "orders.billing/2:proc"), None);
        assert_eq!(k.state_of(&h, "orders.billing/3:process"), None);
        assert_eq!(
            k.collection("orders.billing/2:process", "seen", "\"k\""),
            "streaming:runtime:job:{orders:3}:billing:orders.billing/2:process:seen:k:\"k\""
        );
    }

    #[test]
    fn the_config_names_the_hash_a_key_is_stored_in() {
        let c = crate::redis::RedisRuntimeConfig::builder()
            .job_name("totals")
            .build()
            .unwrap();
        let h = c.keyed_state_hash(
            ("orders", 3, "billing"),
            "orders.billing/2:process",
            "count",
            "\"k\"",
        );
        assert_eq!(
            h,
            "streaming:runtime:totals:{orders:3}:billing:orders.billing/2:process:count"
        );
        let c = crate::redis::RedisRuntimeConfig::builder()
            .keyed_state_shard_count(4)
            .build()
            .unwrap();
        let i = shard_of("\"k\"", 4);
        assert_eq!(
            c.keyed_state_hash(("t", 0, "g"), "t.g/3:process", "count", "\"k\""),
            format!("streaming:runtime:redis-streaming-job:{{t:0}}:g:t.g/3:process:count:s{i}")
        );
    }

    #[test]
    fn sharded_state_keys_split_by_fnv1a_of_the_field() {
        // Reference values of FNV-1a 64.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        let k = StateKeys::new("p", "job", "{t:0}", "g", 4);
        let field = "\"a\"";
        let i = shard_of(field, 4);
        assert_eq!(u64::from(i), fnv1a64(field.as_bytes()) % 4);
        let h = k.hash("t.g/3:process", "count", field);
        assert_eq!(h, format!("p:job:{{t:0}}:g:t.g/3:process:count:s{i}"));
        assert_eq!(k.state_of(&h, "t.g/3:process"), Some("count"));
        assert_eq!(
            k.state_of("p:job:{t:0}:g:t.g/3:process:count", "t.g/3:process"),
            None
        );
        let shards: std::collections::HashSet<u32> = (0..100)
            .map(|n| shard_of(&format!("\"k{n}\""), 4))
            .collect();
        assert_eq!(shards.len(), 4, "100 keys reach every shard");
    }
}
