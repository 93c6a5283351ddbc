// pipeline! expansion
// add_source_with_id       the environment (no source yet) -> a stream  [-]
// flat_map                 a stream -> a stream  [words/1:flat_map]
// map                      a stream -> a stream  [words/2:map]
// key_by                   a stream -> a keyed stream  [-]
// window                   a keyed stream -> a windowed stream  [-]
// allowed_lateness         a windowed stream -> a windowed stream  [-]
// reduce                   a windowed stream -> a stream  [words/4:window-reduce]
// collect_vec              a stream -> a finished pipeline  [words/5:sink]
// engines: memory
fn pipeline() {
    let _ = '__streaming_pipeline: {
        use ::streaming::__private::{FallibleConfigKind as _, InfallibleConfigKind as _};
        let __config_0 = (
            match TumblingEventTimeWindows::of(Duration::from_secs(60)) {
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
        env.add_source_with_id("words", lines)
            .flat_map({
                #[allow(unused_mut)]
                let mut __streaming_element_fn = |l: String| {
                    l.split(' ').map(String::from).collect::<Vec<_>>()
                };
                move |__streaming_element| __streaming_element_fn(__streaming_element)
            })
            .map(|w| (w, 1u64))
            .key_by({
                #[allow(unused_mut)]
                let mut __streaming_element_fn = |p: &(String, u64)| p.0.clone();
                move |__streaming_element| __streaming_element_fn(__streaming_element)
            })
            .window(__config_0.0)
            .allowed_lateness(Duration::from_secs(5))
            .reduce(|a, b| (a.0, a.1 + b.1))
            .collect_vec()
    };
}
