//! The public bulkhead: a named limit on concurrent calls to one downstream system.
//!
//! | file | what it holds |
//! |------|---------------|
//! | `mod.rs` | [`Bulkhead`]: its verbs (acquire, try, timed, async, owned, weighted, `call`), close and drain, configuration changes, observation (counters, listeners, events), and the face the keyed and adaptive bulkheads go through |
//! | `config.rs` | `BulkheadConfig`, its builder, `ConfigError` |
//! | `error.rs` | `BulkheadFull`, the refusal |
//! | `request.rs` | `Request`: a call's permits, class and own max wait |
//! | `permit.rs` | `Permit`, `OwnedPermit` and their marks |
//! | `future.rs` | the named futures (`Acquire`, `AcquireOwned`, `AcquireWithSleep`, `Drained`) |
//! | `blocking.rs` | the blocking slow path and drain wait, and the check that refuses to block an async worker |
//! | `fallible.rs` | the fallible `call` verbs |
//! | `hook.rs` | the limit hook an adaptive bulkhead attaches |
//!
//! # Why `mod.rs` is long
//!
//! About 2 000 lines, half of them docs: every public verb carries its contract (errors,
//! blocking, cancel safety, panics) and a doc test, which is the documentation users read.
//! The code is the one type's methods on one state word: each verb is a few lines over the
//! same fast path, slow path and observation path (`permitted`, `refuse`,
//! `release_permits`), which are read together to check that a grant is reported once and a
//! release never skipped. What is separable is in the files above.

mod blocking;
pub(crate) mod config;
pub(crate) mod error;
mod fallible;
pub(crate) mod future;
pub(crate) mod hook;
pub(crate) mod permit;
pub(crate) mod request;

use core::fmt;
use core::future::Future;
use core::time::Duration;
use std::sync::Arc as StdArc;

use crate::bulkhead::config::BulkheadConfig;
use crate::bulkhead::error::retry_tail;
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::future::{Acquire, AcquireOwned, AcquireWithSleep, Drained};
use crate::bulkhead::hook::{retry_tick_due, sample_due, LimitHook};
use crate::bulkhead::permit::Mark;
use crate::bulkhead::permit::OwnedPermit;
use crate::bulkhead::permit::Permit;
use crate::bulkhead::request::Request;
use crate::engine::policy::Criticality;
use crate::engine::state::MAX_PERMITS;
use crate::engine::state::{Semaphore, Word};
use crate::engine::sync::{AtomicU64, AtomicUsize, Instant, Mutex, OnceLock, Ordering};
use crate::engine::timer::{Binding, Timer};
use crate::observe::event::BulkheadEvent;
use crate::observe::event::BulkheadEventKind;
use crate::observe::event::ListenerHandle;
use crate::observe::metrics::BulkheadMetrics;
use crate::observe::name::Name;
use crate::observe::reason::RejectReason;
use crate::observe::retry::{releases_needed, RetryStats, TICK_EVERY};
use crate::observe::{bump_own, bump_own_count, Cells, Counters, Listeners, Outcome};

/// A `max_wait_duration` that does not fit in `u64` nanoseconds (584 years): unbounded.
const UNBOUNDED_WAIT: u64 = u64::MAX;
/// A `max_waiting_calls` of `None`.
const NO_WAITER_CAP: usize = usize::MAX;

/// What an observed call did, for the cold observing path.
#[derive(Clone, Copy)]
enum Observed {
    Permitted,
    Rejected(RejectReason),
    Finished,
}

/// Caps how many calls to one external system may be in flight at once, and refuses the
/// next one at once (or after a short, bounded wait).
///
/// The protected call runs on the caller's own thread or task ([`call`](Self::call),
/// [`call_async`](Self::call_async), or a [`Permit`] held around it), so thread-locals and
/// tracing spans stay visible. Share a bulkhead by reference or in an [`Arc`](std::sync::Arc).
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
///
/// // A pool of 20 connections: admit 16 calls, wait at most 100 ms for a slot.
/// let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
///
/// let balance = bank.call(|| 42)?; // runs on this thread, permit released on return
/// assert_eq!(balance, 42);
///
/// let held: Vec<_> = (0..16).map(|_| bank.try_acquire().unwrap()).collect();
/// let refused = bank.try_acquire().unwrap_err();
/// assert_eq!(refused.reason(), RejectReason::Full);
/// drop(held);
/// assert_eq!(bank.metrics().available_concurrent_calls(), 16);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
pub struct Bulkhead {
    sem: Semaphore,
    name: Name,
    /// `max_wait_duration` in nanoseconds, `UNBOUNDED_WAIT` if it does not fit.
    max_wait_nanos: AtomicU64,
    /// `max_waiting_calls`, `NO_WAITER_CAP` for `None`.
    max_waiting: AtomicUsize,
    /// The current configuration; the lock also serializes `change_config` calls.
    config: Mutex<BulkheadConfig>,
    /// Registered listeners: an append-only chain, walked without a lock.
    listeners: Listeners,
    /// Call counters and the wait histogram, once [`enable_counters`](Self::enable_counters)
    /// was called.
    counters: OnceLock<Box<Counters>>,
    /// Who observes, when one observer alone lets the hot paths skip the out-of-line calls
    /// (issue 21): [`FAST_COUNTERS`] (the counters, nothing else: counted inline),
    /// `k + 1` for a limit controller alone that samples one call in `k` (an unsampled
    /// grant is decided inline and marked nothing), [`FAST_NONE`] otherwise. Recomputed
    /// under the config lock after each change ([`note_observers`](Self::note_observers)).
    fast: AtomicUsize,
    /// A limit controller, once one was attached (`adaptive::AdaptiveLimit`): it samples
    /// permits as they are granted and learns from them as they end.
    hook: OnceLock<Box<dyn LimitHook>>,
    /// The release-rate tracker behind [`BulkheadFull::retry_after`], made when counters or
    /// a listener first observe (never for an unobserved bulkhead: its refusals pay nothing
    /// for it). See `observe::retry`.
    retry: OnceLock<Box<RetryStats>>,
    /// The retry tracker's average, encoded as the bits a `Full` refusal of a caller served
    /// by the next release carries (0: no estimate yet, or no tracker): written by the
    /// tracker when the average moves, read by the counted refusal, which then needs neither
    /// the tracker's `OnceLock` nor its box (issue 33).
    retry_tail: AtomicU64,
}

/// Returns `permits` to `sem` if dropped: armed around foreign or fallible work that runs
/// before a release, forgotten once that work returned.
struct ReleaseOnUnwind<'a> {
    sem: &'a Semaphore,
    permits: u32,
}

impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        self.sem.release_many(self.permits);
    }
}

/// [`Bulkhead::fast`]: several observers, or none.
const FAST_NONE: usize = 0;
/// [`Bulkhead::fast`]: the counters alone.
const FAST_COUNTERS: usize = 1;

impl Bulkhead {
    /// Creates a bulkhead named `name` with `config`.
    ///
    /// Errors and events carry the name without allocating: a name of up to 23 bytes is
    /// copied into them, and its memory is freed with the bulkhead and the last error or
    /// event that carries it. A longer name is interned once for the life of the process,
    /// up to 1 MiB (with 16 bytes per name) and 16 384 such names in all; past that cap a
    /// new long name is shortened to its first 20 bytes or so and `…` (memory stays bounded
    /// whatever the names).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("payment-gateway", BulkheadConfig::default());
    /// assert_eq!(bulkhead.name(), "payment-gateway");
    /// ```
    pub fn new(name: impl Into<String>, config: BulkheadConfig) -> Bulkhead {
        Bulkhead::bound(name.into(), config, None)
    }

    /// Creates a bulkhead named `name` with `config` whose bounded async waits keep their
    /// deadlines on `timer`, a [`Timer`] the embedder (a runtime) drives, instead of the
    /// process-wide `bulkhead-timer` thread: this bulkhead never starts that thread, and
    /// the process-wide [`timer::fire_expired`](crate::timer::fire_expired) does not see its
    /// deadlines. Owned, weighted and adaptive waits of the bulkhead all use `timer`. Otherwise
    /// as [`new`](Self::new).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::timer::Timer;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// // The callback tells the runtime's timer when to call `timer.fire_expired()`.
    /// let timer = Timer::new(|at| println!("wake the runtime at {at:?}"));
    /// let bulkhead = Bulkhead::with_timer("bank", BulkheadConfig::default(), &timer);
    /// assert_eq!(bulkhead.name(), "bank");
    /// ```
    pub fn with_timer(name: impl Into<String>, config: BulkheadConfig, timer: &Timer) -> Bulkhead {
        Bulkhead::bound(name.into(), config, timer.binding())
    }

    /// [`new`](Self::new) and [`with_timer`](Self::with_timer): the deadlines go to `timer`.
    pub(crate) fn bound(name: String, config: BulkheadConfig, timer: Binding) -> Bulkhead {
        let bulkhead = Bulkhead {
            sem: Semaphore::new(config.max_concurrent_calls(), timer),
            name: Name::new(name),
            max_wait_nanos: AtomicU64::new(UNBOUNDED_WAIT),
            max_waiting: AtomicUsize::new(NO_WAITER_CAP),
            config: Mutex::new(config.clone()),
            listeners: Listeners::new(),
            counters: OnceLock::new(),
            fast: AtomicUsize::new(FAST_NONE),
            hook: OnceLock::new(),
            retry: OnceLock::new(),
            retry_tail: AtomicU64::new(0),
        };
        bulkhead.store_wait_settings(&config);
        // Nobody is queued yet: nothing to serve.
        let _ = bulkhead.sem.set_policy(config.queue_order(), config.sheddable_headroom());
        // The `tracing` feature does not set the observed flag: the paths it logs (a
        // refusal, a wait) ask `trace::interested()` next to the flag, one load of
        // tracing's global max level, so with no subscriber they stay unobserved.
        bulkhead
    }

    /// The bulkhead's name.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// assert_eq!(Bulkhead::new("bank", BulkheadConfig::default()).name(), "bank");
    /// ```
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The current configuration.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// assert_eq!(bulkhead.config(), BulkheadConfig::for_pool(20));
    /// ```
    pub fn config(&self) -> BulkheadConfig {
        self.config.lock().clone()
    }

    /// Replaces the configuration at run time. Never waits for a permit.
    ///
    /// Growing the limit admits queued waiters at once, oldest first. Shrinking never revokes
    /// a permit: calls in flight finish, and new calls are admitted only once the calls in
    /// flight are below the new limit. [`metrics`](Self::metrics) reports the new limit at
    /// once. A new max wait or waiter cap applies to waits that start afterwards.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(2).build()?);
    /// let a = bulkhead.try_acquire().unwrap();
    /// let b = bulkhead.try_acquire().unwrap();
    /// bulkhead.change_config(BulkheadConfig::builder().max_concurrent_calls(1).build()?);
    /// assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), 1);
    /// assert_eq!(bulkhead.metrics().available_concurrent_calls(), 0);
    /// drop(a);
    /// assert!(bulkhead.try_acquire().is_err()); // still 1 in flight: the debt is paid first
    /// drop(b);
    /// assert!(bulkhead.try_acquire().is_ok());
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn change_config(&self, config: BulkheadConfig) {
        let mut current = self.config.lock();
        // Wait settings first: the limit CAS (Release) then publishes them to callers it admits.
        self.store_wait_settings(&config);
        let reorder = self.sem.set_policy(config.queue_order(), config.sheddable_headroom());
        if let Some(hook) = self.hook.get() {
            // The configured limit is the controller's cap: it moves its bounds (under the
            // config lock, so caps reach it in the config's order) and applies its limit
            // after the lock.
            hook.cap_changed(config.max_concurrent_calls());
            *current = config;
            drop(current);
            hook.apply(self);
            if reorder {
                self.sem.serve_waiters();
            }
            return;
        }
        let serve = self.sem.set_limit(config.max_concurrent_calls()) | reorder;
        *current = config;
        drop(current);
        // Queued callers the new permits admit are granted and woken after the config lock
        // is released: their wakers may call back into this bulkhead (`config`,
        // `change_config`).
        if serve {
            self.sem.serve_waiters();
        }
    }

    fn store_wait_settings(&self, config: &BulkheadConfig) {
        let nanos = u64::try_from(config.max_wait_duration().as_nanos()).unwrap_or(UNBOUNDED_WAIT);
        // Ordering: Relaxed — an independent setting; a wait starting concurrently with a
        // change may use the old or the new value, as documented.
        self.max_wait_nanos.store(nanos, Ordering::Relaxed);
        // Ordering: Relaxed — as above.
        self.max_waiting
            .store(config.max_waiting_calls().unwrap_or(NO_WAITER_CAP), Ordering::Relaxed);
    }

    /// The configured max wait.
    #[inline]
    pub(crate) fn max_wait(&self) -> Duration {
        // Ordering: Relaxed — see `store_wait_settings`.
        match self.max_wait_nanos.load(Ordering::Relaxed) {
            UNBOUNDED_WAIT => Duration::MAX,
            nanos => Duration::from_nanos(nanos),
        }
    }

    /// Whether the configured max wait is zero (fail fast).
    #[inline]
    pub(crate) fn max_wait_is_zero(&self) -> bool {
        // Ordering: Relaxed — see `store_wait_settings`.
        self.max_wait_nanos.load(Ordering::Relaxed) == 0
    }

    /// The configured waiter cap.
    pub(crate) fn max_waiting(&self) -> Option<usize> {
        // Ordering: Relaxed — see `store_wait_settings`.
        match self.max_waiting.load(Ordering::Relaxed) {
            NO_WAITER_CAP => None,
            n => Some(n),
        }
    }

    /// Takes a permit if one is free. Never waits.
    ///
    /// A rejection costs one atomic load and allocates nothing.
    ///
    /// # Errors
    ///
    /// [`RejectReason::Full`] when no permit is free for a newcomer: all are in use, or
    /// callers are queued (a newcomer never overtakes a waiter). [`RejectReason::Closed`]
    /// once [`close`](Self::close) ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
    /// let permit = bulkhead.try_acquire().expect("one slot is free");
    /// assert!(bulkhead.try_acquire().is_err());
    /// drop(permit);
    /// assert!(bulkhead.try_acquire().is_ok());
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, BulkheadFull> {
        match self.sem.try_acquire_with(|word, quiet| self.refuse_from(word, quiet)) {
            Ok(word) => Ok(Permit::new(self, self.permitted_with::<true>(word))),
            Err(full) => Err(full),
        }
    }

    /// Takes a permit, waiting up to the configured `max_wait_duration` for one.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `max_wait_duration` when no permit is free (not at
    /// all when it is zero). Do not call it from async code; use
    /// [`acquire_async`](Self::acquire_async).
    ///
    /// # Errors
    ///
    /// [`RejectReason::Full`] when the bulkhead is full and the max wait is zero;
    /// [`RejectReason::TooManyWaiting`] when `max_waiting_calls` callers already wait;
    /// [`RejectReason::WaitTimedOut`] when the max wait passed without a free permit;
    /// [`RejectReason::Closed`] when the bulkhead is (or, while waiting, was) closed.
    ///
    /// # Panics
    ///
    /// If it would have to wait on a thread that is polling async tasks (a tokio worker, or
    /// inside `block_on`), as tokio's own blocking calls do: that would stall every task on
    /// the thread. Use [`acquire_async`](Self::acquire_async) there. Never panics when a
    /// permit is free or the max wait is zero; blocking inside `spawn_blocking` is fine.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    /// let config = BulkheadConfig::builder()
    ///     .max_concurrent_calls(1)
    ///     .max_wait_duration(Duration::from_millis(5))
    ///     .build()?;
    /// let bulkhead = Bulkhead::new("bank", config);
    /// let _held = bulkhead.acquire().unwrap();
    /// let err = bulkhead.acquire().unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// assert!(err.waited() >= Duration::from_millis(5));
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    #[inline]
    pub fn acquire(&self) -> Result<Permit<'_>, BulkheadFull> {
        match self.sem.try_acquire() {
            Ok(word) => Ok(Permit::new(self, self.permitted(word))),
            Err(word) => self.acquire_slow(word),
        }
    }

    /// `acquire` without a free permit: out of line, so that `acquire` (and `call`, which
    /// inlines it) keeps only its fast path. Callgrind (`benches/callgrind.rs`), `call(|| ())`:
    /// 51 instructions with the slow path inline (acquire was then not inlined), 29 without.
    #[cold]
    #[inline(never)]
    fn acquire_slow(&self, word: Word) -> Result<Permit<'_>, BulkheadFull> {
        // The common refusal of a zero-wait bulkhead (no permit free, nobody observing: the
        // word's one comparison), built where nothing else is live, so it saves no register
        // and writes the error once (callgrind, `bulkhead_zero_wait`, issue 33: 54.9 -> see
        // benches/results/NOTES.md). What `refuse` would build for that word.
        if word.is_quiet_full()
            && (word.is_closed() || self.max_wait_is_zero())
            && !crate::observe::trace::interested()
        {
            return Err(self.refuse_unobserved(word));
        }
        self.acquire_slower(word)
    }

    /// [`acquire_slow`](Self::acquire_slow) for every word but the quiet refusal: a permit
    /// held back, an observed refusal, or a wait.
    #[inline(never)]
    fn acquire_slower(&self, word: Word) -> Result<Permit<'_>, BulkheadFull> {
        // Fail fast without decoding the configured wait into a `Duration`.
        if word.is_closed() || self.max_wait_is_zero() {
            if word.has_free() {
                return self.take_held_back_or_refuse(word).map(|mark| Permit::new(self, mark));
            }
            // The refusal `try_acquire` makes for this word: with the counters alone
            // observing, the counted refusal's inline path (its clock read amortized), not
            // `refuse`'s, which reads the clock for the estimate on every refusal (callgrind,
            // `bulkhead_zero_wait_instrumented`, issue 33: see benches/results/NOTES.md).
            return Err(self.refuse_from(word, word.is_quiet_full()));
        }
        self.wait_blocking(self.max_wait(), 1, Criticality::Default)
            .map(|mark| Permit::new(self, mark))
    }

    /// Takes a permit, waiting up to `wait` (instead of the configured max wait) for one.
    /// Sub-millisecond waits are honoured; a wait too long for the clock waits until a
    /// permit frees.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `wait`. Robust to spurious wake-ups.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), with `wait` as the max wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
    /// let _held = bulkhead.try_acquire().unwrap();
    /// let err = bulkhead.acquire_timeout(Duration::from_micros(300)).unwrap_err();
    /// assert!(err.waited() >= Duration::from_micros(300));
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    #[inline]
    pub fn acquire_timeout(&self, wait: Duration) -> Result<Permit<'_>, BulkheadFull> {
        self.acquire_raw(wait).map(|mark| Permit::new(self, mark))
    }

    /// Takes a permit as with `acquire_timeout`, without wrapping it in a guard.
    #[inline]
    fn acquire_raw(&self, wait: Duration) -> Result<Mark, BulkheadFull> {
        match self.sem.try_acquire() {
            Ok(word) => Ok(self.permitted(word)),
            Err(word) if word.has_free() && wait.is_zero() => self.take_held_back_or_refuse(word),
            // The refusal `try_acquire` makes for this word (see `acquire_slower`).
            Err(word) if word.is_closed() || wait.is_zero() => {
                Err(self.refuse_from(word, word.is_quiet_full()))
            }
            Err(_) => self.wait_blocking(wait, 1, Criticality::Default),
        }
    }

    /// A default caller that may not wait, refused by the fast path with `word` although a
    /// permit is free (`Word::has_free`: the waiters flag or `CLOSED` refused it): takes a
    /// permit held back for queued waiters it is served before (a sheddable waiter's
    /// headroom), as a waiting caller would be granted at once; otherwise the refusal. Out
    /// of line: callers test `has_free` first, so a refusal of a full bulkhead pays one
    /// comparison.
    #[cold]
    #[inline(never)]
    pub(crate) fn take_held_back_or_refuse(&self, word: Word) -> Result<Mark, BulkheadFull> {
        match self.sem.try_acquire_held_back_slow(word) {
            Ok(word) => Ok(self.permitted(word)),
            Err(word) => Err(self.refuse(word)),
        }
    }

    /// Waits asynchronously for a permit, up to the configured `max_wait_duration`, on any
    /// executor (tokio, smol, `futures::executor::block_on`, your own), with or without the
    /// `tokio` feature.
    ///
    /// The bulkhead keeps the deadline itself: a queued wait stores it in its queue slot, and
    /// the crate's deadline timer withdraws the waiter when it passes and wakes it (see
    /// [`bulkhead::timer`](crate::engine::timer): one process-wide thread, started by the first
    /// bounded wait that queues, parked while nothing waits with a bound; or a timer of your
    /// own). No timer is armed per waiter. The wait ends no earlier than the max wait and
    /// late only by the operating system's timed park (tens of microseconds on Linux; see the
    /// waiting path in `docs/performance.md` for measured figures), not by a runtime's 1 ms
    /// tick. A future that is not polled after its wake still holds no place in the queue.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. Dropping the future at any point loses nothing: a queued caller leaves
    /// the queue, and a permit granted to a future that is dropped before it returns it goes
    /// to the next waiter.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let permit = bulkhead.acquire_async().await?;
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    /// drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn acquire_async(&self) -> Acquire<'_> {
        Acquire::new(self)
    }

    /// Waits asynchronously for a permit up to the configured `max_wait_duration`, bounded
    /// by a sleep future that `make_sleep` builds from that duration: works with any runtime.
    ///
    /// `make_sleep` is called only if the caller really has to wait (never when a permit is
    /// free, nor when the max wait is zero or unbounded); the sleep is kept in the future,
    /// not boxed. Any future fits: its output is ignored (a timer whose sleep yields an
    /// `Instant`, such as smol's `Timer::after`, needs no wrapper).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_async`](Self::acquire_async).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); [`RejectReason::WaitTimedOut`] when the sleep completes
    /// first.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    /// let config = BulkheadConfig::builder()
    ///     .max_concurrent_calls(1)
    ///     .max_wait_duration(Duration::from_secs(60))
    ///     .build()?;
    /// let bulkhead = Bulkhead::new("bank", config);
    /// let _held = bulkhead.try_acquire().unwrap();
    /// // A "sleep" that is already over: the wait times out on its first poll.
    /// let err = futures::executor::block_on(
    ///     bulkhead.acquire_async_with_sleep(|_wait| std::future::ready(())),
    /// )
    /// .unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// // A sleep whose output is not `()` (here an `Instant`, as smol's timer yields) fits.
    /// let err = futures::executor::block_on(
    ///     bulkhead.acquire_async_with_sleep(|_wait| std::future::ready(std::time::Instant::now())),
    /// )
    /// .unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn acquire_async_with_sleep<M, S>(&self, make_sleep: M) -> AcquireWithSleep<'_, M, S>
    where
        M: FnOnce(Duration) -> S,
        S: Future,
    {
        AcquireWithSleep::new(self, make_sleep)
    }

    /// Takes an owned permit if one is free. Never waits. The permit keeps the bulkhead
    /// alive and can move to another task or thread.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let permit = bulkhead.try_acquire_owned()?;
    /// std::thread::spawn(move || drop(permit)).join().unwrap();
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[inline]
    pub fn try_acquire_owned(self: &StdArc<Self>) -> Result<OwnedPermit, BulkheadFull> {
        self.try_acquire().map(|permit| permit.into_owned(StdArc::clone(self)))
    }

    /// Takes `n` permits at once if they are free: a call that costs `n` slots of the
    /// limit. Never waits. `try_acquire_many(1)` is [`try_acquire`](Self::try_acquire).
    ///
    /// All or nothing: either the permit holds `n` slots or nothing was taken. While anyone
    /// waits, a newcomer takes nothing, whatever it asks for (FIFO, no barging).
    /// `n == 0` gives an empty permit at once (as tokio's `acquire_many(0)` does) unless the
    /// bulkhead is closed: it takes no slot, so it overtakes nobody.
    ///
    /// # Errors
    ///
    /// [`RejectReason::ExceedsLimit`] when `n` is above the current limit (it could never be
    /// granted; for a sheddable request, `n` plus the `sheddable_headroom`);
    /// [`RejectReason::Reserved`] when a sheddable request found `n` slots free and nobody
    /// queued, but not the headroom it must leave besides; [`RejectReason::Full`] when fewer
    /// than `n` slots are free for a newcomer (or callers are queued);
    /// [`RejectReason::Closed`] once [`close`](Self::close) ran.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(4).build()?);
    /// let batch = bulkhead.try_acquire_many(3).expect("3 of 4 free");
    /// assert_eq!(batch.num_permits(), 3);
    /// assert_eq!(bulkhead.try_acquire_many(2).unwrap_err().reason(), RejectReason::Full);
    /// assert_eq!(bulkhead.try_acquire_many(5).unwrap_err().reason(), RejectReason::ExceedsLimit);
    /// drop(batch);
    /// assert_eq!(bulkhead.metrics().available_concurrent_calls(), 4);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    #[inline]
    pub fn try_acquire_many(
        &self,
        request: impl Into<Request>,
    ) -> Result<Permit<'_>, BulkheadFull> {
        let request = request.into();
        let n = request.num_permits();
        match self.try_acquire_request(request) {
            Ok(word) => Ok(Permit::with_permits(self, n, self.permitted(word))),
            Err(word) => Err(self.refuse_many(word, request)),
        }
    }

    /// Takes `n` permits at once, waiting up to the configured `max_wait_duration` for them.
    /// `acquire_many(1)` is [`acquire`](Self::acquire).
    ///
    /// The wait is strictly FIFO: a waiter for 3 at the head of the queue holds back a later
    /// waiter for 1 even while 1 or 2 slots are free, and it is granted its whole request at
    /// once (never part of it) as soon as releases or growth free `n` slots. A request above
    /// the current limit is refused at once (a request for 1 never is: at a limit of 0 it
    /// waits for growth, as [`acquire`](Self::acquire) does); a queued waiter whose request
    /// a shrink puts above the limit is refused then, wherever it stands in the queue (it
    /// would otherwise block everyone behind it until the limit grows back). A sheddable
    /// request is tested with the `sheddable_headroom` it must leave: one that could never
    /// fit is refused with `ExceedsLimit` too, never queued.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `max_wait_duration`, as [`acquire`](Self::acquire)
    /// does (and panics where it would).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`RejectReason::ExceedsLimit`] when `n` is above
    /// the limit, when asked or when a shrink put the limit below `n` while it waited. With a
    /// zero max wait, as [`try_acquire_many`](Self::try_acquire_many) (a sheddable request
    /// held back by the headroom is [`RejectReason::Reserved`]; allowed to wait, it queues).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    /// let config = BulkheadConfig::builder()
    ///     .max_concurrent_calls(3)
    ///     .max_wait_duration(Duration::from_millis(5))
    ///     .build()?;
    /// let bulkhead = Bulkhead::new("bank", config);
    /// let one = bulkhead.acquire()?;
    /// // 2 free, 3 asked: waits 5 ms for the third, then gives up.
    /// assert_eq!(bulkhead.acquire_many(3).unwrap_err().reason(), RejectReason::WaitTimedOut);
    /// drop(one);
    /// assert_eq!(bulkhead.acquire_many(3)?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many(&self, request: impl Into<Request>) -> Result<Permit<'_>, BulkheadFull> {
        let request = request.into();
        self.acquire_many_within(request, request.wait_within(self.max_wait()))
    }

    /// Takes `n` permits at once, waiting at most `wait` (instead of the configured
    /// `max_wait_duration`) and at most the request's own [`max_wait`](Request::max_wait):
    /// the weighted [`acquire_timeout`](Self::acquire_timeout). A zero wait never queues.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to the smaller of `wait` and the request's max wait.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many), with that wait as the max wait.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(3).build()?);
    /// let one = bulkhead.try_acquire()?;
    /// let err = bulkhead.acquire_many_timeout(3, Duration::from_millis(2)).unwrap_err();
    /// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    /// drop(one);
    /// assert_eq!(bulkhead.acquire_many_timeout(3, Duration::from_millis(2))?.num_permits(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_many_timeout(
        &self,
        request: impl Into<Request>,
        wait: Duration,
    ) -> Result<Permit<'_>, BulkheadFull> {
        let request = request.into();
        self.acquire_many_within(request, request.wait_within(wait))
    }

    /// The blocking weighted acquire, waiting at most `wait` (already the effective one).
    fn acquire_many_within(
        &self,
        request: Request,
        wait: Duration,
    ) -> Result<Permit<'_>, BulkheadFull> {
        let n = request.num_permits();
        match self.try_acquire_request(request) {
            Ok(word) => Ok(Permit::with_permits(self, n, self.permitted(word))),
            Err(word) if word.is_closed() || n == 0 || word.exceeds_limit(n) || wait.is_zero() => {
                Err(self.refuse_many(word, request))
            }
            Err(_) => self
                .wait_blocking(wait, n, request.class())
                .map(|mark| Permit::with_permits(self, n, mark)),
        }
    }

    /// Waits asynchronously for `n` permits at once, up to the configured
    /// `max_wait_duration`, on any executor. `acquire_many_async(1)` is
    /// [`acquire_async`](Self::acquire_async); the wait is ordered as
    /// [`acquire_many`](Self::acquire_many)'s.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe. A waiter is granted its whole request at once, never part of it, so a
    /// dropped, timed-out or refused waiter holds nothing to give back; a request granted to
    /// a future dropped before it returns the permit goes back whole, to the waiters behind.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let batch = bulkhead.acquire_many_async(4).await?;
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 4);
    /// drop(batch);
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_many_async(&self, request: impl Into<Request>) -> Acquire<'_> {
        Acquire::many(self, request.into())
    }

    /// Takes `n` permits at once as an owned permit if they are free. Never waits.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many`](Self::try_acquire_many).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let permit = bulkhead.try_acquire_many_owned(5)?;
    /// std::thread::spawn(move || assert_eq!(permit.num_permits(), 5)).join().unwrap();
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn try_acquire_many_owned(
        self: &StdArc<Self>,
        request: impl Into<Request>,
    ) -> Result<OwnedPermit, BulkheadFull> {
        self.try_acquire_many(request).map(|permit| permit.into_owned(StdArc::clone(self)))
    }

    /// Waits asynchronously for `n` permits at once as an owned permit, up to the configured
    /// `max_wait_duration`. The future is `Send + 'static`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_many_async`](Self::acquire_many_async).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let permit = tokio::spawn(bulkhead.acquire_many_owned_async(2)).await.unwrap().unwrap();
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 2);
    /// drop(permit);
    /// # }
    /// ```
    pub fn acquire_many_owned_async(
        self: &StdArc<Self>,
        request: impl Into<Request>,
    ) -> AcquireOwned {
        AcquireOwned::many(StdArc::clone(self), request.into())
    }

    /// Takes `n` permits at once as an owned permit, waiting up to the configured
    /// `max_wait_duration` (or the request's own [`max_wait`](Request::max_wait), if
    /// shorter): the owned [`acquire_many`](Self::acquire_many).
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread as [`acquire_many`](Self::acquire_many) does.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let permit = bulkhead.acquire_many_owned(3)?;
    /// std::thread::spawn(move || assert_eq!(permit.num_permits(), 3)).join().unwrap();
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn acquire_many_owned(
        self: &StdArc<Self>,
        request: impl Into<Request>,
    ) -> Result<OwnedPermit, BulkheadFull> {
        self.acquire_many(request).map(|permit| permit.into_owned(StdArc::clone(self)))
    }

    /// Takes an owned permit, waiting up to the configured `max_wait_duration`.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread as [`acquire`](Self::acquire) does.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let permit = bulkhead.acquire_owned()?;
    /// assert_eq!(permit.bulkhead().name(), "bank");
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn acquire_owned(self: &StdArc<Self>) -> Result<OwnedPermit, BulkheadFull> {
        self.acquire().map(|permit| permit.into_owned(StdArc::clone(self)))
    }

    /// Waits asynchronously for an owned permit, up to the configured `max_wait_duration`.
    /// The future is `Send + 'static`, so it can be spawned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`acquire_async`](Self::acquire_async).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let task = tokio::spawn(bulkhead.acquire_owned_async());
    /// let permit = task.await.unwrap().unwrap();
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    /// drop(permit);
    /// # }
    /// ```
    pub fn acquire_owned_async(self: &StdArc<Self>) -> AcquireOwned {
        AcquireOwned::new(StdArc::clone(self))
    }

    /// Runs `f` on the calling thread under a permit, waiting for one up to the configured
    /// `max_wait_duration`. The permit is released when `f` returns or unwinds (the panic
    /// still propagates).
    ///
    /// # Blocking
    ///
    /// Blocks while waiting for a permit, as [`acquire`](Self::acquire) does, then for as
    /// long as `f` runs.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `f` is not run.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let answer = bulkhead.call(|| 6 * 7)?;
    /// assert_eq!(answer, 42);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[inline]
    pub fn call<T>(&self, f: impl FnOnce() -> T) -> Result<T, BulkheadFull> {
        let _permit = self.acquire()?;
        Ok(f())
    }

    /// Runs `f` on the calling thread under the permits `request` asks for (its count, its
    /// criticality, its own [`max_wait`](Request::max_wait) if shorter than the
    /// configured one): the weighted, classed [`call`](Self::call). The permits are released
    /// when `f` returns or unwinds.
    ///
    /// # Blocking
    ///
    /// Blocks while waiting for the permits, as [`acquire_many`](Self::acquire_many) does,
    /// then for as long as `f` runs.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many); `f` is not run.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, Criticality, Request};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let report = Request::permits(4).criticality(Criticality::Sheddable).max_wait(Duration::from_millis(5));
    /// let rows = bulkhead.call_with(report, || bulkhead.metrics().in_flight_calls())?;
    /// assert_eq!(rows, 4);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn call_with<T>(
        &self,
        request: impl Into<Request>,
        f: impl FnOnce() -> T,
    ) -> Result<T, BulkheadFull> {
        let _permit = self.acquire_many(request)?;
        Ok(f())
    }

    /// Awaits `fut` in the calling task under the permits `request` asks for, waiting up to
    /// the smaller of the configured `max_wait_duration` and the request's own
    /// [`max_wait`](Request::max_wait), on any executor (the bulkhead's timer keeps the
    /// deadline): the weighted, classed [`call_async`](Self::call_async).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it while it waits leaves the queue (a grant that raced the drop
    /// goes back whole, to the waiters behind); dropping it while `fut` runs drops `fut` and
    /// releases the permits.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many); `fut` is dropped without being polled.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, Criticality, Request};
    /// # futures::executor::block_on(async {
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let login = Request::from(Criticality::Critical).max_wait(Duration::from_millis(20));
    /// assert_eq!(bulkhead.call_async_with(login, async { 6 * 7 }).await?, 42);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// # })?;
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub async fn call_async_with<F: Future>(
        &self,
        request: impl Into<Request>,
        fut: F,
    ) -> Result<F::Output, BulkheadFull> {
        let permit = self.acquire_many_async(request).await?;
        Ok(Self::run_marked(permit, fut).await)
    }

    /// Awaits `fut` under an owned permit, waiting for one up to the configured
    /// `max_wait_duration`: the non-fallible
    /// [`call_owned_async_fallible`](Self::call_owned_async_fallible). The future is
    /// `Send + 'static` when `fut` is, so it can be spawned.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `fut` is dropped without being polled.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let task = tokio::spawn(bulkhead.call_owned_async(async { 6 * 7 }));
    /// assert_eq!(task.await.unwrap().unwrap(), 42);
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
    /// # }
    /// ```
    pub fn call_owned_async<F: Future + Send + 'static>(
        self: &StdArc<Self>,
        fut: F,
    ) -> impl Future<Output = Result<F::Output, BulkheadFull>> + Send + 'static {
        let acquire = self.acquire_owned_async();
        async move {
            let permit = acquire.await?;
            Ok(Self::run_marked(permit, fut).await)
        }
    }

    /// Awaits `fut` under `permit`, marking the call cancelled if dropped before `fut`
    /// completes (an adaptive limit learns nothing from it) and a success once it has.
    async fn run_marked<P: crate::bulkhead::permit::Marked, F: Future>(
        mut permit: P,
        fut: F,
    ) -> F::Output {
        crate::bulkhead::permit::Marked::unmarked_is_cancelled(&mut permit);
        let output = fut.await;
        crate::bulkhead::permit::Marked::set(
            &mut permit,
            crate::bulkhead::permit::Outcome::Success,
        );
        output
    }

    /// Awaits `fut` in the calling task under a permit, waiting for one up to the configured
    /// `max_wait_duration`. The permit is held until `fut` completes or this future is
    /// dropped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it while it waits leaves the queue; dropping it while `fut` runs
    /// drops `fut` and releases the permit.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); `fut` is dropped without being polled.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let answer = bulkhead.call_async(async { 6 * 7 }).await?;
    /// assert_eq!(answer, 42);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async<F: Future>(&self, fut: F) -> Result<F::Output, BulkheadFull> {
        let mut permit = self.acquire_async().await?;
        // Dropped before `fut` completes, the call was cancelled (an adaptive limit learns
        // nothing from it); completed, it succeeded.
        crate::bulkhead::permit::Marked::unmarked_is_cancelled(&mut permit);
        let output = fut.await;
        crate::bulkhead::permit::Marked::set(
            &mut permit,
            crate::bulkhead::permit::Outcome::Success,
        );
        Ok(output)
    }

    /// Closes the bulkhead for a graceful shutdown: new calls are refused at once with
    /// [`RejectReason::Closed`], every queued caller (sync or async) is woken and refused
    /// with `Closed`, and calls in flight finish normally. Returns `true` if this call closed
    /// it, `false` if it was already closed (closing twice is harmless).
    ///
    /// Closing is for good: a closed bulkhead never reopens, whatever
    /// [`change_config`](Self::change_config) does. Build a new one to start again. Emits a
    /// [`BulkheadEventKind::Closed`] event.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    ///
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// let in_flight = bulkhead.try_acquire()?;
    /// assert!(bulkhead.close());
    /// assert!(!bulkhead.close(), "already closed");
    /// assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Closed);
    ///
    /// // The call in flight finishes normally; then the bulkhead is drained.
    /// assert!(!bulkhead.wait_drained(Duration::ZERO));
    /// drop(in_flight);
    /// assert!(bulkhead.wait_drained(Duration::from_secs(1)));
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn close(&self) -> bool {
        let closed = self.sem.close();
        if closed && !self.listeners.is_empty() {
            self.emit(BulkheadEventKind::Closed);
        }
        closed
    }

    /// Whether [`close`](Self::close) ran.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// assert!(!bulkhead.is_closed());
    /// bulkhead.close();
    /// assert!(bulkhead.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.sem.load().is_closed()
    }

    /// Waits until the bulkhead is closed and no call is in flight, for at most `timeout`.
    /// Returns `true` if it is drained, `false` if `timeout` passed first.
    ///
    /// It waits for [`close`](Self::close) too: call it after `close`, or on a thread that
    /// waits for another to close the bulkhead.
    ///
    /// # Blocking
    ///
    /// Blocks the calling thread for up to `timeout`. In async code use
    /// [`drained`](Self::drained).
    ///
    /// # Panics
    ///
    /// If it would have to wait on a thread that is polling async tasks, as
    /// [`acquire`](Self::acquire) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let permit = bulkhead.try_acquire_owned()?;
    /// let worker = std::thread::spawn(move || {
    ///     std::thread::sleep(Duration::from_millis(10)); // the call in flight
    ///     drop(permit);
    /// });
    /// bulkhead.close();
    /// assert!(bulkhead.wait_drained(Duration::from_secs(10)));
    /// assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
    /// worker.join().unwrap();
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[must_use = "false means calls were still in flight when the timeout passed"]
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        self.wait_drained_blocking(timeout)
    }

    /// Completes when the bulkhead is closed and no call is in flight: the async
    /// [`wait_drained`](Self::wait_drained). Bound it with your runtime's timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future leaves the drain wait and changes nothing else.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let bulkhead = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let call = tokio::spawn({
    ///     let bulkhead = Arc::clone(&bulkhead);
    ///     async move {
    ///         bulkhead.call_async(tokio::time::sleep(Duration::from_millis(10))).await
    ///     }
    /// });
    /// tokio::task::yield_now().await; // let the call start
    /// bulkhead.close();
    /// tokio::time::timeout(Duration::from_secs(10), bulkhead.drained()).await?;
    /// call.await??; // admitted before the close, it finished normally
    /// # Ok(())
    /// # }
    /// ```
    pub fn drained(&self) -> Drained<'_> {
        Drained::new(self)
    }

    /// A snapshot of the bulkhead's counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
    /// assert_eq!(bulkhead.metrics().available_concurrent_calls(), 16);
    /// ```
    pub fn metrics(&self) -> BulkheadMetrics {
        let word = self.sem.load();
        BulkheadMetrics {
            available: usize::try_from(word.available()).unwrap_or(0),
            max_allowed: word.limit(),
            in_flight: word.in_flight(),
            waiting: self.sem.waiting(),
            closed: word.is_closed(),
            counts: self.counters.get().map(|counters| counters.counts()),
        }
    }

    /// Starts counting calls: permitted, rejected (per reason) and finished, plus the wait
    /// histogram that the `metrics` feature exports. [`metrics`](Self::metrics) reports the
    /// counts from then on. Idempotent; counting cannot be turned off.
    ///
    /// Counting costs a rejection or an acquire a few plain instructions, and never a lock
    /// or a write to a cache line another thread writes: each thread counts in its own
    /// cells, summed when read. Every call that starts after this returns is counted, its
    /// end included; a permit taken before is not counted when it ends.
    /// `bulkhead::metrics_export::register` calls it for you.
    ///
    /// # Examples
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    ///
    /// let bank = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(1).build()?);
    /// assert!(!bank.metrics().is_counting());
    /// bank.enable_counters();
    /// let permit = bank.try_acquire().unwrap();
    /// assert!(bank.try_acquire().is_err());
    /// drop(permit);
    /// let m = bank.metrics();
    /// assert_eq!(m.calls_permitted(), 1);
    /// assert_eq!(m.calls_rejected(RejectReason::Full), 1);
    /// assert_eq!(m.calls_finished(), 1);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn enable_counters(&self) {
        self.counters.get_or_init(|| Box::new(Counters::new()));
        self.retry.get_or_init(|| Box::new(RetryStats::new(retry_tail)));
        self.note_observers();
        self.sem.set_observed();
    }

    /// Recomputes [`fast`](Self::fast) after the counters, a listener or a controller
    /// came. Under the config lock, so that of two concurrent changes the one that locks
    /// second sees both (each made its change before locking).
    fn note_observers(&self) {
        let _serial = self.config.lock();
        let fast = match (self.counters.get(), self.listeners.is_empty(), self.hook.get()) {
            (Some(_), true, None) => FAST_COUNTERS,
            (None, true, Some(hook)) => hook.sample_one_in().max(1) as usize + 1,
            _ => FAST_NONE,
        };
        // Ordering: Release — pairs with the Acquire loads in `permitted`, `refuse` and
        // `release_sampled`, so a reader that sees a fast mode also sees the counters or the
        // controller it will use. A reader that sees a stale mode just after a listener came
        // misses that listener's events for calls concurrent with its registration, which
        // `on_event` allows.
        self.fast.store(fast, Ordering::Release);
    }

    /// The counters, if enabled: for the metrics exporter.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn counters(&self) -> Option<&Counters> {
        self.counters.get().map(|counters| &**counters)
    }

    /// Registers a listener called for every event from now on, on the thread where the
    /// event happens; keep them cheap. The returned handle removes it.
    ///
    /// With no listener registered (and no counters, and without the `tracing` feature),
    /// events cost the hot paths nothing: whether to emit is a bit of the state word those
    /// paths already read. Emitting takes no lock and writes no reference count: listeners
    /// form an append-only chain, walked with one load per listener. A listener that panics
    /// is caught and ignored (the next one still runs); it never loses or duplicates a
    /// permit.
    ///
    /// Registration is safe while other threads emit: every event of a call that starts
    /// after `on_event` returns reaches the new listener; events of calls concurrent with
    /// the registration may or may not. A call is observed whole: its `CallFinished` is
    /// emitted only if its permit was granted while anyone observed (a permit taken before
    /// the first listener or counter ends unreported), so counts of permitted and finished
    /// calls agree. The returned [`ListenerHandle`](crate::ListenerHandle)
    /// removes the listener ([`remove`](crate::ListenerHandle::remove)); dropping it keeps
    /// the listener.
    ///
    /// Events are emitted just after the state change they report, without a lock, so
    /// listeners running on different threads may see them out of order: a waiter handed a
    /// released permit can emit its `CallPermitted` before the releaser's `CallFinished`.
    /// Counters stay exact; a "permitted minus finished" difference may briefly exceed the
    /// limit by the number of hand-offs in progress. Read gauges from
    /// [`metrics`](Self::metrics) instead, and for counts prefer
    /// [`enable_counters`](Self::enable_counters), which is cheaper than a counting listener.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadEventKind};
    ///
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(0).build()?);
    /// let rejected = Arc::new(AtomicUsize::new(0));
    /// let counter = Arc::clone(&rejected);
    /// bulkhead.on_event(move |event| {
    ///     if let BulkheadEventKind::CallRejected(_) = event.kind() {
    ///         counter.fetch_add(1, Ordering::Relaxed);
    ///     }
    /// });
    /// assert!(bulkhead.try_acquire().is_err());
    /// assert_eq!(rejected.load(Ordering::Relaxed), 1);
    /// # Ok::<(), bulkhead::ConfigError>(())
    /// ```
    pub fn on_event(
        &self,
        listener: impl Fn(&BulkheadEvent) + Send + Sync + 'static,
    ) -> ListenerHandle {
        let active = StdArc::new(crate::engine::sync::AtomicBool::new(true));
        self.retry.get_or_init(|| Box::new(RetryStats::new(retry_tail)));
        self.listeners.push(Box::new(listener), StdArc::clone(&active));
        self.note_observers();
        self.sem.set_observed();
        ListenerHandle { active }
    }

    /// Registers a listener whose handle flag `active` is shared (the keyed level registers
    /// one listener on every key's bulkhead, removed from all by one handle).
    pub(crate) fn add_listener(
        &self,
        listener: Box<crate::observe::Listener>,
        active: StdArc<crate::engine::sync::AtomicBool>,
    ) {
        self.retry.get_or_init(|| Box::new(RetryStats::new(retry_tail)));
        self.listeners.push(listener, active);
        self.note_observers();
        self.sem.set_observed();
    }

    /// Bookkeeping for a permit granted without waiting: counted, `CallPermitted`, if
    /// anyone observes.
    #[inline]
    pub(crate) fn permitted(&self, word: Word) -> Mark {
        self.permitted_with::<false>(word)
    }

    /// [`permitted`](Self::permitted), with the counters-alone case inline when `INLINE`:
    /// for `try_acquire`, whose callers keep nothing live across it (instrumented acquire +
    /// release, issue 21). `acquire` and `call` keep it out of line: inlined there, the
    /// compiler re-tested the mark of an unobserved `call(|| ())` (29 -> 33 instructions).
    #[inline(always)]
    fn permitted_with<const INLINE: bool>(&self, word: Word) -> Mark {
        if word.is_observed() {
            // Ordering: Acquire — pairs with the Release store in `note_observers`.
            let fast = self.fast.load(Ordering::Acquire);
            // A controller alone (sampling 1 in `fast - 1`): a call that is not its sample has
            // nobody to tell, now or at the release.
            if fast > 2 && !sample_due((fast - 1) as u32) {
                return Mark::NONE;
            }
            if INLINE && fast == FAST_COUNTERS {
                if let Some(cells) = self.counters.get().and_then(|c| c.inline_cells()) {
                    bump_own(&cells.permitted);
                    return Mark::COUNTED;
                }
            }
            self.observed_permitted(fast)
        } else {
            Mark::NONE
        }
    }

    /// [`permitted`](Self::permitted) while anyone observes, past a lone controller's
    /// unsampled calls: out of line, so that the unobserved acquire stays small (with the
    /// counters' case inlined too, the compiler re-tested the mark of an unobserved
    /// `call(|| ())`: 29 -> 33 instructions); not cold, since a lone observer's fast cases
    /// are its common ones.
    #[inline(never)]
    fn observed_permitted(&self, fast: usize) -> Mark {
        if fast > FAST_COUNTERS {
            return self.hook_sampled();
        }
        if fast == FAST_COUNTERS {
            if let Some(cells) = self.counters.get().and_then(|c| c.inline_cells()) {
                bump_own(&cells.permitted);
                return Mark::COUNTED;
            }
        }
        self.observe_permitted();
        self.start_mark()
    }

    /// Bookkeeping for a permit granted on the slow path, after a wait that started at
    /// `start`: as [`permitted`](Self::permitted), and the wait is recorded. `start` is
    /// `None` only for an unbounded async wait that began unobserved (it never read the
    /// clock): counted, not timed.
    #[inline]
    pub(crate) fn permitted_after(&self, word: Word, start: Option<Instant>) -> Mark {
        if word.is_observed() || crate::observe::trace::interested() {
            self.observe_permitted_after(start)
        } else {
            Mark::NONE
        }
    }

    #[cold]
    #[inline(never)]
    fn observe_permitted_after(&self, start: Option<Instant>) -> Mark {
        self.observe_permitted();
        if let Some(start) = start {
            self.observe_wait(Outcome::Permitted, self.sem.clock.since(start));
        }
        self.start_mark()
    }

    /// Builds the rejection error (allocation-free); counts it and emits `CallRejected`, if
    /// anyone observes.
    #[inline(always)]
    pub(crate) fn reject(
        &self,
        word: Word,
        reason: RejectReason,
        waited: Duration,
    ) -> BulkheadFull {
        let full = BulkheadFull::new(self.name, word.limit(), reason, waited);
        if word.is_observed() || crate::observe::trace::interested() {
            let full = self.with_retry_after(full, word, reason);
            if waited.is_zero() {
                self.observe_rejected(reason);
            } else {
                // What the error reports (kept to one part in two million), so that the
                // histogram and the caller agree.
                self.observe_rejected_after(reason, full.waited());
            }
            return full;
        }
        full
    }

    /// [`refuse`](Self::refuse), told by the engine whether the word is a quiet refusal (no
    /// permit free, nobody observing): then only `tracing` may want to hear of it.
    #[inline(always)]
    pub(crate) fn refuse_from(&self, word: Word, quiet: bool) -> BulkheadFull {
        if !quiet {
            return match self.refuse_counted(word) {
                Some(full) => full,
                None => self.refuse_loud(word),
            };
        }
        if crate::observe::trace::interested() {
            self.observe_refused(word);
        }
        BulkheadFull::refused(self.name, word.limit(), word.is_closed())
    }

    /// [`refuse`](Self::refuse) for a word that is not a quiet refusal (observed, closed,
    /// or held back for waiters): out of line, so that `try_acquire`'s inlined code stays
    /// what it was before the retry estimate (with `refuse` inlined there, the unobserved
    /// kept refusal and acquire + release each cost one instruction more, callgrind,
    /// issue 32).
    #[cold]
    #[inline(never)]
    fn refuse_loud(&self, word: Word) -> BulkheadFull {
        // Ordering: Acquire — pairs with the Release store in `note_observers`, as in
        // `refuse_observed`.
        if self.fast.load(Ordering::Acquire) > FAST_COUNTERS
            && !crate::observe::trace::interested()
            && self.retry.get().is_none()
        {
            // A controller alone observes: it learns nothing from a refusal, and without a
            // release-rate tracker there is no estimate (what `refuse` would find, after
            // two more calls; callgrind, `adaptive_reject`, issue 33). The tracker test is
            // defensive: today a tracker comes only with counters or a listener, and either
            // leaves this mode for good.
            return BulkheadFull::refused(self.name, word.limit(), word.is_closed());
        }
        self.refuse(word)
    }

    /// The counted refusal (issue 33), the one every service exporting metrics runs, when
    /// the counters alone observe and this thread has inline cells: counts it and returns
    /// the refusal, with the retry estimate of a caller the next release would serve read
    /// ready-encoded (`retry_tail`). `None` (nothing counted) in every other case.
    #[inline(always)]
    fn refuse_counted(&self, word: Word) -> Option<BulkheadFull> {
        // Ordering: Acquire — pairs with the Release store in `note_observers`, as in
        // `refuse_observed`.
        if !word.is_observed()
            || self.fast.load(Ordering::Acquire) != FAST_COUNTERS
            || crate::observe::trace::interested()
        {
            return None;
        }
        let cells = self.counters.get()?.inline_cells()?;
        // Both paths give the error's word alone, and the error is built once below: joined
        // on a 32-byte error instead, the two paths met through the stack.
        let ready = if word.serves_next_newcomer() && !word.is_closed() {
            // The common case (a caller the next release would serve), tested first so that
            // its cell is a constant: `Full`.
            let count = bump_own_count(&cells.rejected[RejectReason::Full.index()]);
            // Ordering: Relaxed — a statistic (see `observe::retry`): a stale tail carries
            // an estimate one look older; nothing is published through it.
            let tail = self.retry_tail.load(Ordering::Relaxed);
            // The tick: the thread's first refusal, then one in `TICK_EVERY`. A tail of 0
            // (no estimate yet) is carried as none: the first look is the releases' to take
            // (`note_release`), so a bulkhead whose calls never finish does not read the
            // clock on every refusal (issue 33).
            (count % TICK_EVERY != 1).then_some(tail)
        } else {
            bump_own_count(&cells.rejected[RejectReason::refused_index(word.is_closed())]);
            None
        };
        let bits = match ready {
            Some(tail) => BulkheadFull::retry_bits(word.limit(), tail),
            None => self.refuse_counted_slow(word),
        };
        Some(BulkheadFull::from_bits(self.name, bits))
    }

    /// [`refuse_counted`](Self::refuse_counted)'s refusal, already counted, in the cases
    /// its inline path leaves: closed, a queue or a shrink's debt ahead, or a tick due (the
    /// thread's first refusal and one in [`TICK_EVERY`] after it: the tracker reads the
    /// clock, and looks at the release count when a look is due).
    #[cold]
    #[inline(never)]
    fn refuse_counted_slow(&self, word: Word) -> core::num::NonZeroU64 {
        let full = BulkheadFull::refused(self.name, word.limit(), word.is_closed());
        match self.retry.get() {
            _ if word.is_closed() => full.bits(),
            Some(stats) if word.serves_next_newcomer() => {
                // The tick: the clock, and a look when one is due; the bits it left.
                stats.interval(&self.retry_tail, || self.counted_finished());
                // Ordering: Relaxed — as in `refuse_counted`.
                BulkheadFull::retry_bits(word.limit(), self.retry_tail.load(Ordering::Relaxed))
            }
            _ => self.with_retry_after(full, word, RejectReason::Full).bits(),
        }
    }

    /// The calls the counters saw finish (0 without counters): the retry estimate's count.
    fn counted_finished(&self) -> u64 {
        self.counters.get().map_or(0, |c| c.finished())
    }

    /// The refusal of a caller that found no free permit and may not wait: `Closed` if the
    /// word says so, `Full` otherwise. Decoded from the word the caller already read.
    #[inline(always)]
    pub(crate) fn refuse(&self, word: Word) -> BulkheadFull {
        if word.is_observed() || crate::observe::trace::interested() {
            return self.refuse_observed(word);
        }
        BulkheadFull::refused(self.name, word.limit(), word.is_closed())
    }

    /// [`refuse`](Self::refuse) while anyone observes: counts and tells it, and attaches
    /// the retry estimate. Out of line, so that the unobserved refusal keeps its code (with
    /// the counters' case inlined into `refuse`, the unobserved refusal and acquire + release
    /// each rose by one instruction, callgrind, issue 32).
    #[inline]
    fn refuse_observed(&self, word: Word) -> BulkheadFull {
        // Ordering: Acquire — pairs with the Release store in `note_observers`.
        match self.fast.load(Ordering::Acquire) {
            _ if crate::observe::trace::interested() => self.observe_refused(word),
            FAST_COUNTERS => match self.counters.get().and_then(|c| c.inline_cells()) {
                Some(cells) => {
                    bump_own(&cells.rejected[RejectReason::refused_index(word.is_closed())])
                }
                None => self.observe_refused(word),
            },
            // A controller alone learns nothing from a refusal.
            FAST_NONE => self.observe_refused(word),
            _ => {}
        }
        let full = BulkheadFull::refused(self.name, word.limit(), word.is_closed());
        if word.is_closed() {
            return full;
        }
        if word.serves_next_newcomer() && !retry_tick_due() {
            // A caller the next release would serve: its estimate is the bulkhead's encoded
            // one, read without the clock on all but one refusal in `TICK_EVERY` of this
            // thread (its first included), as the counted refusal does (a listener's refusal
            // read the clock every time: callgrind, `bulkhead_reject_listener_estimate`,
            // issue 33). A tail of 0 is no estimate yet, as there.
            // Ordering: Relaxed — as in `refuse_counted`.
            let tail = self.retry_tail.load(Ordering::Relaxed);
            return BulkheadFull::from_bits(
                self.name,
                BulkheadFull::retry_bits(word.limit(), tail),
            );
        }
        self.with_retry_after(full, word, RejectReason::Full)
    }

    /// `full` with the estimate of when a slot frees for its caller, if the bulkhead is
    /// observed and has seen calls finish (`observe::retry`). Out of line and cold: only
    /// an observed refusal calls it.
    #[cold]
    #[inline(never)]
    fn with_retry_after(
        &self,
        full: BulkheadFull,
        word: Word,
        reason: RejectReason,
    ) -> BulkheadFull {
        let Some(stats) = self.retry.get() else { return full };
        let counted = || self.counted_finished();
        match reason {
            RejectReason::Full
            | RejectReason::WaitTimedOut
            | RejectReason::TooManyWaiting
            | RejectReason::Evicted => match stats.interval(&self.retry_tail, counted) {
                Some(interval) => {
                    let needed = releases_needed(self.sem.waiting(), word.available());
                    let estimate = Duration::from_nanos(interval.saturating_mul(needed));
                    full.with_retry_after(Some(estimate))
                }
                None => full,
            },
            _ => full,
        }
    }

    /// As [`refuse`](Self::refuse), for a caller that already found nobody observing (and
    /// may hold a lock of its own): builds the error and notifies no one, so no listener
    /// or `tracing` subscriber can run under the caller's lock, however the observers
    /// changed since it looked.
    #[inline]
    pub(crate) fn refuse_unobserved(&self, word: Word) -> BulkheadFull {
        BulkheadFull::refused(self.name, word.limit(), word.is_closed())
    }

    /// Returns the `permits` held by a guard (0 for an empty one); counts it and emits
    /// `CallFinished`, if anyone observes.
    ///
    /// A permit granted while anyone observed, sampled by a limit controller, or marked with
    /// an outcome goes to [`release_marked`](Self::release_marked): the release of a permit
    /// granted unobserved (mark zero) tests nothing but the word's waiter flag.
    #[inline]
    pub(crate) fn release_permits(&self, permits: u32, mark: Mark) {
        if mark.is_set() {
            return self.release_marked(permits, mark);
        }
        self.sem.release_many(permits);
    }

    /// The release of a marked permit: out of line, so that the unmarked release inlines
    /// to its `fetch_add` and one test; not cold, since counting is its common case.
    #[inline(never)]
    fn release_marked(&self, permits: u32, mark: Mark) {
        if mark.is_counted() {
            self.sem.release_many(permits);
            // Granted while the counters alone observed. If they still are alone, counted
            // inline; a listener that came since hears this call's end like any observed
            // call's (`on_event`: a call is observed whole once anyone observed its grant).
            // Ordering: Acquire — pairs with the Release store in `note_observers`.
            if self.fast.load(Ordering::Acquire) == FAST_COUNTERS {
                if let Some(cells) = self.counters.get().and_then(|c| c.inline_cells()) {
                    bump_own(&cells.finished);
                    return self.note_release();
                }
            }
            return self.observe_finished();
        }
        if mark.is_sampled() {
            return self.release_sampled(permits, mark);
        }
        // A mark set only by an outcome (an unobserved bulkhead's `fail()`) tells no one.
        if self.sem.release_many(permits).is_observed() && mark.is_observed() {
            // Granted while others observed too (a counted-alone grant is `is_counted`).
            self.observe_finished();
        }
    }

    /// Releases a marked permit: the controller learns from a sampled one *before* the slot
    /// is released, so that when the sample shrinks the limit this permit pays the new debt
    /// instead of being handed to a queued caller under the old limit. (Released first,
    /// every completion of a slow phase re-admitted a waiter before the limit dropped:
    /// adapting took a whole extra latency; see benches/results/adaptive.md.)
    ///
    /// Inlined into [`release_marked`](Self::release_marked): a controller alone (the common
    /// case) then costs one call to it and the release (issue 21).
    #[inline(always)]
    fn release_sampled(&self, permits: u32, mark: Mark) {
        if let Some(hook) = self.hook.get() {
            // The fold may move the limit and serve waiters (their wakes contain their own
            // panics); should anything in it unwind regardless, the permits still go back
            // (issue 29: nothing lost on the adaptive release).
            let guard = ReleaseOnUnwind { sem: &self.sem, permits };
            hook.finished(self, mark);
            core::mem::forget(guard);
        }
        self.sem.release_many(permits);
        // Ordering: Acquire — pairs with the Release store in `note_observers`. A
        // controller alone has no counters or listeners to tell.
        if self.fast.load(Ordering::Acquire) == FAST_NONE {
            self.observe_finished();
        }
    }

    /// Attaches `hook`, once: later permits are sampled by it. `false` if one is attached.
    pub(crate) fn attach_hook(&self, hook: Box<dyn LimitHook>) -> bool {
        if self.hook.set(hook).is_err() {
            return false;
        }
        // Published by the `OnceLock` (Release/Acquire); the flag sends later grants to it.
        self.note_observers();
        self.sem.set_observed();
        true
    }

    /// The attached limit controller, if any.
    pub(crate) fn hook(&self) -> Option<&dyn LimitHook> {
        self.hook.get().map(|hook| &**hook)
    }

    /// Sets the engine's limit (a controller's decision), never waiting, and serves queued
    /// callers the new permits admit. Call it holding no lock: serving wakes waiters.
    pub(crate) fn set_engine_limit(&self, limit: usize) {
        if self.sem.set_limit(limit) {
            self.sem.serve_waiters();
        }
    }

    /// The refusal of a caller making `request` that the word it saw refused and that may
    /// not wait, in this order:
    ///
    /// * `Closed` if the word is closed;
    /// * `ExceedsLimit` if the request could never be granted: its permits above the limit,
    ///   or, for a sheddable one, its permits plus the configured `sheddable_headroom` (as
    ///   the engine refuses such a waiter before it queues);
    /// * `Reserved` for a sheddable request that found its permits free and nobody queued:
    ///   the engine's sheddable acquire (`Semaphore::try_acquire_sheddable`) refuses such a
    ///   word only for the headroom it must leave;
    /// * `Full` otherwise (too few free, or callers queued: a newcomer never overtakes).
    ///
    /// `word` is the word the acquire was refused on. The headroom is the engine's mirror of
    /// it (no lock), so a refusal racing a `change_config` may judge "could never fit" by the
    /// old or the new headroom, as the acquire itself may have.
    #[cold]
    #[inline(never)]
    pub(crate) fn refuse_many(&self, word: Word, request: Request) -> BulkheadFull {
        let permits = request.num_permits();
        let sheddable = request.class() == Criticality::Sheddable;
        let reason = if word.is_closed() {
            RejectReason::Closed
        } else if self.sem.request_cannot_fit(word, permits, request.class()) {
            RejectReason::ExceedsLimit
        } else if sheddable && word.available() >= i64::from(permits) && !word.holds_back(permits) {
            // Open with `permits` free: `holds_back` is then exactly "callers are queued".
            RejectReason::Reserved
        } else {
            RejectReason::Full
        };
        self.reject(word, reason, Duration::ZERO)
    }

    /// An empty permit's "acquire": takes nothing, so it is granted at once, even past queued
    /// waiters, unless the bulkhead is closed.
    #[inline]
    fn try_acquire_none(&self) -> Result<Word, Word> {
        let word = self.sem.load();
        if word.is_closed() {
            Err(word)
        } else {
            Ok(word)
        }
    }

    /// Takes what `request` asks for, all or nothing, without waiting: the fast path of
    /// every weighted acquire. The default class takes the plain path; the others are out
    /// of line.
    #[inline]
    pub(crate) fn try_acquire_request(&self, request: Request) -> Result<Word, Word> {
        if request.is_default_class() {
            self.try_acquire_many_raw(request.num_permits())
        } else {
            self.try_acquire_classed(request.num_permits(), request.class())
        }
    }

    /// A critical or sheddable [`try_acquire_request`](Self::try_acquire_request): a
    /// sheddable caller leaves the headroom free; a critical one may take permits held back
    /// for queued callers of a lower class (see [`Criticality`]).
    #[cold]
    #[inline(never)]
    fn try_acquire_classed(&self, permits: u32, class: Criticality) -> Result<Word, Word> {
        match permits {
            0 => self.try_acquire_none(),
            n if n as usize > MAX_PERMITS => Err(self.sem.load()),
            n if class == Criticality::Sheddable => self.sem.try_acquire_sheddable(n),
            n => self.sem.try_acquire_many_as(n, class),
        }
    }

    /// Takes `permits` at once, all or nothing, without waiting: the fast path of every
    /// weighted acquire.
    #[inline]
    pub(crate) fn try_acquire_many_raw(&self, permits: u32) -> Result<Word, Word> {
        match permits {
            0 => self.try_acquire_none(),
            // Above the limit: never free; refused with `ExceedsLimit` by `refuse_many`.
            n if n as usize > MAX_PERMITS => Err(self.sem.load()),
            n => self.sem.try_acquire_many(n),
        }
    }

    // The observed paths: out of line and `#[cold]`, so the unobserved fast paths keep
    // their code and register allocation. Measured again for issue 21 (callgrind,
    // benches/callgrind.rs, `--features metrics`): with all three observers `cold`, the
    // unobserved kept refusal costs 20 instructions, acquire + release 34 and `call` 27, and
    // metrics on cost a refusal 48 and acquire + release 99; without `cold` on the permit
    // and release observers, metrics on cost 40 and 86, but the kept refusal rose to 21 (as
    // much as tokio's), acquire + release to 37 and `call` to 30, because the callers then
    // keep their values in callee-saved registers around the call. The unobserved counts
    // come first. Most of a counted event is the call itself: a cold call site saves and
    // restores the caller's live registers (about 14 instructions in the bench loop), then
    // the hot case (counters on, this thread's cells inline, nobody else to tell) is a
    // thread-local read, a bounds check, an increment and the listener check (18).
    // Everything else (taking a slot, a bucket, listeners, tracing) is in cold functions.

    /// Inlined into its out-of-line callers (`observed_permitted`, `observe_permitted_after`).
    #[inline]
    fn observe_permitted(&self) {
        if let Some(counters) = self.counters.get() {
            match counters.inline_cells() {
                Some(cells) => bump_own(&cells.permitted),
                None => return self.observe_slow(Observed::Permitted),
            }
        }
        if !self.listeners.is_empty() {
            self.emit(BulkheadEventKind::CallPermitted);
        }
    }

    /// The mark of a permit just granted while observed: the controller's, if one is
    /// attached, else `OBSERVED` (its release is observed too).
    #[inline]
    fn start_mark(&self) -> Mark {
        match self.hook.get() {
            Some(hook) => self.hook_started(&**hook),
            None => Mark::OBSERVED,
        }
    }

    /// The controller's mark. A permit it did not sample, on a bulkhead nobody else
    /// observes (no counters, no listener), gets no mark at all: nobody would hear of its
    /// end, so its release is the unobserved one (at 1 in 16 sampled, 15 calls in 16 pay no
    /// observer on release).
    /// A controller alone observes and this call is its sample (decided by `permitted`).
    #[inline(never)]
    fn hook_sampled(&self) -> Mark {
        match self.hook.get() {
            // In flight now, this grant included (callers pass the word before or after it).
            Some(hook) => hook.started_sampled(self.sem.load().in_flight()),
            None => Mark::OBSERVED,
        }
    }

    #[cold]
    #[inline(never)]
    fn hook_started(&self, hook: &dyn LimitHook) -> Mark {
        let mark = hook.started(self);
        if mark.is_sampled() || self.counters.get().is_some() || !self.listeners.is_empty() {
            mark
        } else {
            Mark::NONE
        }
    }

    /// The refusal of a fast path: `Closed` if the word says so, `Full` otherwise. Takes the
    /// word, not the reason, so that the caller does not decode it on its hot path.
    #[cold]
    #[inline(never)]
    fn observe_refused(&self, word: Word) {
        let reason = if word.is_closed() { RejectReason::Closed } else { RejectReason::Full };
        self.observe_rejected(reason);
    }

    /// A refusal that waited zero (the fast paths, `TooManyWaiting`).
    #[inline]
    fn observe_rejected(&self, reason: RejectReason) {
        if let Some(counters) = self.counters.get() {
            match counters.inline_cells() {
                Some(cells) => bump_own(&cells.rejected[reason.index()]),
                None => return self.observe_slow(Observed::Rejected(reason)),
            }
        }
        if !self.listeners.is_empty() || crate::observe::trace::interested() {
            self.tell(BulkheadEventKind::CallRejected(reason));
        }
    }

    #[cold]
    #[inline(never)]
    fn observe_finished(&self) {
        if let Some(counters) = self.counters.get() {
            match counters.inline_cells() {
                Some(cells) => bump_own(&cells.finished),
                None => {
                    self.observe_slow(Observed::Finished);
                    return self.note_release();
                }
            }
        } else if let Some(retry) = self.retry.get() {
            // Observed by listeners alone: the retry estimate counts the release itself.
            retry.untallied_release();
        }
        self.note_release();
        if !self.listeners.is_empty() {
            self.emit(BulkheadEventKind::CallFinished);
        }
    }

    /// After an observed release was counted: while the bulkhead has no retry estimate yet
    /// (`retry_tail` 0), asks the tracker, which takes the first look once one is due. The
    /// refusals leave that first look to the releases and ask only on their tick, so a
    /// bulkhead whose calls never finish does not read the clock on every refusal (issue 33:
    /// the criterion bench's instrumented refusal, 12.8 ns, was that). Once an estimate
    /// exists it stays, and this is one load.
    #[inline(always)]
    fn note_release(&self) {
        // Ordering: Relaxed — as in `refuse_counted`: a statistic.
        if self.retry_tail.load(Ordering::Relaxed) == 0 {
            self.first_look();
        }
    }

    /// [`note_release`](Self::note_release)'s look: the clock, and the release count if a
    /// look is due.
    #[cold]
    #[inline(never)]
    fn first_look(&self) {
        if let Some(stats) = self.retry.get() {
            stats.interval(&self.retry_tail, || self.counted_finished());
        }
    }

    /// Counting that the hot case does not cover (this thread has no slot yet, a bucket
    /// slot, thread-local teardown), then the listeners and tracing.
    #[cold]
    #[inline(never)]
    fn observe_slow(&self, what: Observed) {
        let kind = match what {
            Observed::Permitted => {
                self.count(|cells| &cells.permitted);
                BulkheadEventKind::CallPermitted
            }
            Observed::Rejected(reason) => {
                self.count(|cells| &cells.rejected[reason.index()]);
                BulkheadEventKind::CallRejected(reason)
            }
            Observed::Finished => {
                self.count(|cells| &cells.finished);
                BulkheadEventKind::CallFinished
            }
        };
        self.tell(kind);
    }

    /// Tells the listeners and, for a refusal, tracing.
    #[cold]
    #[inline(never)]
    fn tell(&self, kind: BulkheadEventKind) {
        if !self.listeners.is_empty() {
            self.emit(kind);
        }
        #[cfg(feature = "tracing")]
        if let BulkheadEventKind::CallRejected(reason) = kind {
            crate::observe::trace::rejected(self.name.as_str(), reason, Duration::ZERO);
        }
    }

    /// A refusal after a wait (`WaitTimedOut`): counted, timed, told.
    #[cold]
    #[inline(never)]
    fn observe_rejected_after(&self, reason: RejectReason, waited: Duration) {
        self.count(|cells| &cells.rejected[reason.index()]);
        self.observe_wait(Outcome::Rejected, waited);
        if !self.listeners.is_empty() {
            self.emit(BulkheadEventKind::CallRejected(reason));
        }
        #[cfg(feature = "tracing")]
        crate::observe::trace::rejected(self.name.as_str(), reason, waited);
    }

    /// Counts in this thread's cell, wherever it is, if counting is on.
    #[cold]
    #[inline(never)]
    fn count(&self, pick: impl Fn(&Cells) -> &AtomicU64) {
        if let Some(counters) = self.counters.get() {
            counters.bump(pick);
        }
    }

    /// A wait on the slow path, granted or refused.
    #[cold]
    fn observe_wait(&self, outcome: Outcome, waited: Duration) {
        if let Some(counters) = self.counters.get() {
            counters.waited(outcome, waited);
        }
        #[cfg(feature = "tracing")]
        if outcome == Outcome::Permitted {
            crate::observe::trace::waited(self.name.as_str(), waited);
        }
    }

    #[cold]
    #[inline(never)]
    fn emit(&self, kind: BulkheadEventKind) {
        self.listeners.emit(&BulkheadEvent::new(self.name, kind));
    }

    pub(crate) fn sem(&self) -> &Semaphore {
        &self.sem
    }

    // The face the keyed bulkhead goes through (src/keyed/): each an inlined call on, or a
    // read of, the same word as the engine's, so no hot path pays for the indirection.

    /// A slot taken without waiting, for a caller that builds its own guard and refusal (the
    /// keyed map, which takes it under a shard's lock): `Ok` with the word of the grant, to
    /// report with [`permitted`](Self::permitted); `Err` with the word that refused, for
    /// [`refuse`](Self::refuse) or [`refuse_unobserved`](Self::refuse_unobserved). A default
    /// caller takes a permit held back for a sheddable waiter (issue 29).
    #[inline]
    pub(crate) fn try_take(&self) -> Result<Word, Word> {
        self.sem.try_acquire().or_else(|word| self.sem.try_acquire_held_back(word))
    }

    /// Whether a refusal read from `word` reaches user code (listeners, counters, a `tracing`
    /// subscriber): the condition under which [`reject`](Self::reject) does more than build
    /// the error.
    #[inline]
    pub(crate) fn refusal_is_observed(word: Word) -> bool {
        word.is_observed() || crate::observe::trace::interested()
    }

    /// Refuses a request for `n` that could never be granted (above the limit), from one
    /// load of the word and before taking or queuing anything (`ExceedsLimit`, or as
    /// [`refuse_many`](Self::refuse_many) words it); `Ok` otherwise.
    #[inline]
    pub(crate) fn refuse_above_limit(&self, n: u32) -> Result<(), BulkheadFull> {
        let word = self.sem.load();
        if word.exceeds_limit(n) {
            return Err(self.refuse_many(word, Request::permits(n)));
        }
        Ok(())
    }

    /// The mark of a call that starts now without taking a slot (a permit split off another
    /// that holds them): [`permitted`](Self::permitted) on the current word.
    #[inline]
    pub(crate) fn permitted_now(&self) -> Mark {
        self.permitted(self.sem.load())
    }

    /// How many calls are in flight, from one load of the word (a snapshot: it orders
    /// nothing).
    #[inline]
    pub(crate) fn in_flight(&self) -> usize {
        self.sem.load().in_flight()
    }

    /// Nothing in flight and nobody queued (or closed with nothing in flight), read with
    /// Acquire so that every release so far happens-before what the caller does next (the
    /// keyed map evicts an idle key on this answer: `Semaphore::is_idle_acquire`).
    #[inline]
    pub(crate) fn is_idle_acquire(&self) -> bool {
        self.sem.is_idle_acquire()
    }

    /// For checkers and tests: whether the bulkhead is work-conserving right now (design
    /// invariant 7). Call it only when nothing is in motion on this bulkhead (no acquire,
    /// release or poll running, no deadline due): then no waiter waits while the permits it
    /// could be granted are free, no queued request is one that can never be granted, and
    /// newcomers are held back only while someone waits. `Err` names the violation.
    ///
    /// Not part of the stable API: the model-checking scenarios, the reference model, the
    /// fuzzers and the soak call it after every step they know to be quiescent.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let held = bulkhead.try_acquire()?;
    /// assert_eq!(bulkhead.check_work_conservation(), Ok(()));
    /// # drop(held);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[doc(hidden)]
    pub fn check_work_conservation(&self) -> Result<(), String> {
        self.sem.check_work_conservation()
    }

    /// For checkers and tests: the wait queue's slots in use. At quiescence that is the
    /// waits still queued (callers and drain waits); a wait that left without freeing its
    /// slot shows here. Not part of the stable API.
    ///
    /// ```
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
    /// let held = bulkhead.try_acquire()?;
    /// assert!(!bulkhead.wait_drained(std::time::Duration::ZERO));
    /// assert_eq!(bulkhead.queue_slots_in_use(), 0);
    /// # drop(held);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    #[doc(hidden)]
    pub fn queue_slots_in_use(&self) -> usize {
        self.sem.slots_in_use()
    }

    /// Moves the execution's model clock to `to` nanoseconds and wakes timed waiters.
    #[cfg(any(bulkhead_loom, bulkhead_shuttle))]
    #[doc(hidden)]
    #[deprecated(note = "the model clock is shared by every bulkhead of an execution: use \
                         `bulkhead::model::advance_to(Duration::from_nanos(to))`")]
    pub fn model_advance_clock(&self, to: u64) {
        self.sem.clock.advance(to);
    }
}

impl fmt::Debug for Bulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let metrics = self.metrics();
        f.debug_struct("Bulkhead")
            .field("name", &self.name)
            .field("max_concurrent_calls", &metrics.max_allowed)
            .field("available", &metrics.available)
            .finish()
    }
}
