//! A snapshot of a bulkhead's counters.

use crate::observe::reason::RejectReason;
use crate::observe::CallCounts;

/// A snapshot of a bulkhead's state, taken by [`Bulkhead::metrics`](crate::Bulkhead::metrics).
///
/// `available_concurrent_calls`, `max_allowed_concurrent_calls` and `in_flight_calls` come
/// from one atomic read and are consistent with each other; `waiting_calls` is read
/// separately and may lag them by an instant.
///
/// The call counters (`calls_permitted`, `calls_rejected`, `calls_finished`) count from
/// [`Bulkhead::enable_counters`](crate::Bulkhead::enable_counters) on, and read zero before.
/// Each is exact for every call that happened before the snapshot; they are summed one
/// after the other, so a call running concurrently may be in one count and not yet in
/// another.
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig};
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
/// let _permit = bulkhead.try_acquire()?;
/// let m = bulkhead.metrics();
/// assert_eq!(m.max_allowed_concurrent_calls(), 16);
/// assert_eq!(m.available_concurrent_calls(), 15);
/// assert_eq!(m.in_flight_calls(), 1);
/// assert_eq!(m.waiting_calls(), 0);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BulkheadMetrics {
    pub(crate) available: usize,
    pub(crate) max_allowed: usize,
    pub(crate) in_flight: usize,
    pub(crate) waiting: usize,
    pub(crate) closed: bool,
    /// `None` until counting is enabled.
    pub(crate) counts: Option<CallCounts>,
}

impl BulkheadMetrics {
    /// Free slots. Never negative: after a shrink below the calls in flight it reads 0 until
    /// they drain below the new limit.
    pub fn available_concurrent_calls(&self) -> usize {
        self.available
    }

    /// The current limit.
    pub fn max_allowed_concurrent_calls(&self) -> usize {
        self.max_allowed
    }

    /// Calls holding a permit (including a permit just granted to a waiter).
    pub fn in_flight_calls(&self) -> usize {
        self.in_flight
    }

    /// Callers queued for a slot.
    pub fn waiting_calls(&self) -> usize {
        self.waiting
    }

    /// Whether the bulkhead is closed ([`Bulkhead::close`](crate::Bulkhead::close)).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether the bulkhead counts calls ([`Bulkhead::enable_counters`](crate::Bulkhead::enable_counters)
    /// was called).
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::default());
    /// assert!(!bank.metrics().is_counting());
    /// bank.enable_counters();
    /// assert!(bank.metrics().is_counting());
    /// ```
    pub fn is_counting(&self) -> bool {
        self.counts.is_some()
    }

    /// Calls admitted since counting was enabled (a permit handed to the caller, at once or
    /// after a wait).
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::default());
    /// bank.enable_counters();
    /// bank.call(|| ())?;
    /// assert_eq!(bank.metrics().calls_permitted(), 1);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn calls_permitted(&self) -> u64 {
        self.counts.map_or(0, |c| c.permitted)
    }

    /// Calls refused for `reason` since counting was enabled.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(0).build()?);
    /// bank.enable_counters();
    /// assert!(bank.try_acquire().is_err());
    /// assert_eq!(bank.metrics().calls_rejected(RejectReason::Full), 1);
    /// assert_eq!(bank.metrics().calls_rejected(RejectReason::WaitTimedOut), 0);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn calls_rejected(&self, reason: RejectReason) -> u64 {
        self.counts.map_or(0, |c| c.rejected[reason.index()])
    }

    /// Calls refused for any reason since counting was enabled.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(0).build()?);
    /// bank.enable_counters();
    /// assert!(bank.try_acquire().is_err());
    /// assert!(bank.acquire().is_err());
    /// assert_eq!(bank.metrics().calls_rejected_total(), 2);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn calls_rejected_total(&self) -> u64 {
        self.counts.map_or(0, |c| c.rejected.iter().fold(0, |sum, n| sum.wrapping_add(*n)))
    }

    /// Permits released since counting was enabled: the call returned, unwound, or was
    /// cancelled while holding its permit.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::default());
    /// bank.enable_counters();
    /// let permit = bank.try_acquire()?;
    /// assert_eq!(bank.metrics().calls_finished(), 0);
    /// drop(permit);
    /// assert_eq!(bank.metrics().calls_finished(), 1);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn calls_finished(&self) -> u64 {
        self.counts.map_or(0, |c| c.finished)
    }
}
