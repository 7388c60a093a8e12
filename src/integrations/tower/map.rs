//! Mapping a [`BulkheadService`](super::BulkheadService) error into the caller's own error
//! type by `From`, as the `_fallible` calls of [`Bulkhead`](crate::Bulkhead) do.

use super::BoxError;
use crate::bulkhead::error::BulkheadFull;

/// Maps an error of a [`BulkheadService`](super::BulkheadService) (or of any stack around
/// it) into `E`: a refusal by the bulkhead, unboxed, through `From<BulkheadFull>`; any other
/// error, still boxed, through `From<BoxError>`.
///
/// With it an adapter over a tower client gets the guide's mapping in one `map_err`: the
/// refusal lands in the same "temporarily unavailable" variant as a circuit breaker's.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::tower::{map_refusal, BoxError, BulkheadLayer};
/// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// #[derive(Debug)]
/// enum PortError {
///     TemporarilyUnavailable,
///     Upstream(BoxError),
/// }
/// impl From<BulkheadFull> for PortError {
///     fn from(_: BulkheadFull) -> Self {
///         PortError::TemporarilyUnavailable
///     }
/// }
/// impl From<BoxError> for PortError {
///     fn from(err: BoxError) -> Self {
///         PortError::Upstream(err)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let bank = Arc::new(Bulkhead::new("sber", BulkheadConfig::builder().max_concurrent_calls(1).build().unwrap()));
/// let client = ServiceBuilder::new()
///     .layer(BulkheadLayer::new(Arc::clone(&bank)))
///     .service(service_fn(|account: u32| async move {
///         if account == 0 { Err("no such account".into()) } else { Ok::<_, BoxError>(account * 10) }
///     }));
///
/// let balance = |account| client.clone().oneshot(account);
/// assert_eq!(balance(4).await.map_err(map_refusal::<PortError>).unwrap(), 40);
/// match balance(0).await.map_err(map_refusal::<PortError>) {
///     Err(PortError::Upstream(err)) => assert_eq!(err.to_string(), "no such account"),
///     other => panic!("expected the upstream's error, got {other:?}"),
/// }
/// let _busy = bank.try_acquire().unwrap();
/// assert!(matches!(
///     balance(4).await.map_err(map_refusal::<PortError>),
///     Err(PortError::TemporarilyUnavailable)
/// ));
/// # }
/// ```
pub fn map_refusal<E>(err: BoxError) -> E
where
    E: From<BulkheadFull> + From<BoxError>,
{
    match err.downcast::<BulkheadFull>() {
        Ok(full) => E::from(*full),
        Err(other) => E::from(other),
    }
}
