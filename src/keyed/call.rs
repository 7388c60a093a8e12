//! The `call` verbs of the keyed bulkhead: run a closure or await a future with the slots
//! of its key and of the total held, plain, weighted (`_with`), fallible and owned, each on
//! an acquire verb of `acquire.rs`.

use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};

use super::KeyedBulkhead;
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::request::Request;

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// Runs `f` on the calling thread with the slots `request` asks for held at `key` and at
    /// the total (its count, its criticality, its own [`max_wait`](Request::max_wait) at
    /// each level): the keyed [`Bulkhead::call_with`](crate::Bulkhead::call_with). The slots
    /// are released when `f` returns or unwinds.
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire_many`](Self::acquire_many), then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many); `f` does not run.
    ///
    /// ```
    /// use bulkhead::{Criticality, Request, keyed::KeyedBulkhead};
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let request = Request::permits(2).criticality(Criticality::Critical);
    /// let held = tenants.call_with(&42, request, || tenants.key_metrics(&42).unwrap().in_flight_calls())?;
    /// assert_eq!(held, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_with<T>(
        &self,
        key: &K,
        request: impl Into<Request>,
        f: impl FnOnce() -> T,
    ) -> Result<T, BulkheadFull> {
        let _permit = self.acquire_many(key, request)?;
        Ok(f())
    }

    /// Awaits `fut` in the calling task with the slots `request` asks for held at `key` and
    /// at the total until it completes or is dropped: the keyed
    /// [`Bulkhead::call_async_with`](crate::Bulkhead::call_async_with). Each level waits at
    /// most the smaller of its configured max wait and the request's own
    /// [`max_wait`](Request::max_wait), kept by that bulkhead's timer, on any executor.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_many_async`](Self::acquire_many_async); once `fut` runs, dropping the
    /// future drops `fut` and releases the slots.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many); `fut` is not polled.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Request, keyed::KeyedBulkhead};
    /// # futures::executor::block_on(async {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let request = Request::permits(3).max_wait(Duration::from_millis(5));
    /// assert_eq!(tenants.call_async_with(&42, request, async { 7 }).await?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn call_async_with<F: Future>(
        &self,
        key: &K,
        request: impl Into<Request>,
        fut: F,
    ) -> Result<F::Output, BulkheadFull> {
        let _permit = self.acquire_many_async(key, request).await?;
        Ok(fut.await)
    }

    /// Awaits `fut` with an owned slot of `key` (and of the total) held: the non-fallible
    /// [`call_owned_async_fallible`](Self::call_owned_async_fallible). The key is looked up
    /// when this is called; the future is `Send + 'static` when `fut` is.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_owned_async`](Self::acquire_owned_async); once `fut` runs, dropping the
    /// future drops `fut` and releases the slots.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `fut` is not polled.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tokio::spawn(tenants.call_owned_async(&7, async { 7 })).await??, 7);
    /// # Ok(())
    /// # }
    /// ```
    pub fn call_owned_async<F: Future + Send + 'static>(
        &self,
        key: &K,
        fut: F,
    ) -> impl Future<Output = Result<F::Output, BulkheadFull>> + Send + 'static {
        let acquire = self.acquire_owned_async(key);
        async move {
            let _permit = acquire.await?;
            Ok(fut.await)
        }
    }

    /// Runs `f` on the calling thread with a slot of `key` (and of the total) held; the
    /// slots are released when `f` returns or unwinds.
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire`](Self::acquire), then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `f` does not run.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tenants.call(&42, || "done")?, "done");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call<T>(&self, key: &K, f: impl FnOnce() -> T) -> Result<T, BulkheadFull> {
        let _permit = self.acquire(key)?;
        Ok(f())
    }

    /// Awaits `fut` in the calling task with a slot of `key` (and of the total) held until it
    /// completes or is dropped.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire_async`](Self::acquire_async); once `fut` runs, dropping the future drops
    /// `fut` and releases the slots.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `fut` is not polled.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// assert_eq!(tenants.call_async(&42, async { 7 }).await?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn call_async<F: Future>(&self, key: &K, fut: F) -> Result<F::Output, BulkheadFull> {
        let _permit = self.acquire_async(key).await?;
        Ok(fut.await)
    }

    /// Runs `f`, which can fail, with a slot of `key` (and of the total) held, and gives its
    /// result with a refusal mapped into `E` by `From<BulkheadFull>`: the keyed
    /// [`Bulkhead::call_fallible`](crate::Bulkhead::call_fallible), with the same error mapping
    /// (a keyed refusal is a [`BulkheadFull`] whatever level refused).
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire`](Self::acquire), then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no slot was granted (`f` does not run); otherwise what
    /// `f` gave.
    ///
    /// ```
    /// use bulkhead::{BulkheadConfig, BulkheadFull, keyed::KeyedBulkhead};
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum PortError {
    ///     NotFound,
    ///     TemporarilyUnavailable(String),
    /// }
    /// impl From<BulkheadFull> for PortError {
    ///     fn from(full: BulkheadFull) -> Self {
    ///         PortError::TemporarilyUnavailable(full.bulkhead_name().to_owned())
    ///     }
    /// }
    ///
    /// let tenants = KeyedBulkhead::<u64>::builder("api")
    ///     .default_config(BulkheadConfig::builder().max_concurrent_calls(1).build().unwrap())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(tenants.call_fallible(&7, || Err::<u8, _>(PortError::NotFound)), Err(PortError::NotFound));
    /// let _busy = tenants.try_acquire(&7).unwrap();
    /// assert_eq!(
    ///     tenants.call_fallible(&7, || Ok::<_, PortError>(1)),
    ///     Err(PortError::TemporarilyUnavailable("api/7".to_owned()))
    /// );
    /// ```
    pub fn call_fallible<T, E>(&self, key: &K, f: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire(key)?;
        f()
    }

    /// Runs `f`, which can fail, with the slots `request` asks for held at `key` and at the
    /// total, a refusal mapped into `E`: the keyed
    /// [`Bulkhead::call_fallible_with`](crate::Bulkhead::call_fallible_with).
    ///
    /// # Blocking
    ///
    /// Waits like [`acquire_many`](Self::acquire_many), then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when the slots were not granted (`f` does not run); otherwise
    /// what `f` gave.
    ///
    /// ```
    /// use bulkhead::{Criticality, keyed::KeyedBulkhead};
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let ok: Result<u32, BoxError> = tenants.call_fallible_with(&7, Criticality::Critical, || Ok(7));
    /// assert_eq!(ok.unwrap(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call_fallible_with<T, E>(
        &self,
        key: &K,
        request: impl Into<Request>,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E>
    where
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire_many(key, request)?;
        f()
    }

    /// Awaits `fut`, which can fail, with the slots `request` asks for held at `key` and at
    /// the total, a refusal mapped into `E`: the keyed
    /// [`Bulkhead::call_async_fallible_with`](crate::Bulkhead::call_async_fallible_with).
    ///
    /// # Cancel safety
    ///
    /// As [`call_async_with`](Self::call_async_with).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when the slots were not granted (`fut` is not polled);
    /// otherwise what `fut` gave.
    ///
    /// ```
    /// use bulkhead::{Request, keyed::KeyedBulkhead};
    /// type BoxError = Box<dyn std::error::Error + Send + Sync>;
    /// # futures::executor::block_on(async {
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build()?;
    /// let ok: Result<u32, BoxError> = tenants.call_async_fallible_with(&7, Request::permits(2), async { Ok(7) }).await;
    /// assert_eq!(ok.unwrap(), 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn call_async_fallible_with<T, E, F>(
        &self,
        key: &K,
        request: impl Into<Request>,
        fut: F,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire_many_async(key, request).await?;
        fut.await
    }

    /// Awaits `fut`, which can fail, with a slot of `key` (and of the total) held, and gives
    /// its result with a refusal mapped into `E` by `From<BulkheadFull>`: the keyed
    /// [`Bulkhead::call_async_fallible`](crate::Bulkhead::call_async_fallible).
    ///
    /// # Cancel safety
    ///
    /// As [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no slot was granted (`fut` is dropped without being
    /// polled); otherwise what `fut` gave.
    ///
    /// ```
    /// use bulkhead::{BulkheadFull, keyed::KeyedBulkhead};
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct Unavailable;
    /// impl From<BulkheadFull> for Unavailable {
    ///     fn from(_: BulkheadFull) -> Self {
    ///         Unavailable
    ///     }
    /// }
    ///
    /// let tenants = KeyedBulkhead::<u64>::builder("api").build().unwrap();
    /// let rate = futures::executor::block_on(
    ///     tenants.call_async_fallible(&7, async { Ok::<_, Unavailable>(91.5) }),
    /// );
    /// assert_eq!(rate, Ok(91.5));
    /// ```
    pub async fn call_async_fallible<T, E, F>(&self, key: &K, fut: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<BulkheadFull>,
    {
        let _permit = self.acquire_async(key).await?;
        fut.await
    }

    /// The fallible async call on an owned permit: like
    /// [`call_async_fallible`](Self::call_async_fallible), but the returned future holds
    /// the key's bulkhead and the total by `Arc` instead of borrowing, so it is `'static`
    /// (and `Send` when `fut` is) and can be given to `tokio::spawn`. The key is looked up
    /// when this is called, the slots are taken when the future is first polled.
    ///
    /// # Cancel safety
    ///
    /// As [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// `E::from(BulkheadFull)` when no slot was granted (`fut` is dropped without being
    /// polled); otherwise what `fut` gave.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{BulkheadFull, keyed::KeyedBulkhead};
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
    /// let tenants = Arc::new(KeyedBulkhead::<u64>::builder("api").build().unwrap());
    /// let task = tokio::spawn(tenants.call_owned_async_fallible(&7, async { Ok::<_, Unavailable>(7) }));
    /// assert_eq!(task.await.unwrap(), Ok(7));
    /// # }
    /// ```
    pub fn call_owned_async_fallible<T, E, F>(
        &self,
        key: &K,
        fut: F,
    ) -> impl Future<Output = Result<T, E>> + 'static
    where
        F: Future<Output = Result<T, E>> + 'static,
        E: From<BulkheadFull>,
    {
        let acquire = self.acquire_owned_async(key);
        async move {
            let _permit = acquire.await?;
            fut.await
        }
    }
}
