//! Adaptive limits: a bulkhead whose limit follows the downstream's latency, within the
//! guide's cap.
//!
//! The style guide sizes a bulkhead statically, at 80 % of the connection pool
//! (R-RES-BH-3, [`BulkheadConfig::for_pool`]), for the case it names: the downstream
//! answers slowly but is not down. A static limit of 16 then still lets 16 callers sit in
//! 2-second calls. An [`AdaptiveBulkhead`] measures every admitted call (latency and
//! [`Outcome`]) when its permit ends, feeds the [`Sample`] to a [`LimitAlgorithm`], and
//! moves the bulkhead's limit with [`Bulkhead::change_config`], which never blocks. The
//! limit stays within `[min_limit, max]`, where `max` is the configured
//! `max_concurrent_calls`: an adaptive bulkhead never admits more than the static one.
//!
//! Three algorithms come built in, with the rules and defaults of Netflix's
//! concurrency-limits library (each type's docs cite the file): [`Aimd`] (loss-based),
//! [`Gradient2`] (latency gradient) and [`Vegas`] (queue estimate). Plug your own by
//! implementing [`LimitAlgorithm`].
//!
//! # Cost
//!
//! A plain [`Bulkhead`] pays nothing for this module: the adaptive bulkhead is a separate
//! type that wraps one, and its permits record on drop. Its own acquire + release adds two
//! clock reads, a lock of the controller (uncontended in the common case: one
//! compare-and-swap each way) and the algorithm's arithmetic; `benches/results/adaptive.md`
//! has the instruction counts.
//!
//! # User code and the controller's lock
//!
//! The controller's lock is held only to feed a sample to the algorithm and read its new
//! limit. The algorithm's [`LimitAlgorithm::update`] and `estimates` run under it (they are
//! the state it protects: keep them to arithmetic, and never call the bulkhead from them).
//! Nothing else of the user's does: the new limit reaches the engine after the lock (a
//! grown limit wakes queued callers, whose wakers may call the bulkhead), limit-change
//! listeners run after it, a removed listener is dropped after the listeners' lock, and a
//! classifier (`call_classified`) runs with only the permit held.
//!
//! # Examples
//!
//! ```
//! use bulkhead::adaptive::{AdaptiveBulkhead, Gradient2};
//! use bulkhead::BulkheadConfig;
//!
//! // At most 16 calls (80 % of a pool of 20), fewer while the bank slows down.
//! let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Gradient2::default());
//! let balance = bank.call(|| "42.00 EUR")?; // latency recorded as a success
//! assert_eq!(balance, "42.00 EUR");
//! let reply: Result<u32, &str> = bank.call_result(|| Err("503"))?; // recorded as a failure
//! assert!(reply.is_err());
//! assert!(bank.limit() <= 16);
//! # Ok::<(), bulkhead::BulkheadFull>(())
//! ```

mod aimd;
mod algorithm;
mod gradient2;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
mod vegas;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use self::aimd::Aimd;
pub use self::algorithm::{Estimates, LimitAlgorithm, Limits, Outcome, Sample};
pub use self::gradient2::Gradient2;
pub use self::vegas::Vegas;
use crate::sync::{AtomicBool, Mutex, Ordering};
use crate::{Bulkhead, BulkheadConfig, BulkheadFull, BulkheadMetrics, ConfigError, Permit};

/// A listener of limit changes.
type Listener = Box<dyn Fn(&LimitChanged<'_>) + Send + Sync>;

/// A bulkhead whose limit an algorithm moves within `[min_limit, max]`, from samples of
/// the calls it admits.
///
/// It wraps a plain [`Bulkhead`] (shared as an `Arc`, see [`bulkhead`](Self::bulkhead)), so
/// rejection, waiting, FIFO order, events and metrics are the engine's. What it adds: every
/// permit it hands out records a [`Sample`] when it ends, and the controller applies the
/// algorithm's new limit with [`Bulkhead::change_config`] (which never blocks: shrinking
/// lets calls in flight finish, growing admits queued waiters at once).
///
/// The limit starts at `max` (the guide's static sizing) unless
/// [`AdaptiveBulkheadBuilder::initial_limit`] says otherwise.
///
/// # Examples
///
/// ```
/// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
/// use bulkhead::BulkheadConfig;
///
/// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
/// assert_eq!(bank.limit(), 16);
/// for _ in 0..3 {
///     let permit = bank.try_acquire()?;
///     permit.fail(); // e.g. the bank answered 503: the limit backs off
/// }
/// assert_eq!(bank.limit(), 10); // 16 -> floor(16 * 0.9) = 14 -> 12 -> 10
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
pub struct AdaptiveBulkhead {
    bulkhead: Arc<Bulkhead>,
    min: usize,
    max: usize,
    /// Latency above which a successful call counts as a failure.
    timeout: Option<Duration>,
    /// Record 1 call in this many (per thread); 1 records every call.
    sample_one_in: u32,
    /// The configuration the limit is applied to (its wait settings are kept).
    base: BulkheadConfig,
    controller: Mutex<Controller>,
    /// Each with the flag its [`ListenerHandle`](crate::ListenerHandle) clears.
    listeners: Mutex<Vec<(Arc<AtomicBool>, Arc<Listener>)>>,
}

struct Controller {
    algorithm: Box<dyn LimitAlgorithm>,
    limit: usize,
    samples: u64,
}

impl AdaptiveBulkhead {
    /// An adaptive bulkhead named `name`: `config` gives the cap (`max_concurrent_calls`,
    /// also the initial limit) and the wait settings; `algorithm` moves the limit within
    /// `[1, max]` (`[0, 0]` for a cap of 0).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Vegas};
    /// use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Vegas::default());
    /// assert_eq!((bank.min_limit(), bank.limit(), bank.max_limit()), (1, 16, 16));
    /// ```
    pub fn new(
        name: impl Into<String>,
        config: BulkheadConfig,
        algorithm: impl LimitAlgorithm,
    ) -> AdaptiveBulkhead {
        AdaptiveBulkhead::builder(name, config)
            .algorithm(algorithm)
            .build()
            .expect("the default bounds are valid for any cap")
    }

    /// A builder: bounds, initial limit, algorithm (default [`Gradient2`]) and timeout.
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20))
    ///     .algorithm(Aimd::default())
    ///     .min_limit(2)
    ///     .initial_limit(8)
    ///     .build()?;
    /// assert_eq!(bank.limit(), 8);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn builder(name: impl Into<String>, config: BulkheadConfig) -> AdaptiveBulkheadBuilder {
        AdaptiveBulkheadBuilder {
            name: name.into(),
            config,
            algorithm: None,
            min_limit: None,
            max_limit: None,
            initial_limit: None,
            timeout: None,
            sample_one_in: 1,
        }
    }

    /// An adaptive bulkhead registered in `registry` under `name`: its cap and wait
    /// settings are the configuration the registry gives `name` (from a config file, a
    /// named config or the default, as [`BulkheadRegistry::bulkhead`] resolves it), and the
    /// registry's entry (tags kept) then holds the adaptive bulkhead's engine, so
    /// [`BulkheadRegistry::find`], `all`, `close_all`, `wait_drained` and the metrics
    /// exporter see it, and [`BulkheadRegistry::find_adaptive`] gives this handle back. Make
    /// calls through it to record samples; calls made through the registry's
    /// `Arc<Bulkhead>` are limited but not measured.
    ///
    /// A caller that took the registry's previous bulkhead for `name` before this call
    /// keeps using that one.
    ///
    /// [`BulkheadRegistry::bulkhead`]: crate::BulkheadRegistry::bulkhead
    /// [`BulkheadRegistry::find`]: crate::BulkheadRegistry::find
    /// [`BulkheadRegistry::find_adaptive`]: crate::BulkheadRegistry::find_adaptive
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Vegas};
    /// use bulkhead::{BulkheadConfig, BulkheadRegistry};
    ///
    /// let registry = BulkheadRegistry::new(BulkheadConfig::for_pool(20));
    /// let bank = AdaptiveBulkhead::in_registry(&registry, "bank", Vegas::default());
    /// assert_eq!(bank.max_limit(), 16);
    /// assert!(Arc::ptr_eq(&registry.find("bank").unwrap(), bank.bulkhead()));
    /// ```
    pub fn in_registry(
        registry: &crate::BulkheadRegistry,
        name: &str,
        algorithm: impl LimitAlgorithm,
    ) -> Arc<AdaptiveBulkhead> {
        let config = registry.configured(name);
        let adaptive = Arc::new(AdaptiveBulkhead::new(name, config, algorithm));
        registry.set_adaptive(name, &adaptive);
        adaptive
    }

    /// The bulkhead underneath: its name, metrics, events, `close` and `drained` are the
    /// adaptive bulkhead's. Do not resize it with `change_config` yourself: the next limit
    /// change replaces that limit (and keeps the wait settings given at construction).
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// assert_eq!(bank.bulkhead().name(), "bank");
    /// ```
    pub fn bulkhead(&self) -> &Arc<Bulkhead> {
        &self.bulkhead
    }

    /// The configuration given at construction: the cap and the wait settings.
    pub(crate) fn base_config(&self) -> &BulkheadConfig {
        &self.base
    }

    /// The bulkhead's name.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// assert_eq!(AdaptiveBulkhead::new("bank", BulkheadConfig::default(), Aimd::default()).name(), "bank");
    /// ```
    pub fn name(&self) -> &str {
        self.bulkhead.name()
    }

    /// The limit in force now.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// assert_eq!(AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default()).limit(), 16);
    /// ```
    pub fn limit(&self) -> usize {
        self.bulkhead.sem().load().limit()
    }

    /// The lowest limit the algorithm may set.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// assert_eq!(AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default()).min_limit(), 1);
    /// ```
    pub fn min_limit(&self) -> usize {
        self.min
    }

    /// The highest limit the algorithm may set: the configured `max_concurrent_calls`
    /// unless the builder lowered it.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// assert_eq!(AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default()).max_limit(), 16);
    /// ```
    pub fn max_limit(&self) -> usize {
        self.max
    }

    /// Takes a permit if one is free, without waiting; the permit records a sample when
    /// it ends (a success unless marked otherwise, a failure if dropped while panicking).
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::try_acquire`].
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let permit = bank.try_acquire()?;
    /// permit.succeed();
    /// assert_eq!(bank.adaptive_metrics().samples(), 1);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<AdaptivePermit<'_>, BulkheadFull> {
        let permit = self.bulkhead.try_acquire()?;
        Ok(self.wrap(permit, Outcome::Success))
    }

    /// Takes a permit, blocking up to the configured `max_wait_duration` for one. The
    /// permit records a sample when it ends, as [`try_acquire`](Self::try_acquire)'s does.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread while it waits (not while the permit is held).
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`].
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let permit = bank.acquire()?;
    /// drop(permit); // a success
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn acquire(&self) -> Result<AdaptivePermit<'_>, BulkheadFull> {
        let permit = self.bulkhead.acquire()?;
        Ok(self.wrap(permit, Outcome::Success))
    }

    /// Takes a permit, waiting up to the configured `max_wait_duration` in the calling
    /// task. The permit records a sample when it ends.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Bulkhead::acquire_async`]: dropping the future while it waits
    /// leaves the queue and records nothing.
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire_async`].
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let permit = bank.acquire_async().await?;
    /// permit.succeed();
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_async(&self) -> Result<AdaptivePermit<'_>, BulkheadFull> {
        let permit = self.bulkhead.acquire_async().await?;
        Ok(self.wrap(permit, Outcome::Success))
    }

    /// Runs `f` on the calling thread under a permit (waiting for one as
    /// [`acquire`](Self::acquire) does) and records a success, or a failure if `f`
    /// panics (the panic goes on unwinding).
    ///
    /// # Blocking
    ///
    /// Blocks while waiting for a permit, then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`]; `f` is not run.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// assert_eq!(bank.call(|| 6 * 7)?, 42);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[inline]
    pub fn call<T>(&self, f: impl FnOnce() -> T) -> Result<T, BulkheadFull> {
        let _permit = self.acquire()?;
        Ok(f())
    }

    /// Like [`call`](Self::call), for a fallible `f`: an `Err` is recorded as a
    /// [`Outcome::Failure`] (a timeout is an `Err` too when `f` bounds its own wait).
    ///
    /// # Blocking
    ///
    /// As [`call`](Self::call).
    ///
    /// # Errors
    ///
    /// The outer `Err` when no permit was obtained, as [`Bulkhead::acquire`]; the inner
    /// result is `f`'s.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let reply: Result<(), &str> = bank.call_result(|| Err("503"))?;
    /// assert_eq!(reply, Err("503"));
    /// assert_eq!(bank.limit(), 14); // AIMD backed off
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn call_result<T, E>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<Result<T, E>, BulkheadFull> {
        self.call_classified(f, classify_result)
    }

    /// Like [`call`](Self::call), with `classify` deciding the [`Outcome`] from the value.
    ///
    /// # Blocking
    ///
    /// As [`call`](Self::call).
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`]; `f` is not run.
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd, Outcome};
    /// use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let status = bank.call_classified(|| 404, |status| match status {
    ///     500.. => Outcome::Failure,
    ///     400.. => Outcome::Ignored, // the caller's fault, not the bank's load
    ///     _ => Outcome::Success,
    /// })?;
    /// assert_eq!(status, 404);
    /// assert_eq!(bank.limit(), 16);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
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

    /// Awaits `fut` in the calling task under a permit and records a success; a failure
    /// if `fut` panics; [`Outcome::Cancelled`] if this future is dropped before `fut`
    /// completes.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it while it waits leaves the queue; dropping it while `fut`
    /// runs drops `fut`, releases the permit and records a cancelled call.
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire_async`]; `fut` is dropped without being polled.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// assert_eq!(bank.call_async(async { 6 * 7 }).await?, 42);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async<F: Future>(&self, fut: F) -> Result<F::Output, BulkheadFull> {
        self.call_async_classified(fut, |_| Outcome::Success).await
    }

    /// Like [`call_async`](Self::call_async), for a fallible `fut`: an `Err` is recorded
    /// as a failure. Bound the call with a timeout inside (`tokio::time::timeout(d, fut)`)
    /// and a timeout is an `Err` too.
    ///
    /// # Cancel safety
    ///
    /// As [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// The outer `Err` when no permit was obtained, as [`Bulkhead::acquire_async`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// use bulkhead::BulkheadConfig;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let slow = tokio::time::sleep(Duration::from_secs(60));
    /// let reply = bank.call_result_async(tokio::time::timeout(Duration::from_millis(1), slow)).await?;
    /// assert!(reply.is_err()); // timed out: recorded as a failure
    /// assert_eq!(bank.limit(), 14);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_result_async<T, E, F>(&self, fut: F) -> Result<Result<T, E>, BulkheadFull>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.call_async_classified(fut, classify_result).await
    }

    /// Like [`call_async`](Self::call_async), with `classify` deciding the [`Outcome`]
    /// from the output.
    ///
    /// # Cancel safety
    ///
    /// As [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire_async`]; `fut` is dropped without being polled.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd, Outcome};
    /// # use bulkhead::BulkheadConfig;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let status = bank.call_async_classified(async { 503 }, |s| {
    ///     if *s >= 500 { Outcome::Failure } else { Outcome::Success }
    /// }).await?;
    /// assert_eq!((status, bank.limit()), (503, 14));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async_classified<F: Future>(
        &self,
        fut: F,
        classify: impl FnOnce(&F::Output) -> Outcome,
    ) -> Result<F::Output, BulkheadFull> {
        let permit = self.bulkhead.acquire_async().await?;
        let mut permit = self.wrap(permit, Outcome::Cancelled);
        let value = fut.await;
        permit.set_outcome(classify(&value));
        Ok(value)
    }

    /// Metrics: the limit, its bounds, the samples recorded, the algorithm's estimates and
    /// the bulkhead's own metrics. Takes the controller's lock briefly.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Vegas};
    /// # use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Vegas::default());
    /// bank.call(|| ())?;
    /// let m = bank.adaptive_metrics();
    /// assert_eq!((m.limit(), m.max_limit(), m.samples()), (16, 16, 1));
    /// assert!(m.estimates().no_load_latency.is_some());
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn adaptive_metrics(&self) -> AdaptiveMetrics {
        let controller = self.controller.lock();
        AdaptiveMetrics {
            limit: controller.limit,
            min: self.min,
            max: self.max,
            samples: controller.samples,
            estimates: controller.algorithm.estimates(),
            bulkhead: self.bulkhead.metrics(),
        }
    }

    /// Registers a listener called after every limit change, with the old and new limits,
    /// on the thread that recorded the sample, after the controller's lock is released
    /// (a listener may read [`adaptive_metrics`](Self::adaptive_metrics)). Two changes
    /// recorded on different threads at once may reach listeners (and, for a moment, the
    /// engine) out of order; each event's `old -> new` is exact, and the engine always ends
    /// at the controller's last limit. The returned handle removes the listener
    /// ([`ListenerHandle::remove`](crate::ListenerHandle::remove): no change recorded after
    /// it returns reaches it); dropping the handle keeps it.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// use bulkhead::BulkheadConfig;
    ///
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// bank.on_limit_change(move |change| sink.lock().unwrap().push((change.old_limit(), change.new_limit())));
    /// bank.try_acquire()?.fail();
    /// assert_eq!(*seen.lock().unwrap(), vec![(16, 14)]);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn on_limit_change(
        &self,
        listener: impl Fn(&LimitChanged<'_>) + Send + Sync + 'static,
    ) -> crate::ListenerHandle {
        let active = Arc::new(AtomicBool::new(true));
        let listener: Arc<Listener> = Arc::new(Box::new(listener));
        let mut listeners = self.listeners.lock();
        // Removed listeners are taken out under the lock (changes clone the list) and
        // dropped after it: a listener's captures are user values, whose `Drop` may call
        // this bulkhead again.
        // Ordering: Relaxed — the flag guards no data (see `ListenerHandle::remove`).
        let (kept, removed): (Vec<_>, Vec<_>) =
            listeners.drain(..).partition(|(active, _)| active.load(Ordering::Relaxed));
        *listeners = kept;
        listeners.push((Arc::clone(&active), listener));
        drop(listeners);
        drop(removed);
        crate::ListenerHandle { active }
    }

    /// Feeds a sample to the algorithm as if a call had ended with it, and applies the
    /// new limit. For callers that measure calls themselves (e.g. a call made outside any
    /// permit, or a replayed trace).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd, Outcome, Sample};
    /// use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// bank.record(Sample::new(Duration::from_secs(9), 16, Outcome::Success)); // > 5 s timeout
    /// assert_eq!(bank.limit(), 14);
    /// ```
    pub fn record(&self, sample: Sample) {
        let mut sample = sample;
        if sample.outcome == Outcome::Success && self.timeout.is_some_and(|t| sample.latency > t) {
            sample.outcome = Outcome::Failure;
        }
        let change = {
            let mut controller = self.controller.lock();
            controller.samples += 1;
            let old = controller.limit;
            let limits = Limits { current: old, min: self.min, max: self.max };
            let new = controller.algorithm.update(&sample, limits).clamp(self.min, self.max);
            if new == old {
                return;
            }
            controller.limit = new;
            (old, new, controller.algorithm.estimates())
        };
        self.apply_limit(change.1);
        let listeners: Vec<(Arc<AtomicBool>, Arc<Listener>)> = self.listeners.lock().clone();
        let event = LimitChanged {
            name: self.bulkhead.name(),
            old: change.0,
            new: change.1,
            estimates: change.2,
        };
        for (active, listener) in &listeners {
            // Ordering: Relaxed — the flag guards no data: a removal that happens-before this
            // change is seen by coherence.
            if active.load(Ordering::Relaxed) {
                // A panicking listener must not stop the others (nor poison anything).
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(&event)));
            }
        }
    }

    /// Applies `limit` (just set in the controller) to the engine, after the controller's
    /// lock: growing the limit grants queued callers and wakes them, and a waker is user
    /// code (it may call this bulkhead again, or drop a permit of it).
    ///
    /// Two changes recorded at once may then reach the engine in either order, so each
    /// recorder reads the controller's limit again after applying, and applies that, until
    /// what it applied is the controller's limit. The last `change_config` of all is thus
    /// always the controller's last limit: whoever made it read that limit afterwards (a
    /// later change would be applied later still by its own recorder). And a recorder
    /// returns, so its permit is released, only once the engine has had a limit at least as
    /// recent as its own sample's (`AdaptivePermit`'s drop records before it releases).
    fn apply_limit(&self, mut limit: usize) {
        loop {
            // `change_config` never blocks.
            self.bulkhead.change_config(self.config_with(limit));
            let latest = self.controller.lock().limit;
            if latest == limit {
                return;
            }
            limit = latest;
        }
    }

    fn config_with(&self, limit: usize) -> BulkheadConfig {
        let mut builder = BulkheadConfig::builder()
            .max_concurrent_calls(limit)
            .max_wait_duration(self.base.max_wait_duration());
        if let Some(waiting) = self.base.max_waiting_calls() {
            builder = builder.max_waiting_calls(waiting);
        }
        builder.build().expect("a limit within the validated cap")
    }

    #[inline]
    fn wrap<'a>(&'a self, permit: Permit<'a>, unmarked: Outcome) -> AdaptivePermit<'a> {
        let sampled = self.sample_one_in == 1 || sampled(self.sample_one_in);
        AdaptivePermit {
            in_flight: if sampled { self.bulkhead.sem().load().in_flight() } else { 0 },
            start: if sampled { Some(Instant::now()) } else { None },
            permit: Some(permit),
            owner: self,
            outcome: None,
            unmarked,
        }
    }
}

/// Whether this call is one of the 1 in `k` that this thread samples: a countdown in a
/// thread-local cell (no shared write, no division).
#[inline]
fn sampled(k: u32) -> bool {
    thread_local! {
        static COUNTDOWN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    COUNTDOWN.with(|countdown| match countdown.get() {
        0 => {
            countdown.set(k - 1);
            true
        }
        n => {
            countdown.set(n - 1);
            false
        }
    })
}

fn classify_result<T, E>(result: &Result<T, E>) -> Outcome {
    if result.is_ok() {
        Outcome::Success
    } else {
        Outcome::Failure
    }
}

impl fmt::Debug for AdaptiveBulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveBulkhead")
            .field("name", &self.name())
            .field("limit", &self.limit())
            .field("min_limit", &self.min)
            .field("max_limit", &self.max)
            .finish()
    }
}

/// Builds an [`AdaptiveBulkhead`]; see [`AdaptiveBulkhead::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct AdaptiveBulkheadBuilder {
    name: String,
    config: BulkheadConfig,
    algorithm: Option<Box<dyn LimitAlgorithm>>,
    min_limit: Option<usize>,
    max_limit: Option<usize>,
    initial_limit: Option<usize>,
    timeout: Option<Duration>,
    sample_one_in: u32,
}

impl AdaptiveBulkheadBuilder {
    /// The algorithm (default: [`Gradient2::default`]).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20)).algorithm(Vegas::default()).build()?;
    /// assert_eq!(b.limit(), 16);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn algorithm(mut self, algorithm: impl LimitAlgorithm) -> Self {
        self.algorithm = Some(Box::new(algorithm));
        self
    }

    /// The lowest limit (default 1, or 0 for a cap of 0).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20)).min_limit(4).build()?;
    /// assert_eq!(b.min_limit(), 4);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn min_limit(mut self, n: usize) -> Self {
        self.min_limit = Some(n);
        self
    }

    /// The highest limit (default: the config's `max_concurrent_calls`; it may only be
    /// lowered).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20)).max_limit(10).build()?;
    /// assert_eq!((b.max_limit(), b.limit()), (10, 10));
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn max_limit(mut self, n: usize) -> Self {
        self.max_limit = Some(n);
        self
    }

    /// The limit to start from (default: the highest, i.e. the static sizing).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20)).initial_limit(5).build()?;
    /// assert_eq!(b.bulkhead().metrics().max_allowed_concurrent_calls(), 5);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn initial_limit(mut self, n: usize) -> Self {
        self.initial_limit = Some(n);
        self
    }

    /// A call that succeeds but takes longer than `timeout` is recorded as a
    /// [`Outcome::Failure`] (default: none; [`Aimd`] has its own timeout rule).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// # use std::time::Duration;
    /// let b = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20))
    ///     .algorithm(Aimd::default())
    ///     .timeout(Duration::from_millis(1))
    ///     .build()?;
    /// b.call(|| std::thread::sleep(Duration::from_millis(5)))?; // slow: a failure
    /// assert_eq!(b.limit(), 14);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Records 1 call in `k` (counted per thread) instead of every call (default 1: every
    /// call, as Netflix's limiters do). The other calls read no clock and take no lock:
    /// their permits cost what a plain bulkhead's do, plus a thread-local countdown. The
    /// algorithm then learns `k` times more slowly, in calls; use it where calls are many
    /// and cheap. `0` is an error.
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20))
    ///     .algorithm(Aimd::default())
    ///     .sample_one_in(4)
    ///     .build()?;
    /// for _ in 0..8 {
    ///     bank.call(|| ())?;
    /// }
    /// assert_eq!(bank.adaptive_metrics().samples(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sample_one_in(mut self, k: u32) -> Self {
        self.sample_one_in = k;
        self
    }

    /// Validates the bounds and builds the bulkhead.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_limit` when it exceeds the config's
    /// `max_concurrent_calls`, `min_limit` when it exceeds the max, `initial_limit` when it
    /// is outside `[min, max]`, `timeout` or `sample_one_in` when it is zero.
    ///
    /// ```
    /// use bulkhead::adaptive::AdaptiveBulkhead;
    /// use bulkhead::BulkheadConfig;
    /// let err = AdaptiveBulkhead::builder("bank", BulkheadConfig::for_pool(20))
    ///     .max_limit(20)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!((err.key(), err.value()), ("max_limit", "20"));
    /// ```
    pub fn build(self) -> Result<AdaptiveBulkhead, ConfigError> {
        let cap = self.config.max_concurrent_calls();
        let max = self.max_limit.unwrap_or(cap);
        if max > cap {
            return Err(ConfigError::new(
                "max_limit",
                max.to_string(),
                format!("exceeds max_concurrent_calls ({cap}), the guide's cap"),
            ));
        }
        let min = self.min_limit.unwrap_or(1.min(max));
        if min > max {
            return Err(ConfigError::new(
                "min_limit",
                min.to_string(),
                format!("exceeds the max limit ({max})"),
            ));
        }
        let initial = self.initial_limit.unwrap_or(max);
        if !(min..=max).contains(&initial) {
            return Err(ConfigError::new(
                "initial_limit",
                initial.to_string(),
                format!("is outside [{min}, {max}]"),
            ));
        }
        if self.sample_one_in == 0 {
            return Err(ConfigError::new(
                "sample_one_in",
                "0".to_string(),
                "must be at least 1".to_string(),
            ));
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::new(
                "timeout",
                "0s".to_string(),
                "must be positive".to_string(),
            ));
        }
        let algorithm = self.algorithm.unwrap_or_else(|| Box::new(Gradient2::default()));
        let adaptive = AdaptiveBulkhead {
            bulkhead: Arc::new(Bulkhead::new(self.name, self.config.clone())),
            min,
            max,
            timeout: self.timeout,
            sample_one_in: self.sample_one_in,
            base: self.config,
            controller: Mutex::new(Controller { algorithm, limit: initial, samples: 0 }),
            listeners: Mutex::new(Vec::new()),
        };
        if initial != cap {
            let config = adaptive.config_with(initial);
            adaptive.bulkhead.change_config(config);
        }
        Ok(adaptive)
    }
}

/// A limit change: the bulkhead, the old and new limits, and the algorithm's estimates
/// just after the change.
///
/// ```
/// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
/// # use bulkhead::BulkheadConfig;
/// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
/// bank.on_limit_change(|c| assert_eq!((c.bulkhead_name(), c.old_limit(), c.new_limit()), ("bank", 16, 14)));
/// bank.try_acquire()?.fail();
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[derive(Clone, Debug)]
pub struct LimitChanged<'a> {
    name: &'a str,
    old: usize,
    new: usize,
    estimates: Estimates,
}

impl LimitChanged<'_> {
    /// The bulkhead's name.
    pub fn bulkhead_name(&self) -> &str {
        self.name
    }

    /// The limit before the change.
    pub fn old_limit(&self) -> usize {
        self.old
    }

    /// The limit after the change.
    pub fn new_limit(&self) -> usize {
        self.new
    }

    /// The algorithm's estimates just after the change.
    pub fn estimates(&self) -> &Estimates {
        &self.estimates
    }
}

/// A snapshot of an adaptive bulkhead: see [`AdaptiveBulkhead::adaptive_metrics`]. Its
/// fields are read at slightly different moments and are not mutually consistent.
#[derive(Clone, Debug)]
pub struct AdaptiveMetrics {
    limit: usize,
    min: usize,
    max: usize,
    samples: u64,
    estimates: Estimates,
    bulkhead: BulkheadMetrics,
}

impl AdaptiveMetrics {
    /// The limit the controller last set.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The lowest limit allowed.
    pub fn min_limit(&self) -> usize {
        self.min
    }

    /// The highest limit allowed.
    pub fn max_limit(&self) -> usize {
        self.max
    }

    /// Samples recorded so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The algorithm's estimates (no-load latency, gradient, queue).
    pub fn estimates(&self) -> &Estimates {
        &self.estimates
    }

    /// The bulkhead's own metrics (available, in flight, waiting).
    pub fn bulkhead(&self) -> &BulkheadMetrics {
        &self.bulkhead
    }
}

/// A permit of an [`AdaptiveBulkhead`]: releases its slot and records a [`Sample`] when it
/// ends.
///
/// Unless marked, a permit records [`Outcome::Success`] when dropped normally and
/// [`Outcome::Failure`] when dropped while the thread panics (permits inside
/// [`call_async`](AdaptiveBulkhead::call_async) record [`Outcome::Cancelled`] when the
/// call's future is dropped first). Mark it with [`succeed`](Self::succeed),
/// [`fail`](Self::fail), [`ignore`](Self::ignore) or [`set_outcome`](Self::set_outcome).
///
/// # Examples
///
/// ```
/// use bulkhead::adaptive::{AdaptiveBulkhead, Aimd, Outcome};
/// use bulkhead::BulkheadConfig;
/// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
/// let mut permit = bank.try_acquire()?;
/// permit.set_outcome(Outcome::Failure);
/// drop(permit);
/// assert_eq!(bank.limit(), 14);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[must_use = "dropping the permit at once records a call of no duration"]
#[clippy::has_significant_drop]
pub struct AdaptivePermit<'a> {
    permit: Option<Permit<'a>>,
    owner: &'a AdaptiveBulkhead,
    /// `None` when this call is not sampled (see `sample_one_in`).
    start: Option<Instant>,
    in_flight: usize,
    outcome: Option<Outcome>,
    unmarked: Outcome,
}

impl AdaptivePermit<'_> {
    /// Sets the outcome recorded when the permit ends (the last one set wins).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// let mut permit = b.try_acquire()?;
    /// permit.set_outcome(Outcome::Ignored);
    /// drop(permit);
    /// assert_eq!(b.limit(), 16); // an ignored call moves nothing
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn set_outcome(&mut self, outcome: Outcome) {
        self.outcome = Some(outcome);
    }

    /// Ends the permit, recording a success.
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// b.try_acquire()?.succeed();
    /// assert_eq!(b.adaptive_metrics().samples(), 1);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn succeed(mut self) {
        self.outcome = Some(Outcome::Success);
    }

    /// Ends the permit, recording a failure.
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// b.try_acquire()?.fail();
    /// assert_eq!(b.limit(), 14);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn fail(mut self) {
        self.outcome = Some(Outcome::Failure);
    }

    /// Ends the permit, recording an ignored call (the built-in algorithms learn nothing).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::BulkheadConfig;
    /// let b = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// b.try_acquire()?.ignore();
    /// assert_eq!((b.limit(), b.adaptive_metrics().samples()), (16, 1));
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn ignore(mut self) {
        self.outcome = Some(Outcome::Ignored);
    }

    /// When the permit was granted, if this call is sampled (always, unless the builder
    /// set [`sample_one_in`](AdaptiveBulkheadBuilder::sample_one_in) above 1).
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveBulkhead, Aimd};
    /// # use bulkhead::BulkheadConfig;
    /// let bank = AdaptiveBulkhead::new("bank", BulkheadConfig::for_pool(20), Aimd::default());
    /// assert!(bank.try_acquire()?.started().is_some());
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn started(&self) -> Option<Instant> {
        self.start
    }
}

impl Drop for AdaptivePermit<'_> {
    #[inline]
    fn drop(&mut self) {
        let Some(start) = self.start else {
            return; // not sampled: the inner permit releases
        };
        let latency = start.elapsed();
        let outcome = match self.outcome {
            Some(outcome) => outcome,
            None if std::thread::panicking() => Outcome::Failure,
            None => self.unmarked,
        };
        // Record before releasing: when the sample shrinks the limit, this permit pays the
        // new debt instead of being handed to a queued caller under the old limit. (Released
        // first, every completion of a slow phase re-admitted a waiter before the limit
        // dropped: adapting took a whole extra latency; see benches/results/adaptive.md.)
        self.owner.record(Sample { latency, in_flight: self.in_flight, outcome });
        drop(self.permit.take());
    }
}

impl fmt::Debug for AdaptivePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptivePermit")
            .field("bulkhead", &self.owner.name())
            .field("in_flight", &self.in_flight)
            .field("outcome", &self.outcome.unwrap_or(self.unmarked))
            .finish()
    }
}
