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
    /// The slots it holds: 1 for the plain acquires, `n` for `acquire_many(n)`.
    permits: u32,
}

impl<'a> Permit<'a> {
    #[inline]
    pub(crate) fn new(bulkhead: &'a Bulkhead) -> Self {
        Permit { bulkhead, permits: 1 }
    }

    /// A permit for `permits` slots already taken from `bulkhead`.
    #[inline]
    pub(crate) fn with_permits(bulkhead: &'a Bulkhead, permits: u32) -> Self {
        Permit { bulkhead, permits }
    }

    /// How many slots this permit holds.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// assert_eq!(bulkhead.try_acquire()?.num_permits(), 1);
    /// assert_eq!(bulkhead.try_acquire_many(3)?.num_permits(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.permits
    }

    /// Splits `n` slots off into a new permit of the same bulkhead; `None` (and nothing
    /// changes) if this permit holds fewer than `n`. `split(0)` gives an empty permit and
    /// `split(self.num_permits())` moves every slot, leaving this one empty; an empty permit
    /// is still a guard (dropping it releases nothing, and still counts as a finished call).
    ///
    /// No slot is released or taken: the bulkhead's metrics do not change. Counters and
    /// events count guards, so the new permit emits `CallPermitted` now and `CallFinished`
    /// when dropped, like any other.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let mut batch = bulkhead.try_acquire_many(5)?;
    /// let two = batch.split(2).unwrap();
    /// assert_eq!((batch.num_permits(), two.num_permits()), (3, 2));
    /// assert!(batch.split(4).is_none());
    /// drop(two);
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        self.bulkhead.permitted(self.bulkhead.sem().load());
        Some(Permit { bulkhead: self.bulkhead, permits: n })
    }

    /// Moves every slot of `other` into this permit. `other`'s call ends here: it emits
    /// `CallFinished` as if dropped, but releases nothing.
    ///
    /// # Panics
    ///
    /// If `other` belongs to another bulkhead (its slots cannot count against this one's
    /// limit). `other` is then dropped while unwinding, releasing its slots to its own
    /// bulkhead, so no slot is lost.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let mut batch = bulkhead.try_acquire_many(2)?;
    /// batch.merge(bulkhead.try_acquire()?);
    /// assert_eq!(batch.num_permits(), 3);
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            core::ptr::eq(self.bulkhead, other.bulkhead),
            "merging permits of two bulkheads ('{}' and '{}')",
            self.bulkhead.name(),
            other.bulkhead.name()
        );
        self.permits += core::mem::take(&mut other.permits);
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
        let permits = self.permits;
        core::mem::forget(self);
        OwnedPermit { bulkhead, permits }
    }
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        self.bulkhead.release_permits(self.permits);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("bulkhead", &self.bulkhead.name())
            .field("permits", &self.permits)
            .finish()
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
    /// The slots it holds, as [`Permit`]'s.
    permits: u32,
}

impl OwnedPermit {
    /// A permit for a slot already taken from `bulkhead`.
    pub(crate) fn from_acquired(bulkhead: Arc<Bulkhead>) -> Self {
        OwnedPermit { bulkhead, permits: 1 }
    }

    /// A permit for `permits` slots already taken from `bulkhead`.
    pub(crate) fn with_permits(bulkhead: Arc<Bulkhead>, permits: u32) -> Self {
        OwnedPermit { bulkhead, permits }
    }

    /// How many slots this permit holds, as [`Permit::num_permits`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// assert_eq!(bulkhead.try_acquire_many_owned(3)?.num_permits(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.permits
    }

    /// Splits `n` slots off into a new owned permit, as [`Permit::split`]: `None` if this
    /// permit holds fewer than `n`; 0 and all are allowed.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let mut batch = bulkhead.try_acquire_many_owned(4)?;
    /// let one = batch.split(1).unwrap();
    /// std::thread::spawn(move || drop(one)).join().unwrap();
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        self.bulkhead.permitted(self.bulkhead.sem().load());
        Some(OwnedPermit { bulkhead: Arc::clone(&self.bulkhead), permits: n })
    }

    /// Moves every slot of `other` into this permit, as [`Permit::merge`].
    ///
    /// # Panics
    ///
    /// If `other` belongs to another bulkhead; `other` then releases its slots to its own
    /// bulkhead while unwinding.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let mut batch = bulkhead.try_acquire_owned()?;
    /// batch.merge(bulkhead.try_acquire_many_owned(2)?);
    /// assert_eq!(batch.num_permits(), 3);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(
            Arc::ptr_eq(&self.bulkhead, &other.bulkhead),
            "merging permits of two bulkheads ('{}' and '{}')",
            self.bulkhead.name(),
            other.bulkhead.name()
        );
        self.permits += core::mem::take(&mut other.permits);
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
        self.bulkhead.release_permits(self.permits);
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("bulkhead", &self.bulkhead.name())
            .field("permits", &self.permits)
            .finish()
    }
}
