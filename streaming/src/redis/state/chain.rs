//! A partition's operator chain: built from a clone of the pipeline, ending in a buffer
//! that collects the batch's outputs for the sink.

use crate::dataflow::{BuildPlan, Plan};
use crate::mq::Message;
use crate::ops::{ChainEnd, Counters, Operator, OperatorId};
use crate::redis::state::persist::DynStore;
use crate::redis::state::persist::StateLimits;
use crate::redis::state::runtime::DynSideOutput;
use crate::redis::{RedisRuntime, RedisRuntimeConfig};
use crate::Error;
use std::cell::RefCell;
use std::rc::Rc;

pub(in crate::redis) type Stores = Vec<(OperatorId, DynStore)>;

/// A built chain with its stores, its window operators' counters and its side outputs.
pub(in crate::redis) type Built<C> = (C, Stores, Rc<Counters>, Vec<DynSideOutput>);

/// What a partition's chain is built with, from the job's configuration.
#[derive(Clone, Copy, Debug)]
pub(in crate::redis) struct ChainSettings {
    /// The limits its state enforces.
    pub(in crate::redis) limits: StateLimits,
    /// `watermark_idle_timeout`: with several inputs, an input without a record this long
    /// while another has records is idle (its watermark does not hold the others back).
    pub(in crate::redis) input_idle_timeout: Option<std::time::Duration>,
}

/// The settings of the chains of a job with `config`.
pub(in crate::redis) fn chain_settings(config: &RedisRuntimeConfig) -> ChainSettings {
    ChainSettings {
        limits: state_limits(config),
        input_idle_timeout: config.watermark_idle_timeout(),
    }
}

/// The limits the chain's state enforces, from the job's configuration.
fn state_limits(config: &RedisRuntimeConfig) -> StateLimits {
    StateLimits {
        window_max_fires_per_record: config.window_max_fires_per_record() as usize,
        event_time_timer_max_size: config.event_time_timer_max_size() as usize,
    }
}

pub(in crate::redis) fn build_chain<P, O>(
    plan: &P,
    out: &Rc<RefCell<Vec<O>>>,
    settings: ChainSettings,
) -> Result<Built<impl Operator<Message> + use<P, O>>, Error>
where
    P: BuildPlan<RedisRuntime> + Plan<Head = Message, Out = O> + Clone,
{
    let rt =
        RedisRuntime::new(settings.limits).with_input_idle_timeout(settings.input_idle_timeout);
    // The chain's last operator collects the batch's outputs for the sink.
    let out = Rc::clone(out);
    let end = ChainEnd::new(move |value: O, _timestamp| {
        out.borrow_mut().push(value);
        Ok(())
    });
    let (_root, mut chain) = plan.clone().build(&rt, end)?;
    chain.open()?;
    let (stores, counters, side_outputs) = rt.into_parts();
    Ok((chain, stores, counters, side_outputs))
}

/// The partition's watermark: that of its last watermark operator (the first registered
/// store that has one — a chain registers its last operator first), and its idle flag.
pub(in crate::redis) fn effective_watermark(stores: &Stores) -> Option<(i64, bool)> {
    stores.iter().find_map(|(_, s)| s.borrow().watermark())
}
