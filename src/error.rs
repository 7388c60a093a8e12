//! The rejection error.

use core::fmt;
use core::time::Duration;

use crate::name::Name;

/// Why a call was refused.
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(0).build()?);
/// assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// No slot was free and the caller was not allowed to wait (max wait zero, or
    /// `try_acquire`).
    Full,
    /// The caller waited its whole max wait and no slot freed.
    WaitTimedOut,
    /// No slot was free and `max_waiting_calls` callers were already waiting.
    TooManyWaiting,
    /// The bulkhead was closed ([`Bulkhead::close`](crate::Bulkhead::close)): it refuses
    /// every call, and refused this caller while it waited, if it did.
    Closed,
    /// The caller asked for more permits at once than the limit
    /// ([`Bulkhead::try_acquire_many`](crate::Bulkhead::try_acquire_many) and the other
    /// weighted acquires): refused at once, without waiting, since no release could satisfy
    /// it; or, while it waited, a shrink put the limit below its request when it was at the
    /// head of the queue.
    ExceedsLimit,
}

impl RejectReason {
    /// Every reason, in declaration order: `ALL[r.index()] == r`. Per-reason counters are
    /// arrays of this length, so a new reason is one more entry here (and its label below).
    pub(crate) const ALL: [RejectReason; 5] = [
        RejectReason::Full,
        RejectReason::WaitTimedOut,
        RejectReason::TooManyWaiting,
        RejectReason::Closed,
        RejectReason::ExceedsLimit,
    ];

    /// The position of this reason in [`ALL`](Self::ALL).
    #[inline]
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// A stable, lower-case, machine-friendly name: the `reason` label of the exported
    /// rejection counter and the `reason` field of `tracing` events.
    ///
    /// ```
    /// use bulkhead::RejectReason;
    /// assert_eq!(RejectReason::Full.label(), "full");
    /// assert_eq!(RejectReason::WaitTimedOut.label(), "wait_timed_out");
    /// assert_eq!(RejectReason::TooManyWaiting.label(), "too_many_waiting");
    /// assert_eq!(RejectReason::Closed.label(), "closed");
    /// assert_eq!(RejectReason::ExceedsLimit.label(), "exceeds_limit");
    /// ```
    pub const fn label(self) -> &'static str {
        match self {
            RejectReason::Full => "full",
            RejectReason::WaitTimedOut => "wait_timed_out",
            RejectReason::TooManyWaiting => "too_many_waiting",
            RejectReason::Closed => "closed",
            RejectReason::ExceedsLimit => "exceeds_limit",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::Full => "full",
            RejectReason::WaitTimedOut => "wait timed out",
            RejectReason::TooManyWaiting => "too many waiting",
            RejectReason::Closed => "closed",
            RejectReason::ExceedsLimit => "request exceeds the limit",
        })
    }
}

/// The bulkhead refused a call. Map it like a circuit breaker's "call not permitted":
/// the downstream is temporarily unavailable (HTTP 503, or a fallback).
///
/// Building one allocates nothing and writes no cache line that other threads share: a
/// name of up to 31 bytes is copied into the error, a longer one is an interned
/// `&'static str` (see [`Bulkhead::new`](crate::Bulkhead::new) for the cap on long names).
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
/// let _held = bulkhead.try_acquire()?;
/// let err = bulkhead.try_acquire().unwrap_err();
/// assert_eq!(err.bulkhead_name(), "bank");
/// assert_eq!(err.max_concurrent_calls(), 1);
/// assert_eq!(err.reason(), RejectReason::Full);
/// assert!(err.waited().is_zero());
/// assert!(err.to_string().starts_with("Bulkhead 'bank' is full and does not permit further calls"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
// `repr(C)`, name first: the 32-byte name is then copied with aligned 16-byte moves. With
// the default layout the compiler moved the error as one misaligned block spanning the
// name's two stores, a store-forwarding stall that made a refusal 2.2 → 8.4 ns (criterion,
// `rejection/bulkhead/try_acquire`) at the same instruction count.
#[repr(C)]
pub struct BulkheadFull {
    name: Name,
    max_concurrent_calls: usize,
    reason: RejectReason,
    waited: Duration,
}

impl BulkheadFull {
    pub(crate) fn new(
        name: Name,
        max_concurrent_calls: usize,
        reason: RejectReason,
        waited: Duration,
    ) -> Self {
        BulkheadFull { name, max_concurrent_calls, reason, waited }
    }

    /// The name of the bulkhead that refused the call.
    pub fn bulkhead_name(&self) -> &str {
        self.name.as_str()
    }

    /// The limit when the call was refused.
    pub fn max_concurrent_calls(&self) -> usize {
        self.max_concurrent_calls
    }

    /// Why the call was refused.
    pub fn reason(&self) -> RejectReason {
        self.reason
    }

    /// How long the caller waited, measured from the start of the call: at least the allowed
    /// wait for [`RejectReason::WaitTimedOut`], zero for the other reasons.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl fmt::Display for BulkheadFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Bulkhead '{}' is full and does not permit further calls ({}; max concurrent calls {}",
            self.name, self.reason, self.max_concurrent_calls
        )?;
        if self.reason == RejectReason::WaitTimedOut {
            write!(f, "; waited {:?}", self.waited)?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for BulkheadFull {}
