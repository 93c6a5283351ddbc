// pipeline! expansion
// from_mq_topic            the environment (no source yet) -> a stream  [-]
// map                      a stream -> a stream  [orders.billing/1:map]
// key_by                   a stream -> a keyed stream  [-]
// state                    a keyed stream -> a keyed stream with declared state  [-]
// process                  a keyed stream with declared state -> the output of `process`  [orders.billing/3:process]
// sink                     a stream -> a finished pipeline  [orders.billing/4:sink]
// engines: redis
fn pipeline() {
    let _ = '__streaming_pipeline: {
        use ::streaming::__private::{FallibleConfigKind as _, InfallibleConfigKind as _};
        let __config_0 = (
            match RedisListSink::new("counts") {
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
        ::streaming::__private::process_with_states(
                ::streaming::__private::from_mq_topic(&env, "orders", "billing")
                    .map({
                        #[allow(unused_mut)]
                        let mut __streaming_element_fn = |m: Message| {
                            m.payload_str().unwrap_or_default().to_string()
                        };
                        move |__streaming_element| __streaming_element_fn(
                            __streaming_element,
                        )
                    })
                    .key_by({
                        #[allow(unused_mut)]
                        let mut __streaming_element_fn = |k: &String| k.clone();
                        move |__streaming_element| __streaming_element_fn(
                            __streaming_element,
                        )
                    }),
                (
                    ::streaming::api::ValueStateDescriptor::<
                        u64,
                    >::persistent("count", 0),
                    (),
                ),
                |k: String, ctx, out| {
                    #[allow(unused_variables)]
                    let count = ::streaming::__private::DeclaredState::<
                        ::streaming::api::ValueStateDescriptor<u64>,
                    >::at(0);
                    {
                        let n = ctx.state(count)?.value() + 1;
                        ctx.state(count)?.update(n);
                        out.collect(format!("{k}={n}"));
                        Ok(())
                    }
                },
            )
            .sink(__config_0.0)
    };
}
