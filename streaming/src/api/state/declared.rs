//! The states a `pipeline!` declares with `.state(..)` before a `process`: each gets its
//! slot in the operator's state when the pipeline is built, and the process function a
//! [`DeclaredState`] holding the slot's index.

use super::backend::KeyedStateBackend;
use super::StateDescriptor;
use crate::Error;
use std::hash::Hash;
use std::marker::PhantomData;

/// A state declared with `.state(..)` in `pipeline!`: the index of its declaration, which
/// is its slot in the operator's state (the pipeline's build put it there). Not public API.
#[doc(hidden)]
pub struct DeclaredState<D> {
    index: usize,
    _descriptor: PhantomData<fn() -> D>,
}

impl<D> DeclaredState<D> {
    /// The `index`-th state of the `.state(..)` declarations before `process`.
    #[inline(always)]
    pub const fn at(index: usize) -> Self {
        DeclaredState {
            index,
            _descriptor: PhantomData,
        }
    }

    /// Its slot in the operator's state.
    #[inline(always)]
    pub(crate) fn slot(self) -> usize {
        self.index
    }
}

impl<D> Clone for DeclaredState<D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D> Copy for DeclaredState<D> {}

/// The states declared before a `process`, registered with the operator's state when the
/// pipeline is built: `()` or a pair (descriptor, the rest), in declaration order. Not
/// public API.
#[doc(hidden)]
pub trait DeclareStates<K>: Clone + 'static {
    /// Gives every declared state its slot, in declaration order.
    ///
    /// # Errors
    /// [`Error::StateType`] when restored state has a state of the same name and another
    /// type.
    #[allow(private_interfaces)]
    fn declare(&self, backend: &mut KeyedStateBackend<K>) -> Result<(), Error>;
}

impl<K> DeclareStates<K> for () {
    #[allow(private_interfaces)]
    fn declare(&self, _backend: &mut KeyedStateBackend<K>) -> Result<(), Error> {
        Ok(())
    }
}

impl<K, D, Rest> DeclareStates<K> for (D, Rest)
where
    K: Hash + Eq + Clone + 'static,
    D: StateDescriptor<K>,
    Rest: DeclareStates<K>,
{
    #[allow(private_interfaces)]
    fn declare(&self, backend: &mut KeyedStateBackend<K>) -> Result<(), Error> {
        backend.declare(&self.0)?;
        self.1.declare(backend)
    }
}
