//! One chain fed by the events of two inputs ([`Fed`]): the chains of both inputs end in
//! one [`Merge`], and every call on an input's chain (open, a record, a watermark, …)
//! reaches the chain as an event of that input ([`TwoInputChain`]).
//!
//! The memory engine drives its two-input plans this way (one input after the other), a
//! test driver drives a two-input fragment this way (one call at a time), and a two-input
//! fragment spliced behind an engine's own union gets its inputs' calls as records
//! ([`InBand`]), so that the fragment's operators see exactly what they would see written
//! inline ([`FedInBand`]).

use super::{Merge, Operator, Shared};
use crate::Error;
use std::marker::PhantomData;

/// An event of the first input or of the second.
#[doc(hidden)]
pub enum Fed<A, B> {
    First(Event<A>),
    Second(Event<B>),
}

/// One call on an input's chain.
#[doc(hidden)]
pub enum Event<T> {
    Open,
    Record(T),
    Watermark(i64),
    ProcessingTime(i64),
    Finish,
    Close,
    /// The input will never run (an earlier input's run failed): it counts as closed.
    GiveUp,
}

/// The chains of both inputs, each ending in its input of `merge`, which feeds `M`
/// records to the rest of the pipeline.
pub(crate) struct TwoInputChain<CA, CB, O, M> {
    first: CA,
    second: CB,
    merge: Shared<Merge<O>>,
    _merged: PhantomData<fn(M)>,
}

impl<CA, CB, O, M> TwoInputChain<CA, CB, O, M> {
    /// The chains `first` and `second`, built in front of inputs 0 and 1 of `merge`.
    pub(crate) fn new(first: CA, second: CB, merge: Shared<Merge<O>>) -> Self {
        TwoInputChain {
            first,
            second,
            merge,
            _merged: PhantomData,
        }
    }
}

/// Makes the call `event` stands for on input `input`'s `chain`.
fn deliver<T, M, C, O>(
    chain: &mut C,
    event: Event<T>,
    timestamp: i64,
    merge: &Shared<Merge<O>>,
    input: usize,
) -> Result<(), Error>
where
    C: Operator<T>,
    O: Operator<M>,
{
    match event {
        Event::GiveUp => merge.borrow_mut().give_up::<M>(input),
        Event::Open => chain.open(),
        Event::Record(value) => chain.process(value, timestamp),
        Event::Watermark(watermark) => chain.on_watermark(watermark),
        Event::ProcessingTime(now) => chain.on_processing_time(now),
        Event::Finish => chain.finish(),
        Event::Close => chain.close(),
    }
}

/// The inputs' calls come as [`Fed`] events; the chain's own lifecycle calls concern both
/// inputs: `open`, `on_processing_time`, `finish` and `close` go to both chains, and
/// `on_watermark(w)` says the merged watermark is at least `w` (an engine merged the
/// inputs before this chain, leaving an idle input out): it goes to the merge, not to the
/// inputs' chains.
impl<A, B, CA, CB, O, M> Operator<Fed<A, B>> for TwoInputChain<CA, CB, O, M>
where
    CA: Operator<A>,
    CB: Operator<B>,
    O: Operator<M>,
{
    fn open(&mut self) -> Result<(), Error> {
        self.first.open().and(self.second.open())
    }

    #[inline]
    fn process(&mut self, fed: Fed<A, B>, timestamp: i64) -> Result<(), Error> {
        match fed {
            Fed::First(event) => deliver(&mut self.first, event, timestamp, &self.merge, 0),
            Fed::Second(event) => deliver(&mut self.second, event, timestamp, &self.merge, 1),
        }
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        self.merge.borrow_mut().forward_at_least::<M>(watermark)
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

/// One input's side of a chain `C` of [`Fed`] events: each call on it becomes an event of
/// that input. `Other` is the other input's record type.
pub(crate) struct Side<'a, C, Other, const SECOND: bool>(
    pub(crate) &'a mut C,
    pub(crate) PhantomData<fn() -> Other>,
);

/// One input's chain ending in a chain of [`Fed`] records `N` (an input of an engine's
/// merge): every call on it also goes downstream as a record, the event it stands for,
/// and `open`, `on_watermark`, `finish` and `close` go on as themselves, so that the
/// merge in front of `N` keeps its own account.
#[doc(hidden)]
pub struct InBand<N, Other, const SECOND: bool> {
    next: N,
    _other: PhantomData<fn() -> Other>,
}

impl<N, Other, const SECOND: bool> InBand<N, Other, SECOND> {
    pub(crate) fn new(next: N) -> Self {
        InBand {
            next,
            _other: PhantomData,
        }
    }
}

macro_rules! sides {
    ($second:literal, $variant:ident, $item:ident, $other:ident) => {
        impl<A, B, C: Operator<Fed<A, B>>> Operator<$item> for Side<'_, C, $other, $second> {
            fn open(&mut self) -> Result<(), Error> {
                self.0.process(Fed::$variant(Event::Open), i64::MIN)
            }
            #[inline]
            fn process(&mut self, value: $item, timestamp: i64) -> Result<(), Error> {
                self.0
                    .process(Fed::$variant(Event::Record(value)), timestamp)
            }
            fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
                self.0
                    .process(Fed::$variant(Event::Watermark(watermark)), watermark)
            }
            fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
                self.0
                    .process(Fed::$variant(Event::ProcessingTime(now)), now)
            }
            fn finish(&mut self) -> Result<(), Error> {
                self.0.process(Fed::$variant(Event::Finish), i64::MAX)
            }
            fn close(&mut self) -> Result<(), Error> {
                self.0.process(Fed::$variant(Event::Close), i64::MAX)
            }
        }

        impl<A, B, N: Operator<Fed<A, B>>> Operator<$item> for InBand<N, $other, $second> {
            fn open(&mut self) -> Result<(), Error> {
                self.next.open()?;
                Side::<_, $other, $second>(&mut self.next, PhantomData).open()
            }
            #[inline]
            fn process(&mut self, value: $item, timestamp: i64) -> Result<(), Error> {
                Side::<_, $other, $second>(&mut self.next, PhantomData).process(value, timestamp)
            }
            fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
                Side::<_, $other, $second>(&mut self.next, PhantomData).on_watermark(watermark)?;
                self.next.on_watermark(watermark)
            }
            fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
                Side::<_, $other, $second>(&mut self.next, PhantomData).on_processing_time(now)
            }
            fn finish(&mut self) -> Result<(), Error> {
                Side::<_, $other, $second>(&mut self.next, PhantomData).finish()?;
                self.next.finish()
            }
            fn close(&mut self) -> Result<(), Error> {
                let closed = Side::<_, $other, $second>(&mut self.next, PhantomData).close();
                closed.and(self.next.close())
            }
        }
    };
}
sides!(false, First, A, B);
sides!(true, Second, B, A);

/// The end of an engine's two-input chain whose inputs end in [`InBand`]s: the [`Fed`]
/// records go to the two-input chain `C` (a fragment's), which so sees each input's
/// calls; of the engine merge's own calls only the watermark goes on (the merged
/// watermark, which may leave an idle input out), and its `close` gives up the inputs of
/// `C` that never closed (an input the engine never ran).
pub(crate) struct FedInBand<C> {
    chain: C,
    closed: [bool; 2],
}

impl<C> FedInBand<C> {
    pub(crate) fn new(chain: C) -> Self {
        FedInBand {
            chain,
            closed: [false; 2],
        }
    }
}

impl<A, B, C: Operator<Fed<A, B>>> Operator<Fed<A, B>> for FedInBand<C> {
    fn open(&mut self) -> Result<(), Error> {
        Ok(())
    }

    #[inline]
    fn process(&mut self, fed: Fed<A, B>, timestamp: i64) -> Result<(), Error> {
        match &fed {
            Fed::First(Event::Close | Event::GiveUp) => self.closed[0] = true,
            Fed::Second(Event::Close | Event::GiveUp) => self.closed[1] = true,
            _ => {}
        }
        self.chain.process(fed, timestamp)
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        self.chain.on_watermark(watermark)
    }

    fn finish(&mut self) -> Result<(), Error> {
        Ok(())
    }

    fn close(&mut self) -> Result<(), Error> {
        let mut result = Ok(());
        if !std::mem::replace(&mut self.closed[0], true) {
            result = self.chain.process(Fed::First(Event::GiveUp), i64::MAX);
        }
        if !std::mem::replace(&mut self.closed[1], true) {
            result = result.and(self.chain.process(Fed::Second(Event::GiveUp), i64::MAX));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Convert, MergeInput};
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Keeps what reaches the end of the chain as text.
    #[derive(Clone, Default)]
    struct Log(Rc<RefCell<Vec<String>>>);

    impl Operator<i64> for Log {
        fn open(&mut self) -> Result<(), Error> {
            self.0.borrow_mut().push("open".into());
            Ok(())
        }
        fn process(&mut self, value: i64, timestamp: i64) -> Result<(), Error> {
            self.0.borrow_mut().push(format!("{value}@{timestamp}"));
            Ok(())
        }
        fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
            self.0.borrow_mut().push(format!("wm {watermark}"));
            Ok(())
        }
        fn finish(&mut self) -> Result<(), Error> {
            self.0.borrow_mut().push("finish".into());
            Ok(())
        }
        fn close(&mut self) -> Result<(), Error> {
            self.0.borrow_mut().push("close".into());
            Ok(())
        }
    }

    struct Same;
    impl<T> Convert<T> for Same {
        type Out = T;
        fn convert(value: T) -> T {
            value
        }
    }

    /// A fragment's two-input chain (each input straight into its merge) behind an
    /// engine's merge of two inputs that end in [`InBand`]s.
    #[test]
    fn each_input_reaches_its_own_chain_and_the_engine_merge_only_raises_the_watermark() {
        let log = Log::default();
        let inner = Merge::shared(log.clone(), 2);
        let fragment = TwoInputChain::<_, _, _, i64>::new(
            MergeInput::<_, Same>::new(&inner, 0),
            MergeInput::<_, Same>::new(&inner, 1),
            inner,
        );
        let engine = Merge::shared(FedInBand::new(fragment), 2);
        let mut a = InBand::<_, i64, false>::new(MergeInput::<_, Same>::new(&engine, 0));
        let mut b = InBand::<_, i64, true>::new(MergeInput::<_, Same>::new(&engine, 1));
        a.open().unwrap();
        b.open().unwrap();
        a.on_watermark(10).unwrap();
        b.process(1, 3).unwrap();
        b.on_watermark(5).unwrap();
        // The engine leaves the idle second input out: the merged watermark rises.
        engine
            .borrow_mut()
            .set_idle::<Fed<i64, i64>>(1, true)
            .unwrap();
        a.process(2, 11).unwrap();
        b.on_watermark(7).unwrap(); // below what went on: nothing
        a.on_watermark(i64::MAX).unwrap();
        a.finish().unwrap();
        a.close().unwrap();
        b.on_watermark(i64::MAX).unwrap();
        b.finish().unwrap();
        b.close().unwrap();
        let expected = [
            "open",
            "1@3",
            "wm 5",
            "wm 10",
            "2@11",
            "wm 9223372036854775807",
            "finish",
            "close",
        ];
        assert_eq!(*log.0.borrow(), expected);
    }

    /// An input the engine never ran (its run stopped on the other) is given up when the
    /// engine closes: the fragment's end closes once.
    #[test]
    fn an_input_the_engine_never_ran_is_given_up_at_close() {
        let log = Log::default();
        let inner = Merge::shared(log.clone(), 2);
        let fragment = TwoInputChain::<_, _, _, i64>::new(
            MergeInput::<_, Same>::new(&inner, 0),
            MergeInput::<_, Same>::new(&inner, 1),
            inner,
        );
        let engine = Merge::shared(FedInBand::new(fragment), 2);
        let mut a = InBand::<_, i64, false>::new(MergeInput::<_, Same>::new(&engine, 0));
        a.open().unwrap();
        a.process(4, 1).unwrap();
        a.close().unwrap();
        assert_eq!(*log.0.borrow(), ["open", "4@1"]);
        engine.borrow_mut().give_up::<Fed<i64, i64>>(1).unwrap();
        assert_eq!(*log.0.borrow(), ["open", "4@1", "close"]);
    }
}
