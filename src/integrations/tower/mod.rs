//! A bulkhead as tower middleware for outbound clients (feature `tower`).
//!
//! [`BulkheadLayer`] wraps a client service (hyper-util's pooled client, a tonic channel,
//! anything implementing `tower::Service` that is `Clone`). Each request takes a permit when
//! it is *called*, holds it until its response future completes or is dropped, and fails
//! fast with a [`BulkheadFull`] boxed in a [`BoxError`] when the bulkhead stays full for its
//! max wait. A server maps that error to HTTP 503 (or a fallback), exactly like a circuit
//! breaker's "call not permitted":
//!
//! ```
//! # fn status(err: &bulkhead::tower::BoxError) -> u16 {
//! if err.downcast_ref::<bulkhead::BulkheadFull>().is_some() {
//!     503 // the downstream is temporarily unavailable to us: shed, or serve a fallback
//! } else {
//!     502
//! }
//! # }
//! # let bank = bulkhead::Bulkhead::new("bank", bulkhead::BulkheadConfig::builder().max_concurrent_calls(0).build().unwrap());
//! # let refused: bulkhead::tower::BoxError = Box::new(bank.try_acquire().unwrap_err());
//! # assert_eq!(status(&refused), 503);
//! # assert_eq!(status(&"connection reset".into()), 502);
//! ```
//!
//! # Why no permit is reserved in `poll_ready`
//!
//! tower's own `ConcurrencyLimit` takes its semaphore permit in `poll_ready` and parks it in
//! the service instance until the next `call`. A service that is cloned, driven to readiness
//! and then not called (a clone idling in a connection pool or a load balancer, a handler
//! that polled readiness then returned early) keeps its permit, so idle clones can use up
//! the whole limit while nothing is in flight (vector#26457, tower#793).
//!
//! Here `poll_ready` only asks the inner service; the permit is taken in `call` and belongs
//! to that request's future. An idle clone holds nothing, and the limit counts requests that
//! really are in flight. The price: readiness does not say whether the bulkhead has room, so
//! a load balancer cannot route around a full bulkhead by readiness. That is the point of a
//! bulkhead: the request is refused at once and the caller decides (503, fallback).
//!
//! # How a call goes
//!
//! 1. `call(request)` keeps the service that was driven to readiness (a clone takes its
//!    place, the usual tower pattern) and returns a [`ResponseFuture`] that does nothing yet.
//! 2. Its first poll takes a permit with [`Bulkhead::acquire_owned_async`]: at once if one is
//!    free, else after waiting up to the bulkhead's `max_wait_duration`, else it resolves
//!    to `Err(BulkheadFull)` and the inner service is never called. The bulkhead keeps the
//!    deadline itself, on any executor (`bulkhead::timer`).
//! 3. With the permit, it calls the inner service and awaits its response. The permit is
//!    released as soon as that future completes, or when the [`ResponseFuture`] is dropped
//!    (a timeout or a cancelled request frees the slot at once).
//!
//! For hyper's client the response future completes when the response head arrives; reading
//! the body happens after the permit is released.
//!
//! # Examples
//!
//! ```
//! use std::convert::Infallible;
//! use std::sync::Arc;
//! use bulkhead::{tower::BulkheadLayer, Bulkhead, BulkheadConfig, BulkheadFull};
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build().unwrap()));
//! let client = ServiceBuilder::new()
//!     .layer(BulkheadLayer::new(Arc::clone(&bank)))
//!     .service(service_fn(|account: u32| async move { Ok::<_, Infallible>(account * 10) }));
//!
//! assert_eq!(client.clone().oneshot(4).await.unwrap(), 40);
//!
//! let _busy = bank.try_acquire().unwrap(); // someone else holds the only slot
//! let err = client.oneshot(5).await.unwrap_err();
//! let full = err.downcast_ref::<BulkheadFull>().expect("refused by the bulkhead");
//! assert_eq!(full.bulkhead_name(), "bank");
//! # }
//! ```

use core::fmt;
use core::future::Future;
use core::mem;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use std::sync::Arc;

use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::future::AcquireOwned;
use crate::bulkhead::permit::OwnedPermit;
use crate::bulkhead::permit::{Marked, Outcome};
use crate::bulkhead::request::Request;
use crate::bulkhead::Bulkhead;

mod keyed;
mod map;
mod retry;

pub use self::keyed::{KeyedBulkheadLayer, KeyedBulkheadService, KeyedResponseFuture};
pub use map::map_refusal;
pub use retry::RetryAfter;

/// The error type of [`BulkheadService`]: the same type as `tower::BoxError`. A refusal is
/// a [`BulkheadFull`] inside; find it with `downcast_ref::<BulkheadFull>()`. Errors of the
/// inner service are passed through, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Applies a bulkhead to a client service: see the [module docs](self).
///
/// Every service this layer builds, and every clone of those, shares the one
/// `Arc<Bulkhead>`.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{tower::BulkheadLayer, Bulkhead, BulkheadConfig};
///
/// let layer = BulkheadLayer::new(Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20))));
/// assert_eq!(layer.bulkhead().name(), "bank");
/// ```
#[derive(Clone)]
pub struct BulkheadLayer<C = Plain> {
    bulkhead: Arc<Bulkhead>,
    classify: C,
}

/// What a request asks the bulkhead for: how many permits, in which
/// [`Criticality`](crate::Criticality). Implemented by [`Plain`] (one permit, default class:
/// every request alike) and by every `Fn(&Req) -> Request`; set with
/// [`BulkheadLayer::classify`].
pub trait Classify<Req> {
    /// The request's [`Request`].
    fn classify(&self, request: &Req) -> Request;
}

/// The classifier of a layer that was given none: one permit in the default class for
/// every request, which takes the plain acquire's path.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain;

impl<Req> Classify<Req> for Plain {
    #[inline]
    fn classify(&self, _: &Req) -> Request {
        Request::default()
    }
}

impl<Req, F: Fn(&Req) -> Request> Classify<Req> for F {
    #[inline]
    fn classify(&self, request: &Req) -> Request {
        self(request)
    }
}

impl BulkheadLayer {
    /// A layer that guards calls with `bulkhead`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{tower::BulkheadLayer, Bulkhead, BulkheadConfig};
    /// let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let layer = BulkheadLayer::new(Arc::clone(&bank));
    /// assert!(Arc::ptr_eq(layer.bulkhead(), &bank));
    /// ```
    pub fn new(bulkhead: Arc<Bulkhead>) -> Self {
        BulkheadLayer { bulkhead, classify: Plain }
    }

    /// A layer that guards calls with an instrumented bulkhead (feature `metrics`): the same
    /// as `BulkheadLayer::new(Arc::clone(bulkhead.bulkhead()))`, since the bulkhead itself
    /// counts and times every call.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{tower::BulkheadLayer, Bulkhead, BulkheadConfig};
    /// let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let layer = BulkheadLayer::instrumented(&bulkhead::metrics_export::register(&bank));
    /// assert!(Arc::ptr_eq(layer.bulkhead(), &bank));
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn instrumented(
        bulkhead: &crate::integrations::metrics_export::InstrumentedBulkhead,
    ) -> Self {
        BulkheadLayer::new(Arc::clone(bulkhead.bulkhead()))
    }

    /// The bulkhead.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{tower::BulkheadLayer, Bulkhead, BulkheadConfig};
    /// let layer = BulkheadLayer::new(Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// assert_eq!(layer.bulkhead().metrics().in_flight_calls(), 0);
    /// ```
    pub fn bulkhead(&self) -> &Arc<Bulkhead> {
        &self.bulkhead
    }
}

impl<C> BulkheadLayer<C> {
    /// The same layer, asking the bulkhead for what `classify` says each request needs:
    /// permits (a costly call takes several) and a [`Criticality`](crate::Criticality)
    /// (user traffic before prefetches). See [`Request`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{tower::BulkheadLayer, Bulkhead, BulkheadConfig, Criticality, Request};
    ///
    /// struct Query { batch: bool, rows: u32 }
    /// let db = Arc::new(Bulkhead::new("db", BulkheadConfig::for_pool(20)));
    /// let layer = BulkheadLayer::new(db).classify(|query: &Query| {
    ///     if query.batch {
    ///         Request::permits(query.rows.div_ceil(1000)).criticality(Criticality::Sheddable)
    ///     } else {
    ///         Request::default()
    ///     }
    /// });
    /// # let _ = layer;
    /// ```
    pub fn classify<F>(self, classify: F) -> BulkheadLayer<F> {
        BulkheadLayer { bulkhead: self.bulkhead, classify }
    }
}

impl<S, C: Clone> Layer<S> for BulkheadLayer<C> {
    type Service = BulkheadService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        BulkheadService {
            inner,
            bulkhead: Arc::clone(&self.bulkhead),
            classify: self.classify.clone(),
        }
    }
}

impl<C> fmt::Debug for BulkheadLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadLayer").field("bulkhead", &self.bulkhead).finish()
    }
}

/// A client service guarded by a bulkhead; built by [`BulkheadLayer`].
///
/// `poll_ready` is the inner service's; `call` takes no permit itself, its
/// [`ResponseFuture`] does. Clones share the bulkhead and hold no permit.
///
/// # Examples
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use bulkhead::{tower::BulkheadService, Bulkhead, BulkheadConfig};
/// use tower::{service_fn, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), bulkhead::tower::BoxError> {
/// let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
/// let echo = service_fn(|x: u32| async move { Ok::<_, Infallible>(x) });
/// let service = BulkheadService::new(echo, bank);
/// assert_eq!(service.oneshot(7).await?, 7);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct BulkheadService<S, C = Plain> {
    inner: S,
    bulkhead: Arc<Bulkhead>,
    classify: C,
}

impl<S> BulkheadService<S> {
    /// Guards `inner` with `bulkhead`; the same as `BulkheadLayer::new(bulkhead).layer(inner)`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{tower::BulkheadService, Bulkhead, BulkheadConfig};
    /// let service = BulkheadService::new((), Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// assert_eq!(service.bulkhead().name(), "bank");
    /// ```
    pub fn new(inner: S, bulkhead: Arc<Bulkhead>) -> Self {
        BulkheadService { inner, bulkhead, classify: Plain }
    }
}

impl<S, C> BulkheadService<S, C> {
    /// The bulkhead.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{tower::BulkheadService, Bulkhead, BulkheadConfig};
    /// let service = BulkheadService::new((), Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// assert_eq!(service.bulkhead().metrics().in_flight_calls(), 0);
    /// ```
    pub fn bulkhead(&self) -> &Arc<Bulkhead> {
        &self.bulkhead
    }

    /// The inner service.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{tower::BulkheadService, Bulkhead, BulkheadConfig};
    /// let service = BulkheadService::new(7u8, Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// assert_eq!(*service.get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{tower::BulkheadService, Bulkhead, BulkheadConfig};
    /// let mut service = BulkheadService::new(7u8, Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// *service.get_mut() += 1;
    /// assert_eq!(service.into_inner(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{tower::BulkheadService, Bulkhead, BulkheadConfig};
    /// let service = BulkheadService::new(7u8, Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// assert_eq!(service.into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, C, Req> Service<Req> for BulkheadService<S, C>
where
    S: Service<Req> + Clone,
    S::Error: Into<BoxError>,
    C: Classify<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S, Req>;

    /// The inner service's readiness. No permit is reserved here (see the module docs).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        // The instance driven to readiness serves this request; its clone takes its place.
        let clone = self.inner.clone();
        let service = mem::replace(&mut self.inner, clone);
        let acquire = self.bulkhead.acquire_many_owned_async(self.classify.classify(&request));
        ResponseFuture { state: Stage::acquiring(acquire, service, request) }
    }
}

impl<S, C> fmt::Debug for BulkheadService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadService").field("bulkhead", &self.bulkhead).finish_non_exhaustive()
    }
}

pin_project! {
    /// The response future of [`BulkheadService`]: takes a permit (waiting up to the
    /// bulkhead's max wait), then calls the inner service and holds the permit until the
    /// response is there.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point releases what it holds: a queued wait leaves the queue, a
    /// permit is released, and the inner call (if made) is dropped.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, Req>
    where
        S: Service<Req>,
    {
        #[pin]
        state: Stage<AcquireOwned, S, Req, S::Future, OwnedPermit>,
    }
}

pin_project! {
    /// What a response future of the plain and the keyed layer goes through: taking its
    /// permits (`A` gives them as `P`), running the inner call under them, done.
    #[project = StageProj]
    pub(crate) enum Stage<A, S, Req, F, P> {
        Acquiring {
            #[pin]
            acquire: A,
            service: Option<S>,
            request: Option<Req>,
        },
        Running {
            #[pin]
            call: Guarded<F, P>,
        },
        Done,
    }
}

impl<A, S, Req, P> Stage<A, S, Req, S::Future, P>
where
    A: Future<Output = Result<P, BulkheadFull>>,
    S: Service<Req>,
    S::Error: Into<BoxError>,
    P: Marked,
{
    /// A stage that first takes its permits with `acquire`.
    pub(crate) fn acquiring(acquire: A, service: S, request: Req) -> Self {
        Stage::Acquiring { acquire, service: Some(service), request: Some(request) }
    }

    /// Drives the stages: a refusal is a [`BulkheadFull`] in the [`BoxError`]. `what` names
    /// the future in the panic of a poll after completion.
    pub(crate) fn poll_stage(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        what: &'static str,
    ) -> Poll<Result<S::Response, BoxError>> {
        loop {
            match self.as_mut().project() {
                StageProj::Acquiring { acquire, service, request } => {
                    let acquired = ready!(acquire.poll(cx));
                    let permits = match acquired {
                        Ok(permits) => permits,
                        Err(full) => {
                            self.set(Stage::Done);
                            return Poll::Ready(Err(Box::new(full)));
                        }
                    };
                    let call = Guarded::call(service.take(), request.take(), permits);
                    self.set(Stage::Running { call });
                }
                StageProj::Running { call } => {
                    let output = ready!(call.poll(cx));
                    self.set(Stage::Done);
                    return Poll::Ready(output);
                }
                StageProj::Done => panic!("a {what} was polled after it completed"),
            }
        }
    }
}

impl<A, S, Req, F, P> Stage<A, S, Req, F, P> {
    /// The stage's name, for `Debug`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Stage::Acquiring { .. } => "acquiring",
            Stage::Running { .. } => "running",
            Stage::Done => "done",
        }
    }
}

impl<S, Req> Future for ResponseFuture<S, Req>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    type Output = Result<S::Response, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().state.poll_stage(cx, "bulkhead ResponseFuture")
    }
}

pin_project! {
    /// The inner service's call and the permits it runs under, released as soon as the call
    /// completes (before the response is handed on). Shared by the plain and keyed layers.
    pub(crate) struct Guarded<F, P> {
        #[pin]
        future: F,
        permits: Option<P>,
    }
}

impl<F, P: Marked> Guarded<F, P> {
    /// Calls `service` with `request` (each taken once, when the permits are held). Until
    /// the call completes, dropping it reports the call [`Outcome::Cancelled`].
    pub(crate) fn call<S, Req>(service: Option<S>, request: Option<Req>, mut permits: P) -> Self
    where
        S: Service<Req, Future = F>,
    {
        let (Some(mut service), Some(request)) = (service, request) else {
            unreachable!("the service and request are taken once, when the permits are held");
        };
        permits.unmarked_is_cancelled();
        Guarded { future: service.call(request), permits: Some(permits) }
    }
}

impl<F, T, E, P: Marked> Future for Guarded<F, P>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = ready!(this.future.poll(cx));
        // The call is over: mark how it went (an `Err` is a failure, for an adaptive limit)
        // and free the slots before handing the response on.
        if let Some(mut permits) = this.permits.take() {
            permits.set(Outcome::of_result(&output));
        }
        Poll::Ready(output.map_err(Into::into))
    }
}

impl<S, Req> fmt::Debug for ResponseFuture<S, Req>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").field("state", &self.state.name()).finish()
    }
}

// docs/integrations.md (the README draft for this feature and `metrics`): its Rust blocks
// run as doctests, so the snippets cannot rot.
#[cfg(all(doctest, feature = "metrics"))]
#[doc = include_str!("../../../docs/integrations.md")]
struct IntegrationsDoctests;
