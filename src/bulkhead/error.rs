//! The rejection error.

use core::fmt;
use core::time::Duration;

use crate::observe::name::Name;
use crate::observe::reason::RejectReason;

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

    /// The limit when the call was refused (for [`RejectReason::TooManyKeys`], the keyed
    /// bulkhead's `max_keys`).
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
        let limit = if self.reason == RejectReason::TooManyKeys {
            "max keys"
        } else {
            "max concurrent calls"
        };
        write!(
            f,
            "Bulkhead '{}' is full and does not permit further calls ({}; {limit} {}",
            self.name, self.reason, self.max_concurrent_calls
        )?;
        if self.reason == RejectReason::WaitTimedOut {
            write!(f, "; waited {:?}", self.waited)?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for BulkheadFull {}
