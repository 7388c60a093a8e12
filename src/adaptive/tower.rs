//! The adaptive bulkhead as a tower layer (feature `tower`).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use tower_layer::Layer;
use tower_service::Service;

use super::AdaptiveBulkhead;
use crate::tower::BoxError;

/// A [`Layer`] guarding an outbound tower client with an [`AdaptiveBulkhead`]: each
/// request takes a permit (waiting up to the configured max wait), and its response, an
/// error or its cancellation is recorded as a sample when it ends (`Ok`: success, `Err`:
/// failure, dropped future: cancelled).
///
/// Like [`BulkheadLayer`](crate::tower::BulkheadLayer) it takes the permit when the
/// request is made, never in `poll_ready`, and a refusal is a
/// [`BulkheadFull`](crate::BulkheadFull) inside the [`BoxError`]. Unlike it, the response
/// future is boxed (one allocation per request).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::adaptive::{tower::AdaptiveBulkheadLayer, AdaptiveBulkhead, Gradient2};
/// use bulkhead::BulkheadConfig;
/// use tower::{service_fn, Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), tower::BoxError> {
/// let bank = Arc::new(AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Gradient2::default()));
/// let layer = AdaptiveBulkheadLayer::new(Arc::clone(&bank));
/// let mut client = layer.layer(service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n * 2) }));
/// assert_eq!(client.ready().await?.call(21).await?, 42);
/// assert_eq!(bank.adaptive_metrics().samples(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct AdaptiveBulkheadLayer {
    bulkhead: Arc<AdaptiveBulkhead>,
}

impl AdaptiveBulkheadLayer {
    /// A layer that guards services with `bulkhead`.
    pub fn new(bulkhead: Arc<AdaptiveBulkhead>) -> Self {
        AdaptiveBulkheadLayer { bulkhead }
    }

    /// The adaptive bulkhead.
    pub fn bulkhead(&self) -> &Arc<AdaptiveBulkhead> {
        &self.bulkhead
    }
}

impl<S> Layer<S> for AdaptiveBulkheadLayer {
    type Service = AdaptiveBulkheadService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AdaptiveBulkheadService { inner, bulkhead: Arc::clone(&self.bulkhead) }
    }
}

impl fmt::Debug for AdaptiveBulkheadLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveBulkheadLayer").field("bulkhead", &self.bulkhead).finish()
    }
}

/// The service [`AdaptiveBulkheadLayer`] makes.
#[derive(Clone)]
pub struct AdaptiveBulkheadService<S> {
    inner: S,
    bulkhead: Arc<AdaptiveBulkhead>,
}

impl<S> AdaptiveBulkheadService<S> {
    /// The adaptive bulkhead.
    pub fn bulkhead(&self) -> &Arc<AdaptiveBulkhead> {
        &self.bulkhead
    }

    /// The inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// The response future of [`AdaptiveBulkheadService`].
pub type ResponseFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send + 'static>>;

impl<S, Req> Service<Req> for AdaptiveBulkheadService<S>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    Req: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let clone = self.inner.clone();
        let mut service = core::mem::replace(&mut self.inner, clone);
        let bulkhead = Arc::clone(&self.bulkhead);
        Box::pin(async move {
            // The request is made only once a permit is held (as `BulkheadLayer` does).
            let permit =
                bulkhead.acquire_async().await.map_err(|full| Box::new(full) as BoxError)?;
            let mut permit = permit;
            permit.set_outcome(super::Outcome::Cancelled);
            let result = service.call(request).await;
            permit.set_outcome(if result.is_ok() {
                super::Outcome::Success
            } else {
                super::Outcome::Failure
            });
            drop(permit);
            result.map_err(Into::into)
        })
    }
}

impl<S> fmt::Debug for AdaptiveBulkheadService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveBulkheadService")
            .field("bulkhead", &self.bulkhead)
            .finish_non_exhaustive()
    }
}
