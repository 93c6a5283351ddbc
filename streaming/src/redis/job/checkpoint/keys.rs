//! Where checkpoints live in Redis.
//!
//! With checkpoint key prefix `C` (`checkpoint_key_prefix`) and job `J`:
//! - the job's keys share the hash tag `{J}` (one slot: the leader's scripts check its
//!   lease and write a checkpoint's record in one script, also on Redis Cluster):
//!   `C{J}:seq` (checkpoint id counter), `C{J}:leader` (the leader lease,
//!   `"{token} {instance}"`), `C{J}:leader:token` (fencing-token counter), `C{J}:ids`
//!   (sorted set of every checkpoint id), `C{J}:complete` (sorted set of complete ids),
//!   `C{J}:open` (sorted set id → deadline ms: checkpoints whose parts are being
//!   written), `C{J}:meta:{id}` (hash: status, instance, token, times, pipelines as
//!   JSON, failure) and `C{J}:parts:{id}` (hash `{topic}/{group}/{partition}` → offset:
//!   the parts written);
//! - a partition's part of checkpoint `id` is a copy of each of its keys `k` under
//!   `C J:{id}:k` (no braces before `k`, so the copy keeps the partition's hash tag and
//!   slot): its state index, every state hash it lists, each key's collection, the schema
//!   hash, the commit frontier (string: the offset the part was taken at) and the acked
//!   set; the part record `C J:{id}:{state base}:part` (hash: offset, token, consumer,
//!   time, and `c:{hash}` → collection base of each hash whose keys have collections) is
//!   written last, so a part without a record is unfinished;
//! - a partition's checkpoint registry `C J:parts:{state base}` (hash, the partition's
//!   slot: checkpoint id → `live` once a part of it was begun, or the ms retention
//!   deleted it at): every step of a part checks it in the same script, so a part is
//!   never written for a checkpoint retention deleted, and retention finds there the
//!   parts of checkpoints no longer in `C{J}:ids` (orphans) to delete.

use crate::redis::state::keys::StateKeys;

/// The job-level checkpoint keys and the names of parts' copies.
#[derive(Clone, Debug)]
pub(crate) struct CheckpointKeys {
    /// `C{J}`.
    job: String,
    /// `CJ`.
    copies: String,
}

impl CheckpointKeys {
    pub(crate) fn new(prefix: &str, job: &str) -> Self {
        CheckpointKeys {
            job: format!("{prefix}{{{job}}}"),
            copies: format!("{prefix}{job}"),
        }
    }

    pub(crate) fn seq(&self) -> String {
        format!("{}:seq", self.job)
    }

    pub(crate) fn leader(&self) -> String {
        format!("{}:leader", self.job)
    }

    pub(crate) fn leader_token(&self) -> String {
        format!("{}:leader:token", self.job)
    }

    pub(crate) fn ids(&self) -> String {
        format!("{}:ids", self.job)
    }

    pub(crate) fn complete(&self) -> String {
        format!("{}:complete", self.job)
    }

    pub(crate) fn open(&self) -> String {
        format!("{}:open", self.job)
    }

    pub(crate) fn meta(&self, id: u64) -> String {
        format!("{}:meta:{id}", self.job)
    }

    pub(crate) fn parts(&self, id: u64) -> String {
        format!("{}:parts:{id}", self.job)
    }

    /// The prefix of checkpoint `id`'s copies: the copy of key `k` is `prefix + k`.
    pub(crate) fn copy_prefix(&self, id: u64) -> String {
        format!("{}:{id}:", self.copies)
    }

    /// The checkpoint registry of a partition (by its state keys): which checkpoints
    /// have (or had) a part of it.
    pub(crate) fn part_registry(&self, state: &StateKeys) -> String {
        format!("{}:parts:{}", self.copies, state.base())
    }

    /// The part record of a partition (by its state keys) in checkpoint `id`.
    pub(crate) fn part_record(&self, id: u64, state: &StateKeys) -> String {
        format!("{}{}:part", self.copy_prefix(id), state.base())
    }
}

/// The collection base of a state hash named `hash` when the engine cannot tell whether
/// its state keeps per-key collections: the hash without its shard suffix `:s{i}` (with
/// `shards` above 1).
pub(crate) fn unsharded_name(hash: &str, shards: u32) -> &str {
    if shards <= 1 {
        return hash;
    }
    match hash.rsplit_once(":s") {
        Some((base, i)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => hash,
    }
}

/// The prefix of a checkpoint part record's field holding the position of another input of
/// the partition's pipeline (`input:{topic}:{group}`).
pub(crate) const INPUT_FIELD: &str = "input:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_keys_share_the_job_tag_and_copies_keep_the_partition_tag() {
        let k = CheckpointKeys::new("ck:", "wc");
        assert_eq!(k.leader(), "ck:{wc}:leader");
        assert_eq!(k.meta(7), "ck:{wc}:meta:7");
        assert_eq!(k.open(), "ck:{wc}:open");
        let state = StateKeys::new("st", "wc", "{t:3}", "g", 1);
        assert_eq!(k.part_record(7, &state), "ck:wc:7:st:wc:{t:3}:g:part");
        assert_eq!(k.part_registry(&state), "ck:wc:parts:st:wc:{t:3}:g");
        assert_eq!(
            format!("{}{}", k.copy_prefix(7), state.index()),
            "ck:wc:7:st:wc:{t:3}:g:index"
        );
    }

    #[test]
    fn unsharded_names_drop_only_a_shard_suffix() {
        assert_eq!(unsharded_name("a:b:s3", 4), "a:b");
        assert_eq!(unsharded_name("a:b:s3", 1), "a:b:s3");
        assert_eq!(unsharded_name("a:bs", 4), "a:bs");
        assert_eq!(unsharded_name("a:b:sx", 4), "a:b:sx");
    }
}
