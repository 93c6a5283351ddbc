//! The NYC flights 2013 data (`../shared/data/flights.csv.zip`) and the jobs of the
//! `flights` example, as library code so tests can run them and capture their output.

mod cli;
mod data;
mod jobs;

pub use cli::{parse_args, Args, ArgsError, Command, Engine, USAGE};
pub use data::{default_data_path, format_utc, load, parse_csv, Dataset, Flight, LoadError};
pub use jobs::{
    delays, sessions, CountAndSum, CountFlights, DelayLine, DelaysOptions, DelaysSummary,
    EventTime, SessionLine, SessionsOptions, SessionsSummary,
};
