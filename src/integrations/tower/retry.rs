//! A refusal's [`retry_after`](BulkheadFull::retry_after) as HTTP headers: what a server in
//! front of a [`BulkheadService`](super::BulkheadService) answers with its 503.

use core::time::Duration;

use crate::bulkhead::error::BulkheadFull;

/// When a refused client should come back, read from the error a
/// [`BulkheadService`](super::BulkheadService) (or a keyed one) returned, in the two forms
/// a 503 carries:
///
/// * `Retry-After: <seconds>`: whole seconds as HTTP wants them (RFC 9110 §10.2.3),
///   rounded **up** (a client told 0 would come straight back) and at least 1;
/// * `retry-after-ms: <milliseconds>` ([`RetryAfter::PRECISE_HEADER`]): the estimate in
///   milliseconds, rounded up, at least 1, for clients that can act on less than a second
///   (most refusals of a bulkhead whose calls take milliseconds free a slot well within one).
///
/// The estimate exists only for a bulkhead that is observed (counters, a listener, the
/// metrics exporter) and has seen calls finish: see [`BulkheadFull::retry_after`]. With
/// none, a server may fall back to a fixed `Retry-After`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use bulkhead::tower::{BulkheadLayer, RetryAfter};
/// use bulkhead::{Bulkhead, BulkheadConfig};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build().unwrap()));
/// bank.enable_counters(); // observed: refusals carry an estimate once calls finished
/// let client = ServiceBuilder::new()
///     .layer(BulkheadLayer::new(Arc::clone(&bank)))
///     .service(service_fn(|ms: u64| async move {
///         tokio::time::sleep(Duration::from_millis(ms)).await;
///         Ok::<_, std::convert::Infallible>(ms)
///     }));
/// client.clone().oneshot(2).await.unwrap(); // one call finished
///
/// let _busy = bank.try_acquire().unwrap();
/// let err = client.oneshot(2).await.unwrap_err();
/// let retry = RetryAfter::from_error(&*err).expect("an observed bulkhead's refusal");
/// assert_eq!(retry.header_seconds(), 1); // `Retry-After: 1`
/// assert!(retry.header_millis() >= 1); // `retry-after-ms: ...`
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RetryAfter(Duration);

impl RetryAfter {
    /// The name of the header with the precise value in milliseconds: `retry-after-ms`
    /// (lower case, as HTTP/2 requires).
    ///
    /// ```
    /// assert_eq!(bulkhead::tower::RetryAfter::PRECISE_HEADER, "retry-after-ms");
    /// ```
    pub const PRECISE_HEADER: &'static str = "retry-after-ms";

    /// The estimate of a refusal found in `err` (a [`BulkheadFull`], as the layer's
    /// `BoxError` holds it), if it carries one.
    ///
    /// ```
    /// use bulkhead::tower::RetryAfter;
    /// let other: bulkhead::tower::BoxError = "connection reset".into();
    /// assert_eq!(RetryAfter::from_error(&*other), None);
    /// ```
    pub fn from_error(err: &(dyn std::error::Error + 'static)) -> Option<RetryAfter> {
        err.downcast_ref::<BulkheadFull>().and_then(RetryAfter::from_refusal)
    }

    /// The estimate `full` carries, if any.
    ///
    /// ```
    /// use bulkhead::{tower::RetryAfter, Bulkhead, BulkheadConfig};
    /// let closed = Bulkhead::new("bank", BulkheadConfig::default());
    /// closed.close();
    /// assert_eq!(RetryAfter::from_refusal(&closed.try_acquire().unwrap_err()), None);
    /// ```
    pub fn from_refusal(full: &BulkheadFull) -> Option<RetryAfter> {
        full.retry_after().map(RetryAfter)
    }

    /// A given estimate (a server's own fallback, or a test).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::tower::RetryAfter;
    /// assert_eq!(RetryAfter::new(Duration::from_millis(1500)).header_seconds(), 2);
    /// ```
    pub fn new(estimate: Duration) -> RetryAfter {
        RetryAfter(estimate)
    }

    /// The estimate itself.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::tower::RetryAfter;
    /// assert_eq!(RetryAfter::new(Duration::from_millis(7)).estimate(), Duration::from_millis(7));
    /// ```
    pub fn estimate(self) -> Duration {
        self.0
    }

    /// The `Retry-After` value: whole seconds, rounded up, at least 1.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::tower::RetryAfter;
    /// let secs = |ms| RetryAfter::new(Duration::from_millis(ms)).header_seconds();
    /// assert_eq!((secs(0), secs(1), secs(999), secs(1000), secs(1001)), (1, 1, 1, 1, 2));
    /// ```
    pub fn header_seconds(self) -> u64 {
        (self.0.as_secs() + u64::from(self.0.subsec_nanos() > 0)).max(1)
    }

    /// The [`PRECISE_HEADER`](Self::PRECISE_HEADER) value: milliseconds, rounded up, at
    /// least 1.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::tower::RetryAfter;
    /// let ms = |us| RetryAfter::new(Duration::from_micros(us)).header_millis();
    /// assert_eq!((ms(0), ms(1), ms(1000), ms(1001)), (1, 1, 1, 2));
    /// ```
    pub fn header_millis(self) -> u64 {
        let millis = self.0.as_nanos().div_ceil(1_000_000);
        u64::try_from(millis).unwrap_or(u64::MAX).max(1)
    }
}
