//! Adaptive limits: a controller attached to a bulkhead moves its limit with the
//! downstream's latency, within the guide's cap.
//!
//! The style guide sizes a bulkhead statically, at 80 % of the connection pool
//! (R-RES-BH-3, [`BulkheadConfig::for_pool`](crate::BulkheadConfig::for_pool)), for the
//! case it names: the downstream answers slowly but is not down. A static limit of 16 then
//! still lets 16 callers sit in 2-second calls. An [`AdaptiveLimit`] attached to a
//! [`Bulkhead`] ([`Bulkhead::set_adaptive_limit`]) measures admitted calls (latency and
//! [`Outcome`]) when their permits end, feeds each [`Sample`] to a [`LimitAlgorithm`], and
//! moves the engine's limit, which never blocks. The limit stays within
//! `[min_limit, max_limit]`, where `max_limit` is at most the configured
//! `max_concurrent_calls`: an adaptive bulkhead never admits more than the static one.
//!
//! The bulkhead stays a [`Bulkhead`]: every verb, permit, event, counter, the registry, the
//! metrics exporter, the tower layer and `#[bulkhead]` work on it unchanged, and **every**
//! call through it feeds the controller, whoever holds it. Mark how a call ended on its
//! permit ([`Permit::fail`](crate::Permit::fail), ...) or let the call say it
//! ([`Bulkhead::call_fallible`]: an `Err` is a failure; [`Bulkhead::call_classified`]).
//!
//! Three algorithms come built in, with the rules and defaults of Netflix's
//! concurrency-limits library (each type's docs cite the file): [`Aimd`] (loss-based),
//! [`Gradient2`] (latency gradient) and [`Vegas`] (queue estimate). Plug your own by
//! implementing [`LimitAlgorithm`].
//!
//! # Cost
//!
//! A bulkhead without a controller pays nothing for this module but a zero test on release:
//! the engine and the plain face know no algorithm, only a hook (`crate::bulkhead::hook`). With one,
//! a sampled call reads a cheap clock twice (the TSC, through `quanta`) and writes its sample
//! into its own thread's ring: no lock, no read-modify-write, no cache line shared with
//! another thread. Now and then a call *folds*: it takes the algorithm out of the
//! controller unless another fold holds it (never waiting), feeds it the samples of every
//! thread and moves
//! the limit; a failure asks for a fold at once. `fold.rs` has the protocol, and what the
//! algorithm sees ([`AdaptiveLimit::fold_window`]). An unsampled call
//! ([`AdaptiveLimit::sample_one_in`]) takes the observed path and a thread-local countdown.
//! `benches/results/adaptive.md` has the instruction counts.
//!
//! # User code and the controller's locks
//!
//! No user code runs under a lock of the controller. A fold takes the algorithm out (one
//! fold at a time: whoever finds it there), runs [`LimitAlgorithm::update`] and
//! `estimates` holding no lock, and puts it back; the controller's locks are held only for
//! a few loads and stores. So an algorithm may read the controller (its limit, bounds,
//! metrics) or feed it a sample ([`AdaptiveControl::record`], folded after its own fold),
//! and may even call the bulkhead. The new limit reaches the engine after the fold (a grown
//! limit wakes queued callers, whose wakers may call the bulkhead), limit-change listeners
//! run after it, a removed listener is dropped after the listeners' lock, and a classifier
//! (`call_classified`) runs with only the permit held. A panic in any of them is caught
//! and counted; it never unwinds through a release.
//!
//! # Examples
//!
//! ```
//! use bulkhead::adaptive::{AdaptiveLimit, Gradient2};
//! use bulkhead::{Bulkhead, BulkheadConfig};
//!
//! // At most 16 calls (80 % of a pool of 20), fewer while the bank slows down.
//! let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
//! bank.set_adaptive_limit(AdaptiveLimit::new(Gradient2::default()))?;
//! let balance = bank.call(|| "42.00 EUR")?; // latency recorded as a success
//! assert_eq!(balance, "42.00 EUR");
//! let reply: Result<u32, Box<dyn std::error::Error>> = bank.call_fallible(|| Err("503".into()));
//! assert!(reply.is_err()); // recorded as a failure
//! assert!(bank.adaptive_limit().unwrap().limit() <= 16);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aimd;
mod algorithm;
mod fold;
mod gradient2;
#[cfg(feature = "metrics")]
pub(crate) mod metrics;
mod vegas;

use std::any::Any;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::pad::CachePadded;

pub use self::aimd::Aimd;
pub use self::algorithm::{Estimates, LimitAlgorithm, Limits, Sample};
pub use self::gradient2::Gradient2;
pub use self::vegas::Vegas;
use crate::bulkhead::config::ConfigError;
use crate::bulkhead::hook::LimitHook;
use crate::bulkhead::permit::Mark;
pub use crate::bulkhead::permit::Outcome;
use crate::bulkhead::Bulkhead;
use crate::engine::sync::{
    fence, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering, SampleClock,
};
use crate::observe::event::ListenerHandle;

/// A listener of limit changes.
type Listener = Box<dyn Fn(&LimitChanged<'_>) + Send + Sync>;

/// The settings of an adaptive limit: the algorithm, its bounds, the initial limit, the
/// latency above which a success counts as a failure, and how many calls to sample.
/// Attach it with [`Bulkhead::set_adaptive_limit`], which validates it against the
/// bulkhead's configuration.
///
/// # Examples
///
/// ```
/// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
/// use bulkhead::{Bulkhead, BulkheadConfig};
///
/// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
/// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()).min_limit(2).initial_limit(8))?;
/// assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 8);
/// assert_eq!(bank.config().max_concurrent_calls(), 16); // the cap stays configured
/// for _ in 0..3 {
///     bank.try_acquire()?.fail(); // e.g. the bank answered 503: the limit backs off
/// }
/// assert_eq!(bank.adaptive_limit().unwrap().limit(), 5); // 8 -> 7 -> 6 -> 5
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "an adaptive limit does nothing until attached with `Bulkhead::set_adaptive_limit`"]
pub struct AdaptiveLimit {
    algorithm: Box<dyn LimitAlgorithm>,
    min_limit: Option<usize>,
    max_limit: Option<usize>,
    initial_limit: Option<usize>,
    timeout: Option<Duration>,
    sample_one_in: u32,
    fold_window: Duration,
}

impl AdaptiveLimit {
    /// The default [`fold_window`](Self::fold_window): 100 µs.
    pub const DEFAULT_FOLD_WINDOW: Duration = Duration::from_micros(100);

    /// An adaptive limit run by `algorithm`, with the default bounds `[1, cap]` (`[0, 0]`
    /// for a cap of 0), starting at the cap (the guide's static sizing), every call
    /// sampled, and the algorithm's own timeout ([`LimitAlgorithm::default_timeout`]: 5 s
    /// for [`Aimd`], none for the others).
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveLimit, Vegas};
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Vegas::default()))?;
    /// let limit = bank.adaptive_limit().unwrap();
    /// assert_eq!((limit.min_limit(), limit.limit(), limit.max_limit()), (1, 16, 16));
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn new(algorithm: impl LimitAlgorithm) -> AdaptiveLimit {
        let timeout = algorithm.default_timeout();
        AdaptiveLimit {
            algorithm: Box::new(algorithm),
            min_limit: None,
            max_limit: None,
            initial_limit: None,
            timeout,
            sample_one_in: 1,
            fold_window: Self::DEFAULT_FOLD_WINDOW,
        }
    }

    /// The lowest limit (default 1, or 0 for a cap of 0).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()).min_limit(4))?;
    /// assert_eq!(bank.adaptive_limit().unwrap().min_limit(), 4);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn min_limit(mut self, n: usize) -> Self {
        self.min_limit = Some(n);
        self
    }

    /// The highest limit (default: the configured `max_concurrent_calls`, which it may not
    /// exceed; it follows a later [`Bulkhead::change_config`] down, never above this).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()).max_limit(10))?;
    /// let limit = bank.adaptive_limit().unwrap();
    /// assert_eq!((limit.max_limit(), limit.limit()), (10, 10));
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
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()).initial_limit(5))?;
    /// assert_eq!(bank.metrics().max_allowed_concurrent_calls(), 5);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn initial_limit(mut self, n: usize) -> Self {
        self.initial_limit = Some(n);
        self
    }

    /// A call that succeeds but takes longer than `timeout` is recorded as a
    /// [`Outcome::Failure`]. The one place to set it: it replaces the algorithm's
    /// [`default_timeout`](LimitAlgorithm::default_timeout).
    ///
    /// ```
    /// # use bulkhead::adaptive::*;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// # use std::time::Duration;
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()).timeout(Duration::from_millis(1)))?;
    /// bank.call(|| std::thread::sleep(Duration::from_millis(5)))?; // slow: a failure
    /// assert_eq!(bank.adaptive_limit().unwrap().limit(), 14);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Records 1 call in `k` (counted per thread) instead of every call (default 1: every
    /// call, as Netflix's limiters do). The other calls read no clock and take no lock.
    /// The algorithm then learns `k` times more slowly, in calls; use it where calls are
    /// many and cheap. `0` is an error.
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()).sample_one_in(4))?;
    /// for _ in 0..8 {
    ///     bank.call(|| ())?;
    /// }
    /// assert_eq!(bank.adaptive_limit().unwrap().metrics().samples(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sample_one_in(mut self, k: u32) -> Self {
        self.sample_one_in = k;
        self
    }

    /// How long successes may gather before they reach the algorithm (default
    /// [`DEFAULT_FOLD_WINDOW`](Self::DEFAULT_FOLD_WINDOW), 100 µs).
    ///
    /// Samples are recorded per thread without a lock and *folded* into the algorithm now
    /// and then: by the call that ends a window (this long after the last fold), by a call
    /// whose thread has 32 samples waiting, by any call that did not succeed (a failure
    /// reaches the algorithm before its call returns, unless another thread is folding at
    /// that moment: then within that fold), and before [`AdaptiveControl`] reads the limit
    /// or the metrics. A fold feeds every non-success sample on its own, and each run of
    /// consecutive successes as one sample: their mean latency and the highest in-flight
    /// count (Netflix's `WindowedLimit` does the same per window). When calls end more than
    /// a window apart, every sample is fed on its own, as it ends; `Duration::ZERO` folds
    /// at every call (successes still merge when several threads record during one fold).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let every_call = AdaptiveLimit::new(Aimd::default()).initial_limit(2).fold_window(Duration::ZERO);
    /// bank.set_adaptive_limit(every_call)?;
    /// let (a, b) = (bank.try_acquire()?, bank.try_acquire()?);
    /// drop((a, b)); // two successes at a high load, folded one by one: +1 each
    /// assert_eq!(bank.adaptive_limit().unwrap().limit(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fold_window(mut self, window: Duration) -> Self {
        self.fold_window = window;
        self
    }

    /// Checks the settings against a cap of `cap` and builds the controller.
    fn controller(self, cap: usize) -> Result<Controller, ConfigError> {
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
        let clock = SampleClock::new();
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        // User code, before the controller exists: no lock is held.
        let algorithm = self.algorithm;
        let estimates = std::panic::catch_unwind(AssertUnwindSafe(|| algorithm.estimates()))
            .unwrap_or_default();
        Ok(Controller {
            window_ticks: clock.ticks(nanos(self.fold_window)),
            last_fold: CachePadded::new(AtomicU64::new(clock.raw())),
            timeout_ticks: self.timeout.map_or(u64::MAX, |t| clock.ticks(nanos(t))),
            clock,
            sample_one_in: self.sample_one_in,
            min_setting: self.min_limit,
            max_setting: self.max_limit,
            limit: AtomicUsize::new(initial),
            slots: fold::Slots::new(),
            algorithm: Mutex::new(Some(algorithm)),
            state: Mutex::new(State {
                limit: initial,
                min,
                max,
                samples: 0,
                panicked: 0,
                estimates,
            }),
            pending: Mutex::new(Vec::new()),
            pending_any: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
        })
    }
}

impl fmt::Debug for AdaptiveLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveLimit")
            .field("min_limit", &self.min_limit)
            .field("max_limit", &self.max_limit)
            .field("initial_limit", &self.initial_limit)
            .field("timeout", &self.timeout)
            .field("sample_one_in", &self.sample_one_in)
            .field("fold_window", &self.fold_window)
            .finish_non_exhaustive()
    }
}

impl Bulkhead {
    /// Attaches an adaptive limit: from now on the controller samples the calls this
    /// bulkhead admits, through whichever verb and whoever holds it, and moves its limit
    /// within the bounds. The configured `max_concurrent_calls` stays the cap
    /// ([`config`](Self::config) reports it; [`metrics`](Self::metrics) reports the limit in
    /// force); a later [`change_config`](Self::change_config) moves the cap, and the
    /// controller's limit stays within it. Permits granted before this call are not
    /// sampled.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_limit` when it exceeds the configured
    /// `max_concurrent_calls`, `min_limit` when it exceeds the max, `initial_limit` when it
    /// is outside `[min, max]`, `timeout` or `sample_one_in` when it is zero, and
    /// `adaptive_limit` when one is already attached (a bulkhead has one controller for
    /// life).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let err = bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()).max_limit(20)).unwrap_err();
    /// assert_eq!((err.key(), err.value()), ("max_limit", "20"));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
    /// let again = bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default())).unwrap_err();
    /// assert_eq!(again.key(), "adaptive_limit");
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn set_adaptive_limit(&self, limit: AdaptiveLimit) -> Result<(), ConfigError> {
        if self.hook().is_some() {
            return Err(attached_twice(self.name()));
        }
        let controller = limit.controller(self.config().max_concurrent_calls())?;
        if !self.attach_hook(Box::new(controller)) {
            return Err(attached_twice(self.name()));
        }
        if let Some(hook) = self.hook() {
            hook.apply(self);
        }
        Ok(())
    }

    /// The adaptive limit attached to this bulkhead, if any: its limit, bounds, metrics,
    /// limit-change listeners, and a way to feed it samples measured elsewhere.
    ///
    /// ```
    /// use bulkhead::adaptive::{AdaptiveLimit, Vegas};
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// assert!(bank.adaptive_limit().is_none());
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Vegas::default()))?;
    /// assert_eq!(bank.adaptive_limit().unwrap().limit(), 16);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn adaptive_limit(&self) -> Option<AdaptiveControl<'_>> {
        let controller = self.hook()?.as_any().downcast_ref::<Controller>()?;
        Some(AdaptiveControl { bulkhead: self, controller })
    }
}

fn attached_twice(name: &str) -> ConfigError {
    ConfigError::new(
        "adaptive_limit",
        name.to_string(),
        "an adaptive limit is already attached to this bulkhead".to_string(),
    )
}

/// The controller attached to a bulkhead: owned by it (its hook), reached through
/// [`AdaptiveControl`].
struct Controller {
    /// The clock of the permits' marks (`Mark::sampled`) and of the fold window.
    clock: SampleClock,
    /// Latency above which a successful call counts as a failure, in ticks of `clock`
    /// (`u64::MAX`: none).
    timeout_ticks: u64,
    /// [`AdaptiveLimit::fold_window`] in ticks of `clock`.
    window_ticks: u64,
    /// When the last fold started, in ticks of `clock`: written by folders, read by every
    /// sampled call (a line written once per fold, not per call).
    last_fold: CachePadded<AtomicU64>,
    /// Record 1 call in this many (per thread); 1 records every call.
    sample_one_in: u32,
    /// The bounds as set, `None` for the defaults that follow the cap.
    min_setting: Option<usize>,
    max_setting: Option<usize>,
    /// `State::limit`, stored under the lock after every change, read by `apply` without it.
    limit: AtomicUsize,
    /// Each thread's samples, not folded yet.
    slots: fold::Slots,
    /// The algorithm while no fold runs. A fold takes it out (so one fold runs at a time:
    /// whoever finds it here) and runs it holding no lock of ours, then puts it back: the
    /// algorithm is user code, which may read this controller or feed it a sample.
    algorithm: Mutex<Option<Box<dyn LimitAlgorithm>>>,
    /// The limit, its bounds and counts; held only for a few loads and stores.
    state: Mutex<State>,
    /// Samples fed by hand ([`AdaptiveControl::record`]) or by threads without a ring,
    /// waiting for the next fold (at most [`PENDING_MAX`]).
    pending: Mutex<Vec<Sample>>,
    /// Whether `pending` holds a sample: written under its lock, read by a fold's recheck.
    pending_any: AtomicBool,
    /// Each with the flag its [`ListenerHandle`] clears.
    listeners: Mutex<Vec<(Arc<AtomicBool>, Arc<Listener>)>>,
}

/// What the controller's `state` lock guards: no user code runs under it.
struct State {
    limit: usize,
    min: usize,
    max: usize,
    samples: u64,
    /// Samples whose `update` panicked (not in `samples`), and samples fed by hand that
    /// found [`PENDING_MAX`] waiting.
    panicked: u64,
    /// The algorithm's estimates after the last fold.
    estimates: Estimates,
}

/// Samples fed by hand or by threads without a ring that may wait for a fold; more are
/// dropped and counted (a fold drains them all, so only a fold running for ever, in user
/// code, lets them pile up).
const PENDING_MAX: usize = 4096;

/// One fold's work on the algorithm it took out: the limit and bounds it started from, what
/// it fed and what panicked. It holds no lock.
struct Folding {
    algorithm: Box<dyn LimitAlgorithm>,
    limits: Limits,
    samples: u64,
    panicked: u64,
}

impl Folding {
    /// Feeds `sample`, standing for `count` samples, to the algorithm.
    ///
    /// The algorithm is user code and runs on whichever call folds, often inside a permit's
    /// `Drop`: a panic in `update` is caught here, so that it never unwinds through a
    /// release (the permit would not come back) nor into a caller whose call succeeded. The
    /// limit stays as it was and the sample is counted as dropped.
    fn feed(&mut self, sample: &Sample, count: u64) {
        let (algorithm, limits) = (&mut self.algorithm, self.limits);
        match std::panic::catch_unwind(AssertUnwindSafe(|| algorithm.update(sample, limits))) {
            Ok(limit) => {
                self.samples = self.samples.wrapping_add(count);
                self.limits.current = limit.clamp(limits.min, limits.max);
            }
            Err(_) => self.panicked = self.panicked.wrapping_add(count),
        }
    }

    /// The algorithm's estimates; none if its `estimates` panics (caught, as in
    /// [`feed`](Self::feed)).
    fn estimates(&self) -> Estimates {
        std::panic::catch_unwind(AssertUnwindSafe(|| self.algorithm.estimates()))
            .unwrap_or_default()
    }
}

/// A fold's net change of the limit: old, new, the estimates after it.
type Change = (usize, usize, Estimates);

impl Controller {
    /// One fold, if no other runs: takes the algorithm out, feeds it every sample the
    /// threads recorded (see `fold.rs`, "What the algorithm sees") and every pending one,
    /// holding no lock while it runs, puts it back, then applies and announces the change.
    /// `false` if another fold holds the algorithm (it looks for our request when it puts
    /// the algorithm back).
    fn fold_once(&self, bulkhead: &Bulkhead) -> bool {
        let Some(algorithm) = self.algorithm.lock().take() else {
            return false;
        };
        // We are the only folder until the algorithm is back: the only writer of the rings'
        // `head` (`fold.rs`) and the only reader of `pending`'s samples.
        let limits = {
            let state = self.state.lock();
            Limits { current: state.limit, min: state.min, max: state.max }
        };
        let mut folding = Folding { algorithm, limits, samples: 0, panicked: 0 };
        // Ordering: Relaxed — a hint for the callers' window test; it publishes nothing.
        self.last_fold.store(self.clock.raw(), Ordering::Relaxed);
        let mut run = fold::Run::default();
        let nanos = |ticks| self.clock.nanos(ticks);
        self.slots.drain(&mut run, |run, word| {
            if let Some((successes, count)) = run.take(nanos) {
                folding.feed(&successes, count);
            }
            folding.feed(&fold::unpack(word, nanos), 1);
        });
        if let Some((successes, count)) = run.take(nanos) {
            folding.feed(&successes, count);
        }
        for sample in self.take_pending() {
            folding.feed(&sample, 1);
        }
        let estimates = folding.estimates();
        let change = {
            let mut state = self.state.lock();
            let old = state.limit;
            // The cap may have moved during the fold (`cap_changed`): its bounds win.
            state.limit = folding.limits.current.clamp(state.min, state.max);
            state.samples = state.samples.wrapping_add(folding.samples);
            state.panicked = state.panicked.wrapping_add(folding.panicked);
            state.estimates = estimates;
            // Ordering: Release — with the engine's AcqRel `set_limit`, an applier that sets
            // the engine after ours reads this value or a later one (see `apply`).
            self.limit.store(state.limit, Ordering::Release);
            (state.limit != old).then_some((old, state.limit, estimates))
        };
        *self.algorithm.lock() = Some(folding.algorithm);
        if let Some(change) = change {
            self.publish(bulkhead, change);
        }
        true
    }

    /// Folds if no other fold runs, and again while other callers asked for a fold during
    /// ours (at most `fold::ROUNDS` folds): never waits for a fold.
    fn try_fold(&self, bulkhead: &Bulkhead) {
        for _ in 0..fold::ROUNDS {
            if !self.fold_once(bulkhead) {
                // The folder looks for our request after it puts the algorithm back.
                return;
            }
            // Ordering: SeqCst fence — pairs with the fences in `Slot::ask_fold` and
            // `fold_pending`: either we see that caller's request below, or its look for
            // the algorithm (after its fence) found it back.
            fence(Ordering::SeqCst);
            // Ordering: Relaxed — ordered by the fence above (see `fold_pending`).
            if !self.slots.wanted() && !self.pending_any.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// Feeds `sample` with the next fold, and folds now unless a fold runs (which then
    /// folds it before it ends, or its last round leaves it for the next fold).
    fn fold_pending(&self, bulkhead: &Bulkhead, sample: Sample) {
        {
            let mut pending = self.pending.lock();
            if pending.len() < PENDING_MAX {
                pending.push(sample);
                // Ordering: Relaxed — written under `pending`'s lock; ordered for the
                // folder's recheck by the fence below.
                self.pending_any.store(true, Ordering::Relaxed);
            } else {
                drop(pending);
                let mut state = self.state.lock();
                state.panicked = state.panicked.wrapping_add(1);
            }
        }
        // Ordering: SeqCst fence — the store-buffering pair of the one in `try_fold`, as in
        // `Slot::ask_fold`.
        fence(Ordering::SeqCst);
        self.try_fold(bulkhead);
    }

    /// The pending samples, taken (call it as the folder).
    fn take_pending(&self) -> Vec<Sample> {
        // Ordering: Relaxed — a hint that skips the lock when nothing waits; a sample
        // pushed after it is the next fold's (its pusher rechecks, see `fold_pending`).
        if !self.pending_any.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut pending = self.pending.lock();
        // Ordering: Relaxed — written under `pending`'s lock, which we hold.
        self.pending_any.store(false, Ordering::Relaxed);
        core::mem::take(&mut *pending)
    }

    /// A thread without a ring feeds its sample through `pending`.
    #[cold]
    #[inline(never)]
    fn record_without_ring(&self, bulkhead: &Bulkhead, word: u64) {
        let sample = fold::unpack(word, |ticks| self.clock.nanos(ticks));
        self.fold_pending(bulkhead, sample);
    }

    /// This thread's ring is full while another thread folds: ask, try, and push again, or
    /// drop the sample.
    #[cold]
    #[inline(never)]
    fn push_to_full_ring(&self, bulkhead: &Bulkhead, slot: &fold::Slot, word: u64) {
        self.ask_and_try_fold(bulkhead, slot);
        if slot.push(word).is_none() {
            slot.drop_one();
        }
    }

    #[inline(never)]
    fn ask_and_try_fold(&self, bulkhead: &Bulkhead, slot: &fold::Slot) {
        slot.ask_fold();
        self.try_fold(bulkhead);
    }

    /// A success slower than the timeout counts as a failure.
    #[inline]
    fn classify(&self, outcome: Outcome, latency_ticks: u64) -> Outcome {
        if outcome == Outcome::Success && latency_ticks > self.timeout_ticks {
            Outcome::Failure
        } else {
            outcome
        }
    }

    /// A sample fed by hand ([`AdaptiveControl::record`]).
    fn record(&self, bulkhead: &Bulkhead, sample: Sample) {
        let nanos = u64::try_from(sample.latency.as_nanos()).unwrap_or(u64::MAX);
        let slow = self.clock.ticks(nanos) > self.timeout_ticks;
        let outcome = if sample.outcome == Outcome::Success && slow {
            Outcome::Failure
        } else {
            sample.outcome
        };
        let sample = Sample { outcome, ..sample };
        self.fold_pending(bulkhead, sample);
    }

    /// Moves the engine to the new limit, then tells the listeners (holding no lock).
    fn publish(&self, bulkhead: &Bulkhead, (old, new, estimates): Change) {
        self.apply(bulkhead);
        let listeners: Vec<(Arc<AtomicBool>, Arc<Listener>)> = self.listeners.lock().clone();
        let event = LimitChanged { name: bulkhead.name(), old, new, estimates };
        for (active, listener) in &listeners {
            // Ordering: Relaxed — the flag guards no data: a removal that happens-before this
            // change is seen by coherence.
            if active.load(Ordering::Relaxed) {
                // A panicking listener must not stop the others (nor poison anything).
                let _ = std::panic::catch_unwind(AssertUnwindSafe(|| listener(&event)));
            }
        }
    }

    /// The controller's limit, without its lock.
    fn current_limit(&self) -> usize {
        // Ordering: Acquire — pairs with the Release stores in `fold` and `cap_changed`.
        self.limit.load(Ordering::Acquire)
    }
}

impl LimitHook for Controller {
    #[inline]
    fn started_sampled(&self, in_flight: usize) -> Mark {
        Mark::sampled(self.clock.raw(), in_flight)
    }

    fn sample_one_in(&self) -> u32 {
        self.sample_one_in
    }

    /// Pushes the sample into this thread's ring and folds if it asks for one (see
    /// `fold.rs`): no lock is waited for.
    #[inline]
    fn finished(&self, bulkhead: &Bulkhead, mark: Mark) {
        let end = self.clock.raw();
        let ticks = mark.elapsed_ticks(end);
        let outcome = self.classify(mark.outcome(), ticks);
        let word = fold::pack(ticks, mark.in_flight(), outcome);
        let Some(slot) = self.slots.own() else {
            return self.record_without_ring(bulkhead, word);
        };
        let Some(waiting) = slot.push(word) else {
            return self.push_to_full_ring(bulkhead, slot, word);
        };
        // Ordering: Relaxed — a hint: a stale value only moves the fold by a call.
        let since = end.wrapping_sub(self.last_fold.load(Ordering::Relaxed));
        if outcome != Outcome::Success || waiting >= fold::FOLD_AT || since >= self.window_ticks {
            self.ask_and_try_fold(bulkhead, slot);
        }
    }

    fn cap_changed(&self, cap: usize) {
        let mut state = self.state.lock();
        state.max = self.max_setting.map_or(cap, |max| max.min(cap));
        state.min = self.min_setting.unwrap_or(1).min(state.max);
        state.limit = state.limit.clamp(state.min, state.max);
        // Ordering: Release — as in `fold`.
        self.limit.store(state.limit, Ordering::Release);
    }

    /// Applies the controller's limit to the engine, holding no lock of ours: growing
    /// the limit grants queued callers and wakes them, and a waker is user code (it may call
    /// this bulkhead again, or drop a permit of it).
    ///
    /// Two changes folded at once may then reach the engine in either order, so each
    /// applier reads the controller's limit again after applying, and applies that, until
    /// what it applied is the controller's limit. The last engine change of all is thus
    /// always the controller's last limit: whoever made it read that limit afterwards (a
    /// later change would be applied later still by its own applier; the limit is stored
    /// Release before its folder applies it, and the engine's `set_limit` is an AcqRel
    /// read-modify-write of one word, so an applier whose `set_limit` comes after reads it).
    /// And a call whose sample folded returns, so its permit is released, only once the
    /// engine has had a limit at least as recent as its own sample's (a sampled permit
    /// records before it releases).
    fn apply(&self, bulkhead: &Bulkhead) {
        let mut limit = self.current_limit();
        loop {
            bulkhead.set_engine_limit(limit);
            let latest = self.current_limit();
            if latest == limit {
                return;
            }
            limit = latest;
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The adaptive limit of a bulkhead ([`Bulkhead::adaptive_limit`]): read its limit and
/// bounds, take a snapshot, listen to its changes, or feed it a sample measured elsewhere.
#[derive(Clone, Copy)]
pub struct AdaptiveControl<'a> {
    bulkhead: &'a Bulkhead,
    controller: &'a Controller,
}

impl AdaptiveControl<'_> {
    /// The controller's limit, once the samples recorded so far are folded into it (this
    /// applies a change to the engine and tells the listeners, as a fold on the call path
    /// does). If a fold runs on another thread at that moment, it does not wait for it (the
    /// algorithm is user code): it returns the limit as it stands, and that fold folds what
    /// was recorded before it ends.
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
    /// assert_eq!(bank.adaptive_limit().unwrap().limit(), 16);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn limit(&self) -> usize {
        self.controller.try_fold(self.bulkhead);
        self.controller.current_limit()
    }

    /// The lowest limit the algorithm may set.
    pub fn min_limit(&self) -> usize {
        self.controller.state.lock().min
    }

    /// The highest limit the algorithm may set: the configured `max_concurrent_calls`
    /// unless [`AdaptiveLimit::max_limit`] lowered it.
    pub fn max_limit(&self) -> usize {
        self.controller.state.lock().max
    }

    /// A snapshot: the limit, its bounds, the samples recorded and the algorithm's
    /// estimates, once the samples recorded so far are folded (as [`limit`](Self::limit)
    /// does). Takes the controller's lock briefly. The bulkhead's own gauges are in
    /// [`Bulkhead::metrics`].
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveLimit, Vegas};
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Vegas::default()))?;
    /// bank.call(|| ())?;
    /// let m = bank.adaptive_limit().unwrap().metrics();
    /// assert_eq!((m.limit(), m.max_limit(), m.samples()), (16, 16, 1));
    /// assert!(m.estimates().no_load_latency.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn metrics(&self) -> AdaptiveMetrics {
        self.controller.try_fold(self.bulkhead);
        let state = self.controller.state.lock();
        AdaptiveMetrics {
            limit: state.limit,
            min: state.min,
            max: state.max,
            samples: state.samples,
            samples_dropped: self.controller.slots.dropped().wrapping_add(state.panicked),
            estimates: state.estimates,
        }
    }

    /// Registers a listener called after every limit change, with the old and new limits,
    /// on the thread that folded the sample, after the fold, holding no lock
    /// (a listener may read [`metrics`](Self::metrics)). Two changes recorded on different
    /// threads at once may reach listeners (and, for a moment, the engine) out of order;
    /// each event's `old -> new` is exact, and the engine always ends at the controller's
    /// last limit. The returned handle removes the listener
    /// ([`ListenerHandle::remove`]: no change recorded after it returns reaches it);
    /// dropping the handle keeps it.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// bank.adaptive_limit().unwrap().on_limit_change(move |change| {
    ///     sink.lock().unwrap().push((change.old_limit(), change.new_limit()))
    /// });
    /// bank.try_acquire()?.fail();
    /// assert_eq!(*seen.lock().unwrap(), vec![(16, 14)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_limit_change(
        &self,
        listener: impl Fn(&LimitChanged<'_>) + Send + Sync + 'static,
    ) -> ListenerHandle {
        let active = Arc::new(AtomicBool::new(true));
        let listener: Arc<Listener> = Arc::new(Box::new(listener));
        let mut listeners = self.controller.listeners.lock();
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
        ListenerHandle { active }
    }

    /// Feeds a sample to the algorithm as if a call had ended with it, and applies the
    /// new limit. For callers that measure calls themselves (e.g. a call made outside any
    /// permit, or a replayed trace).
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::adaptive::{AdaptiveLimit, Aimd, Outcome, Sample};
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
    /// let limit = bank.adaptive_limit().unwrap();
    /// limit.record(Sample::new(Duration::from_secs(9), 16, Outcome::Success)); // > 5 s timeout
    /// assert_eq!(limit.limit(), 14);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn record(&self, sample: Sample) {
        self.controller.record(self.bulkhead, sample);
    }
}

impl fmt::Debug for AdaptiveControl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.controller.state.lock();
        f.debug_struct("AdaptiveControl")
            .field("bulkhead", &self.bulkhead.name())
            .field("limit", &state.limit)
            .field("min_limit", &state.min)
            .field("max_limit", &state.max)
            .finish()
    }
}

/// A limit change: the bulkhead, the old and new limits, and the algorithm's estimates
/// just after the change.
///
/// ```
/// # use bulkhead::adaptive::{AdaptiveLimit, Aimd};
/// # use bulkhead::{Bulkhead, BulkheadConfig};
/// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
/// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
/// let limit = bank.adaptive_limit().unwrap();
/// limit.on_limit_change(|c| assert_eq!((c.bulkhead_name(), c.old_limit(), c.new_limit()), ("bank", 16, 14)));
/// bank.try_acquire()?.fail();
/// # Ok::<(), Box<dyn std::error::Error>>(())
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

/// A snapshot of an adaptive limit: see [`AdaptiveControl::metrics`].
#[derive(Clone, Debug)]
pub struct AdaptiveMetrics {
    limit: usize,
    min: usize,
    max: usize,
    samples: u64,
    samples_dropped: u64,
    estimates: Estimates,
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

    /// Samples fed to the algorithm so far (a run of successes fed as one sample counts
    /// for each call in it).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples dropped because their thread's buffer was full while another thread was
    /// folding (it would have to fold for 96 of this thread's calls: a descheduled folder),
    /// because 4 096 hand-fed samples already waited for a running fold, or because the algorithm's
    /// [`update`](LimitAlgorithm::update) panicked on them (caught: the limit stays as it
    /// was). Not in [`samples`](Self::samples).
    ///
    /// ```
    /// # use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// bank.set_adaptive_limit(AdaptiveLimit::new(Aimd::default()))?;
    /// bank.call(|| ())?;
    /// assert_eq!(bank.adaptive_limit().unwrap().metrics().samples_dropped(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn samples_dropped(&self) -> u64 {
        self.samples_dropped
    }

    /// The algorithm's estimates (no-load latency, gradient, queue).
    pub fn estimates(&self) -> &Estimates {
        &self.estimates
    }
}
