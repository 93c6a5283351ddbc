// pipeline! expansion
// let payments
//   from_mq_topic            the environment (no source yet) -> a stream  [-]
//   map                      a stream -> a stream  [payments.billing/1:map]
// pipeline
//   from_mq_topic            the environment (no source yet) -> a stream  [-]
//   map                      a stream -> a stream  [orders.billing/1:map]
//   key_by                   a stream -> a keyed stream  [-]
//   interval_join            a keyed stream -> an interval join without its bounds  [-]
//     key_by                   a stream -> a keyed stream  [-]
//   between                  an interval join without its bounds -> an interval join with its bounds  [-]
//   side_output_late_seconds an interval join with its bounds -> an interval join with its bounds  [-]
//   process                  an interval join with its bounds -> a stream  [orders.billing/5:process]
//   sink                     a stream -> a finished pipeline  [orders.billing/6:sink]
// engines: redis
fn pipeline() {
    let _ = '__streaming_pipeline: {
        use ::streaming::__private::{FallibleConfigKind as _, InfallibleConfigKind as _};
        use ::streaming::__private::IntervalJoinBy as _;
        let __config_0 = (
            match RedisListSink::new("late-payments") {
                arg => {
                    match (&arg).__config_kind().config(arg) {
                        ::core::result::Result::Ok(value) => value,
                        ::core::result::Result::Err(error) => {
                            let error = ::streaming::__private::config_error(error);
                            break '__streaming_pipeline error;
                        }
                    }
                }
            },
        );
        let __config_1 = (
            match RedisListSink::new("paid") {
                arg => {
                    match (&arg).__config_kind().config(arg) {
                        ::core::result::Result::Ok(value) => value,
                        ::core::result::Result::Err(error) => {
                            let error = ::streaming::__private::config_error(error);
                            break '__streaming_pipeline error;
                        }
                    }
                }
            },
        );
        let payments = ::streaming::__private::from_mq_topic(&env, "payments", "billing")
            .map({
                #[allow(unused_mut)]
                let mut __streaming_element_fn = |m: Message| parse(&m);
                move |__streaming_element| __streaming_element_fn(__streaming_element)
            });
        match ::streaming::__private::from_mq_topic(&env, "orders", "billing")
            .map({
                #[allow(unused_mut)]
                let mut __streaming_element_fn = |m: Message| parse(&m);
                move |__streaming_element| __streaming_element_fn(__streaming_element)
            })
            .key_by({
                #[allow(unused_mut)]
                let mut __streaming_element_fn = |o: &(String, i64)| o.0.clone();
                move |__streaming_element| __streaming_element_fn(__streaming_element)
            })
            .interval_join_by(payments, |p: &(String, i64)| p.0.clone())
            .between(0, 600_000)
        {
            ::core::result::Result::Ok(value) => value,
            ::core::result::Result::Err(error) => {
                let error = ::streaming::__private::config_error(error);
                break '__streaming_pipeline error;
            }
        }
            .side_output_late_seconds(__config_0.0)
            .process(|o: &(String, i64), p: &(String, i64)| (o.0.clone(), p.1 - o.1))
            .sink(__config_1.0)
    };
}
