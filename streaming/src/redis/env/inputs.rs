//! Redis pipelines with several inputs: `union` and `connect` of topics combine their
//! roots into one [`MqTopicSource`] that lists the other inputs, and the built chain
//! hands each message to its input's chain by the message's topic ([`TopicSwitch`]); the
//! inputs' chains meet in one [`Merge`] (the watermark is the lowest of the inputs').

use super::MqTopicSource;
use crate::dataflow::{
    BuildPlan, CombineBroadcast, CombineRoots, IntervalJoinState, JoinBuffers, Plan, Union,
};
use crate::mq::Message;
use crate::ops::{Convert, Merge, MergeInput, Operator, Shared};
use crate::redis::RedisRuntime;
use crate::time::MIN_WATERMARK;
use crate::Error;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

impl MqTopicSource {
    /// The topics this root reads, its first first.
    fn topics(&self) -> Vec<String> {
        std::iter::once(self.topic.clone())
            .chain(self.inputs.iter().map(|i| i.topic.clone()))
            .collect()
    }

    /// This root and its other inputs, each as a root of one topic.
    fn flattened(&self) -> impl Iterator<Item = MqTopicSource> + '_ {
        let alone = MqTopicSource {
            inputs: Vec::new(),
            broadcast: false,
            ..self.clone()
        };
        std::iter::once(alone).chain(self.inputs.iter().cloned())
    }
}

/// Topics of one Redis environment combine: the first topic's root lists the others.
impl CombineRoots<MqTopicSource> for MqTopicSource {
    type Root = MqTopicSource;
    type Head = Message;

    fn combine(&self, other: &MqTopicSource) -> MqTopicSource {
        let mut root = self.clone();
        root.inputs.extend(other.flattened());
        root
    }
}

/// A topic broadcast to a pipeline's partitions: every job partition reads its one
/// partition whole (see the partition's other inputs).
impl CombineBroadcast<MqTopicSource> for MqTopicSource {
    fn combine_broadcast(&self, other: &MqTopicSource) -> MqTopicSource {
        let mut root = self.clone();
        root.inputs
            .extend(other.flattened().map(|input| MqTopicSource {
                broadcast: true,
                ..input
            }));
        root
    }
}

/// The Redis engine keeps an interval join's buffers in Redis, as JSON.
impl<A, B> IntervalJoinState<A, B> for MqTopicSource
where
    A: serde::Serialize + serde::de::DeserializeOwned,
    B: serde::Serialize + serde::de::DeserializeOwned,
{
    fn buffers() -> JoinBuffers<A, B> {
        JoinBuffers::persistent()
    }
}

/// Two Redis plans as one chain: each input's operators end in its input of one
/// [`Merge`] in front of `downstream`; the chain's head hands a message to the input whose
/// topic it came from.
impl<PA, PB, CA, CB> BuildPlan<RedisRuntime> for Union<PA, PB, CA, CB>
where
    PA: BuildPlan<RedisRuntime> + Plan<Root = MqTopicSource, Head = Message>,
    PB: BuildPlan<RedisRuntime> + Plan<Root = MqTopicSource, Head = Message, Time = PA::Time>,
    CA: Convert<PA::Out>,
    CB: Convert<PB::Out, Out = CA::Out>,
{
    fn build<O: Operator<CA::Out>>(
        self,
        rt: &RedisRuntime,
        downstream: O,
    ) -> Result<
        (
            MqTopicSource,
            impl Operator<Message> + use<PA, PB, CA, CB, O>,
        ),
        Error,
    > {
        let first_topics = self.first.root().topics();
        let merge = Merge::shared(downstream, 2);
        let (_, first) = self.first.build(rt, MergeInput::<O, CA>::new(&merge, 0))?;
        let (_, second) = self.second.build(rt, MergeInput::<O, CB>::new(&merge, 1))?;
        let chain = TopicSwitch {
            first_topics,
            first,
            second,
            restored: false,
            idleness: rt.input_idle_timeout().map(|timeout| Idleness {
                timeout,
                merge,
                last_record: [Instant::now(); 2],
                idle: [false; 2],
                _merged: PhantomData,
            }),
        };
        Ok((self.root, chain))
    }
}

/// The head of a chain with two inputs: a message goes to the first input's chain when
/// its topic is one of `first_topics`, else to the second's; everything else goes to both.
struct TopicSwitch<F, S, O, M> {
    first_topics: Vec<String>,
    first: F,
    second: S,
    /// Both inputs' watermarks were restored (see [`restore`](Self::restore)).
    restored: bool,
    /// Marks an input idle in the merge (`watermark_idle_timeout`), when set.
    idleness: Option<Idleness<O, M>>,
}

/// Which input of a chain is idle: one without a record for `timeout` (wall-clock time),
/// seen when the other input's record comes, no longer holds the merged watermark back
/// ([`Merge::set_idle`]) until its own next record.
struct Idleness<O, M> {
    timeout: Duration,
    merge: Shared<Merge<O>>,
    /// When each input's last record came (the chain's build before the first).
    last_record: [Instant; 2],
    idle: [bool; 2],
    _merged: PhantomData<fn(M)>,
}

impl<O: Operator<M>, M> Idleness<O, M> {
    /// A record of `input` came: it is active again, and the other input is idle when it
    /// had no record for the timeout.
    fn record(&mut self, input: usize) -> Result<(), Error> {
        let now = Instant::now();
        self.last_record[input] = now;
        let other = 1 - input;
        if self.idle[input] {
            self.idle[input] = false;
            self.merge.borrow_mut().set_idle::<M>(input, false)?;
        }
        if !self.idle[other] && now.duration_since(self.last_record[other]) >= self.timeout {
            self.idle[other] = true;
            self.merge.borrow_mut().set_idle::<M>(other, true)?;
        }
        Ok(())
    }
}

impl<F: Operator<Message>, S: Operator<Message>, O: Operator<M>, M> TopicSwitch<F, S, O, M> {
    /// Before the first message: every input's watermark operator forwards the watermark
    /// the partition's last commit left (an operator does so before its first record
    /// otherwise), so that the merged watermark is the same whichever input's record
    /// comes first after a take.
    #[inline]
    fn restore(&mut self) -> Result<(), Error> {
        if !self.restored {
            self.restored = true;
            self.first.on_watermark(MIN_WATERMARK)?;
            self.second.on_watermark(MIN_WATERMARK)?;
        }
        Ok(())
    }
}

impl<F, S, O, M> Operator<Message> for TopicSwitch<F, S, O, M>
where
    F: Operator<Message>,
    S: Operator<Message>,
    O: Operator<M>,
{
    fn open(&mut self) -> Result<(), Error> {
        self.first.open()?;
        self.second.open()
    }

    #[inline]
    fn process(&mut self, m: Message, timestamp: i64) -> Result<(), Error> {
        self.restore()?;
        let first = self.first_topics.iter().any(|t| *t == *m.topic);
        if let Some(idleness) = &mut self.idleness {
            idleness.record(usize::from(!first))?;
        }
        if first {
            self.first.process(m, timestamp)
        } else {
            self.second.process(m, timestamp)
        }
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        self.restore()?;
        self.first.on_watermark(watermark)?;
        self.second.on_watermark(watermark)
    }

    fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
        self.first.on_processing_time(now)?;
        self.second.on_processing_time(now)
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.first.finish()?;
        self.second.finish()
    }

    fn close(&mut self) -> Result<(), Error> {
        let first = self.first.close();
        first.and(self.second.close())
    }
}
