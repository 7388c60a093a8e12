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

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::integrations::tower::{BoxError, Classify, Plain, Stage};
use crate::keyed::{AcquireOwnedKeyed, KeyedBulkhead, OwnedKeyedPermit};

/// Guards a client service with a [`KeyedBulkhead`]: each request takes a slot of the key
/// `key_of(&request)` (and of the total) when its response future is first polled, holds it
/// until that future completes or is dropped, and fails with a
/// [`BulkheadFull`](crate::BulkheadFull) (naming the key's bulkhead, the total, or the refused
/// key) boxed in a [`BoxError`] when refused. As with
/// [`BulkheadLayer`](crate::integrations::tower::BulkheadLayer), `poll_ready` reserves nothing.
///
/// Its response future, [`KeyedResponseFuture`], is a named type, as
/// [`BulkheadLayer`](crate::integrations::tower::BulkheadLayer)'s is: no allocation per request. The key's
/// bulkhead is looked up (created if new) when the service is called.
///
/// `H` is the keyed bulkhead's hasher ([`KeyedBulkheadBuilder::hasher`](crate::keyed::KeyedBulkheadBuilder::hasher)),
/// std's `RandomState` by default.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use bulkhead::{BulkheadConfig, BulkheadFull, keyed::KeyedBulkhead, tower::KeyedBulkheadLayer};
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
/// assert_eq!(err.downcast_ref::<BulkheadFull>().unwrap().bulkhead_name(), "api/acme");
/// assert_eq!(client.oneshot(("globex".to_owned(), 9)).await?, 9);
/// # Ok(())
/// # }
/// ```
pub struct KeyedBulkheadLayer<K, F, H = RandomState, C = Plain> {
    keyed: Arc<KeyedBulkhead<K, H>>,
    key_of: Arc<F>,
    classify: Arc<C>,
}

impl<K, F, H> KeyedBulkheadLayer<K, F, H> {
    /// A layer that guards calls with `keyed`, keyed by `key_of(&request)`.
    pub fn new(keyed: Arc<KeyedBulkhead<K, H>>, key_of: F) -> Self {
        KeyedBulkheadLayer { keyed, key_of: Arc::new(key_of), classify: Arc::new(Plain) }
    }
}

impl<K, F, H, C> KeyedBulkheadLayer<K, F, H, C> {
    /// The same layer, asking the key and the total for what `classify` says each request
    /// needs (permits and criticality), as [`BulkheadLayer::classify`](super::BulkheadLayer::classify).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::keyed::KeyedBulkhead;
    /// use bulkhead::tower::KeyedBulkheadLayer;
    /// use bulkhead::{Criticality, Request};
    /// let tenants = Arc::new(KeyedBulkhead::<String>::builder("api").build()?);
    /// let layer = KeyedBulkheadLayer::new(tenants, |(tenant, _): &(String, bool)| tenant.clone())
    ///     .classify(|(_, batch): &(String, bool)| {
    ///         let class = if *batch { Criticality::Sheddable } else { Criticality::Default };
    ///         Request::permits(1).criticality(class)
    ///     });
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn classify<G>(self, classify: G) -> KeyedBulkheadLayer<K, F, H, G> {
        KeyedBulkheadLayer { keyed: self.keyed, key_of: self.key_of, classify: Arc::new(classify) }
    }

    /// The keyed bulkhead.
    pub fn keyed(&self) -> &Arc<KeyedBulkhead<K, H>> {
        &self.keyed
    }
}

impl<K, F, H, C> Clone for KeyedBulkheadLayer<K, F, H, C> {
    fn clone(&self) -> Self {
        KeyedBulkheadLayer {
            keyed: Arc::clone(&self.keyed),
            key_of: Arc::clone(&self.key_of),
            classify: Arc::clone(&self.classify),
        }
    }
}

impl<K, F, H, C> fmt::Debug for KeyedBulkheadLayer<K, F, H, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBulkheadLayer").field("name", &self.keyed.name()).finish()
    }
}

impl<S, K, F, H, C> Layer<S> for KeyedBulkheadLayer<K, F, H, C> {
    type Service = KeyedBulkheadService<S, K, F, H, C>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedBulkheadService {
            inner,
            keyed: Arc::clone(&self.keyed),
            key_of: Arc::clone(&self.key_of),
            classify: Arc::clone(&self.classify),
        }
    }
}

/// A client service guarded by a [`KeyedBulkhead`]; built by [`KeyedBulkheadLayer`].
pub struct KeyedBulkheadService<S, K, F, H = RandomState, C = Plain> {
    inner: S,
    keyed: Arc<KeyedBulkhead<K, H>>,
    key_of: Arc<F>,
    classify: Arc<C>,
}

impl<S: Clone, K, F, H, C> Clone for KeyedBulkheadService<S, K, F, H, C> {
    fn clone(&self) -> Self {
        KeyedBulkheadService {
            inner: self.inner.clone(),
            keyed: Arc::clone(&self.keyed),
            key_of: Arc::clone(&self.key_of),
            classify: Arc::clone(&self.classify),
        }
    }
}

impl<S, K, F, H, C> fmt::Debug for KeyedBulkheadService<S, K, F, H, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBulkheadService")
            .field("name", &self.keyed.name())
            .finish_non_exhaustive()
    }
}

impl<S, K, F, H, C, Req> Service<Req> for KeyedBulkheadService<S, K, F, H, C>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    K: Eq + Hash + Clone + fmt::Display,
    F: Fn(&Req) -> K,
    H: BuildHasher,
    C: Classify<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = KeyedResponseFuture<S, Req>;

    /// The inner service's readiness. No slot is reserved here.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let key = (self.key_of)(&request);
        // The instance driven to readiness serves this request; its clone takes its place.
        let clone = self.inner.clone();
        let service = mem::replace(&mut self.inner, clone);
        let acquire = self.keyed.acquire_many_owned_async(&key, self.classify.classify(&request));
        KeyedResponseFuture { state: Stage::acquiring(acquire, service, request) }
    }
}

pin_project! {
    /// The response future of [`KeyedBulkheadService`]: takes a slot of the request's key,
    /// then one of the total (each waiting up to its bulkhead's max wait), then calls the
    /// inner service and holds both slots until the response is there. A refusal is a
    /// [`BulkheadFull`](crate::BulkheadFull) in the [`BoxError`]; when the total refuses, the
    /// key's slot is released before the error is returned.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point releases what it holds: a queued wait leaves its queue, the
    /// slots taken are released, and the inner call (if made) is dropped.
    #[must_use = "futures do nothing unless polled"]
    pub struct KeyedResponseFuture<S, Req>
    where
        S: Service<Req>,
    {
        // The slots of the key and of the total (`KeyedBulkhead::acquire_owned_async`),
        // dropped in that order (as `KeyedPermit`'s).
        #[pin]
        state: Stage<AcquireOwnedKeyed, S, Req, S::Future, OwnedKeyedPermit>,
    }
}

impl<S, Req> Future for KeyedResponseFuture<S, Req>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().state.poll_stage(cx, "keyed bulkhead ResponseFuture")
    }
}

impl<S, Req> fmt::Debug for KeyedResponseFuture<S, Req>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedResponseFuture").field("state", &self.state.name()).finish()
    }
}
