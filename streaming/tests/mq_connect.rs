//! Connecting to a server that is not there fails promptly with an error.

use streaming::mq::{Mq, MqOptions};

#[tokio::test]
async fn connect_to_a_closed_port_is_an_error() {
    // Nothing listens on port 1 of the loopback address: the connection is refused.
    match Mq::connect("redis://127.0.0.1:1/", MqOptions::default()).await {
        Err(streaming::Error::Redis(e)) => assert!(e.is_connection_refusal(), "{e}"),
        Err(other) => panic!("expected a refused connection, got {other}"),
        Ok(_) => panic!("connected to a closed port?"),
    }
}
