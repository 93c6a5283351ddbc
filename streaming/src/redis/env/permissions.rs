//! The permission check a job runs at start, for a Redis user with ACL rules: every
//! command the job runs, each on a key of the kind it runs it on, queued in a `MULTI` that
//! is then discarded. Redis checks a command's permissions (the command, then its keys)
//! when it queues it, so the check runs nothing, and the first refusal becomes an
//! [`Error::Permission`] naming the command, the key and the rule to add — at start, not
//! mid-run as a `NOPERM` in a retry loop.
//!
//! The commands are those of the engine's Rust code and of its Lua scripts (a script's
//! commands are checked against the calling user when they run). The guide's ACL page
//! lists the same set ([`JOB_COMMANDS`] is checked against it by a test).

use std::time::Duration;

use redis::{Cmd, Value};

use crate::mq::topic::KeySpace;
use crate::mq::Endpoint;
use crate::redis::job::checkpoint::CheckpointKeys;
use crate::redis::state::keys::StateKeys;
use crate::redis::RedisRuntimeConfig;
use crate::Error;

/// Every command a Redis engine job runs, as ACL rules name it (`command|subcommand`).
pub(crate) const JOB_COMMANDS: &[&str] = &[
    // connection and server
    "auth",
    "hello",
    "ping",
    "select",
    "client|setname",
    "info",
    "time",
    "wait",
    // transactions and scripts
    "multi",
    "exec",
    "discard",
    "evalsha",
    "eval",
    "script|load",
    // streams
    "xreadgroup",
    "xread",
    "xack",
    "xadd",
    "xdel",
    "xrange",
    "xrevrange",
    "xpending",
    "xclaim",
    "xautoclaim",
    "xtrim",
    "xlen",
    "xinfo|stream",
    "xinfo|groups",
    "xinfo|consumers",
    "xgroup|create",
    "xgroup|setid",
    "xgroup|delconsumer",
    // strings and keys
    "get",
    "set",
    "incr",
    "del",
    "unlink",
    "exists",
    "type",
    "rename",
    "copy",
    "pexpire",
    "persist",
    // hashes
    "hset",
    "hsetnx",
    "hget",
    "hmget",
    "hdel",
    "hgetall",
    "hscan",
    "hlen",
    "hkeys",
    "hincrby",
    "hexists",
    // sets, sorted sets, lists
    "sadd",
    "srem",
    "smembers",
    "scard",
    "zadd",
    "zrem",
    "zrange",
    "zrangebyscore",
    "zremrangebyscore",
    "zscore",
    "zmscore",
    "zcard",
    "rpush",
    "lrange",
];

/// One probed command: the command as queued, the ACL name of the command, and its key
/// with the key pattern that allows it.
struct Probe {
    cmd: Cmd,
    command: &'static str,
    key: Option<(String, String)>,
}

/// The keys the probes use, one of each kind the job writes, with the pattern the guide
/// gives for it (`~{prefix}:*`).
struct ProbeKeys {
    /// A partition stream of the first source topic (the mq prefix).
    stream: (String, String),
    /// A partition key of the same slot (a lease).
    lease: (String, String),
    /// The partition's state index (the state prefix).
    state: (String, String),
    /// The checkpoint sequence (the checkpoint prefix).
    checkpoint: (String, String),
    /// A sink deduplication key, when deduplication is on (its prefix).
    dedup: Option<(String, String)>,
}

impl ProbeKeys {
    fn of(config: &RedisRuntimeConfig, topic: &str, group: &str) -> Self {
        let mq_prefix = &config.mq_options().key_prefix;
        let mq = KeySpace::new(mq_prefix.clone());
        let tag = mq.hash_tag(topic, 0);
        let state = StateKeys::new(config.state_key_prefix(), config.job_name(), &tag, group, 1);
        let ck = CheckpointKeys::new(config.checkpoint_key_prefix(), config.job_name());
        let pattern = |prefix: &str, sep: &str| format!("~{prefix}{sep}*");
        ProbeKeys {
            stream: (mq.stream(topic, 0), pattern(mq_prefix, ":")),
            lease: (mq.lease(topic, 0, group), pattern(mq_prefix, ":")),
            state: (state.index(), pattern(config.state_key_prefix(), ":")),
            checkpoint: (ck.seq(), pattern(config.checkpoint_key_prefix(), "")),
            dedup: config.sink_deduplication_enabled().then(|| {
                let prefix = config.sink_dedup_key_prefix();
                (
                    format!("{prefix}{}:probe", config.job_name()),
                    pattern(prefix, ""),
                )
            }),
        }
    }

    /// Probes of the keys no command probe uses: `EXISTS` on each (the commands are
    /// probed on other keys).
    fn key_probes(&self) -> impl Iterator<Item = Probe> + '_ {
        [Some(&self.checkpoint), self.dedup.as_ref()]
            .into_iter()
            .flatten()
            .map(|key| {
                let mut cmd = redis::cmd("EXISTS");
                cmd.arg(&key.0);
                Probe {
                    cmd,
                    command: "exists",
                    key: Some(key.clone()),
                }
            })
    }
}

/// The family of key a command is probed on.
#[derive(Clone, Copy)]
enum Family {
    None,
    Stream,
    Lease,
    State,
}

/// How `command` is probed: the key family, and its arguments around the key (`@` stands
/// for the key) — valid for the command's arity, which Redis checks before permissions.
fn template(command: &str) -> (Family, &'static [&'static str]) {
    use Family::*;
    match command {
        "ping" | "info" | "time" | "multi" | "exec" | "discard" => (None, &[]),
        "select" => (None, &["0"]),
        "client|setname" => (None, &["streaming-check"]),
        "wait" => (None, &["0", "0"]),
        "script|load" => (None, &["return 1"]),
        "evalsha" => (
            Stream,
            &["0000000000000000000000000000000000000000", "1", "@"],
        ),
        "eval" => (Stream, &["return 1", "1", "@"]),
        "xreadgroup" => (Stream, &["GROUP", "g", "c", "STREAMS", "@", ">"]),
        "xread" => (Stream, &["STREAMS", "@", "0"]),
        "xack" | "xdel" => (Stream, &["@", "g", "0-1"]),
        "xadd" => (Stream, &["@", "*", "f", "v"]),
        "xrange" => (Stream, &["@", "-", "+"]),
        "xrevrange" => (Stream, &["@", "+", "-"]),
        "xpending" | "xinfo|consumers" => (Stream, &["@", "g"]),
        "xclaim" => (Stream, &["@", "g", "c", "0", "0-1"]),
        "xautoclaim" => (Stream, &["@", "g", "c", "0", "0-0"]),
        "xtrim" => (Stream, &["@", "MAXLEN", "1000000"]),
        "xgroup|create" | "xgroup|setid" => (Stream, &["@", "g", "$"]),
        "xgroup|delconsumer" => (Stream, &["@", "g", "c"]),
        "xlen" | "xinfo|stream" | "xinfo|groups" => (Stream, &["@"]),
        "get" | "incr" | "persist" => (Lease, &["@"]),
        "set" => (Lease, &["@", "v"]),
        "pexpire" => (Lease, &["@", "1"]),
        "rename" | "copy" => (State, &["@", "@"]),
        "hset" | "hsetnx" => (State, &["@", "f", "v"]),
        "hget" | "hmget" | "hdel" | "hexists" => (State, &["@", "f"]),
        "hincrby" => (State, &["@", "f", "1"]),
        "hscan" => (State, &["@", "0"]),
        "sadd" | "srem" | "zrem" | "zscore" | "zmscore" | "rpush" => (State, &["@", "m"]),
        "zadd" => (State, &["@", "1", "m"]),
        "zrange" | "lrange" => (State, &["@", "0", "-1"]),
        "zrangebyscore" | "zremrangebyscore" => (State, &["@", "0", "1"]),
        // del unlink exists type hgetall hlen hkeys smembers scard zcard
        _ => (State, &["@"]),
    }
}

/// The probe of `command`: the command with harmless arguments, on a key of `keys`
/// (queued only, never run).
fn probe(command: &'static str, keys: &ProbeKeys) -> Probe {
    let (family, args) = template(command);
    let key = match family {
        Family::None => None,
        Family::Stream => Some(&keys.stream),
        Family::Lease => Some(&keys.lease),
        Family::State => Some(&keys.state),
    };
    let mut words = command.split('|');
    let mut cmd = redis::cmd(&words.next().unwrap_or(command).to_ascii_uppercase());
    for sub in words {
        cmd.arg(sub.to_ascii_uppercase());
    }
    for a in args {
        match (*a, key) {
            ("@", Some((k, _))) => cmd.arg(k),
            _ => cmd.arg(*a),
        };
    }
    Probe {
        cmd,
        command,
        key: key.cloned(),
    }
}

/// What a queued command's reply says: allowed, or the error it is.
fn refusal(probe: &Probe, reply: &Value) -> Option<Error> {
    match reply {
        Value::ServerError(e) if e.code() == "NOPERM" => {
            Some(refused(probe, e.details().unwrap_or_default()))
        }
        _ => None,
    }
}

/// The error of `probe` refused with `text` (Redis says whether the command or a key).
fn refused(probe: &Probe, text: &str) -> Error {
    match &probe.key {
        Some((key, pattern)) if text.contains("key") => Error::Permission {
            command: probe.command.to_string(),
            key: Some(key.clone()),
            rule: pattern.clone(),
        },
        _ => Error::Permission {
            command: probe.command.to_string(),
            key: None,
            rule: format!("+{}", probe.command),
        },
    }
}

/// Checks that the job's user may run everything the job runs, on the keys of its first
/// pipeline's topic `topic` and group `group` (the other pipelines' keys have the same
/// patterns). On a Redis Cluster the check is skipped: a cluster's users are set node by
/// node, and the engine's first commands show a missing permission.
///
/// # Errors
/// [`Error::Permission`] for the first command or key refused; [`Error::Connect`] or
/// [`Error::Redis`] when the check cannot run.
pub(crate) fn check_blocking(
    endpoint: &Endpoint,
    timeout: Duration,
    config: &RedisRuntimeConfig,
    (topic, group): (&str, &str),
) -> Result<(), Error> {
    if endpoint.is_cluster() {
        return Ok(());
    }
    let mut conn = crate::mq::blocking_connection(endpoint, timeout)?;
    let keys = ProbeKeys::of(config, topic, group);
    // EXEC cannot be queued; outside a transaction it fails without running anything
    // ("EXEC without MULTI") when it is allowed.
    let exec = probe("exec", &keys);
    if let Err(e) = exec.cmd.query::<Value>(&mut conn) {
        if e.code() == Some("NOPERM") {
            return Err(refused(&exec, e.detail().unwrap_or_default()));
        }
    }
    // MULTI alone first: were it refused, the probes after it would run for real.
    let multi = probe("multi", &keys);
    if let Err(e) = multi.cmd.query::<Value>(&mut conn) {
        return Err(match e.code() {
            Some("NOPERM") => refused(&multi, e.detail().unwrap_or_default()),
            _ => e.into(),
        });
    }
    let sent: Vec<Probe> = (JOB_COMMANDS.iter())
        // The connection logged in already; a transaction's ends are probed apart.
        .filter(|c| !matches!(**c, "auth" | "hello" | "exec" | "multi" | "discard"))
        .filter(|c| **c != "wait" || config.commit_replica_wait().is_some())
        .filter(|c| **c != "select" || endpoint.database() != 0)
        .map(|c| probe(c, &keys))
        .chain(keys.key_probes())
        .chain([probe("discard", &keys)])
        .collect();
    let mut pipe = redis::pipe();
    for p in &sent {
        pipe.add_command(p.cmd.clone());
    }
    // Sent as raw commands: a pipeline's query stops at the first error reply, and here
    // every reply is wanted.
    let packed = pipe.get_packed_pipeline();
    let replies = redis::ConnectionLike::req_packed_commands(&mut conn, &packed, 0, sent.len())?;
    (sent.iter().zip(&replies))
        .find_map(|(p, reply)| refusal(p, reply))
        .map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.lua` file under `dir`, as (path, text).
    fn lua_sources(dir: &std::path::Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(lua_sources(&path));
            } else if path.extension().is_some_and(|e| e == "lua") {
                out.push((
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                ));
            }
        }
        out
    }

    #[test]
    fn the_guide_lists_every_command_a_job_runs() {
        let guide = include_str!("../../../docs/security.md");
        for c in JOB_COMMANDS {
            assert!(
                guide.contains(&format!("+{c}")),
                "the ACL page misses `+{c}`"
            );
        }
    }

    #[test]
    fn every_command_the_scripts_call_is_listed() {
        // The engine's Lua scripts, by the commands they call.
        for (name, body) in lua_sources(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src"
        ))) {
            for call in body.split("redis.call('").skip(1) {
                let command = call
                    .split('\'')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                let sub = call
                    .split('\'')
                    .nth(2)
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                let named = format!("{command}|{sub}");
                assert!(
                    JOB_COMMANDS.contains(&command.as_str())
                        || JOB_COMMANDS.contains(&named.as_str()),
                    "{name} calls `{command}` (`{named}`), not in JOB_COMMANDS"
                );
            }
        }
    }
}
