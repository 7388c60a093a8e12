//! Permits: guards that release their slot exactly once, on drop.

use core::fmt;
use std::sync::Arc;

use crate::Bulkhead;

/// A slot in a [`Bulkhead`], borrowed from it. Dropping the permit releases the slot
/// (exactly once) and emits `CallFinished`.
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig};
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
/// {
///     let _permit = bulkhead.try_acquire()?;
///     assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
/// } // released here
/// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
///
/// A permit is `Send`, so a scoped thread may finish the call:
///
/// ```
/// fn is_send<T: Send>(_: &T) {}
/// # let bulkhead = bulkhead::Bulkhead::new("bank", Default::default());
/// let permit = bulkhead.try_acquire().unwrap();
/// is_send(&permit);
/// ```
///
/// It cannot outlive its bulkhead:
///
/// ```compile_fail
/// # use bulkhead::{Bulkhead, BulkheadConfig};
/// let permit = {
///     let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
///     bulkhead.try_acquire().unwrap()
/// };
/// ```
#[must_use = "dropping a permit releases its slot at once"]
#[clippy::has_significant_drop]
pub struct Permit<'a> {
    bulkhead: &'a Bulkhead,
}

impl<'a> Permit<'a> {
    pub(crate) fn new(bulkhead: &'a Bulkhead) -> Self {
        Permit { bulkhead }
    }

    /// The bulkhead this permit belongs to.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let permit = bulkhead.try_acquire()?;
    /// assert_eq!(permit.bulkhead().name(), "bank");
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn bulkhead(&self) -> &'a Bulkhead {
        self.bulkhead
    }

    /// Turns this permit into an owned one without releasing the slot in between.
    pub(crate) fn into_owned(self, bulkhead: Arc<Bulkhead>) -> OwnedPermit {
        debug_assert!(core::ptr::eq(self.bulkhead, &*bulkhead));
        // The slot moves to the owned permit; this guard must not release it.
        core::mem::forget(self);
        OwnedPermit { bulkhead }
    }
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.bulkhead.release_permit();
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("bulkhead", &self.bulkhead.name()).finish()
    }
}

/// A slot in a [`Bulkhead`] that owns a reference to it, so it can move anywhere
/// (`Send + 'static`). Dropping it releases the slot exactly once.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{Bulkhead, BulkheadConfig};
/// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
/// let permit = bulkhead.try_acquire_owned()?;
/// let worker = std::thread::spawn(move || {
///     // ... the call ...
///     drop(permit);
/// });
/// worker.join().unwrap();
/// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[must_use = "dropping a permit releases its slot at once"]
#[clippy::has_significant_drop]
pub struct OwnedPermit {
    bulkhead: Arc<Bulkhead>,
}

impl OwnedPermit {
    /// A permit for a slot already taken from `bulkhead`.
    pub(crate) fn from_acquired(bulkhead: Arc<Bulkhead>) -> Self {
        OwnedPermit { bulkhead }
    }

    /// The bulkhead this permit belongs to.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let permit = bulkhead.try_acquire_owned()?;
    /// assert!(Arc::ptr_eq(permit.bulkhead(), &bulkhead));
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn bulkhead(&self) -> &Arc<Bulkhead> {
        &self.bulkhead
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        self.bulkhead.release_permit();
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit").field("bulkhead", &self.bulkhead.name()).finish()
    }
}
