// pipeline! expansion
// from_elements            the environment (no source yet) -> a stream  [-]
// assign_timestamps_and_watermarks a stream -> a stream  [source-{n}/1:watermarks]
// key_by                   a stream -> a keyed stream  [-]
// window                   a keyed stream -> a windowed stream  [-]
// trigger                  a windowed stream -> a windowed stream  [-]
// reduce                   a windowed stream -> a stream  [source-{n}/3:window-reduce]
// collect_vec              a stream -> a finished pipeline  [source-{n}/4:sink]
// engines: memory
fn pipeline() {
    let _ = '__streaming_pipeline: {
        use ::streaming::__private::{FallibleConfigKind as _, InfallibleConfigKind as _};
        let __config_0 = (
            match BoundedOutOfOrderness::new(Duration::from_millis(10)) {
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
            match SlidingEventTimeWindows::of(size, slide) {
                ::core::result::Result::Ok(value) => value,
                ::core::result::Result::Err(error) => {
                    let error = ::streaming::__private::config_error(error);
                    break '__streaming_pipeline error;
                }
            },
        );
        let __config_2 = (
            match CountTrigger::of(2) {
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
        let __config_3 = (
            match PurgingTrigger::of(__config_2.0) {
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
        env.from_elements([1, 2, 3])
            .assign_timestamps_and_watermarks(__config_0.0)
            .key_by({
                #[allow(unused_mut)]
                let mut __streaming_element_fn = |_: &i32| ();
                move |__streaming_element| __streaming_element_fn(__streaming_element)
            })
            .window(__config_1.0)
            .trigger(__config_3.0)
            .reduce(|a, b| a + b)
            .collect_vec()
    };
}
