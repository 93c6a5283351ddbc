//! Starting the job of a [`RedisEnv`]: the checks before anything runs, the restore of a
//! checkpoint asked for, and the subtasks that run the registered pipelines.

use super::RedisEnv;
use crate::redis::job::{JobClient, JobShared};
use crate::redis::partition::context::PipelineSpec;
use crate::Error;
use std::sync::Arc;

impl RedisEnv {
    /// Starts every registered pipeline (see [`blocking_start`](Self::blocking_start) for
    /// what starting does) without blocking the caller's thread: the server checks run on
    /// a thread of their own and the future resolves when they are done. Works on any
    /// async runtime.
    ///
    /// # Errors
    /// As [`blocking_start`](Self::blocking_start).
    pub async fn start(&self) -> Result<JobClient, Error> {
        let env = self.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("streaming-start".into())
            .spawn(move || {
                let _ = tx.send(env.blocking_start());
            })
            .map_err(|e| Error::Engine {
                op: "start",
                reason: format!("cannot spawn the start thread: {e}"),
            })?;
        rx.await.unwrap_or_else(|_| {
            Err(Error::Engine {
                op: "start",
                reason: "the start thread ended without an answer".into(),
            })
        })
    }

    /// Starts every registered pipeline: per pipeline `pipeline_parallelism` subtasks, each
    /// a thread owning its share of the partitions (shared with the job's other processes;
    /// see the [`redis`](crate::redis) module docs). Blocks the calling thread while it checks the
    /// server; [`start`](Self::start) is its `async` twin.
    ///
    /// It first proves the server (a blocking `PING` and version check, each wait bounded
    /// by [`MqOptions::response_timeout`](crate::mq::MqOptions::response_timeout)), so an
    /// unreachable or unusable Redis fails here instead of starting a job that cannot run.
    /// After that it returns at once. From then on the job never gives up on Redis while
    /// it runs: a subtask that cannot connect, and a partition that cannot be taken or
    /// committed, retry with a bounded, jittered backoff (at most 2 s between attempts),
    /// each failure — naming the address — in [`JobClient::diagnostics`] (the job's
    /// errors and the partition's `last_error`). An unknown topic ends the subtask.
    ///
    /// # Errors
    /// [`Error::Engine`] when called twice or without a registered pipeline;
    /// [`Error::Connect`] naming the address when Redis cannot be reached, does not answer
    /// in time, refuses the password, is not a Redis server or is older than
    /// [`MIN_REDIS_VERSION`](crate::mq::MIN_REDIS_VERSION);
    /// [`Error::InvalidConfig`] naming `commit_replica_wait` when it is set and a master
    /// (the server, or a master of the cluster) has fewer connected replicas than it asks;
    /// [`Error::Permission`] when the URL's user (an ACL user) may not run a command the
    /// job runs or use one of its keys, naming the rule to add (checked on one server; on a
    /// Redis Cluster the first command refused fails instead);
    /// [`Error::InvalidConfig`] for a pipeline of several topics (`union`, `connect`)
    /// whose topics have different partition counts or do not exist (field `inputs`,
    /// naming each topic and its count).
    pub fn blocking_start(&self) -> Result<JobClient, Error> {
        let err = |reason: &str| Error::Engine {
            op: "start",
            reason: reason.to_string(),
        };
        let config = &self.inner.config;
        let pipelines = {
            let mut st = self.inner.state.lock().map_err(|_| err("poisoned"))?;
            if st.started {
                return Err(err("the job of this environment was already started"));
            }
            if let Some(e) = st.tls_refused.take() {
                return Err(e);
            }
            if st.pipelines.is_empty() {
                return Err(err(
                    "no pipeline registered: build one from from_mq_topic and end it with a sink first",
                ));
            }
            st.started = true;
            std::mem::take(&mut st.pipelines)
        };
        let first = pipelines.first().map(|d| (d.topic(), d.group()));
        let proved = (self.check_server(first))
            .and_then(|()| super::co_partition::check_at_start(&self.inner, &pipelines));
        if let Err(e) = proved {
            crate::redis::metrics::job::start_failed(config.job_name());
            // Not started: the pipelines stay registered for another attempt.
            if let Ok(mut st) = self.inner.state.lock() {
                st.started = false;
                st.pipelines = pipelines;
            }
            return Err(e);
        }
        let names: Vec<(String, String)> = (pipelines.iter())
            .map(|d| (d.topic().to_string(), d.group().to_string()))
            .collect();
        let other_inputs = super::co_partition::other_inputs(&pipelines);
        let restored = self.restore_if_asked(&names, &other_inputs);
        if let Err(e) = restored {
            if let Ok(mut st) = self.inner.state.lock() {
                st.started = false;
                st.pipelines = pipelines;
            }
            return Err(e);
        }
        let mut shared = JobShared::new(config, self.inner.endpoint.clone(), names);
        shared.other_inputs = other_inputs;
        shared.broadcast_inputs = (pipelines.iter())
            .flat_map(|d| d.inputs())
            .filter(|i| i.broadcast)
            .map(|i| (i.topic, i.group))
            .collect();
        let job = Arc::new(shared);
        if let Ok(Some(id)) = restored {
            job.checkpoints.saw_complete(id);
        }
        crate::redis::metrics::job::started(config.job_name());
        let forwards: Vec<(String, Arc<str>)> = (pipelines.iter())
            .filter_map(|d| Some((d.topic().to_string(), d.forwarded_topic()?)))
            .collect();
        for def in pipelines {
            let spec = PipelineSpec {
                endpoint: self.inner.endpoint.clone(),
                config: Arc::clone(&self.inner.config),
                topic: def.topic().to_string(),
                group: def.group().to_string(),
                options: def.options(),
                inputs: def.inputs(),
            };
            let name = config.job_name();
            crate::redis::metrics::job::pipeline(name, &spec.topic, &spec.group, true);
            def.start(spec, Arc::clone(&job));
        }
        crate::redis::job::start_registry(&job);
        crate::redis::job::checkpoint::start_scheduler(&job);
        crate::redis::job::start_job_forwarders(&job, config.mq_options().clone(), forwards);
        Ok(JobClient::new(job))
    }

    /// The checks before a start: the server is a usable Redis, the URL's user may run
    /// everything the job runs (on the keys of pipeline `first`, `(topic, group)`), and
    /// the replicas `commit_replica_wait` asks for are there.
    fn check_server(&self, first: Option<(&str, &str)>) -> Result<(), Error> {
        let (config, endpoint) = (&self.inner.config, &self.inner.endpoint);
        let timeout = config.mq_options().response_timeout;
        crate::mq::prove_blocking(endpoint, timeout)?;
        if let Some(first) = first {
            super::permissions::check_blocking(endpoint, timeout, config, first)?;
        }
        match config.commit_replica_wait() {
            Some(w) => crate::redis::partition::commit::replica_wait::check_replicas_blocking(
                endpoint, &w, timeout,
            ),
            None => Ok(()),
        }
    }

    /// Restores the job to checkpoint `id` when [`blocking_start`](Self::blocking_start)
    /// starts it, before any partition is read: every partition of every registered
    /// pipeline gets the checkpoint's keyed state, window panes, timers, watermark and
    /// offset back, and the job reads every entry after that offset again (its outputs
    /// are produced again: sinks see them twice unless they deduplicate; the same
    /// outputs, though windows of different keys that fire at the same watermark may
    /// come in another order than the first time). The consumer
    /// groups are moved, not destroyed. A restore works at any `pipeline_parallelism`
    /// (parts are per partition). Dead letters and scheduled retries made after the
    /// checkpoint stay: a record may go to retry or dead letter again. Overrides
    /// [`restore_from_latest_checkpoint`](crate::redis::RedisRuntimeConfig::restore_from_latest_checkpoint).
    ///
    /// A restore is all-or-nothing up to its first write: it checks every partition of
    /// every pipeline and takes every partition's lease before it changes any, so a
    /// restore refused (see Errors) changes no partition and holds no lease after it.
    /// Once it has started changing partitions, a restore interrupted (the process killed,
    /// or a partition's lease taken by a process of the job started meanwhile) leaves the
    /// partitions before it restored and the others not (logged): start again with the
    /// same restore.
    ///
    /// # Errors
    /// [`Error::Engine`] once the job was started. `blocking_start` then fails (starting
    /// nothing, and restoring no partition) with [`Error::Engine`] when checkpoint `id` is
    /// not complete or not stored, lacks a registered pipeline or has another partition
    /// count, another process of the job is running (its registry record is live, or it
    /// holds a partition's lease past `lease_ttl` + 1 s: naming the first such
    /// partition), or stream entries after a partition's offset were trimmed (naming the
    /// partition).
    pub fn restore_from_checkpoint(&self, id: u64) -> Result<(), Error> {
        let mut st = self.inner.state.lock().map_err(|_| Error::Engine {
            op: "restore_from_checkpoint",
            reason: "poisoned".into(),
        })?;
        if st.started {
            return Err(Error::Engine {
                op: "restore_from_checkpoint",
                reason: "the job was already started: call it before blocking_start".into(),
            });
        }
        st.restore = Some(id);
        Ok(())
    }

    /// Every checkpoint of this environment's job (its `job_name` and
    /// `checkpoint_key_prefix`) stored in Redis, by id: what
    /// [`restore_from_checkpoint`](Self::restore_from_checkpoint) can go back to (the
    /// complete ones). Needs no running job.
    ///
    /// # Errors
    /// [`Error::Connect`] / [`Error::Redis`] when Redis fails.
    pub async fn checkpoints(&self) -> Result<Vec<crate::redis::Checkpoint>, Error> {
        let config = &self.inner.config;
        let timeout = config.mq_options().response_timeout;
        let mut conn =
            crate::mq::connect(&self.inner.endpoint, timeout, std::time::Duration::ZERO).await?;
        let keys = crate::redis::job::checkpoint::CheckpointKeys::new(
            config.checkpoint_key_prefix(),
            config.job_name(),
        );
        crate::redis::job::checkpoint::list(&mut conn, &keys).await
    }

    /// The restore asked for, if any, before the job starts.
    fn restore_if_asked(
        &self,
        pipelines: &[(String, String)],
        inputs: &crate::redis::job::checkpoint::OtherInputs,
    ) -> Result<Option<u64>, Error> {
        use crate::redis::job::checkpoint::{restore_at_start, RestoreRequest};
        let config = &self.inner.config;
        let asked = self.inner.state.lock().ok().and_then(|st| st.restore);
        let request = match asked {
            Some(id) => RestoreRequest::Id(id),
            None if config.restore_from_latest_checkpoint() => RestoreRequest::Latest,
            None => return Ok(None),
        };
        restore_at_start(&self.inner.endpoint, config, pipelines, inputs, request)
    }
}
