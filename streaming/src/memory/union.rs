//! Plans with two inputs on the memory engine: the combined root ([`UnionRoot`]) runs the
//! first input's chain to the end of its input, then the second's; both chains end in one
//! [`Merge`] in front of the rest of the pipeline, and the root reaches each through the
//! [`Fed`] events of a [`TwoInputChain`].

use super::failures::RecordFailures;
use super::run::{MemoryRoot, SingleChain};
use super::{MemoryEnv, MemoryRuntime};
use crate::dataflow::{BuildPlan, CombineRoots, Plan, Union};
use crate::ops::{Convert, Event, Fed, Merge, MergeInput, Operator, Side, TwoInputChain};
use crate::sealed::Sealed;
use crate::Error;
use std::marker::PhantomData;

/// The root of a memory-engine plan with two inputs whose roots are `A` and `B`.
pub struct UnionRoot<A, B> {
    env: MemoryEnv,
    /// The second input runs first (a broadcast input: its elements reach the keyed
    /// stream's function before the keyed elements do).
    second_first: bool,
    /// The inputs' roots, once the plan is built.
    built: Option<(A, B)>,
}

impl<A, B> Sealed for UnionRoot<A, B> {}

impl<A, B> CombineRoots<B> for A
where
    A: MemoryRoot<Runner = SingleChain>,
    B: MemoryRoot<Runner = SingleChain>,
{
    type Root = UnionRoot<A, B>;
    type Head = Fed<A::Item, B::Item>;

    fn combine(&self, _other: &B) -> UnionRoot<A, B> {
        UnionRoot {
            env: self.env().clone(),
            second_first: false,
            built: None,
        }
    }
}

/// The memory engine runs a broadcast input first, to its end, then the keyed stream:
/// every broadcast element is in the broadcast map before the first keyed element
/// (deterministic; Flink does not order the two inputs).
impl<A, B> crate::dataflow::CombineBroadcast<B> for A
where
    A: MemoryRoot<Runner = SingleChain>,
    B: MemoryRoot<Runner = SingleChain>,
{
    fn combine_broadcast(&self, other: &B) -> UnionRoot<A, B> {
        UnionRoot {
            second_first: true,
            ..self.combine(other)
        }
    }
}

/// The memory engine keeps an interval join's buffers in memory.
impl<R, A, B> crate::dataflow::IntervalJoinState<A, B> for R
where
    R: MemoryRoot,
{
    fn buffers() -> crate::dataflow::JoinBuffers<A, B> {
        crate::dataflow::JoinBuffers::in_memory()
    }
}

impl<A, B> MemoryRoot for UnionRoot<A, B>
where
    A: MemoryRoot<Runner = SingleChain>,
    B: MemoryRoot<Runner = SingleChain>,
{
    type Item = Fed<A::Item, B::Item>;
    type Runner = SingleChain;

    fn env(&self) -> &MemoryEnv {
        &self.env
    }

    /// Runs the first input to its end, then the second. A failed first input stops the
    /// run: the second never opens, and `op` gives it up so the rest of the pipeline closes.
    fn drive<O: Operator<Self::Item>>(
        self,
        mut op: O,
        failures: &mut RecordFailures<'_, Self::Item>,
    ) -> Result<(), Error> {
        let Some((first, second)) = self.built else {
            return Err(Error::Engine {
                op: "run",
                reason: "a pipeline with two inputs ran before it was built".into(),
            });
        };
        if self.second_first {
            // A broadcast input: to its end first.
            if let Err(e) = second.drive(
                Side::<_, A::Item, true>(&mut op, PhantomData),
                &mut failures.for_input(),
            ) {
                give_up(&mut op, Fed::First(Event::GiveUp));
                return Err(e);
            }
            return first.drive(
                Side::<_, B::Item, false>(&mut op, PhantomData),
                &mut failures.for_input(),
            );
        }
        if let Err(e) = first.drive(
            Side::<_, B::Item, false>(&mut op, PhantomData),
            &mut failures.for_input(),
        ) {
            give_up(&mut op, Fed::Second(Event::GiveUp));
            return Err(e);
        }
        second.drive(
            Side::<_, A::Item, true>(&mut op, PhantomData),
            &mut failures.for_input(),
        )
    }
}

/// After an input's run failed, the input that never ran is given up (`given_up`), so the
/// rest of the pipeline closes.
fn give_up<T, O: Operator<T>>(op: &mut O, given_up: T) {
    if let Err(closing) = op.process(given_up, i64::MAX) {
        tracing::warn!("closing the pipeline after an input failed: {closing}");
    }
}

impl<PA, PB, CA, CB> BuildPlan<MemoryRuntime> for Union<PA, PB, CA, CB>
where
    PA: BuildPlan<MemoryRuntime>,
    PB: BuildPlan<MemoryRuntime> + Plan<Time = PA::Time>,
    PA::Root: MemoryRoot<Runner = SingleChain, Item = PA::Head>,
    PB::Root: MemoryRoot<Runner = SingleChain, Item = PB::Head>,
    CA: Convert<PA::Out>,
    CB: Convert<PB::Out, Out = CA::Out>,
{
    fn build<O: Operator<CA::Out>>(
        self,
        rt: &MemoryRuntime,
        downstream: O,
    ) -> Result<
        (
            UnionRoot<PA::Root, PB::Root>,
            impl Operator<Fed<PA::Head, PB::Head>> + use<PA, PB, CA, CB, O>,
        ),
        Error,
    > {
        let merge = Merge::shared(downstream, 2);
        let (first_root, first) = self.first.build(rt, MergeInput::<O, CA>::new(&merge, 0))?;
        let (second_root, second) = self.second.build(rt, MergeInput::<O, CB>::new(&merge, 1))?;
        let mut root = self.root;
        root.built = Some((first_root, second_root));
        Ok((root, TwoInputChain::new(first, second, merge)))
    }
}
