//! Which instantiation of a generic function a block runs in (see docs/design.md, "Keys").
//!
//! A block's `static` is shared by every instantiation of its function, including the
//! instantiations of an enclosing generic `impl`, whose parameters the attribute on a method
//! cannot see. So the macro passes a marker that needs no names: a closure written inside the
//! block. A closure's type is generic over every parameter in scope where it is written (the
//! function's, the `impl`'s and `Self`, implicit `impl Trait` parameters included), so its
//! `TypeId` differs between instantiations and is the same for every call of one.
//!
//! The id is a constant of each instantiation, so keying by it costs one 16-byte compare and
//! one word of hashing per call, and no string is hashed.

use std::any::TypeId;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

/// The identity of one instantiation of a block's function; see the module docs.
#[derive(Clone, Copy)]
pub struct Instance {
    id: TypeId,
    name: &'static str,
}

impl Instance {
    /// The instantiation in which `marker`, a closure written in the block, was created
    /// (`Instance::of(&|| ())`).
    #[inline]
    pub fn of<F: ?Sized>(_marker: &F) -> Instance {
        Instance { id: erased_type_id::<F>(), name: std::any::type_name::<F>() }
    }

    /// The marker's type name, which names the instantiation (`m::Wrap<m::Cube>::run::{{closure}}`
    /// with today's compilers); for messages only, never compared.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl PartialEq for Instance {
    fn eq(&self, other: &Instance) -> bool {
        self.id == other.id
    }
}

impl Eq for Instance {}

impl Hash for Instance {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// `TypeId` of `T` with its lifetimes erased. `TypeId::of` needs `T: 'static`, and a closure in a
/// function generic over `A` is `'static` only when `A` is. Lifetimes do not change which
/// instantiation runs, so erasing them loses nothing here.
pub(crate) fn erased_type_id<T: ?Sized>() -> TypeId {
    trait NonStaticAny {
        fn id(&self) -> TypeId
        where
            Self: 'static;
    }
    impl<T: ?Sized> NonStaticAny for PhantomData<T> {
        fn id(&self) -> TypeId
        where
            Self: 'static,
        {
            TypeId::of::<T>()
        }
    }
    let marker = PhantomData::<T>;
    let short: &dyn NonStaticAny = &marker;
    // SAFETY: the two types differ only in the trait object's lifetime bound, so they have the
    // same layout. Lifetimes do not exist at run time: the call computes the id of `T` with its
    // lifetimes erased. The id is only compared, never used to downcast a value, so no borrow
    // outlives its lifetime (this is the `typeid` crate's technique).
    let erased: &(dyn NonStaticAny + 'static) = unsafe { std::mem::transmute(short) };
    erased.id()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker<T>(_: &T) -> Instance {
        Instance::of(&|| ())
    }

    fn borrowed<T>(_: &T) -> Instance {
        Instance::of(&|| ())
    }

    #[test]
    fn instantiations_differ_and_repeat() {
        assert_eq!(marker(&1u8), marker(&2u8));
        assert_ne!(marker(&1u8), marker(&1u16));
        // A type parameter that is not `'static`.
        let (a, b) = (String::new(), 0u32);
        assert_eq!(borrowed(&&a), borrowed(&&a));
        assert_ne!(borrowed(&&a), borrowed(&&b));
        assert!(marker(&1u16).name().contains("u16"), "{}", marker(&1u16).name());
    }
}
