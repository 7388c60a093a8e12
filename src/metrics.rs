//! A snapshot of a bulkhead's counters.

/// A snapshot of a bulkhead's state, taken by [`Bulkhead::metrics`](crate::Bulkhead::metrics).
///
/// `available_concurrent_calls`, `max_allowed_concurrent_calls` and `in_flight_calls` come
/// from one atomic read and are consistent with each other; `waiting_calls` is read
/// separately and may lag them by an instant.
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
}
