//! Where the chains of several inputs meet: one downstream operator fed by N inputs
//! ([`Merge`]), each input reaching it through a [`MergeInput`].
//!
//! The downstream sees one stream: every input's records, and a watermark that is the
//! minimum of the inputs' watermarks (an input that ended counts as `i64::MAX`, so it no
//! longer holds the others back; an input its engine marked idle does not count until its
//! next record). It is opened by the first input that opens, finished when
//! every input finished, and closed once, when every input closed or was given up.

use super::{Operator, Shared};
use crate::Error;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;

/// The downstream operator of N inputs and what it has been told so far.
pub(crate) struct Merge<O> {
    downstream: O,
    /// Each input's highest watermark (ms); `i64::MIN` before its first.
    watermarks: Vec<i64>,
    /// The inputs marked idle ([`set_idle`](Self::set_idle)): left out of the minimum.
    idle: Vec<bool>,
    /// The watermark forwarded downstream: the minimum of `watermarks` when it last rose.
    forwarded: i64,
    finished: Vec<bool>,
    closed: Vec<bool>,
    opened: bool,
    downstream_closed: bool,
}

impl<O> Merge<O> {
    /// `downstream`, fed by `inputs` inputs.
    pub(crate) fn shared(downstream: O, inputs: usize) -> Shared<Self> {
        Rc::new(RefCell::new(Merge {
            downstream,
            watermarks: vec![i64::MIN; inputs],
            idle: vec![false; inputs],
            forwarded: i64::MIN,
            finished: vec![false; inputs],
            closed: vec![false; inputs],
            opened: false,
            downstream_closed: false,
        }))
    }

    /// Input `input` will never run (an earlier input failed): it counts as closed, and the
    /// downstream closes when it was the last one open.
    pub(crate) fn give_up<T>(&mut self, input: usize) -> Result<(), Error>
    where
        O: Operator<T>,
    {
        self.closed[input] = true;
        self.close_when_all_closed::<T>()
    }

    /// Marks input `input` idle (it had no record for a while: its watermark no longer
    /// holds the others back) or active again (its next record came). Forwards the
    /// watermark when leaving an input out raises the minimum; the watermark never goes
    /// back, so an input's records behind it when it becomes active again are late.
    ///
    /// # Errors
    /// The downstream's error on the watermark.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    pub(crate) fn set_idle<T>(&mut self, input: usize, idle: bool) -> Result<(), Error>
    where
        O: Operator<T>,
    {
        self.idle[input] = idle;
        self.forward_lowest::<T>()
    }

    /// The merged watermark is at least `watermark`: an engine merged these inputs before
    /// (a two-input fragment behind an engine's union, which may leave an idle input out).
    /// Forwards it when it is above the one forwarded last.
    ///
    /// # Errors
    /// The downstream's error on the watermark.
    pub(crate) fn forward_at_least<T>(&mut self, watermark: i64) -> Result<(), Error>
    where
        O: Operator<T>,
    {
        if watermark > self.forwarded {
            self.forwarded = watermark;
            return self.downstream.on_watermark(watermark);
        }
        Ok(())
    }

    /// Forwards the lowest watermark of the inputs not idle, when it rose (none when every
    /// input is idle).
    fn forward_lowest<T>(&mut self) -> Result<(), Error>
    where
        O: Operator<T>,
    {
        let lowest = (self.watermarks.iter().zip(&self.idle))
            .filter(|(_, idle)| !**idle)
            .map(|(w, _)| *w)
            .min();
        match lowest {
            Some(lowest) if lowest > self.forwarded => {
                self.forwarded = lowest;
                self.downstream.on_watermark(lowest)
            }
            _ => Ok(()),
        }
    }

    fn close_when_all_closed<T>(&mut self) -> Result<(), Error>
    where
        O: Operator<T>,
    {
        if self.closed.iter().all(|c| *c) && self.opened && !self.downstream_closed {
            self.downstream_closed = true;
            return self.downstream.close();
        }
        Ok(())
    }
}

/// Input `index` of a [`Merge`]: its records go downstream converted by `C`.
pub(crate) struct MergeInput<O, C> {
    merge: Shared<Merge<O>>,
    index: usize,
    _convert: PhantomData<C>,
}

impl<O, C> MergeInput<O, C> {
    /// Input `index` of `merge`.
    pub(crate) fn new(merge: &Shared<Merge<O>>, index: usize) -> Self {
        MergeInput {
            merge: Rc::clone(merge),
            index,
            _convert: PhantomData,
        }
    }
}

/// How the records of one input become the merged stream's records: unchanged (a union)
/// or tagged with the input they came from (connected streams).
pub trait Convert<T> {
    /// The merged stream's record type.
    type Out;
    /// The merged record for `value`.
    fn convert(value: T) -> Self::Out;
}

impl<T, O, C> Operator<T> for MergeInput<O, C>
where
    C: Convert<T>,
    O: Operator<C::Out>,
{
    fn open(&mut self) -> Result<(), Error> {
        let mut merge = self.merge.borrow_mut();
        if merge.opened {
            return Ok(());
        }
        merge.opened = true;
        merge.downstream.open()
    }

    #[inline]
    fn process(&mut self, value: T, timestamp: i64) -> Result<(), Error> {
        let converted = C::convert(value);
        self.merge
            .borrow_mut()
            .downstream
            .process(converted, timestamp)
    }

    fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
        let mut merge = self.merge.borrow_mut();
        let own = &mut merge.watermarks[self.index];
        *own = (*own).max(watermark);
        merge.forward_lowest::<C::Out>()
    }

    fn on_processing_time(&mut self, now: i64) -> Result<(), Error> {
        self.merge.borrow_mut().downstream.on_processing_time(now)
    }

    fn finish(&mut self) -> Result<(), Error> {
        let mut merge = self.merge.borrow_mut();
        merge.finished[self.index] = true;
        if merge.finished.iter().all(|f| *f) {
            return merge.downstream.finish();
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), Error> {
        let mut merge = self.merge.borrow_mut();
        merge.closed[self.index] = true;
        merge.close_when_all_closed::<C::Out>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps what reaches the downstream as text.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl Operator<i64> for Log {
        fn open(&mut self) -> Result<(), Error> {
            self.0.push("open".into());
            Ok(())
        }
        fn process(&mut self, value: i64, timestamp: i64) -> Result<(), Error> {
            self.0.push(format!("{value}@{timestamp}"));
            Ok(())
        }
        fn on_watermark(&mut self, watermark: i64) -> Result<(), Error> {
            self.0.push(format!("wm {watermark}"));
            Ok(())
        }
        fn finish(&mut self) -> Result<(), Error> {
            self.0.push("finish".into());
            Ok(())
        }
        fn close(&mut self) -> Result<(), Error> {
            self.0.push("close".into());
            Ok(())
        }
    }

    struct Same;
    impl Convert<i64> for Same {
        type Out = i64;
        fn convert(value: i64) -> i64 {
            value
        }
    }

    fn inputs() -> (Shared<Merge<Log>>, [MergeInput<Log, Same>; 2]) {
        let merge = Merge::shared(Log::default(), 2);
        let inputs = [MergeInput::new(&merge, 0), MergeInput::new(&merge, 1)];
        (merge, inputs)
    }

    fn log(merge: &Shared<Merge<Log>>) -> Vec<String> {
        merge.borrow().downstream.0.clone()
    }

    #[test]
    fn an_idle_input_does_not_hold_the_watermark_back_until_its_next_record() {
        let (merge, [mut a, mut b]) = inputs();
        a.open().unwrap();
        a.on_watermark(10).unwrap();
        b.on_watermark(3).unwrap();
        a.on_watermark(20).unwrap();
        merge.borrow_mut().set_idle::<i64>(1, true).unwrap();
        a.on_watermark(30).unwrap();
        merge.borrow_mut().set_idle::<i64>(1, false).unwrap();
        b.on_watermark(25).unwrap();
        // Both idle: nothing to forward.
        merge.borrow_mut().set_idle::<i64>(0, true).unwrap();
        merge.borrow_mut().set_idle::<i64>(1, true).unwrap();
        assert_eq!(log(&merge), ["open", "wm 3", "wm 20", "wm 30"]);
    }

    #[test]
    fn the_watermark_is_the_lowest_of_the_inputs_and_an_ended_input_stops_counting() {
        let (merge, [mut a, mut b]) = inputs();
        a.open().unwrap();
        b.open().unwrap();
        a.on_watermark(10).unwrap();
        b.on_watermark(5).unwrap();
        b.on_watermark(20).unwrap();
        a.process(1, 11).unwrap();
        a.on_watermark(i64::MAX).unwrap();
        a.finish().unwrap();
        a.close().unwrap();
        b.on_watermark(30).unwrap();
        b.on_watermark(i64::MAX).unwrap();
        b.finish().unwrap();
        b.close().unwrap();
        let expected = [
            "open",
            "wm 5",
            "wm 10",
            "1@11",
            "wm 20",
            "wm 30",
            "wm 9223372036854775807",
            "finish",
            "close",
        ];
        assert_eq!(log(&merge), expected);
    }

    #[test]
    fn an_input_given_up_closes_the_downstream_once_the_others_closed() {
        let (merge, [mut a, _b]) = inputs();
        a.open().unwrap();
        a.process(7, 1).unwrap();
        a.close().unwrap();
        assert_eq!(
            log(&merge),
            ["open", "7@1"],
            "still open for the second input"
        );
        merge.borrow_mut().give_up::<i64>(1).unwrap();
        assert_eq!(log(&merge), ["open", "7@1", "close"]);
    }
}
