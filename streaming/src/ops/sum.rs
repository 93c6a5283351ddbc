//! What a sum adds up per element: the element itself (`sum`), a number a function
//! extracts (`sum_by`), or one (`count`). The rolling sum per key and the window sum share
//! it.

/// The number an element adds to a sum (a [`Numeric`](crate::api::Numeric) where a sum
/// uses it).
pub trait Summand<T> {
    /// The number summed.
    type Value;

    /// What `element` adds.
    fn value(&mut self, element: T) -> Self::Value;
}

/// `sum()`: each element is the number it adds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Itself;

impl<T> Summand<T> for Itself {
    type Value = T;

    #[inline(always)]
    fn value(&mut self, element: T) -> T {
        element
    }
}

/// `count()`: each element adds one.
#[derive(Clone, Copy, Debug, Default)]
pub struct One;

impl<T> Summand<T> for One {
    type Value = u64;

    #[inline(always)]
    fn value(&mut self, _element: T) -> u64 {
        1
    }
}

/// `sum_by(f)`: each element adds `f(element)`.
impl<T, V, F: FnMut(&T) -> V> Summand<T> for F {
    type Value = V;

    #[inline(always)]
    fn value(&mut self, element: T) -> V {
        self(&element)
    }
}
