//! What a caller asks for: how many permits, and in which [`Criticality`].

use crate::engine::policy::Criticality;

/// What one acquire asks for: `n` permits (a call that costs `n` slots of the limit) in a
/// [`Criticality`]. Every weighted acquire takes one — [`try_acquire_many`],
/// [`acquire_many`], [`acquire_many_async`], [`try_acquire_many_owned`] and
/// [`acquire_many_owned_async`], on a plain, adaptive or keyed bulkhead alike — so richer
/// requests need no more method names.
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
}

impl Default for Request {
    /// One permit, default criticality.
    ///
    /// ```
    /// use bulkhead::{Criticality, Request};
    /// assert_eq!(Request::default(), Request::permits(1).criticality(Criticality::Default));
    /// ```
    fn default() -> Self {
        Request { permits: 1, class: Criticality::Default }
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
        Request { permits: n, class: Criticality::Default }
    }

    /// The same request in class `class`.
    ///
    /// ```
    /// use bulkhead::{Criticality, Request};
    /// let request = Request::permits(2).criticality(Criticality::Critical);
    /// assert_eq!(request.class(), Criticality::Critical);
    /// ```
    pub const fn criticality(self, class: Criticality) -> Request {
        Request { permits: self.permits, class }
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
