//! The console's pages: jobs and their partitions, topics, dead letters, keyed state.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use streaming::mq::DeadLetter;
use streaming::redis::registered_instances;

use super::html::{or_dash, page};
use super::Console;
use crate::jobs::{age, heartbeat_text, late, now_ms, time_text, watermark_text};
use crate::Failure;

/// The page of a failed read: what failed, with `status`.
pub(super) fn failed(c: &Console, title: &str, status: StatusCode, e: Failure) -> Response {
    let body = html! { p.error id="failure" { (e.0) } };
    (status, page(c, title, None, body)).into_response()
}

/// Running job instances and every partition they own.
pub(super) async fn jobs(State(c): State<Arc<Console>>) -> Response {
    let instances = match registered_instances(&c.mq, None).await {
        Ok(i) => i,
        Err(e) => return failed(&c, "Jobs", StatusCode::BAD_GATEWAY, e.into()),
    };
    let now = now_ms();
    let body = html! {
        @if instances.is_empty() { p #no-jobs { "No job instance is running (the job registry is empty)." } }
        table #instances {
            tr { th { "Job" } th { "Instance" } th { "Parallelism" } th { "Paused" } th { "Heartbeat" } th { "Partitions" } th { "Stalled" } }
            @for i in &instances {
                tr class=[late(i, now).then_some("bad")] {
                    td { (i.job) " " a.muted href=(format!("/checkpoints/{}", i.job)) { "checkpoints" } }
                    td { (i.instance) } td.num { (i.parallelism) } td { (i.paused) }
                    td { (heartbeat_text(i, now)) " ago" } td.num { (i.partitions.len()) }
                    td.num { (i.partitions.iter().filter(|p| p.stalled).count()) }
                }
            }
        }
        h2 { "Partitions" }
        table #partitions {
            tr { th { "Job" } th { "Instance" } th { "Topic" } th { "Group" } th { "Partition" } th { "Offset" } th { "Lag" } th { "Watermark" } th { "Last commit" } th { "Stalled" } th { "Last error" } }
            @for i in &instances {
                @for p in &i.partitions {
                    tr data-partition=(format!("{}/{}/{}", p.topic, p.group, p.partition)) class=[(p.stalled || p.last_error.is_some()).then_some("bad")] {
                        td { (i.job) } td { (i.instance) }
                        td { a href=(format!("/topics/{}", p.topic)) { (p.topic) } }
                        td { (p.group) } td.num { (p.partition) }
                        td { (or_dash(p.offset.clone())) }
                        td.num.lag { (or_dash(p.lag.map(|l| l.to_string()))) }
                        td { (or_dash(p.watermark.map(watermark_text))) }
                        td { (or_dash(p.last_commit_at_ms.map(|t| format!("{} ago", age(t, now))))) }
                        td { (p.stalled) }
                        td { (or_dash(p.last_error.clone())) }
                    }
                }
            }
        }
        (inputs_table(&instances))
        (states_table(&instances))
    };
    page(&c, "Jobs", Some(c.refresh), body)
}

/// The other inputs of pipelines that read several topics (nothing when none does).
fn inputs_table(instances: &[streaming::redis::RegisteredInstance]) -> Markup {
    let mut rows = std::collections::BTreeSet::new();
    for i in instances {
        for p in &i.pipelines {
            for input in &p.inputs {
                rows.insert((&i.job, &p.topic, &p.group, &input.topic, &input.group));
            }
        }
    }
    html! {
        @if !rows.is_empty() {
            h2 { "Several inputs" }
            table #inputs {
                tr { th { "Job" } th { "Topic" } th { "Group" } th { "Also reads" } th { "As group" } }
                @for (job, topic, group, input, input_group) in rows {
                    tr { td { (job) } td { (topic) } td { (group) } td { (input) } td { (input_group) } }
                }
            }
        }
    }
}

/// The keyed states the instances' pipelines opened, each linking to its lookup.
fn states_table(instances: &[streaming::redis::RegisteredInstance]) -> Markup {
    let mut rows = std::collections::BTreeSet::new();
    for i in instances {
        for p in &i.pipelines {
            for st in &p.states {
                rows.insert((
                    &i.job,
                    &p.topic,
                    &p.group,
                    &st.operator,
                    &st.state,
                    &st.schema,
                ));
            }
        }
    }
    html! {
        h2 { "Keyed states" }
        table #states {
            tr { th { "Job" } th { "Topic" } th { "Group" } th { "Operator" } th { "State" } th { "Type" } }
            @for (job, topic, group, operator, state, schema) in rows {
                tr {
                    td { (job) } td { (topic) } td { (group) }
                    td { a href=(state_link(job, topic, group, operator, state)) { (operator) } }
                    td { (state) } td { (schema) }
                }
            }
        }
    }
}

/// The state page's address for one state (the key still to fill in).
fn state_link(job: &str, topic: &str, group: &str, operator: &str, state: &str) -> String {
    let q = [
        ("job", job),
        ("topic", topic),
        ("group", group),
        ("operator", operator),
        ("state", state),
    ];
    let encoded: Vec<String> = q
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect();
    format!("/state?{}", encoded.join("&"))
}

/// Every topic with its length, dead letters and each group's lag.
pub(super) async fn topics(State(c): State<Arc<Console>>) -> Response {
    let names = match c.mq.list_topics().await {
        Ok(n) => n,
        Err(e) => return failed(&c, "Topics", StatusCode::BAD_GATEWAY, e.into()),
    };
    let mut rows = Vec::new();
    for name in names {
        match c.mq.describe_topic(&name).await {
            Ok(info) => rows.push(info),
            Err(e) => return failed(&c, "Topics", StatusCode::BAD_GATEWAY, e.into()),
        }
    }
    let body = html! {
        table #topics {
            tr { th { "Topic" } th { "Partitions" } th { "Entries" } th { "Retries due" } th { "Dead letters" } th { "Lag by group" } th { "Recent entries/s and lag" } }
            @for t in &rows {
                @let parts = &t.partition_info;
                tr {
                    td { a href=(format!("/topics/{}", t.name)) { (t.name) } }
                    td.num { (t.partitions) }
                    td.num { (parts.iter().map(|p| p.length).sum::<u64>()) }
                    td.num { (parts.iter().map(|p| p.retry_scheduled).sum::<u64>()) }
                    td.num { a href=(format!("/dlq/{}", t.name)) { (parts.iter().map(|p| p.dead_letters).sum::<u64>()) } }
                    td { (group_lags(parts)) }
                    td.trend { (c.history.sparklines(&t.name)) }
                }
            }
        }
    };
    page(&c, "Topics", Some(c.refresh), body)
}

/// `group: lag` for each group of a topic's partitions (summed; `?` when a partition's
/// lag is unknown).
fn group_lags(parts: &[streaming::mq::PartitionInfo]) -> String {
    let mut lags: std::collections::BTreeMap<&str, Option<u64>> = Default::default();
    for g in parts.iter().flat_map(|p| &p.groups) {
        let sum = lags.entry(&g.name).or_insert(Some(0));
        *sum = sum.zip(g.lag).map(|(a, b)| a + b);
    }
    let shown: Vec<String> = (lags.iter())
        .map(|(g, l)| format!("{g}: {}", l.map_or("?".to_owned(), |l| l.to_string())))
        .collect();
    shown.join(", ")
}

/// One topic per partition and consumer group.
pub(super) async fn topic(State(c): State<Arc<Console>>, Path(topic): Path<String>) -> Response {
    let info = match c.mq.describe_topic(&topic).await {
        Ok(i) => i,
        Err(e) => return failed(&c, &topic, StatusCode::NOT_FOUND, e.into()),
    };
    let body = html! {
        p { a href=(format!("/dlq/{topic}")) { "Dead letters" } }
        table #partitions {
            tr { th { "Partition" } th { "Entries" } th { "Retries due" } th { "Dead letters" } th { "Group" } th { "Consumers" } th { "Pending" } th { "Lag" } th { "Last delivered" } th { "Commit frontier" } }
            @for p in &info.partition_info {
                @if p.groups.is_empty() {
                    tr { td.num { (p.partition) } td.num { (p.length) } td.num { (p.retry_scheduled) } td.num { (p.dead_letters) } td colspan="6" { span.muted { "no consumer group" } } }
                }
                @for g in &p.groups {
                    tr {
                        td.num { (p.partition) } td.num { (p.length) } td.num { (p.retry_scheduled) } td.num { (p.dead_letters) }
                        td { (g.name) } td.num { (g.consumers) } td.num { (g.pending) }
                        td.num { (or_dash(g.lag.map(|l| l.to_string()))) }
                        td { (g.last_delivered_id) } td { (or_dash(g.frontier.clone())) }
                    }
                }
            }
        }
    };
    page(&c, &format!("Topic {topic}"), Some(c.refresh), body)
}

#[derive(Deserialize, Default)]
pub(super) struct DlqFilter {
    /// As the form sends it: empty for any partition.
    partition: Option<String>,
    group: Option<String>,
    error_type: Option<String>,
}

/// An empty form field read as "any".
fn given(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().to_owned())
}

/// A topic's dead letters (at most 200), filtered.
pub(super) async fn dead_letters(
    State(c): State<Arc<Console>>,
    Path(topic): Path<String>,
    Query(f): Query<DlqFilter>,
) -> Response {
    let title = format!("Dead letters of {topic}");
    let partition = match given(&f.partition).map(|p| p.parse::<u32>()) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(_)) => {
            let e =
                Failure("the partition must be a number (or empty for every partition)".to_owned());
            return failed(&c, &title, StatusCode::BAD_REQUEST, e);
        }
    };
    let filter = crate::dlq::Filter::new(partition, given(&f.group), given(&f.error_type));
    let letters = match crate::dlq::scan(&c.mq, &topic, &filter, 200).await {
        Ok(l) => l,
        Err(e) => return failed(&c, &title, StatusCode::NOT_FOUND, e),
    };
    let body = html! {
        form method="get" {
            label { "Partition " input type="number" name="partition" min="0" value=[partition]; }
            " " label { "Group " input name="group" value=[given(&f.group)]; }
            " " label { "Error type " input name="error_type" value=[given(&f.error_type)]; }
            " " button type="submit" { "Filter" }
        }
        p.muted { (letters.len()) " shown (at most 200)" }
        @if !c.read_only && !letters.is_empty() {
            form #purge method="post" action=(format!("/dlq/{topic}/purge")) {
                label { input type="checkbox" name="confirm" value="yes" id="confirm-purge"; " Delete every dead letter of " (topic) " for good (all partitions, not only those shown)" }
                " " button type="submit" id="purge-button" { "Purge" }
            }
        }
        table #dead-letters {
            tr { th { "Partition" } th { "Dead-letter id" } th { "Failed" } th { "Group" } th { "Error type" } th { "Error" } th { "Attempts" } th { "Key" } th { "Payload" } }
            @for d in &letters {
                tr {
                    td.num { (d.partition) }
                    td { a href=(format!("/dlq/{topic}/{}/{}", d.partition, d.dlq_id)) { (d.dlq_id) } }
                    td { (time_text(d.failed_ms)) } td { (d.group) } td { (d.error_type) } td { (d.error) }
                    td.num { (d.attempts) } td { (or_dash(d.key.clone())) }
                    td { (shortened(&String::from_utf8_lossy(&d.payload), 60)) }
                }
            }
        }
    };
    page(&c, &title, None, body)
}

/// `s` cut to `max` characters (an ellipsis marks the cut).
fn shortened(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// One dead letter: what failed, its message, and (unless read-only) the forms that
/// replay it — with its payload as edited — or delete it.
pub(super) async fn dead_letter(
    State(c): State<Arc<Console>>,
    Path((topic, partition, id)): Path<(String, u32, String)>,
) -> Response {
    let title = format!("Dead letter {id}");
    let d = match c.mq.dead_letter(&topic, partition, &id).await {
        Ok(Some(d)) => d,
        Ok(None) => {
            let e = Failure(format!("topic `{topic}` has no dead letter `{id}` in partition {partition} (replayed or deleted?)"));
            return failed(&c, &title, StatusCode::NOT_FOUND, e);
        }
        Err(e) => {
            return failed(
                &c,
                &title,
                StatusCode::BAD_REQUEST,
                crate::dlq::bad_id(&id, e),
            )
        }
    };
    let body = html! {
        (dead_letter_facts(&d))
        @if c.read_only {
            p.muted { "This console is read-only." }
        } @else {
            (dead_letter_forms(&topic, &d))
        }
        p { a href=(format!("/dlq/{topic}")) { "All dead letters of " (topic) } }
    };
    page(&c, &title, None, body)
}

fn dead_letter_facts(d: &DeadLetter) -> Markup {
    html! {
        table #facts {
            tr { th { "Topic / partition" } td { (d.topic) " / " (d.partition) } }
            tr { th { "Message id (original)" } td { (d.id) " (" (d.original_id) ")" } }
            tr { th { "Failed" } td { (time_text(d.failed_ms)) " in group " (d.group) " after " (d.attempts) @if d.attempts == 1 { " attempt" } @else { " attempts" } } }
            tr { th { "Error" } td { (d.error_type) ": " (d.error) } }
            tr { th { "Key" } td { (or_dash(d.key.clone())) } }
            tr { th { "Event time" } td { (or_dash(d.timestamp_ms.map(time_text))) } }
            tr { th { "Headers" } td { @for (k, v) in &d.headers { code { (k) "=" (v) } " " } } }
        }
    }
}

fn dead_letter_forms(topic: &str, d: &DeadLetter) -> Markup {
    let at = format!("/dlq/{topic}/{}/{}", d.partition, d.dlq_id);
    html! {
        @match std::str::from_utf8(&d.payload) {
            Ok(text) => {
                form #replay method="post" action=(format!("{at}/replay")) {
                    p { label for="payload" { "Payload (edit it to replay a corrected message)" } }
                    // A newline right after the start tag is dropped by the HTML parser: this
                    // one goes, the payload's own first character stays.
                    textarea #payload name="payload" { "\n" (text) }
                    p {
                        label { input type="checkbox" name="confirm" value="yes" id="confirm-replay"; " I want to replay this message" }
                        " " button type="submit" id="replay-button" { "Replay" }
                    }
                }
            }
            Err(_) => {
                p { "The payload is not UTF-8 text (" (d.payload.len()) " bytes): it replays as it is." }
                form #replay method="post" action=(format!("{at}/replay")) {
                    label { input type="checkbox" name="confirm" value="yes" id="confirm-replay"; " I want to replay this message" }
                    " " button type="submit" id="replay-button" { "Replay" }
                }
            }
        }
        form #delete method="post" action=(format!("{at}/delete")) {
            label { input type="checkbox" name="confirm" value="yes" id="confirm-delete"; " Delete it for good" }
            " " button type="submit" id="delete-button" { "Delete" }
        }
    }
}

#[derive(Deserialize, Default)]
pub(super) struct StateQuery {
    job: Option<String>,
    topic: Option<String>,
    group: Option<String>,
    operator: Option<String>,
    state: Option<String>,
    key: Option<String>,
}

/// One key's keyed state: chosen from the states running jobs registered.
pub(super) async fn state(State(c): State<Arc<Console>>, Query(q): Query<StateQuery>) -> Response {
    let field = |v: &Option<String>| given(v).unwrap_or_default();
    let (job, topic, group) = (field(&q.job), field(&q.topic), field(&q.group));
    let (operator, state, key) = (field(&q.operator), field(&q.state), field(&q.key));
    let form = html! {
        form #lookup method="get" {
            @for (name, value) in [("job", &job), ("topic", &topic), ("group", &group), ("operator", &operator), ("state", &state)] {
                label { (name) " " input name=(name) id=(name) value=(value); } " "
            }
            label { "key (JSON) " input name="key" id="key" value=(key) placeholder="\"customer-7\""; }
            " " button type="submit" id="look-up" { "Look up" }
        }
        p.muted { "Pick a state from the Keyed states table of the Jobs page to fill in all but the key." }
    };
    if [&job, &topic, &group, &operator, &state, &key]
        .iter()
        .any(|v| v.is_empty())
    {
        return page(&c, "Keyed state", None, form);
    }
    let keys = JobKeys::of(&c, &job).await;
    let at = crate::state::StateAt {
        job: &job,
        topic: &topic,
        group: &group,
        operator: &operator,
        state: &state,
        state_prefix: &keys.state_prefix,
        shards: keys.shards,
    };
    let found = crate::state::look_up(&c.target, &c.prefix, &at, &key, None).await;
    let body = html! {
        (form)
        @match found {
            Ok((text, json)) => {
                p { "Partition " (json["partition"]) }
                pre #value { (text) }
            }
            Err(e) => p.error id="failure" { (e.0) }
        }
    };
    page(&c, "Keyed state", None, body)
}

/// A job's checkpoints (under the prefix its running instance registered, else the
/// default `checkpoint_key_prefix`).
pub(super) async fn checkpoints(
    State(c): State<Arc<Console>>,
    Path(job): Path<String>,
) -> Response {
    let title = format!("Checkpoints of {job}");
    let keys = JobKeys::of(&c, &job).await;
    let list = match crate::checkpoints::list(&c.target, &job, &keys.checkpoint_prefix).await {
        Ok(l) => l,
        Err(e) => return failed(&c, &title, StatusCode::BAD_GATEWAY, e),
    };
    let now = now_ms();
    let body = html! {
        @if list.is_empty() { p #no-checkpoints { "No checkpoint of job " (job) " is stored." } }
        table #checkpoints {
            tr { th { "Id" } th { "Status" } th { "Started" } th { "Took" } th { "Instance" } th { "Leader token" } th { "Pipelines" } th { "Failure" } }
            @for ck in list.iter().rev() {
                tr class=[(ck.failure.is_some()).then_some("bad")] {
                    td.num { (ck.id) } td.status { (crate::checkpoints::status_text(&ck.status)) }
                    td { (age(ck.started_at_ms, now)) " ago" } td { (crate::checkpoints::took_text(ck)) }
                    td { (ck.instance) } td.num { (ck.fencing_token) }
                    td { @for p in &ck.pipelines { (p.topic) "/" (p.group) "×" (p.partitions) " " } }
                    td { (or_dash(ck.failure.clone())) }
                }
            }
        }
    };
    page(&c, &title, Some(c.refresh), body)
}

/// How job `job` names its state and checkpoint keys: as a running instance registered
/// them, else the defaults.
struct JobKeys {
    state_prefix: String,
    shards: u32,
    checkpoint_prefix: String,
}

impl JobKeys {
    async fn of(c: &Console, job: &str) -> JobKeys {
        let defaults = streaming::redis::RedisRuntimeConfig::default();
        let mut keys = JobKeys {
            state_prefix: defaults.state_key_prefix().to_owned(),
            shards: defaults.keyed_state_shard_count(),
            checkpoint_prefix: defaults.checkpoint_key_prefix().to_owned(),
        };
        let instances = registered_instances(&c.mq, Some(job))
            .await
            .unwrap_or_default();
        for i in &instances {
            if let Some(s) = &i.state_keys {
                (keys.state_prefix, keys.shards) = (s.prefix.clone(), s.shards);
            }
            if let Some(p) = &i.checkpoint_key_prefix {
                keys.checkpoint_prefix = p.clone();
            }
        }
        keys
    }
}
