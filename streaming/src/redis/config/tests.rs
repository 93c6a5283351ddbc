//! Defaults and validation of the Redis engine's options.

use super::*;
use crate::Error;

fn field(r: Result<RedisRuntimeConfig, Error>) -> &'static str {
    match r {
        Err(Error::InvalidConfig { field, .. }) => field,
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[test]
fn string_options_take_owned_and_borrowed_strings() {
    let instance = format!("pod-{}", 7);
    let c = RedisRuntimeConfig::builder()
        .job_name(String::from("billing"))
        .job_instance_id(instance)
        .state_key_prefix("app:state")
        .sink_dedup_key_prefix(std::borrow::Cow::Borrowed("app:dedup:"))
        .build()
        .unwrap();
    assert_eq!(c.job_name(), "billing");
    assert_eq!(c.job_instance_id(), "pod-7");
    assert_eq!(c.state_key_prefix(), "app:state");
    assert_eq!(c.sink_dedup_key_prefix(), "app:dedup:");
}

#[test]
fn default_instance_ids_are_unique_per_config_and_carry_the_pid() {
    let a = RedisRuntimeConfig::default().job_instance_id().to_owned();
    let b = RedisRuntimeConfig::default().job_instance_id().to_owned();
    assert_ne!(a, b);
    assert!(a.contains(&format!("-{}-", std::process::id())), "{a}");
    assert!(RedisRuntimeConfig::builder()
        .job_instance_id(a)
        .build()
        .is_ok());
}

#[test]
fn defaults_are_the_seeds() {
    let c = RedisRuntimeConfig::builder().build().unwrap();
    assert_eq!(c.job_name(), "redis-streaming-job");
    assert!(!c.job_instance_id().is_empty());
    assert_eq!(c.state_key_prefix(), "streaming:runtime");
    assert_eq!(c.state_ttl(), None);
    assert_eq!(c.keyed_state_shard_count(), 1);
    assert_eq!(c.hot_key_warn_interval(), Duration::from_secs(60));
    assert_eq!(c.hot_key_throttle_max(), Duration::from_millis(200));
    assert_eq!(c.hot_key_policy(), HotKeyPolicy::LogOnly);
    assert!(c.state_schema_evolution_enabled());
    assert_eq!(c.state_schema_mismatch_policy(), SchemaMismatchPolicy::Fail);
    assert!(c.restore_group_from_commit_frontier());
    assert!(!c.sink_deduplication_enabled());
    assert_eq!(c.sink_deduplication_ttl(), Duration::from_secs(604_800));
    assert_eq!(c.sink_dedup_key_prefix(), "streaming:runtime:sinkDedup:");
    assert_eq!((c.pipeline_parallelism(), c.timer_threads()), (1, 1));
    assert_eq!((c.mdc_enabled(), c.mdc_sample_rate()), (false, 1.0));
    assert_eq!(c.processing_error_result(), ProcessingErrorResult::Retry);
    assert_eq!(
        c.ack_mode(),
        AckMode::Offset,
        "measured faster; see AckMode"
    );
}

#[test]
fn invalid_fields_are_named() {
    let b = RedisRuntimeConfig::builder;
    assert_eq!(field(b().mdc_sample_rate(1.5).build()), "mdc_sample_rate");
    assert_eq!(
        field(b().mdc_sample_rate(f64::NAN).build()),
        "mdc_sample_rate"
    );
    assert_eq!(
        field(b().pipeline_parallelism(0).build()),
        "pipeline_parallelism"
    );
    assert_eq!(field(b().timer_threads(0).build()), "timer_threads");
    assert_eq!(
        field(b().keyed_state_shard_count(0).build()),
        "keyed_state_shard_count"
    );
    assert_eq!(field(b().job_name("").build()), "job_name");
    assert_eq!(field(b().job_name("a{b}").build()), "job_name");
    assert_eq!(
        field(b().state_key_prefix("x y").build()),
        "state_key_prefix"
    );
    assert_eq!(
        field(b().hot_key_warn_interval(Duration::ZERO).build()),
        "hot_key_warn_interval"
    );
    let bad_mq = MqOptions {
        key_prefix: "a b".into(),
        ..MqOptions::default()
    };
    match b().mq_options(bad_mq).build() {
        Err(Error::InvalidConfig { field, reason }) => {
            assert_eq!(field, "mq_options");
            assert!(reason.starts_with("key_prefix"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        field(b().window_max_fires_per_record(0).build()),
        "window_max_fires_per_record"
    );
    assert_eq!(
        field(b().sink_deduplication_ttl(Duration::ZERO).build()),
        "sink_deduplication_ttl"
    );
    assert!(b().sink_deduplication_enabled(true).build().is_ok());
    assert_eq!(field(b().timer_threads(4).build()), "timer_threads");
    let c = b().state_ttl(Some(Duration::ZERO)).build().unwrap();
    assert_eq!(c.state_ttl(), None, "zero TTL means no TTL");
    for bad in [
        Duration::from_micros(500),
        Duration::MAX,
        Duration::from_secs(1 << 40),
    ] {
        let e = b().state_ttl(Some(bad)).build().unwrap_err();
        assert!(e.to_string().contains("state_ttl"), "{bad:?}: {e}");
    }
    let century = Duration::from_secs(100 * 31_557_600);
    assert_eq!(
        b().state_ttl(Some(century)).build().unwrap().state_ttl(),
        Some(century)
    );
    let e = (b()
        .state_ttl(Some(century + Duration::from_secs(1)))
        .build())
    .unwrap_err();
    assert!(e.to_string().contains("over 100 years"), "{e}");
}

#[test]
fn an_idle_timeout_under_a_millisecond_is_refused() {
    let idle = |d| RedisRuntimeConfig::builder().watermark_idle_timeout(Some(d));
    for d in [Duration::from_nanos(1), Duration::from_micros(999)] {
        assert_eq!(field(idle(d).build()), "watermark_idle_timeout", "{d:?}");
    }
    let c = idle(Duration::ZERO).build().unwrap();
    assert_eq!(c.watermark_idle_timeout(), None, "zero turns it off");
    let c = idle(Duration::from_millis(1)).build().unwrap();
    assert_eq!(c.watermark_idle_timeout(), Some(Duration::from_millis(1)));
}

#[test]
fn commit_replica_wait_is_validated_naming_the_field() {
    let with = |w: ReplicaWait| RedisRuntimeConfig::builder().commit_replica_wait(Some(w));
    let ms = Duration::from_millis;
    assert_eq!(RedisRuntimeConfig::default().commit_replica_wait(), None);
    let ok = with(ReplicaWait::new(1, ms(500))).build().unwrap();
    assert_eq!(ok.commit_replica_wait(), Some(ReplicaWait::new(1, ms(500))));
    for bad in [
        ReplicaWait::new(0, ms(500)),
        ReplicaWait::new(1, Duration::ZERO),
        ReplicaWait::new(1, Duration::from_micros(999)),
        // Not shorter than the default response timeout (5 s).
        ReplicaWait::new(1, Duration::from_secs(5)),
    ] {
        assert_eq!(field(with(bad).build()), "commit_replica_wait", "{bad:?}");
    }
}

#[test]
fn checkpoint_and_leader_defaults_are_the_seeds() {
    let c = RedisRuntimeConfig::builder().build().unwrap();
    assert_eq!(c.checkpoint_interval(), Duration::ZERO);
    assert!(!c.restore_from_latest_checkpoint());
    assert_eq!(c.checkpoint_key_prefix(), "streaming:runtime:checkpoint:");
    assert_eq!(c.checkpoints_to_keep(), 5);
    assert_eq!(c.checkpoint_drain_timeout(), Duration::from_secs(30));
    assert_eq!(c.checkpoint_threads(), 1);
    assert!(!c.defer_ack_until_checkpoint());
    assert!(c.ack_deferred_messages_on_checkpoint());
    assert!(!c.leader_election_enabled());
    assert_eq!(c.leader_lease_ttl(), Duration::from_secs(30));
    assert_eq!(c.leader_renew_interval(), Duration::from_secs(10));
    assert_eq!(c.checkpoint().period(), None);
    let fast = RedisRuntimeConfig::builder()
        .checkpoint_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    assert_eq!(fast.checkpoint().period(), Some(Duration::from_millis(50)));
}

#[test]
fn invalid_checkpoint_and_leader_fields_are_named() {
    let b = RedisRuntimeConfig::builder;
    assert_eq!(
        field(b().checkpoint_key_prefix("a b").build()),
        "checkpoint_key_prefix"
    );
    assert_eq!(
        field(b().checkpoint_key_prefix("{x}").build()),
        "checkpoint_key_prefix"
    );
    assert_eq!(
        field(b().checkpoint_drain_timeout(Duration::ZERO).build()),
        "checkpoint_drain_timeout"
    );
    assert_eq!(
        field(b().checkpoint_threads(2).build()),
        "checkpoint_threads"
    );
    assert_eq!(
        field(b().checkpoint_threads(0).build()),
        "checkpoint_threads"
    );
    assert_eq!(
        field(b().defer_ack_until_checkpoint(true).build()),
        "defer_ack_until_checkpoint"
    );
    assert_eq!(
        field(b().ack_deferred_messages_on_checkpoint(false).build()),
        "ack_deferred_messages_on_checkpoint"
    );
    assert_eq!(
        field(b().leader_lease_ttl(Duration::ZERO).build()),
        "leader_lease_ttl"
    );
    assert_eq!(
        field(b().leader_renew_interval(Duration::ZERO).build()),
        "leader_renew_interval"
    );
    assert_eq!(
        field(
            b().leader_lease_ttl(Duration::from_secs(5))
                .leader_renew_interval(Duration::from_secs(5))
                .build()
        ),
        "leader_renew_interval"
    );
    let e = b().defer_ack_until_checkpoint(true).build().unwrap_err();
    assert!(e.to_string().contains("one transaction"), "{e}");
}
