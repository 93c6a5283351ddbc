//! `checkpoints list`: a Redis engine job's stored checkpoints.

use clap::Subcommand;
use serde_json::json;
use streaming::mq::MqOptions;
use streaming::redis::{Checkpoint, CheckpointStatus, RedisEnv, RedisRuntimeConfig};

use crate::output::{Output, Table};
use crate::{Failure, Result, Target};

#[derive(Debug, Subcommand)]
pub(crate) enum CheckpointsCommand {
    /// Lists a job's checkpoints by id: status (only `complete` ones can be restored
    /// with `RedisEnv::restore_from_checkpoint`), when, by which instance and leader
    /// term, and the pipelines (topic/group × partitions) they hold.
    List {
        /// The job's name (`RedisRuntimeConfig::job_name`).
        #[arg(long, default_value_t = RedisRuntimeConfig::default().job_name().to_owned())]
        job: String,
        /// Prefix of checkpoint keys (`RedisRuntimeConfig::checkpoint_key_prefix`).
        #[arg(long, default_value_t = RedisRuntimeConfig::default().checkpoint_key_prefix().to_owned())]
        checkpoint_prefix: String,
    },
}

/// Job `job`'s checkpoints stored under `checkpoint_prefix`, by id.
///
/// # Errors
/// Reading them failed (the URL redacted in the message).
pub(crate) async fn list(
    target: &Target,
    job: &str,
    checkpoint_prefix: &str,
) -> Result<Vec<Checkpoint>> {
    let url = target.url.as_str();
    let mq = MqOptions::builder().tls(target.tls.clone()).build()?;
    let config = RedisRuntimeConfig::builder()
        .job_name(job)
        .checkpoint_key_prefix(checkpoint_prefix)
        .mq_options(mq)
        .build()?;
    let env = RedisEnv::try_with_config(url, config)?;
    env.checkpoints().await.map_err(|e| {
        Failure(format!(
            "reading checkpoints at `{}`: {e}",
            streaming::mq::redact_url(url)
        ))
    })
}

/// A checkpoint's status as printed.
pub(crate) fn status_text(status: &CheckpointStatus) -> &'static str {
    match status {
        CheckpointStatus::Pending => "pending",
        CheckpointStatus::Complete => "complete",
        CheckpointStatus::Failed => "failed",
        CheckpointStatus::Deleting => "deleting",
    }
}

/// How long checkpoint `c` took, e.g. `12 ms` (`-` while it runs).
pub(crate) fn took_text(c: &Checkpoint) -> String {
    c.finished_at_ms.map_or("-".into(), |f| {
        format!("{} ms", f.saturating_sub(c.started_at_ms))
    })
}

pub(crate) async fn run(target: &Target, cmd: &CheckpointsCommand, out: &Output) -> Result<()> {
    let CheckpointsCommand::List {
        job,
        checkpoint_prefix,
    } = cmd;
    let list = list(target, job, checkpoint_prefix).await?;
    let mut table = Table::new(&[
        "id",
        "status",
        "age",
        "took",
        "instance",
        "token",
        "pipelines",
        "failure",
    ]);
    let now = crate::jobs::now_ms();
    for c in &list {
        let status = status_text(&c.status);
        let took = took_text(c);
        let pipelines: Vec<String> = (c.pipelines.iter())
            .map(|p| format!("{}/{}×{}", p.topic, p.group, p.partitions))
            .collect();
        table.row(vec![
            c.id.to_string(),
            status.into(),
            crate::jobs::age(c.started_at_ms, now),
            took,
            c.instance.clone(),
            c.fencing_token.to_string(),
            pipelines.join(" "),
            c.failure.clone().unwrap_or_default(),
        ]);
    }
    if list.is_empty() && !out.json {
        crate::output::write_out(&format!("no checkpoints of job `{job}` under `{checkpoint_prefix}` (check --job and --checkpoint-prefix)\n"));
        return Ok(());
    }
    out.print(&table, &json!(list));
    Ok(())
}
