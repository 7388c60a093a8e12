//! Bulkhead names that cost nothing to put in an error and are freed with their last holder.
//!
//! A refused call builds a [`BulkheadFull`](crate::BulkheadFull) that names its bulkhead, so
//! the name must be copied into it without allocating and without writing a cache line that
//! other threads share (DESIGN.md, invariant 2). Until issue 13 every distinct name was
//! interned for the life of the process (`&'static str`): free to copy, but a service that
//! made one bulkhead per tenant or per host grew without bound.
//!
//! A [`Name`] is one of two things:
//!
//! * **inline**, for names of up to [`INLINE_CAPACITY`] bytes (31: `tenant-` and a 24-digit
//!   id, a host and port, a route): the bytes themselves, copied by value into every error
//!   and event. Building a refusal reads the bulkhead (a line it already reads) and writes
//!   only the caller's stack; the memory goes with the bulkhead.
//! * **shared**, for longer names: an `Arc<str>`. Copying one into an error is a reference
//!   count increment, an atomic write to a line that every refusal of that bulkhead writes.
//!   This is the documented price of a long name; no allocation still.
//!
//! Why not the alternatives: an interner with reference counts pays the shared write for
//! every name; one with a fixed cap must either refuse new bulkheads or leak past the cap;
//! and an index into a table of names would make `bulkhead_name()` take a lock, and need the
//! name to outlive its bulkhead anyway, since an error may. The inline copy makes the common
//! case (short names) as cheap as the interned pointer was, at the price of a larger error:
//! `size_of::<BulkheadFull>()` went from 48 to 64 bytes (one cache line).
//!
//! The layout is chosen for the copy: the length byte stores `len + 1` as a `NonZeroU8`, so
//! its zero is free to mark the shared variant (no separate tag byte), and a [`Name`] is 32
//! bytes, which the compiler copies with two 16-byte moves.

use core::fmt;
use core::num::NonZeroU8;
use std::sync::Arc;

/// The longest name stored inline (bytes of UTF-8). Chosen so that a [`Name`] is 32 bytes:
/// the length byte (which doubles as the tag) and the bytes.
pub(crate) const INLINE_CAPACITY: usize = 31;

/// A bulkhead's name: inline up to [`INLINE_CAPACITY`] bytes, shared behind an `Arc<str>`
/// beyond. Cloning an inline name copies 32 bytes; cloning a shared one increments its
/// reference count.
pub(crate) enum Name {
    /// A name of up to [`INLINE_CAPACITY`] bytes.
    Inline(Inline),
    /// A name longer than [`INLINE_CAPACITY`] bytes.
    Shared(Arc<str>),
}

impl Name {
    /// Stores `name` inline if it fits, behind an `Arc<str>` otherwise.
    pub(crate) fn new(name: String) -> Name {
        let len = name.len();
        if len <= INLINE_CAPACITY {
            let mut bytes = [0; INLINE_CAPACITY];
            bytes[..len].copy_from_slice(name.as_bytes());
            // `len + 1` fits in a `u8` (INLINE_CAPACITY is below 255) and is not zero.
            let len_plus_one = NonZeroU8::new(len as u8 + 1).unwrap_or(NonZeroU8::MAX);
            Name::Inline(Inline { len_plus_one, bytes })
        } else {
            Name::Shared(Arc::from(name))
        }
    }

    /// The name.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        match self {
            // `bytes[..len]` is a copy of a whole `str`, so it is valid UTF-8 and this never
            // takes the `Err` arm; checking it costs a pass over at most 31 bytes, and keeps
            // the crate free of `unsafe` (`from_utf8_unchecked`).
            Name::Inline(Inline { len_plus_one, bytes }) => {
                let len = usize::from(len_plus_one.get() - 1);
                core::str::from_utf8(&bytes[..len]).unwrap_or_default()
            }
            Name::Shared(name) => name,
        }
    }
}

/// An inline name's length and bytes: `Copy`, so that cloning a [`Name`] copies these 32 bytes
/// as one block (two 16-byte moves) instead of field by field.
#[derive(Clone, Copy)]
pub(crate) struct Inline {
    /// The name's length plus one: never zero, which leaves zero to mark [`Name::Shared`].
    len_plus_one: NonZeroU8,
    /// `bytes[..len_plus_one - 1]` is the whole name, valid UTF-8.
    bytes: [u8; INLINE_CAPACITY],
}

impl Clone for Name {
    #[inline]
    fn clone(&self) -> Name {
        match self {
            Name::Inline(inline) => Name::Inline(*inline),
            Name::Shared(name) => Name::Shared(Arc::clone(name)),
        }
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

#[cfg(test)]
mod tests {
    use super::{Name, INLINE_CAPACITY};

    #[test]
    fn short_names_are_inline_and_long_ones_shared() {
        let fits = "x".repeat(INLINE_CAPACITY);
        let over = "é".repeat(INLINE_CAPACITY / 2 + 1);
        assert!(matches!(Name::new(String::new()), Name::Inline(_)));
        assert!(matches!(Name::new(fits.clone()), Name::Inline(_)));
        assert!(matches!(Name::new(over.clone()), Name::Shared(_)));
        for name in ["", "bank", "é-ü-✓", fits.as_str(), over.as_str()] {
            assert_eq!(Name::new(name.to_owned()).as_str(), name);
            assert_eq!(Name::new(name.to_owned()).clone(), Name::new(name.to_owned()));
        }
        assert_eq!(core::mem::size_of::<Name>(), 32);
    }
}
