//! What a caller asks for: how many permits, in which [`Criticality`], and how long it may
//! wait.

use core::time::Duration;

use crate::engine::policy::Criticality;

/// What one acquire asks for: `n` permits (a call that costs `n` slots of the limit) in a
/// [`Criticality`]. Every weighted acquire takes one — [`try_acquire_many`],
/// [`acquire_many`], [`acquire_many_async`], [`try_acquire_many_owned`] and
/// [`acquire_many_owned_async`], on a plain, adaptive or keyed bulkhead alike — so richer
/// requests need no more method names. The call verbs take one too
/// ([`call_with`](crate::Bulkhead::call_with),
/// [`call_async_with`](crate::Bulkhead::call_async_with)), and a request may carry its own
/// [`max_wait`](Request::max_wait), kept by the bulkhead's timer like the configured one.
///
/// A bare `u32` converts into a request for that many permits in the default class, and a
/// bare [`Criticality`] into a request for one permit in that class, so
/// `try_acquire_many(3)` and `try_acquire_many(Criticality::Sheddable)` both read as they
/// mean. [`Request::default()`] is one permit in the default class: the plain
/// [`try_acquire`](crate::Bulkhead::try_acquire).
///
/// [`try_acquire_many`]: crate::Bulkhead::try_acquire_many
/// [`acquire_many`]: crate::Bulkhead::acquire_many
/// [`acquire_many_async`]: crate::Bulkhead::acquire_many_async
/// [`try_acquire_many_owned`]: crate::Bulkhead::try_acquire_many_owned
/// [`acquire_many_owned_async`]: crate::Bulkhead::acquire_many_owned_async
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig, Criticality, Request};
/// let bulkhead = Bulkhead::new("db", BulkheadConfig::builder().max_concurrent_calls(8).build()?);
/// let report = bulkhead.try_acquire_many(Request::permits(4).criticality(Criticality::Sheddable))?;
/// let login = bulkhead.try_acquire_many(Criticality::Critical)?;
/// let plain = bulkhead.try_acquire_many(2)?;
/// assert_eq!((report.num_permits(), login.num_permits(), plain.num_permits()), (4, 1, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a request does nothing until an acquire takes it"]
pub struct Request {
    permits: u32,
    class: Criticality,
    /// The per-call max wait; `None` when the call sets none.
    wait: Option<Duration>,
}

impl Default for Request {
    /// One permit, default criticality.
    ///
    /// ```
    /// use bulkhead::{Criticality, Request};
    /// assert_eq!(Request::default(), Request::permits(1).criticality(Criticality::Default));
    /// ```
    fn default() -> Self {
        Request { permits: 1, class: Criticality::Default, wait: None }
    }
}

impl Request {
    /// A request for `n` permits in the default class. `n == 0` asks for an empty permit.
    ///
    /// ```
    /// use bulkhead::Request;
    /// assert_eq!(Request::permits(3).num_permits(), 3);
    /// ```
    pub const fn permits(n: u32) -> Request {
        Request { permits: n, class: Criticality::Default, wait: None }
    }

    /// The same request in class `class`.
    ///
    /// ```
    /// use bulkhead::{Criticality, Request};
    /// let request = Request::permits(2).criticality(Criticality::Critical);
    /// assert_eq!(request.class(), Criticality::Critical);
    /// ```
    pub const fn criticality(self, class: Criticality) -> Request {
        Request { permits: self.permits, class, wait: self.wait }
    }

    /// The same request with a max wait of its own: the call waits at most the smaller of
    /// `wait` and the bulkhead's `max_wait_duration` (the operator's bound stays a bound),
    /// sync or async, on any executor. The bulkhead's own deadline timer keeps it, exactly
    /// like the configured max wait, so an async wait needs no runtime timer. A zero wait
    /// means try only: the call is granted at once or refused, and never queues.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason, Request};
    /// let config = BulkheadConfig::builder()
    ///     .max_concurrent_calls(1)
    ///     .max_wait_duration(Duration::from_secs(10))
    ///     .build()?;
    /// let bulkhead = Bulkhead::new("bank", config);
    /// let _held = bulkhead.try_acquire()?;
    /// // This call gives up after 2 ms, not after the bulkhead's 10 s.
    /// let err = bulkhead.acquire_many(Request::permits(1).max_wait(Duration::from_millis(2))).unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// // A zero wait never queues.
    /// let err = bulkhead.call_with(Request::default().max_wait(Duration::ZERO), || ()).unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::Full);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn max_wait(self, wait: Duration) -> Request {
        Request { permits: self.permits, class: self.class, wait: Some(wait) }
    }

    /// The effective max wait of this request on a bulkhead whose configured max wait is
    /// `configured`: the smaller of the two.
    #[inline]
    pub(crate) fn wait_within(self, configured: Duration) -> Duration {
        wait_within(self.wait, configured)
    }

    /// The request's own max wait, if it sets one.
    #[inline]
    pub(crate) const fn own_wait(self) -> Option<Duration> {
        self.wait
    }

    /// The permits asked for.
    ///
    /// ```
    /// use bulkhead::Request;
    /// assert_eq!(Request::from(5).num_permits(), 5);
    /// ```
    pub const fn num_permits(self) -> u32 {
        self.permits
    }

    /// The criticality asked in.
    ///
    /// ```
    /// use bulkhead::{Criticality, Request};
    /// assert_eq!(Request::from(Criticality::Sheddable).class(), Criticality::Sheddable);
    /// ```
    pub const fn class(self) -> Criticality {
        self.class
    }

    /// Whether this is a plain request: default class (any count).
    #[inline]
    pub(crate) fn is_default_class(self) -> bool {
        self.class == Criticality::Default
    }
}

impl From<u32> for Request {
    /// `n` permits in the default class.
    fn from(n: u32) -> Request {
        Request::permits(n)
    }
}

impl From<Criticality> for Request {
    /// One permit in `class`.
    fn from(class: Criticality) -> Request {
        Request::permits(1).criticality(class)
    }
}

/// The smaller of a request's own max wait (if any) and `configured`.
#[inline]
pub(crate) fn wait_within(own: Option<Duration>, configured: Duration) -> Duration {
    match own {
        Some(own) if own < configured => own,
        _ => configured,
    }
}
