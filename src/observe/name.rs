//! Bulkhead names that cost nothing to put in an error and are freed with their last holder.
//!
//! A refused call builds a [`BulkheadFull`](crate::BulkheadFull) that names its bulkhead, so
//! the name must be copied into it without allocating and without writing a cache line that
//! other threads share (DESIGN.md, invariant 2). Until issue 13 every distinct name was
//! interned for the life of the process (`&'static str`): free to copy, but a service that
//! made one bulkhead per tenant or per host grew without bound.
//!
//! A [`Name`] is `Copy` (no drop glue: a refusal whose error is discarded costs nothing to
//! build or drop) and one of two things:
//!
//! * **inline**, for names of up to [`INLINE_CAPACITY`] bytes (23: `tenant-` and a 16-digit
//!   id, a short host and port, a route): the bytes themselves, copied by value into every
//!   error and event. Building a refusal reads the bulkhead (a line it already reads) and writes
//!   only the caller's stack; the memory goes with the bulkhead.
//! * **interned**, for longer names: a pointer to a `&'static` record from a process-wide set
//!   that keeps each
//!   distinct long name once, up to [`LONG_NAMES_CAP`] bytes and [`LONG_NAMES_MAX`] names in
//!   all (about 1.6 MiB with the set). Past that cap a new long
//!   name is cut to its first bytes (at a character boundary, ending in `…`) and stored
//!   inline: memory stays bounded whatever a service names its bulkheads, at the price of a
//!   shortened name in errors and events.
//!
//! Why not the alternatives: an `Arc<str>` (or a reference-counted interner) makes every
//! refusal write the count, a cache line shared by every refusing thread, and gives the error
//! drop glue, which measured 17 → 46 instructions and 2.2 → 6.7 ns per refusal (callgrind and
//! criterion, `benches/results/keyed.md`); an index into a table of names would make
//! `bulkhead_name()` take a lock and need the name to outlive its bulkhead anyway.
//!
//! The layout is chosen for the copy: the length byte stores `len + 1` as a `NonZeroU8`, so
//! its zero is free to mark the interned variant (no separate tag byte), and a [`Name`] is 24
//! bytes, which the compiler copies with one 16-byte and one 8-byte move.
//!
//! Why 23 bytes inline (issue 21): the kept refusal (`try_acquire().err()`) must cost no more
//! than tokio's, whose error is one byte. Measured with callgrind (`benches/callgrind.rs`,
//! op `bulkhead_reject_err`, tokio's `tokio_reject_err` 21 instructions), with the limit,
//! reason and wait packed in one word next to the name: 15 bytes inline (a 16-byte name) 18
//! instructions, 23 bytes 20, 31 bytes 24. 23 is the longest that stays under tokio's. Since
//! the engine decides the common refusal first and the error is built on that path without
//! testing a flag (`Semaphore::try_acquire_with`), the kept refusal with 23 bytes inline is
//! 16 to 18 instructions (the spread is code layout between builds).

use core::fmt;
use core::num::NonZeroU8;
use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// The longest name stored inline (bytes of UTF-8). Chosen so that a [`Name`] is 16 bytes:
/// the length byte (which doubles as the tag) and the bytes.
pub(crate) const INLINE_CAPACITY: usize = 23;

/// How many bytes of distinct names longer than [`INLINE_CAPACITY`] the process keeps, in
/// all, counting each name's record (1 MiB). Past it, or past [`LONG_NAMES_MAX`] names, a new long name is shortened to fit
/// inline.
pub(crate) const LONG_NAMES_CAP: usize = 1 << 20;

/// How many distinct long names the process keeps at most: with the set that finds them,
/// the long names take at most about 1.3 MiB (1 MiB of names and their 16-byte records,
/// 32 768 buckets of 9 bytes), within the 1.6 MiB documented before issue 21.
pub(crate) const LONG_NAMES_MAX: usize = 16_384;

/// A bulkhead's name: inline up to [`INLINE_CAPACITY`] bytes, interned beyond (up to
/// [`LONG_NAMES_CAP`] bytes of long names; past it, shortened). Copying one copies 24 bytes.
#[derive(Clone, Copy)]
pub(crate) enum Name {
    /// A name of up to [`INLINE_CAPACITY`] bytes.
    Inline(Inline),
    /// A name longer than [`INLINE_CAPACITY`] bytes, kept for the life of the process.
    Interned(&'static Record),
}

/// An interned long name's record: a thin pointer to it keeps [`Name`] at 24 bytes (a
/// `&'static str` is two words).
pub(crate) struct Record {
    text: Box<str>,
}

/// An interned long name, found in the set by its text.
#[derive(Clone, Copy)]
struct Long(&'static Record);

impl core::borrow::Borrow<str> for Long {
    fn borrow(&self) -> &str {
        &self.0.text
    }
}

impl core::hash::Hash for Long {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        str::hash(&self.0.text, state);
    }
}

impl PartialEq for Long {
    fn eq(&self, other: &Long) -> bool {
        self.0.text == other.0.text
    }
}

impl Eq for Long {}

/// What one interned name costs besides its bytes: its leaked [`Record`]. Counted against
/// [`LONG_NAMES_CAP`].
const RECORD_BYTES: usize = core::mem::size_of::<Record>();

/// The process-wide set of long names and the bytes they take.
static LONG_NAMES: Mutex<(Option<HashSet<Long>>, usize)> = Mutex::new((None, 0));

impl Name {
    /// Stores `name` inline if it fits, interned otherwise (shortened past the cap).
    pub(crate) fn new(name: String) -> Name {
        if name.len() <= INLINE_CAPACITY {
            return Name::inline(&name);
        }
        let mut guard = LONG_NAMES.lock().unwrap_or_else(PoisonError::into_inner);
        let (names, bytes) = &mut *guard;
        let names = names.get_or_insert_with(HashSet::new);
        if let Some(existing) = names.get(name.as_str()) {
            return Name::Interned(existing.0);
        }
        let cost = name.len() + RECORD_BYTES;
        if *bytes + cost > LONG_NAMES_CAP || names.len() >= LONG_NAMES_MAX {
            return Name::inline(&shortened(&name));
        }
        *bytes += cost;
        let leaked: &'static Record = Box::leak(Box::new(Record { text: name.into_boxed_str() }));
        names.insert(Long(leaked));
        Name::Interned(leaked)
    }

    /// `name`, which fits, stored inline.
    fn inline(name: &str) -> Name {
        let len = name.len();
        let mut bytes = [0; INLINE_CAPACITY];
        bytes[..len].copy_from_slice(name.as_bytes());
        // `len + 1` fits in a `u8` (INLINE_CAPACITY is below 255) and is not zero.
        let len_plus_one = NonZeroU8::new(len as u8 + 1).unwrap_or(NonZeroU8::MAX);
        Name::Inline(Inline { len_plus_one, bytes })
    }

    /// The name.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        match self {
            // `bytes[..len]` is a copy of a whole `str`, so it is valid UTF-8 and this never
            // takes the `Err` arm; checking it costs a pass over at most 23 bytes, and keeps
            // the crate free of `unsafe` (`from_utf8_unchecked`).
            Name::Inline(Inline { len_plus_one, bytes }) => {
                let len = usize::from(len_plus_one.get() - 1);
                core::str::from_utf8(&bytes[..len]).unwrap_or_default()
            }
            Name::Interned(record) => &record.text,
        }
    }
}

/// The longest prefix of `name` that fits inline with a trailing `…` (3 bytes), cut at a
/// character boundary.
fn shortened(name: &str) -> String {
    let mut end = INLINE_CAPACITY - '…'.len_utf8();
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end])
}

/// An inline name's length and bytes, copied as one 24-byte block.
#[derive(Clone, Copy)]
pub(crate) struct Inline {
    /// The name's length plus one: never zero, which leaves zero to mark [`Name::Interned`].
    len_plus_one: NonZeroU8,
    /// `bytes[..len_plus_one - 1]` is the whole name, valid UTF-8.
    bytes: [u8; INLINE_CAPACITY],
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
    use super::{shortened, Name, INLINE_CAPACITY};

    #[test]
    fn short_names_are_inline_and_long_ones_interned() {
        let fits = "x".repeat(INLINE_CAPACITY);
        let over = "é".repeat(INLINE_CAPACITY / 2 + 1);
        assert!(matches!(Name::new(String::new()), Name::Inline(_)));
        assert!(matches!(Name::new(fits.clone()), Name::Inline(_)));
        assert!(matches!(Name::new(over.clone()), Name::Interned(_)));
        for name in ["", "bank", "é-ü-✓", fits.as_str(), over.as_str()] {
            assert_eq!(Name::new(name.to_owned()).as_str(), name);
            assert_eq!(Name::new(name.to_owned()), Name::new(name.to_owned()));
        }
        // A long name is interned once.
        let (Name::Interned(a), Name::Interned(b)) = (Name::new(over.clone()), Name::new(over))
        else {
            panic!("long names are interned");
        };
        assert!(core::ptr::eq(a, b));
        assert_eq!(core::mem::size_of::<Name>(), 24);
    }

    #[test]
    fn a_shortened_name_fits_inline_and_ends_at_a_char_boundary() {
        for name in ["a".repeat(100), "é".repeat(50), "✓".repeat(40)] {
            let short = shortened(&name);
            assert!(short.len() <= INLINE_CAPACITY, "{short:?}");
            assert!(short.ends_with('…'));
            assert!(name.starts_with(short.trim_end_matches('…')));
            assert!(matches!(Name::inline(&short), Name::Inline(_)));
        }
    }
}
