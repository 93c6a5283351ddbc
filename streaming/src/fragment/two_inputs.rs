//! Fragments of two inputs: a function from two [`Input`]s to
//! `impl `[`TwoInputFragment`], spliced behind two streams with
//! [`DataStream::transform_with`].

use super::{BuildInFragment, Input};
use crate::dataflow::{CombineRoots, DataStream, FragmentInputs, Plan, SplicedTwo};
use crate::ops::Fed;
use crate::sealed::Sealed;
use crate::time::{EventTime, Offers, StreamTime};
use crate::Error;

/// What a two-input fragment function returns: a stream built from an [`Input<A, Tm>`]
/// (the first input) and an [`Input<B, Tm>`] (the second), which its body combines with
/// [`union`](DataStream::union), [`connect`](DataStream::connect) or
/// [`interval_join`](crate::KeyedStream::interval_join), producing
/// [`Out`](TwoInputFragment::Out). Implemented by this crate for `DataStream<P>` and
/// `Result<DataStream<P>, Error>` whose plan can run on every engine; name it as
/// `impl TwoInputFragment<A, B, Out = U>` (inputs with event time) or
/// `impl TwoInputFragment<A, B, NoEventTime, Out = U>` (for inputs
/// `Input<A, NoEventTime>`, `Input<B, NoEventTime>`).
///
/// The rules of one-input fragments (see [the `fragment` module](crate::fragment)) hold,
/// and:
/// - the body combines the **first input with the second**, in that order
///   (`first.connect(second)`, `first.union(second)`,
///   `first.key_by(..).interval_join(second.key_by(..))`), each input with any operators
///   of its own in front; combining the second with the first is refused with
///   [`Error::InvalidConfig`] (field `fragment`) by the pipeline's terminal operation or
///   the test driver, and not combining them does not compile;
/// - its operators get the ids they would get written inline: those of each input
///   continue the ids of the stream it is spliced behind, those after the combination
///   continue the first stream's;
/// - each input's own operators see that input's watermark, those after the combination
///   the lowest of both (as the engines do);
/// - its interval joins keep their buffers as the Redis engine does (as JSON: with
///   feature `redis`, both joined element types are serde `Serialize + DeserializeOwned`).
///
/// Customers (the latest name of each, in keyed state) enrich orders, written once and
/// run on the memory engine; the same function follows two topics on the Redis engine
/// and runs under [`TwoInputTestDriver`](crate::testing::TwoInputTestDriver):
///
/// ```
/// use streaming::api::{Collector, KeyedContext, ValueStateDescriptor};
/// use streaming::fragment::{Input, TwoInputFragment};
/// use streaming::{BoxError, KeyedCoProcessFunction, MemoryEnv};
///
/// type Customer = (u32, String); // (customer id, name)
/// type Order = (u32, u64); // (customer id, cents)
///
/// const NAME: ValueStateDescriptor<String> = ValueStateDescriptor::persistent("name", String::new());
///
/// #[derive(Clone)]
/// struct Enrich;
///
/// impl KeyedCoProcessFunction<u32, Customer, Order> for Enrich {
///     type Out = String;
///     fn process_element1(
///         &mut self,
///         customer: Customer,
///         ctx: &mut KeyedContext<'_, u32>,
///         _out: &mut Collector<'_, String>,
///     ) -> Result<(), BoxError> {
///         ctx.state(&NAME)?.update(customer.1);
///         Ok(())
///     }
///     fn process_element2(
///         &mut self,
///         order: Order,
///         ctx: &mut KeyedContext<'_, u32>,
///         out: &mut Collector<'_, String>,
///     ) -> Result<(), BoxError> {
///         let name = ctx.state(&NAME)?.value();
///         out.collect(format!("{name}: {}", order.1));
///         Ok(())
///     }
/// }
///
/// /// Each order with its customer's latest name.
/// fn enrich(customers: Input<Customer>, orders: Input<Order>) -> impl TwoInputFragment<Customer, Order, Out = String> {
///     customers
///         .connect(orders)
///         .key_by(|c: &Customer| c.0, |o: &Order| o.0)
///         .process(Enrich)
/// }
///
/// let env = MemoryEnv::new();
/// let customers = env.from_timestamped_collection([((1, "ada".to_string()), 0)]);
/// let orders = env.from_timestamped_collection([((1, 30), 5), ((2, 7), 6)]);
/// // The memory engine runs the first input (the customers) to its end, then the second.
/// let lines = customers.transform_with(orders, enrich).collect_vec()?;
/// assert_eq!(lines, ["ada: 30", ": 7"]);
/// # Ok::<(), streaming::Error>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a two-input pipeline fragment of `Input<{A}, {Tm}>` and `Input<{B}, {Tm}>` that runs on every engine",
    label = "not a fragment of `Input<{A}, {Tm}>` and `Input<{B}, {Tm}>`",
    note = "a two-input fragment is a stream built from both of the function's inputs, combined first with second (`first.connect(second)`, `first.union(second)`, `first.key_by(..).interval_join(second.key_by(..))`); no source, no sink",
    note = "its functions and sinks must be `Clone + Send + 'static`; with feature `redis`, keyed state, window keys, accumulators and interval-joined elements must be serde `Serialize + DeserializeOwned`"
)]
pub trait TwoInputFragment<A, B, Tm: StreamTime = EventTime>: Sealed {
    /// The element type the fragment produces.
    type Out;

    /// The fragment's plan.
    #[doc(hidden)]
    type Plan: TwoInputFragmentPlan<A, B, Tm, Out = Self::Out>;

    /// The fragment's stream, or the configuration error that stopped building it.
    #[doc(hidden)]
    fn into_stream(self) -> Result<DataStream<Self::Plan>, Error>;
}

/// A plan rooted at the [`FragmentInputs`] of `A` and `B` that every engine can build.
/// Not public API.
#[doc(hidden)]
pub trait TwoInputFragmentPlan<A, B, Tm>:
    Plan<Root = FragmentInputs<A, B, Tm>, Head = Fed<A, B>> + BuildInFragment + Clone + Send + 'static
{
}

impl<A, B, Tm, P> TwoInputFragmentPlan<A, B, Tm> for P where
    P: Plan<Root = FragmentInputs<A, B, Tm>, Head = Fed<A, B>>
        + BuildInFragment
        + Clone
        + Send
        + 'static
{
}

impl<A, B, Tm, P> TwoInputFragment<A, B, Tm> for DataStream<P>
where
    Tm: StreamTime,
    P: TwoInputFragmentPlan<A, B, Tm>,
{
    type Out = P::Out;
    type Plan = P;

    fn into_stream(self) -> Result<DataStream<P>, Error> {
        Ok(self)
    }
}

impl<A, B, Tm, P> TwoInputFragment<A, B, Tm> for Result<DataStream<P>, Error>
where
    Tm: StreamTime,
    P: TwoInputFragmentPlan<A, B, Tm>,
{
    type Out = P::Out;
    type Plan = P;

    fn into_stream(self) -> Result<DataStream<P>, Error> {
        self
    }
}

impl<P: Plan> DataStream<P> {
    /// Continues this stream and `other` with `fragment`, a function from two
    /// [`Input`]s to a [`TwoInputFragment`]: this stream feeds its first input, `other` its
    /// second. Its operators get the ids they would get written inline (see
    /// [`TwoInputFragment`]), so keyed state keeps its place.
    ///
    /// Both streams come from one engine's sources and agree on event time, as for
    /// [`connect`](DataStream::connect); a fragment whose inputs carry event time
    /// (`Input<T>`) follows only streams with event time. How the inputs interleave is
    /// the engine's choice: the memory engine runs this stream's input to its end, then
    /// `other`'s; the Redis engine reads co-partitioned topics batch by batch.
    ///
    /// # Errors
    /// None here: a configuration error of the fragment, or a fragment that combines its
    /// second input with its first ([`Error::InvalidConfig`], field `fragment`), is
    /// returned by the pipeline's terminal operation.
    pub fn transform_with<Q, F, G, Tm>(
        self,
        other: DataStream<Q>,
        fragment: G,
    ) -> DataStream<SplicedTwo<P, Q, F::Plan>>
    where
        Q: Plan<Time = P::Time>,
        P::Root: CombineRoots<Q::Root>,
        G: FnOnce(Input<P::Out, Tm>, Input<Q::Out, Tm>) -> F,
        F: TwoInputFragment<P::Out, Q::Out, Tm>,
        Tm: StreamTime,
        P::Time: Offers<Tm>,
    {
        let first = self.fragment_input();
        let second = other.second_fragment_input();
        let built = fragment(first, second).into_stream();
        self.splice_two(other, built)
    }
}
