//! `state get`: one key's keyed state of the Redis engine, as JSON.

use std::time::Duration;

use clap::Subcommand;
use serde_json::{json, Value};
use streaming::mq::redact_url;
use streaming::redis::RedisRuntimeConfig;

use crate::output::Output;
use crate::{Failure, Result, Target};

/// How long connecting and the read may take.
const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Subcommand)]
pub(crate) enum StateCommand {
    /// Prints the stored value of one key of one keyed state.
    ///
    /// A value state lives in the hash `{state-prefix}:{job}:{topic:partition}:{group}:{operator}:{state}`
    /// (`:s{i}` appended with `--shards` above 1), field = the key as JSON. A collection
    /// state (list, map, set) keeps each key's collection in its own Redis key, that hash
    /// (unsharded) + `:k:` + the key as JSON: a list, a hash (map key → value) or a set,
    /// each element as JSON; it prints as a JSON array (a map: `[key, value]` pairs).
    /// A window's `panes` print labelled, one line per open pane of the key.
    Get {
        /// The job's name (`RedisRuntimeConfig::job_name`).
        #[arg(long, default_value_t = RedisRuntimeConfig::default().job_name().to_owned())]
        job: String,
        /// The source topic.
        #[arg(long)]
        topic: String,
        /// The source partition (where the key's messages are); without it every
        /// partition of the topic is looked in and the output names the one that holds it.
        #[arg(long)]
        partition: Option<u32>,
        /// The consumer group the job reads with.
        #[arg(long)]
        group: String,
        /// The operator id, e.g. `orders.billing/2:process` (`jobs show` lists a running
        /// job's states with their operators).
        #[arg(long)]
        operator: String,
        /// The state's name, e.g. `count`.
        #[arg(long)]
        state: String,
        /// The key as JSON, e.g. `'"customer-7"'`, `42` or `'["a",1]'`.
        #[arg(long)]
        key: String,
        /// Prefix of keyed-state keys (`RedisRuntimeConfig::state_key_prefix`).
        #[arg(long, default_value_t = RedisRuntimeConfig::default().state_key_prefix().to_owned())]
        state_prefix: String,
        /// Hashes per state (`RedisRuntimeConfig::keyed_state_shard_count`).
        #[arg(long, default_value_t = 1)]
        shards: u32,
    },
}

/// Where `state get` looks: the state's address but the partition.
struct Wanted<'a> {
    topic: &'a str,
    group: &'a str,
    operator: &'a str,
    state: &'a str,
    /// The key as the hash fields the engine may have written for it.
    fields: Vec<String>,
    /// The configuration that names the hashes (job, prefix, shards) and the same unsharded
    /// (collections keep their key beside the unsharded hash).
    config: RedisRuntimeConfig,
    unsharded: RedisRuntimeConfig,
}

impl Wanted<'_> {
    /// The key's stored state in `partition` as (text, JSON document), or the hashes
    /// looked in.
    async fn find_in(
        &self,
        conn: &mut redis::aio::MultiplexedConnection,
        url: &str,
        partition: u32,
    ) -> Result<std::result::Result<(String, Value), Vec<String>>> {
        let (operator, state) = (self.operator, self.state);
        let at = (self.topic, partition, self.group);
        let mut tried = Vec::new();
        if state == crate::panes::PANES {
            // One field per pane, sharded by pane: every shard is scanned.
            let base = self.unsharded.keyed_state_hash(at, operator, state, "");
            let hashes: Vec<String> = match self.config.keyed_state_shard_count() {
                1 => vec![base],
                n => (0..n).map(|i| format!("{base}:s{i}")).collect(),
            };
            for field in &self.fields {
                if let Some((text, panes)) = crate::panes::read(conn, &hashes, field).await? {
                    return Ok(Ok((
                        text,
                        json!({ "partition": partition, "panes": panes }),
                    )));
                }
            }
            return Ok(Err(hashes));
        }
        for field in &self.fields {
            let base = self.unsharded.keyed_state_hash(at, operator, state, field);
            let collection = format!("{base}:k:{field}");
            if let Some(value) = read_collection(conn, url, &collection).await? {
                let json =
                    json!({ "partition": partition, "key": collection, "collection": value });
                return Ok(Ok((format!("{value:#}"), json)));
            }
            let hash = self.config.keyed_state_hash(at, operator, state, field);
            let stored: Option<String> =
                timed(redis::cmd("HGET").arg(&hash).arg(field).query_async(conn))
                    .await
                    .map_err(|e| {
                        Failure(format!("reading `{hash}` at `{}`: {e}", redact_url(url)))
                    })?;
            let Some(stored) = stored else {
                tried.push(hash);
                continue;
            };
            let value: Value = serde_json::from_str(&stored).map_err(|e| {
                Failure(format!(
                    "field `{field}` of `{hash}` is not JSON ({e}): {stored}"
                ))
            })?;
            let json =
                json!({ "partition": partition, "hash": hash, "field": field, "value": value });
            return Ok(Ok((format!("{value:#}"), json)));
        }
        Ok(Err(tried))
    }
}

pub(crate) async fn run(
    target: &Target,
    prefix: &str,
    cmd: &StateCommand,
    out: &Output,
) -> Result<()> {
    let StateCommand::Get {
        job,
        topic,
        partition,
        group,
        operator,
        state,
        key,
        state_prefix,
        shards,
    } = cmd;
    let at = StateAt {
        job,
        topic,
        group,
        operator,
        state,
        state_prefix,
        shards: *shards,
    };
    let (text, json) = look_up(target, prefix, &at, key, *partition).await?;
    out.print_line(&text, &json);
    Ok(())
}

/// Which keyed state a lookup reads, and how the job names its keys.
pub(crate) struct StateAt<'a> {
    pub(crate) job: &'a str,
    pub(crate) topic: &'a str,
    pub(crate) group: &'a str,
    pub(crate) operator: &'a str,
    pub(crate) state: &'a str,
    /// `RedisRuntimeConfig::state_key_prefix`.
    pub(crate) state_prefix: &'a str,
    /// `RedisRuntimeConfig::keyed_state_shard_count`.
    pub(crate) shards: u32,
}

/// The stored state of `key` (JSON text) as (pretty text, JSON document naming where it
/// was found), in `partition` or else in every partition of the topic.
///
/// # Errors
/// The key has no such state, or Redis failed.
pub(crate) async fn look_up(
    target: &Target,
    prefix: &str,
    at: &StateAt<'_>,
    key: &str,
    partition: Option<u32>,
) -> Result<(String, Value)> {
    let unsharded = RedisRuntimeConfig::builder()
        .job_name(at.job)
        .state_key_prefix(at.state_prefix);
    let wanted = Wanted {
        topic: at.topic,
        group: at.group,
        operator: at.operator,
        state: at.state,
        fields: key_fields(key)?,
        config: unsharded
            .clone()
            .keyed_state_shard_count(at.shards)
            .build()?,
        unsharded: unsharded.build()?,
    };
    let mut conn = connect(target, "state get").await?;
    // Without a partition, every partition of the topic is looked in (a key's state is
    // where its records were, which its key_by key alone does not tell).
    let partitions: Vec<u32> = match partition {
        Some(p) => vec![p],
        None => (0..crate::connect(target, prefix)
            .await?
            .partitions(at.topic)
            .await?)
            .collect(),
    };
    let mut tried = Vec::new();
    for &p in &partitions {
        match wanted.find_in(&mut conn, &target.url, p).await? {
            Ok(found) => return Ok(found),
            Err(hashes) => tried.extend(hashes),
        }
    }
    let looked = match partition {
        Some(_) => format!("`{}`", tried.join("`, `")),
        None => format!(
            "every partition of `{}` ({}), e.g. `{}`",
            at.topic,
            partitions.len(),
            tried.first().map_or("", String::as_str)
        ),
    };
    if at.state == crate::panes::PANES {
        return Err(Failure(format!(
            "key {key} has no open window pane in operator `{}` (a window that fired and was cleaned up leaves none; looked in {looked})",
            at.operator
        )));
    }
    Err(Failure(format!(
        "no state `{}` of operator `{}` for key {key} (looked in {looked})",
        at.state, at.operator
    )))
}

/// The collection stored at `key` as a JSON array (`None` when there is no such key).
async fn read_collection(
    conn: &mut redis::aio::MultiplexedConnection,
    url: &str,
    key: &str,
) -> Result<Option<Value>> {
    let fail = |e: String| Failure(format!("reading `{key}` at `{}`: {e}", redact_url(url)));
    let kind: String = timed(redis::cmd("TYPE").arg(key).query_async(conn))
        .await
        .map_err(fail)?;
    let parse = |text: &str| -> Result<Value> {
        serde_json::from_str(text)
            .map_err(|e| Failure(format!("an element of `{key}` is not JSON ({e}): {text}")))
    };
    let items: Vec<Value> = match kind.as_str() {
        "list" | "set" => {
            let cmd = if kind == "list" {
                redis::cmd("LRANGE").arg(key).arg(0).arg(-1).clone()
            } else {
                redis::cmd("SMEMBERS").arg(key).clone()
            };
            let mut raw: Vec<String> = timed(cmd.query_async(conn)).await.map_err(fail)?;
            if kind == "set" {
                raw.sort(); // a set has no order: print a stable one
            }
            raw.iter().map(|t| parse(t)).collect::<Result<_>>()?
        }
        "hash" => {
            let raw: Vec<(String, String)> =
                timed(redis::cmd("HGETALL").arg(key).query_async(conn))
                    .await
                    .map_err(fail)?;
            raw.iter()
                .map(|(k, v)| Ok(json!([parse(k)?, parse(v)?])))
                .collect::<Result<_>>()?
        }
        _ => return Ok(None),
    };
    Ok(Some(Value::Array(items)))
}

/// The hash fields the engine may have written for `key` (JSON text): serde_json's
/// compact form, and the text without blanks in the order written (a struct key's fields
/// keep their declaration order, which a parsed JSON object does not).
fn key_fields(key: &str) -> Result<Vec<String>> {
    let parsed: Value = serde_json::from_str(key).map_err(|e| {
        Failure(format!(
            "`--key` must be JSON, e.g. '\"customer-7\"' or 42: {e}"
        ))
    })?;
    let compact = parsed.to_string();
    let as_written = without_blanks(key);
    Ok(if as_written == compact {
        vec![compact]
    } else {
        vec![compact, as_written]
    })
}

/// `json` without the blanks between tokens (blanks inside strings stay).
fn without_blanks(json: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if !c.is_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

/// A plain connection to the one server `target` names, for `command` (named in the error
/// for a cluster URL).
pub(crate) async fn connect(
    target: &Target,
    command: &str,
) -> Result<redis::aio::MultiplexedConnection> {
    let url = target.url.as_str();
    let shown = redact_url(url);
    let fail =
        |e: &dyn std::fmt::Display| Failure(format!("cannot connect to Redis at `{shown}`: {e}"));
    if url.starts_with(streaming::mq::CLUSTER_SCHEME) {
        return Err(Failure(format!(
            "`{command}` reads from one Redis server, not a cluster (`{shown}`): pass the URL of the master that holds the partition's slot"
        )));
    }
    let client = if target.tls.is_set() {
        let mut info =
            redis::IntoConnectionInfo::into_connection_info(url).map_err(|e| fail(&e))?;
        match &mut info.addr {
            redis::ConnectionAddr::TcpTls { insecure, .. } => {
                *insecure = target.tls.insecure_skip_verify_for_tests;
            }
            _ => return Err(fail(&"the --tls-* options need a `rediss://` URL")),
        }
        redis::Client::build_with_tls(info, target.tls.certificates()?).map_err(|e| fail(&e))?
    } else {
        redis::Client::open(url).map_err(|e| fail(&e))?
    };
    timed(client.get_multiplexed_async_connection())
        .await
        .map_err(|e| fail(&e))
}

/// `f`, failing after [`TIMEOUT`].
async fn timed<T>(
    f: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> std::result::Result<T, String> {
    match tokio::time::timeout(TIMEOUT, f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_fields_are_the_compact_form_and_the_order_written() {
        assert_eq!(key_fields(" \"a b\" ").unwrap(), ["\"a b\""]);
        assert_eq!(key_fields("[ \"a\", 1 ]").unwrap(), ["[\"a\",1]"]);
        // serde_json sorts a parsed object's fields; a struct key keeps its own order.
        assert_eq!(
            key_fields("{\"b\": 1, \"a\": \"x y\"}").unwrap(),
            ["{\"a\":\"x y\",\"b\":1}", "{\"b\":1,\"a\":\"x y\"}"]
        );
        assert!(key_fields("customer-7").is_err());
    }

    mod hostile {
        //! `--key` as a user may type it, or any text: never a panic; a key that reads
        //! as JSON gives fields that all read back as that JSON, the compact form first.
        use super::*;
        use proptest::prelude::*;

        fn json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                "[ -~\u{e9}\u{1F600}]{0,6}".prop_map(Value::from),
            ];
            leaf.prop_recursive(3, 12, 4, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                    proptest::collection::vec(("[a-z \"\\\\]{0,4}", inner), 0..4)
                        .prop_map(|kv| Value::Object(kv.into_iter().collect())),
                ]
            })
        }

        /// `value` as text with blanks between its tokens.
        fn spaced(value: &Value, blank: &str) -> String {
            match value {
                Value::Array(items) => {
                    let inner: Vec<String> = items.iter().map(|v| spaced(v, blank)).collect();
                    format!(
                        "[{blank}{}{blank}]",
                        inner.join(&format!("{blank},{blank}"))
                    )
                }
                Value::Object(map) => {
                    let inner: Vec<String> = map
                        .iter()
                        .map(|(k, v)| {
                            format!(
                                "{}{blank}:{blank}{}",
                                Value::from(k.as_str()),
                                spaced(v, blank)
                            )
                        })
                        .collect();
                    format!("{{{blank}{}{blank}}}", inner.join(","))
                }
                other => other.to_string(),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn a_json_key_gives_fields_that_read_back_as_it(
                key in json(),
                blank in prop::sample::select(vec!["", " ", "\n\t "]),
            ) {
                let text = spaced(&key, blank);
                let fields = key_fields(&text).unwrap();
                prop_assert_eq!(&fields[0], &key.to_string());
                prop_assert!(fields.len() <= 2);
                for f in &fields {
                    prop_assert_eq!(&serde_json::from_str::<Value>(f).unwrap(), &key, "{}", f);
                }
            }

            #[test]
            fn any_text_is_refused_or_gives_json_fields(text in "\\PC{0,40}") {
                if let Ok(fields) = key_fields(&text) {
                    let key: Value = serde_json::from_str(&text).unwrap();
                    for f in &fields {
                        prop_assert_eq!(&serde_json::from_str::<Value>(f).unwrap(), &key, "{}", f);
                    }
                }
            }
        }
    }
}
