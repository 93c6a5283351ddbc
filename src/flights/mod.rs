//! The NYC flights 2013 data (`../shared/data/flights.csv.zip`, or in
//! `$STREAMING_DATA_DIR`) and the jobs of the
//! `flights` example, as library code so tests can run them and capture their output.

mod archive;
mod cli;
mod counts;
mod data;
#[macro_use]
mod jobs;
mod parse;
mod split;
mod topic;
mod windows_redis;

pub use archive::load;
pub use cli::{parse_args, Args, Command, Engine, DEFAULT_REDIS_URL};
pub use counts::{count_by_carrier, counts, counts_redis, CountLine, CountsSummary, RedisCounts};
pub use data::{default_data_path, format_utc, Dataset, Flight, LoadError, DATA_DIR_ENV};
pub use jobs::{
    delays, delays_fragment, delays_partitioned, sessions, sessions_fragment, sessions_partitioned,
    CountAndSum, CountFlights, DelayLine, DelaysOptions, DelaysSummary, EventTime, LateCounter,
    SessionLine, SessionsOptions, SessionsSummary,
};
pub use parse::parse_csv;
pub use windows_redis::{delays_redis, sessions_redis, RedisWindowed};
