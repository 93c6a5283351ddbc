// pipeline! expansion
// from_collection          the environment (no source yet) -> a stream  [-]
// map                      a stream -> a stream  [source-{n}/1:map]
// filter                   a stream -> a stream  [source-{n}/2:filter]
// map                      a stream -> a stream  [source-{n}/3:map]
// filter                   a stream -> a stream  [source-{n}/4:filter]
// sink                     a stream -> a finished pipeline  [source-{n}/5:sink]
// engines: memory
fn pipeline() {
    let _ = {
        env.from_collection(0..10_000_000u64)
            .map(|x| x * 3)
            .filter(|x| x % 2 == 0)
            .map(|x| x + 1)
            .filter(|x| x % 5 != 0)
            .sink(|x| total += x)
    };
}
