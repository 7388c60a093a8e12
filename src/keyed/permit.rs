//! The keyed permits: [`KeyedPermit`] (borrowed) and [`OwnedKeyedPermit`] (owned), each
//! holding its key's slots and as many of the total, released on drop (the key's first);
//! and how a caller's slots reach them: [`take`] (a key's slots, with its `Arc`) and
//! [`both`] (the total's answer, the key's slots released first on a refusal).

use core::fmt;
use std::sync::Arc;

use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::{Mark, Marked, Outcome, OwnedPermit, Permit};
use crate::bulkhead::Bulkhead;

/// The slots of a caller that holds `key` and tried the total (if any): both, or the
/// total's refusal with the key's slot released first, so no slot of either level is held
/// once the error is returned.
#[inline]
pub(super) fn both<Q, P>(
    key: Q,
    total: Option<Result<P, BulkheadFull>>,
) -> Result<(Q, Option<P>), BulkheadFull> {
    match total {
        None => Ok((key, None)),
        Some(Ok(total)) => Ok((key, Some(total))),
        Some(Err(refused)) => {
            drop(key);
            Err(refused)
        }
    }
}

/// A slot of `bulkhead` taken by `acquire`, returned with the `Arc` (no second clone of it,
/// no release in between). The caller wraps it at once in a guard that releases it
/// ([`KeyedPermit::key_slot`] or `OwnedPermit::from_acquired`); nothing that can panic comes
/// between.
#[inline]
pub(super) fn take(
    bulkhead: Arc<Bulkhead>,
    acquire: impl FnOnce(&Bulkhead) -> Result<Permit<'_>, BulkheadFull>,
) -> Result<(Arc<Bulkhead>, Mark), BulkheadFull> {
    // The borrowed guard is given up, its mark kept: its slot is the caller's guard's.
    let mark = acquire(&bulkhead)?.into_mark();
    Ok((bulkhead, mark))
}

/// Releases `permits` slots of `bulkhead` granted while it was observed (`mark` set): out
/// of line, off a keyed permit's inlined drop.
#[inline(never)]
fn release_marked_slots(bulkhead: &Bulkhead, permits: u32, mark: Mark) {
    bulkhead.release_permits(permits, mark);
}

/// A slot of a key (or `n` of them, from the weighted verbs) and, with a total, as many of
/// the total, borrowed from the [`KeyedBulkhead`](crate::keyed::KeyedBulkhead); both released
/// on drop (the key's first).
///
/// ```
/// use bulkhead::keyed::KeyedBulkhead;
/// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
/// let permit = hosts.try_acquire(&"a.example")?;
/// assert_eq!(permit.key_bulkhead().metrics().in_flight_calls(), 1);
/// drop(permit);
/// assert_eq!(hosts.key_metrics(&"a.example").unwrap().in_flight_calls(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the slots are released as soon as the permit is dropped"]
#[clippy::has_significant_drop]
pub struct KeyedPermit<'a> {
    // Both levels are released by `Drop`, the key's slots first; the key's `Arc` goes with
    // the fields afterwards. No field has a release of its own (a `KeySlot` or an
    // `OwnedPermit` for the key, a `Permit` for the total): each was a second drop function
    // called from this one's, and adding the total to a permit then had to drop the field's
    // old value. One `Drop` saved 7 to 9 instructions per keyed acquire + release and 57
    // with a total (callgrind, `benches/results/keyed.md`).
    pub(super) key: Arc<Bulkhead>,
    /// The slots held of the key's bulkhead, and of the total when there is one (the two
    /// always hold as many): 1 for the plain acquires, `n` for the weighted ones.
    permits: u32,
    mark: Mark,
    /// The total, when the keyed bulkhead has one, and the mark of its slots.
    total: Option<&'a Bulkhead>,
    total_mark: Mark,
}

impl<'a> KeyedPermit<'a> {
    /// The key's part of a permit: one slot of `key` already taken, with its mark; no total
    /// yet ([`with_total`](Self::with_total) adds it).
    #[inline]
    pub(super) fn key_slot(key: Arc<Bulkhead>, mark: Mark) -> Self {
        Self::key_slots(key, 1, mark)
    }

    /// As [`key_slot`](Self::key_slot), for `permits` slots of `key` already taken.
    #[inline]
    pub(super) fn key_slots(key: Arc<Bulkhead>, permits: u32, mark: Mark) -> Self {
        KeyedPermit { key, permits, mark, total: None, total_mark: Mark::NONE }
    }

    /// Adds the total's answer (if the keyed bulkhead has a total): the permit with both
    /// levels, or the total's refusal with the key's slots released first (`both`). Inlined
    /// always: out of line it cost `keyed_acq_rel_total` 49 instructions (callgrind).
    #[inline(always)]
    pub(super) fn with_total(
        self,
        total: Option<Result<Permit<'a>, BulkheadFull>>,
    ) -> Result<Self, BulkheadFull> {
        let (mut permit, total) = both(self, total)?;
        if let Some(total) = total {
            debug_assert_eq!(total.num_permits(), permit.permits);
            permit.total = Some(total.bulkhead());
            // The total's slots move to this permit, which releases them.
            permit.total_mark = total.into_mark();
        }
        Ok(permit)
    }

    /// The bulkhead of the permit's key (the fallback key's, if the call was sent there).
    pub fn key_bulkhead(&self) -> &Bulkhead {
        &self.key
    }

    /// How many slots this permit holds of its key, and as many of the total when the keyed
    /// bulkhead has one: 1 for the plain acquires, `n` for
    /// [`try_acquire_many`](crate::keyed::KeyedBulkhead::try_acquire_many) and the other
    /// weighted verbs.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let hosts = KeyedBulkhead::<&str>::builder("hosts").build()?;
    /// assert_eq!(hosts.try_acquire(&"a.example")?.num_permits(), 1);
    /// assert_eq!(hosts.try_acquire_many(&"a.example", 3)?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.permits
    }

    /// Splits `n` slots off into a new permit of the same key (and `n` of the total with
    /// them); `None`, changing nothing, if this permit holds fewer than `n`. As
    /// [`Permit::split`]: `split(0)` gives an empty permit, no slot is taken or released,
    /// and the new permit is a call of its own for counters and events (`CallPermitted` now
    /// on the key and the total, `CallFinished` when dropped). Like any keyed permit, the
    /// new one keeps its key live until it is dropped.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u32>::builder("api")
    ///     .total(BulkheadConfig::builder().max_concurrent_calls(8).build()?)
    ///     .build()?;
    /// let mut batch = tenants.try_acquire_many(&7, 5)?;
    /// let two = batch.split(2).unwrap();
    /// assert_eq!((batch.num_permits(), two.num_permits()), (3, 2));
    /// assert!(batch.split(4).is_none());
    /// drop(two);
    /// assert_eq!(tenants.key_metrics(&7).unwrap().in_flight_calls(), 3);
    /// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        self.permits = self.permits.checked_sub(n)?;
        // The new guard's own marks, as `Permit::split` gives it (counted and told now if
        // anyone observes). The `Arc` is cloned from this permit's, outside the shard's
        // lock: the key is not idle (this permit holds it), so no eviction can race it.
        let mark = self.key.permitted_now();
        let total_mark = self.total.map_or(Mark::NONE, Bulkhead::permitted_now);
        Some(KeyedPermit {
            key: Arc::clone(&self.key),
            permits: n,
            mark,
            total: self.total,
            total_mark,
        })
    }

    /// Moves every slot of `other` (of the key and of the total) into this permit. As
    /// [`Permit::merge`]: `other`'s call ends here (it reports `CallFinished` as if dropped)
    /// but releases nothing.
    ///
    /// # Panics
    ///
    /// If `other` holds slots of another bulkhead: another key, or another keyed bulkhead
    /// (its slots cannot count against this key's limit), as [`Permit::merge`] and tokio's
    /// `SemaphorePermit::merge` do. Two keys whose calls went to the fallback key hold slots
    /// of the same bulkhead and merge. On the panic `other` is dropped while unwinding, so
    /// its slots go back to its own key and total: nothing is lost.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
    /// let mut batch = tenants.try_acquire_many(&7, 2)?;
    /// batch.merge(tenants.try_acquire(&7)?);
    /// assert_eq!(batch.num_permits(), 3);
    /// assert_eq!(tenants.key_metrics(&7).unwrap().in_flight_calls(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        let same_total = match (self.total, other.total) {
            (None, None) => true,
            (Some(a), Some(b)) => core::ptr::eq(a, b),
            _ => false,
        };
        assert!(
            Arc::ptr_eq(&self.key, &other.key) && same_total,
            "merging permits of two bulkheads ('{}' and '{}')",
            self.key.name(),
            other.key.name()
        );
        self.permits += core::mem::take(&mut other.permits);
    }
}

impl Drop for KeyedPermit<'_> {
    /// The common case inline: a key's slots granted unobserved, no total. Everything else
    /// (a mark to report, a total to release) is out of line, so the drop keeps few values
    /// live across a call and saves few registers.
    #[inline]
    fn drop(&mut self) {
        if self.mark.is_set() {
            return self.release_marked();
        }
        self.key.release_permits(self.permits, Mark::NONE);
        if let Some(total) = self.total {
            if self.total_mark.is_set() {
                return release_marked_slots(total, self.permits, self.total_mark);
            }
            total.release_permits(self.permits, Mark::NONE);
        }
    }
}

impl KeyedPermit<'_> {
    /// Releases the key's slots (first) and the total's: the drop of a permit whose key
    /// was observed when it was granted.
    #[inline(never)]
    fn release_marked(&mut self) {
        self.key.release_permits(self.permits, self.mark);
        if let Some(total) = self.total {
            total.release_permits(self.permits, self.total_mark);
        }
    }
}

impl fmt::Debug for KeyedPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedPermit")
            .field("key", &self.key.name())
            .field("permits", &self.permits)
            .field("total", &self.total.is_some())
            .finish()
    }
}

/// A slot of a key (or `n` of them) and, with a total, as many of the total, holding both
/// bulkheads by `Arc`: `Send + 'static`, so it can move to another task or thread. Both
/// released on drop (the key's first). Holding it keeps its key live.
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
/// let tenants = Arc::new(
///     KeyedBulkhead::<u64>::builder("api")
///         .total(BulkheadConfig::builder().max_concurrent_calls(4).build()?)
///         .build()?,
/// );
/// let permit = tenants.try_acquire_owned(&42)?;
/// assert_eq!(permit.key_bulkhead().name(), "api/42");
/// assert_eq!(permit.total_bulkhead().unwrap().name(), "api");
/// std::thread::spawn(move || drop(permit)).join().unwrap();
/// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "the slots are released as soon as the permit is dropped"]
#[clippy::has_significant_drop]
pub struct OwnedKeyedPermit {
    // Dropped in declaration order: the key's slot, then the total's.
    key: OwnedPermit,
    total: Option<OwnedPermit>,
}

impl OwnedKeyedPermit {
    /// The key's slots and the total's answer (if the keyed bulkhead has a total): the
    /// permit with both levels, or the total's refusal with the key's slots released first
    /// ([`both`]).
    #[inline]
    pub(super) fn both(
        key: OwnedPermit,
        total: Option<Result<OwnedPermit, BulkheadFull>>,
    ) -> Result<Self, BulkheadFull> {
        both(key, total).map(|(key, total)| OwnedKeyedPermit { key, total })
    }

    /// The bulkhead of the permit's key (the fallback key's, if the call was sent there).
    pub fn key_bulkhead(&self) -> &Arc<Bulkhead> {
        self.key.bulkhead()
    }

    /// How many slots this permit holds of its key (and as many of the total), as
    /// [`KeyedPermit::num_permits`].
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tenants.try_acquire_many_owned(&42, 4)?.num_permits(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_permits(&self) -> u32 {
        self.key.num_permits()
    }

    /// Splits `n` slots off into a new owned permit of the same key (and `n` of the total),
    /// as [`KeyedPermit::split`]: `None`, changing nothing, if this permit holds fewer.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u64>::builder("api")
    ///     .total(BulkheadConfig::builder().max_concurrent_calls(8).build()?)
    ///     .build()?;
    /// let mut batch = tenants.try_acquire_many_owned(&42, 4)?;
    /// let one = batch.split(1).unwrap();
    /// std::thread::spawn(move || drop(one)).join().unwrap();
    /// assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn split(&mut self, n: u32) -> Option<Self> {
        let key = self.key.split(n)?;
        // The total holds as many slots as the key, so its split succeeds too.
        let total = self.total.as_mut().and_then(|total| total.split(n));
        debug_assert_eq!(total.is_some(), self.total.is_some());
        Some(OwnedKeyedPermit { key, total })
    }

    /// Moves every slot of `other` (of the key and of the total) into this permit, as
    /// [`KeyedPermit::merge`].
    ///
    /// # Panics
    ///
    /// If `other` holds slots of another bulkhead (another key, or another keyed
    /// bulkhead); `other` then releases its slots to its own key and total while unwinding.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let mut batch = tenants.try_acquire_owned(&42)?;
    /// batch.merge(tenants.try_acquire_many_owned(&42, 2)?);
    /// assert_eq!(batch.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn merge(&mut self, other: Self) {
        let same_total = match (&self.total, &other.total) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a.bulkhead(), b.bulkhead()),
            _ => false,
        };
        assert!(
            Arc::ptr_eq(self.key.bulkhead(), other.key.bulkhead()) && same_total,
            "merging permits of two bulkheads ('{}' and '{}')",
            self.key.bulkhead().name(),
            other.key.bulkhead().name()
        );
        let OwnedKeyedPermit { key, total } = other;
        self.key.merge(key);
        if let (Some(mine), Some(theirs)) = (&mut self.total, total) {
            mine.merge(theirs);
        }
    }

    /// The shared total, if the keyed bulkhead has one.
    pub fn total_bulkhead(&self) -> Option<&Arc<Bulkhead>> {
        self.total.as_ref().map(OwnedPermit::bulkhead)
    }
}

/// An outcome marked on a keyed call reaches both levels' permits (the tower layer's guard).
impl Marked for OwnedKeyedPermit {
    fn set(&mut self, outcome: Outcome) {
        self.key.set(outcome);
        if let Some(total) = &mut self.total {
            total.set(outcome);
        }
    }

    fn unmarked_is_cancelled(&mut self) {
        self.key.unmarked_is_cancelled();
        if let Some(total) = &mut self.total {
            total.unmarked_is_cancelled();
        }
    }
}

impl fmt::Debug for OwnedKeyedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedKeyedPermit")
            .field("key", &self.key.bulkhead().name())
            .field("total", &self.total.is_some())
            .finish()
    }
}
