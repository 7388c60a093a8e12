//! [`CachePadded`]: a value alone on its cache line(s), so that a hot atomic written by one
//! core does not share a line with data another core reads (false sharing).

use core::fmt;
use core::ops::{Deref, DerefMut};

/// `T` aligned (and so padded) to 128 bytes, 256 on s390x.
///
/// 128, not 64, on x86_64 too: its spatial prefetcher fetches cache lines in pairs, so two
/// atomics 64 bytes apart still contend; aarch64 and powerpc64 have cores with 128-byte lines.
/// s390x's lines are 256 bytes. On targets with smaller lines this costs only memory. (This
/// replaced `crossbeam_utils::CachePadded`, the crate's only use of crossbeam-utils; the
/// layout on x86_64 and aarch64 is the same as it was.)
#[cfg_attr(not(target_arch = "s390x"), repr(align(128)))]
#[cfg_attr(target_arch = "s390x", repr(align(256)))]
#[derive(Default)]
pub(crate) struct CachePadded<T> {
    value: T,
}

impl<T> CachePadded<T> {
    /// `value`, padded.
    pub(crate) const fn new(value: T) -> CachePadded<T> {
        CachePadded { value }
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for CachePadded<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for CachePadded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::CachePadded;
    use core::sync::atomic::AtomicU64;

    #[test]
    fn a_padded_value_fills_its_own_lines() {
        let line = if cfg!(target_arch = "s390x") { 256 } else { 128 };
        assert_eq!(core::mem::align_of::<CachePadded<AtomicU64>>(), line);
        assert_eq!(core::mem::size_of::<CachePadded<AtomicU64>>(), line);
        assert_eq!(core::mem::size_of::<[CachePadded<u8>; 2]>(), 2 * line);
    }
}
