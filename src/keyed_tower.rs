//! A bulkhead per key as tower middleware (features `tower`): the key is extracted from each
//! request (a tenant header, the target host, the route).

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use core::mem;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::collections::hash_map::RandomState;
use std::sync::Arc;

use tower_layer::Layer;
use tower_service::Service;

use crate::keyed::KeyedBulkhead;
use crate::tower::BoxError;

/// Guards a client service with a [`KeyedBulkhead`]: each request takes a slot of the key
/// `key_of(&request)` (and of the total) when its response future is first polled, holds it
/// until that future completes or is dropped, and fails with a
/// [`KeyedFull`](crate::keyed::KeyedFull) boxed in a [`BoxError`] when refused. As with
/// [`BulkheadLayer`](crate::tower::BulkheadLayer), `poll_ready` reserves nothing.
///
/// Its response future is boxed (one allocation per request), unlike
/// [`BulkheadLayer`](crate::tower::BulkheadLayer)'s.
///
/// `H` is the keyed bulkhead's hasher ([`KeyedBulkheadBuilder::hasher`](crate::keyed::KeyedBulkheadBuilder::hasher)),
/// std's `RandomState` by default.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use bulkhead::{BulkheadConfig, keyed::{KeyedBulkhead, KeyedFull}, keyed_tower::KeyedBulkheadLayer};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), bulkhead::tower::BoxError> {
/// // Requests are (tenant, payload); at most one call in flight per tenant.
/// let tenants = Arc::new(
///     KeyedBulkhead::<String>::builder("api")
///         .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?)
///         .build()?,
/// );
/// let layer = KeyedBulkheadLayer::new(Arc::clone(&tenants), |req: &(String, u32)| req.0.clone());
/// let client = ServiceBuilder::new()
///     .layer(layer)
///     .service(service_fn(|req: (String, u32)| async move { Ok::<_, Infallible>(req.1) }));
/// assert_eq!(client.clone().oneshot(("acme".to_owned(), 7)).await?, 7);
///
/// // acme busy: its next request is refused, another tenant's goes through.
/// let _busy = tenants.try_acquire(&"acme".to_owned())?;
/// let err = client.clone().oneshot(("acme".to_owned(), 8)).await.unwrap_err();
/// assert!(matches!(err.downcast_ref::<KeyedFull>(), Some(KeyedFull::Key(_))));
/// assert_eq!(client.oneshot(("globex".to_owned(), 9)).await?, 9);
/// # Ok(())
/// # }
/// ```
pub struct KeyedBulkheadLayer<K, F, H = RandomState> {
    keyed: Arc<KeyedBulkhead<K, H>>,
    key_of: Arc<F>,
}

impl<K, F, H> KeyedBulkheadLayer<K, F, H> {
    /// A layer that guards calls with `keyed`, keyed by `key_of(&request)`.
    pub fn new(keyed: Arc<KeyedBulkhead<K, H>>, key_of: F) -> Self {
        KeyedBulkheadLayer { keyed, key_of: Arc::new(key_of) }
    }

    /// The keyed bulkhead.
    pub fn keyed(&self) -> &Arc<KeyedBulkhead<K, H>> {
        &self.keyed
    }
}

impl<K, F, H> Clone for KeyedBulkheadLayer<K, F, H> {
    fn clone(&self) -> Self {
        KeyedBulkheadLayer { keyed: Arc::clone(&self.keyed), key_of: Arc::clone(&self.key_of) }
    }
}

impl<K, F, H> fmt::Debug for KeyedBulkheadLayer<K, F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBulkheadLayer").field("name", &self.keyed.name()).finish()
    }
}

impl<S, K, F, H> Layer<S> for KeyedBulkheadLayer<K, F, H> {
    type Service = KeyedBulkheadService<S, K, F, H>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedBulkheadService {
            inner,
            keyed: Arc::clone(&self.keyed),
            key_of: Arc::clone(&self.key_of),
        }
    }
}

/// A client service guarded by a [`KeyedBulkhead`]; built by [`KeyedBulkheadLayer`].
pub struct KeyedBulkheadService<S, K, F, H = RandomState> {
    inner: S,
    keyed: Arc<KeyedBulkhead<K, H>>,
    key_of: Arc<F>,
}

impl<S: Clone, K, F, H> Clone for KeyedBulkheadService<S, K, F, H> {
    fn clone(&self) -> Self {
        KeyedBulkheadService {
            inner: self.inner.clone(),
            keyed: Arc::clone(&self.keyed),
            key_of: Arc::clone(&self.key_of),
        }
    }
}

impl<S, K, F, H> fmt::Debug for KeyedBulkheadService<S, K, F, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBulkheadService")
            .field("name", &self.keyed.name())
            .finish_non_exhaustive()
    }
}

impl<S, K, F, H, Req> Service<Req> for KeyedBulkheadService<S, K, F, H>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    S::Response: 'static,
    Req: Send + 'static,
    K: Eq + Hash + Clone + fmt::Display + Send + Sync + 'static,
    F: Fn(&Req) -> K,
    H: BuildHasher + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    /// The inner service's readiness. No slot is reserved here.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let key = (self.key_of)(&request);
        let keyed = Arc::clone(&self.keyed);
        // The instance driven to readiness serves this request; its clone takes its place.
        let clone = self.inner.clone();
        let mut service = mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            // Held until the inner response future completes or this future is dropped.
            let _permit = keyed.acquire_async(&key).await?;
            service.call(request).await.map_err(Into::into)
        })
    }
}
