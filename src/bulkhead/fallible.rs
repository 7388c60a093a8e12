//! Calls whose work can fail: the refusal is mapped into the caller's own error type.
//!
//! [`Bulkhead::call`] gives `Result<T, BulkheadFull>`; for work that itself returns
//! `Result<T, E>` that is a nested `Result<Result<T, E>, BulkheadFull>` every adapter would
//! flatten by hand. The `_fallible` variants flatten it: they give `Result<T, E>` for any
//! `E: From<BulkheadFull>`, so one error variant of the adapter ("temporarily unavailable")
//! receives the refusal, as it receives a circuit breaker's "call not permitted".
//!
//! They also mark the call's outcome on its permit: `Ok` a success, `Err` a failure, a
//! dropped future cancelled. A plain bulkhead ignores the mark; an adaptive limit learns
//! from it (`Bulkhead::set_adaptive_limit`). [`Bulkhead::call_classified`] and
//! [`Bulkhead::call_async_classified`] let a classifier decide instead (a 404 says nothing
//! of the downstream's load).
//!
//! Why not `try_call`: in this crate `try_` means "never waits" ([`Bulkhead::try_acquire`]),
//! and these calls wait up to the configured max wait like [`Bulkhead::call`] does.

use core::future::Future;
use std::sync::Arc;

use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::{Marked, Outcome};
use crate::bulkhead::request::Request;
use crate::bulkhead::Bulkhead;

impl Bulkhead {
    /// Runs `f`, which can fail, on the calling thread under a permit, and gives its result
    /// with a refusal mapped into `E` by `From<BulkheadFull>`: the same as
    /// `self.call(f).map_err(E::from).and_then(|r| r)`, written once.
    ///
    /// Waits for a permit up to the configured `max_wait_duration`; the permit is released
    /// when `f` returns or unwinds (the panic still propagates).
    ///
    /// # Blocking
    ///
    /// Blocks while waiting for a permit, as [`acquire`](Self::acquire) does, then for as
    /// long as `f` runs.
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no permit was granted, as [`acquire`](Self::acquire)
    /// refuses (`f` is not run); otherwise whatever `f` returned.
    ///
    /// # Panics
    ///
    /// As [`acquire`](Self::acquire): rather than wait on a thread that polls async tasks.
    /// Use [`call_async_fallible`](Self::call_async_fallible) there.
    ///
    /// # Examples
    ///
    /// The guide's adapter: one error variant, "temporarily unavailable", for a bulkhead's
    /// refusal and a circuit breaker's alike; `?` maps it.
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum PortError {
    ///     /// The system is temporarily unavailable to us: answer 503 or serve a fallback.
    ///     TemporarilyUnavailable(String),
    ///     /// The bank said no.
    ///     Rejected(u16),
    /// }
    ///
    /// impl From<BulkheadFull> for PortError {
    ///     fn from(full: BulkheadFull) -> Self {
    ///         PortError::TemporarilyUnavailable(full.to_string())
    ///     }
    /// }
    /// // A circuit breaker's refusal maps to the same variant:
    /// // impl From<CallNotPermitted> for PortError { ... TemporarilyUnavailable ... }
    ///
    /// struct SberPort {
    ///     bulkhead: Bulkhead,
    /// }
    ///
    /// impl SberPort {
    ///     fn balance(&self, account: u32) -> Result<u64, PortError> {
    ///         self.bulkhead.call_fallible(|| match account {
    ///             0 => Err(PortError::Rejected(404)),
    ///             _ => Ok(4200),
    ///         })
    ///     }
    /// }
    ///
    /// let port = SberPort { bulkhead: Bulkhead::new("sber", BulkheadConfig::for_pool(1)) };
    /// assert_eq!(port.balance(7), Ok(4200));
    /// assert_eq!(port.balance(0), Err(PortError::Rejected(404)));
    ///
    /// let _busy = port.bulkhead.try_acquire()?; // the only slot is taken for 100 ms
    /// match port.balance(7) {
    ///     Err(PortError::TemporarilyUnavailable(why)) => {
    ///         assert!(why.starts_with("Bulkhead 'sber' stayed full for the call's whole max wait"))
    ///     }
    ///     other => panic!("expected a refusal, got {other:?}"),
    /// }
    /// # Ok::<(), BulkheadFull>(())
    /// ```
    #[inline]
    pub fn call_fallible<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        E: From<BulkheadFull>,
    {
        let mut permit = self.acquire()?;
        let result = f();
        permit.set(Outcome::of_result(&result));
        result
    }

    /// Awaits `fut`, which can fail, in the calling task under a permit, and gives its result
    /// with a refusal mapped into `E` by `From<BulkheadFull>`: the fallible form of
    /// [`call_async`](Self::call_async).
    ///
    /// Waits for a permit up to the configured `max_wait_duration`; the permit is held until
    /// `fut` completes or this future is dropped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it while it waits leaves the queue; dropping it while `fut` runs
    /// drops `fut` and releases the permit.
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no permit was granted, as
    /// [`acquire_async`](Self::acquire_async) refuses (`fut` is dropped without being
    /// polled); otherwise whatever `fut` gave.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};
    ///
    /// #[derive(Debug)]
    /// enum PortError {
    ///     /// 503 or a fallback.
    ///     TemporarilyUnavailable,
    /// }
    /// impl From<BulkheadFull> for PortError {
    ///     fn from(_: BulkheadFull) -> Self {
    ///         PortError::TemporarilyUnavailable
    ///     }
    /// }
    ///
    /// async fn fetch_rates(bank: &Bulkhead) -> Result<f64, PortError> {
    ///     let rate = bank.call_async_fallible(async { Ok::<_, PortError>(91.5) }).await?;
    ///     Ok(rate * 2.0)
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let bank = Bulkhead::new("sber", BulkheadConfig::builder().max_concurrent_calls(1).build().unwrap());
    /// assert_eq!(fetch_rates(&bank).await.unwrap(), 183.0);
    /// let _busy = bank.try_acquire().unwrap();
    /// assert!(matches!(fetch_rates(&bank).await, Err(PortError::TemporarilyUnavailable)));
    /// # }
    /// ```
    pub async fn call_async_fallible<T, E, F>(&self, fut: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<BulkheadFull>,
    {
        let mut permit = self.acquire_async().await?;
        permit.unmarked_is_cancelled();
        let result = fut.await;
        permit.set(Outcome::of_result(&result));
        result
    }

    /// Runs `f`, which can fail, under the permits `request` asks for (its count, its
    /// criticality, its own [`max_wait`](crate::Request::max_wait) if shorter than the
    /// configured one), with a refusal mapped into `E`: the fallible form of
    /// [`call_with`](Self::call_with). `Ok` marks a success, `Err` a failure.
    ///
    /// # Blocking
    ///
    /// As [`call_with`](Self::call_with).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when the permits were not granted, as
    /// [`acquire_many`](Self::acquire_many) refuses (`f` is not run); otherwise what `f` gave.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, Criticality, Request};
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// let bank = Bulkhead::new("sber", BulkheadConfig::for_pool(20));
    /// let login = Request::from(Criticality::Critical).max_wait(Duration::from_millis(5));
    /// let ok: Result<u32, BoxError> = bank.call_fallible_with(login, || Ok(7));
    /// assert_eq!(ok.unwrap(), 7);
    /// let refused: Result<(), BoxError> = bank.call_fallible_with(99, || Ok(()));
    /// assert!(refused.unwrap_err().downcast::<BulkheadFull>().is_ok());
    /// ```
    pub fn call_fallible_with<T, E>(
        &self,
        request: impl Into<Request>,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<BulkheadFull>,
    {
        let mut permit = self.acquire_many(request)?;
        let result = f();
        permit.set(Outcome::of_result(&result));
        result
    }

    /// Awaits `fut`, which can fail, under the permits `request` asks for, with a refusal
    /// mapped into `E`: the fallible form of [`call_async_with`](Self::call_async_with).
    /// Waits up to the smaller of the configured `max_wait_duration` and the request's own
    /// [`max_wait`](crate::Request::max_wait), on any executor.
    ///
    /// # Cancel safety
    ///
    /// As [`call_async_with`](Self::call_async_with).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when the permits were not granted (`fut` is dropped without
    /// being polled); otherwise whatever `fut` gave.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig, Request};
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// # futures::executor::block_on(async {
    /// let bank = Bulkhead::new("sber", BulkheadConfig::for_pool(20));
    /// let rates: Result<f64, BoxError> =
    ///     bank.call_async_fallible_with(Request::permits(2), async { Ok(91.5) }).await;
    /// assert_eq!(rates.unwrap(), 91.5);
    /// # });
    /// ```
    pub async fn call_async_fallible_with<T, E, F>(
        &self,
        request: impl Into<Request>,
        fut: F,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<BulkheadFull>,
    {
        let mut permit = self.acquire_many_async(request).await?;
        permit.unmarked_is_cancelled();
        let result = fut.await;
        permit.set(Outcome::of_result(&result));
        result
    }

    /// The fallible async call on an owned permit: like
    /// [`call_async_fallible`](Self::call_async_fallible), but the returned future holds
    /// an `Arc` of the bulkhead instead of a borrow, so it is `'static` (and `Send` when
    /// `fut` is) and can be given to `tokio::spawn`.
    ///
    /// The permit is taken with [`acquire_owned_async`](Self::acquire_owned_async) when the
    /// returned future is first polled, not when this method is called.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it while it waits leaves the queue; dropping it while `fut` runs
    /// drops `fut` and releases the permit.
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no permit was granted (`fut` is dropped without being
    /// polled); otherwise whatever `fut` gave.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct Unavailable;
    /// impl From<BulkheadFull> for Unavailable {
    ///     fn from(_: BulkheadFull) -> Self {
    ///         Unavailable
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let bank = Arc::new(Bulkhead::new("sber", BulkheadConfig::for_pool(20)));
    /// let task = tokio::spawn(bank.call_owned_async_fallible(async { Ok::<_, Unavailable>(7) }));
    /// assert_eq!(task.await.unwrap(), Ok(7));
    /// # }
    /// ```
    pub fn call_owned_async_fallible<T, E, F>(
        self: &Arc<Self>,
        fut: F,
    ) -> impl Future<Output = Result<T, E>>
    where
        F: Future<Output = Result<T, E>>,
        E: From<BulkheadFull>,
    {
        let acquire = self.acquire_owned_async();
        async move {
            let mut permit = acquire.await?;
            permit.unmarked_is_cancelled();
            let result = fut.await;
            permit.set(Outcome::of_result(&result));
            result
        }
    }

    /// Runs `f` on the calling thread under a permit, as [`call`](Self::call) does, and
    /// marks the call with the [`Outcome`] `classify` gives for its value (for an adaptive
    /// limit: a 404 says nothing of the downstream's load, a 503 is a failure).
    ///
    /// # Blocking
    ///
    /// As [`call`](Self::call).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `f` is not run.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// use bulkhead::{Bulkhead, BulkheadConfig, Outcome};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
    /// let status = bank.call_classified(|| 404, |status| match status {
    ///     500.. => Outcome::Failure,
    ///     400.. => Outcome::Ignored, // the caller's fault, not the bank's load
    ///     _ => Outcome::Success,
    /// })?;
    /// assert_eq!(status, 404);
    /// assert_eq!(bank.adaptive_limit().unwrap().limit(), 16);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_classified<T>(
        &self,
        f: impl FnOnce() -> T,
        classify: impl FnOnce(&T) -> Outcome,
    ) -> Result<T, BulkheadFull> {
        let mut permit = self.acquire()?;
        let value = f();
        permit.set_outcome(classify(&value));
        Ok(value)
    }

    /// Awaits `fut` in the calling task under a permit, as
    /// [`call_async`](Self::call_async) does, and marks the call with the [`Outcome`]
    /// `classify` gives for its output ([`Outcome::Cancelled`] if this future is dropped
    /// first).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it while it waits leaves the queue; dropping it while `fut`
    /// runs drops `fut`, releases the permit and reports a cancelled call.
    ///
    /// # Errors
    ///
    /// As [`acquire_async`](Self::acquire_async); `fut` is dropped without being polled.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// use bulkhead::{Bulkhead, BulkheadConfig, Outcome};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
    /// let status = bank.call_async_classified(async { 503 }, |s| {
    ///     if *s >= 500 { Outcome::Failure } else { Outcome::Success }
    /// }).await?;
    /// assert_eq!((status, bank.adaptive_limit().unwrap().limit()), (503, 14));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async_classified<F: Future>(
        &self,
        fut: F,
        classify: impl FnOnce(&F::Output) -> Outcome,
    ) -> Result<F::Output, BulkheadFull> {
        let mut permit = self.acquire_async().await?;
        permit.unmarked_is_cancelled();
        let output = fut.await;
        permit.set_outcome(classify(&output));
        Ok(output)
    }
}
