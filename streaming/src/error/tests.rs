//! Kinds and retryability of every error variant.

use super::*;

fn op() -> OperatorId {
    OperatorId::new("src", 2, "map")
}

fn boxed(text: &str) -> BoxError {
    text.to_string().into()
}

fn io(kind: std::io::ErrorKind) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(kind, "io"))
}

fn reply(kind: redis::ErrorKind) -> redis::RedisError {
    redis::RedisError::from((kind, "reply"))
}

fn connect(source: Option<redis::RedisError>) -> Error {
    Error::Connect {
        addr: "127.0.0.1:1".into(),
        reason: "refused".into(),
        source,
    }
}

/// One error of every variant (and every cause that changes the answer), with its kind
/// and whether it is retryable.
fn table() -> Vec<(Error, ErrorKind, bool)> {
    let mut t = table_config_to_state();
    t.extend(table_limits_to_queue());
    t.extend(table_connection_and_server());
    t
}

fn table_config_to_state() -> Vec<(Error, ErrorKind, bool)> {
    use ErrorKind::*;
    vec![
        (
            Error::InvalidConfig {
                field: "size",
                reason: "must be positive".into(),
            },
            Config,
            false,
        ),
        (
            Error::UserFunction {
                operator: op(),
                source: boxed("service down"),
            },
            UserFunction,
            true,
        ),
        (
            Error::UserFunction {
                operator: op(),
                source: Error::permanent("bad input").into(),
            },
            UserFunction,
            false,
        ),
        (
            Error::Panic {
                operator: op(),
                message: "boom".into(),
            },
            UserFunction,
            true,
        ),
        (
            Error::WindowBounds {
                operator: op(),
                timestamp: i64::MAX,
            },
            InvalidRecord,
            false,
        ),
        (
            Error::StateType {
                operator: op(),
                state: "count",
                declared: "ValueState<u64>".into(),
                requested: "ValueState<String>".into(),
            },
            State,
            false,
        ),
        (
            Error::Source {
                source_id: "src".into(),
                source: boxed("file gone"),
            },
            UserFunction,
            true,
        ),
        (
            Error::from(io(std::io::ErrorKind::ConnectionReset)),
            Connection,
            true,
        ),
    ]
}

fn table_limits_to_queue() -> Vec<(Error, ErrorKind, bool)> {
    use ErrorKind::*;
    vec![
        (
            Error::from(io(std::io::ErrorKind::TimedOut)),
            Connection,
            true,
        ),
        (
            Error::from(reply(redis::ErrorKind::BusyLoadingError)),
            Connection,
            true,
        ),
        (
            Error::from(reply(redis::ErrorKind::ResponseError)),
            Server,
            false,
        ),
        (
            Error::from(reply(redis::ErrorKind::TypeError)),
            Server,
            false,
        ),
        (
            connect(Some(io(std::io::ErrorKind::ConnectionRefused))),
            Connection,
            true,
        ),
        (
            connect(Some(reply(redis::ErrorKind::AuthenticationFailed))),
            Connection,
            false,
        ),
        (
            Error::Mq {
                op: "send",
                reason: "topic t does not exist".into(),
            },
            Queue,
            false,
        ),
        (
            Error::MqDecode {
                what: "payload",
                reason: "not UTF-8".into(),
            },
            InvalidRecord,
            false,
        ),
    ]
}

fn table_connection_and_server() -> Vec<(Error, ErrorKind, bool)> {
    use ErrorKind::*;
    vec![
        (
            Error::StateNotPersistent {
                operator: op(),
                state: "count",
                declared: "ValueState<u64>".into(),
            },
            State,
            false,
        ),
        (
            Error::HotKey {
                operator: op(),
                state: "count".into(),
                fields: 10_000,
            },
            Limit,
            true,
        ),
        (
            Error::StateSchema {
                operator: op(),
                state: "count".into(),
                stored: "ValueState<u64>".into(),
                current: "ValueState<i64>".into(),
            },
            State,
            false,
        ),
        (Error::NoEventTime { operator: op() }, Config, false),
        (
            Error::TimerQueueFull {
                operator: op(),
                max: 10,
            },
            Limit,
            true,
        ),
        (
            Error::StateDecode {
                operator: op(),
                state: "count".into(),
                reason: "expected u64".into(),
            },
            State,
            false,
        ),
        (
            Error::RecordNotUndone {
                timestamp: 3,
                source: Box::new(Error::Panic {
                    operator: op(),
                    message: "boom".into(),
                }),
            },
            UserFunction,
            false,
        ),
        (
            Error::Engine {
                op: "blocking_start",
                reason: "already started".into(),
            },
            Engine,
            false,
        ),
        (
            Error::Fenced {
                topic: "t".into(),
                group: "g".into(),
                partition: 0,
                token: 7,
            },
            Fenced,
            false,
        ),
    ]
}

#[test]
fn every_variant_has_a_kind_and_a_retry_answer() {
    for (e, kind, retryable) in table() {
        assert_eq!(e.kind(), kind, "{e:?}");
        assert_eq!(e.is_retryable(), retryable, "{e:?}");
    }
}

#[test]
fn a_user_function_error_wrapping_a_decode_error_is_not_retryable() {
    let decode = Error::MqDecode {
        what: "payload",
        reason: "expected JSON".into(),
    };
    let e = Error::UserFunction {
        operator: op(),
        source: decode.into(),
    };
    assert_eq!(e.kind(), ErrorKind::UserFunction);
    assert!(!e.is_retryable());
}

#[test]
fn a_redis_error_keeps_its_message_and_source() {
    let e = Error::from(reply(redis::ErrorKind::ResponseError));
    assert!(e.to_string().starts_with("redis: "), "{e}");
    let source = std::error::Error::source(&e).expect("the client's error");
    assert!(source.downcast_ref::<redis::RedisError>().is_some());
}

#[test]
fn operator_fields_compare_with_text() {
    let Error::Panic { operator, .. } = (Error::Panic {
        operator: op(),
        message: String::new(),
    }) else {
        unreachable!()
    };
    assert_eq!(operator, "src/2:map");
    assert_eq!(operator.as_str(), "src/2:map");
}
