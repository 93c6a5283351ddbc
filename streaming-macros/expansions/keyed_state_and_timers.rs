// pipeline! expansion
// from_elements            the environment (no source yet) -> a stream  [-]
// key_by                   a stream -> a keyed stream  [-]
// state                    a keyed stream -> a keyed stream with declared state  [-]
// process                  a keyed stream with declared state -> the output of `process`  [source-{n}/2:process]
// on_timer                 the output of `process` -> a stream  [-]
// print                    a stream -> a finished pipeline  [source-{n}/3:sink]
// engines: memory
fn pipeline() {
    let _ = {
        ::streaming::__private::process_with_timers(
                env.from_elements([("a", 1), ("b", 2)]).key_by(|p: &(&str, i32)| p.0),
                (
                    ::streaming::api::ValueStateDescriptor::<u64>::new("count", 0),
                    (::streaming::api::SetStateDescriptor::<i32>::new("seen"), ()),
                ),
                |v, ctx, out| {
                    #[allow(unused_variables)]
                    let count = ::streaming::__private::DeclaredState::<
                        ::streaming::api::ValueStateDescriptor<u64>,
                    >::at(0);
                    #[allow(unused_variables)]
                    let seen = ::streaming::__private::DeclaredState::<
                        ::streaming::api::SetStateDescriptor<i32>,
                    >::at(1);
                    {
                        let n = ctx.state(count)?.value() + 1;
                        ctx.state(count)?.update(n);
                        ctx.state(seen)?.add(v.1);
                        ctx.register_event_time_timer(ctx.timestamp() + 10)?;
                        out.collect(n);
                        Ok(())
                    }
                },
                |ts, ctx, out| {
                    #[allow(unused_variables)]
                    let count = ::streaming::__private::DeclaredState::<
                        ::streaming::api::ValueStateDescriptor<u64>,
                    >::at(0);
                    #[allow(unused_variables)]
                    let seen = ::streaming::__private::DeclaredState::<
                        ::streaming::api::SetStateDescriptor<i32>,
                    >::at(1);
                    {
                        out.collect(ctx.state(count)?.value() + ts as u64);
                        Ok(())
                    }
                },
            )
            .print()
    };
}
