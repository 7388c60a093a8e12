//! The synchronisation shim: the only module that names `std::sync`, loom or shuttle.
//!
//! Every atomic, lock, thread park and clock read in the engine goes through here, so the
//! model checkers can replace them without touching the engine. Three exclusive branches:
//!
//! | cfg                | atomics, mutex, park           | clock                              | `OnceLock`, thread slots          |
//! |--------------------|--------------------------------|------------------------------------|-----------------------------------|
//! | (none)             | `core`, `parking_lot`, `std`   | `std::time::Instant`               | `std`; a pool of reusable slots    |
//! | `bulkhead_loom`    | `loom`                         | [`Clock`]: a model clock           | a model `OnceLock`; a slot per model thread |
//! | `bulkhead_shuttle` | `shuttle`                      | [`Clock`]: a model clock           | a model `OnceLock`; a slot per model thread |
//!
//! The adaptive limits' sample clock ([`SampleClock`]) is, outside a model, `quanta`'s raw
//! counter (the TSC where it is invariant) with the feature `tsc`, or `std::time::Instant`
//! without it; inside one, the model clock.
//!
//! Inside a model checker wall-clock time does not exist, so a deadline is an input the model
//! controls: the model clock only moves when a test calls `crate::engine::model::advance` (or
//! `advance_to`), and that call wakes every thread parked on a deadline and every task queued
//! for a permit, exactly as the passage of time would. There is one model clock per model
//! execution, shared by every bulkhead in it (a per-execution lazy static of the checker);
//! [`Clock`] is a zero-sized handle on it.

#[cfg(all(bulkhead_loom, bulkhead_shuttle))]
compile_error!("`bulkhead_loom` and `bulkhead_shuttle` are mutually exclusive");

// The checker crate itself, re-exported by `crate::engine::model` so users pair with our version.
#[cfg(bulkhead_loom)]
pub use ::loom;
#[cfg(bulkhead_shuttle)]
pub use ::shuttle;

// `Ordering` is the same type in every branch (loom and shuttle re-export core's).
pub(crate) use core::sync::atomic::Ordering;

/// Declares a per-thread countdown cell (`Cell<i64>`, starting at 0) named `$name`, of type
/// [`CountdownKey`]: the controllers' 1-in-k sample and the refusal's clock tick
/// (`bulkhead::hook`). Under a model checker it is the checker's thread-local, so that each
/// execution starts every thread's countdown afresh: a `std` thread-local outlives loom's
/// execution, and its replay diverged ("Is the model fully deterministic?", stop 39's failed
/// CI run). `ci/shim-check.sh` keeps every `thread_local!` of the crate in this file.
#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
macro_rules! per_thread_countdown {
    ($name:ident) => {
        std::thread_local! {
            static $name: core::cell::Cell<i64> = const { core::cell::Cell::new(0) };
        }
    };
}
#[cfg(bulkhead_loom)]
macro_rules! per_thread_countdown {
    ($name:ident) => {
        ::loom::thread_local! {
            static $name: core::cell::Cell<i64> = core::cell::Cell::new(0);
        }
    };
}
#[cfg(bulkhead_shuttle)]
macro_rules! per_thread_countdown {
    ($name:ident) => {
        ::shuttle::thread_local! {
            static $name: core::cell::Cell<i64> = core::cell::Cell::new(0);
        }
    };
}
pub(crate) use per_thread_countdown;

/// The key type [`per_thread_countdown!`] declares.
#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub(crate) type CountdownKey = std::thread::LocalKey<core::cell::Cell<i64>>;
/// The key type [`per_thread_countdown!`] declares.
#[cfg(bulkhead_loom)]
pub(crate) type CountdownKey = ::loom::thread::LocalKey<core::cell::Cell<i64>>;
/// The key type [`per_thread_countdown!`] declares.
#[cfg(bulkhead_shuttle)]
pub(crate) type CountdownKey = ::shuttle::thread::LocalKey<core::cell::Cell<i64>>;

/// A thread slot that is nobody's: the thread has none (yet), or gave it back while its
/// thread-locals were being destroyed. Callers must then not treat the slot's cells as
/// their own.
pub(crate) const NO_SLOT: usize = usize::MAX;

#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
mod imp {
    pub(crate) use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize};
    pub(crate) use std::sync::OnceLock;
    pub(crate) use std::thread::{current as current_thread, Thread};

    /// The guard of [`Mutex`].
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    /// A mutex without poisoning (parking_lot's), so `lock` needs no `unwrap`.
    #[derive(Debug, Default)]
    pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) const fn new(value: T) -> Self {
            Mutex(parking_lot::const_mutex(value))
        }

        #[inline]
        pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, T> {
            self.0.lock()
        }
    }

    /// The adaptive limits' clock (`crate::adaptive`), with the feature `tsc`: raw ticks of
    /// the fastest counter `quanta` finds (the TSC where it is invariant, else the OS's
    /// monotonic clock in nanoseconds), converted to nanoseconds only for a difference. A raw
    /// read is one `rdtsc` and a match; `Instant::now()` is a vDSO call (33 instructions) and
    /// a difference of two (`Instant::elapsed`) another 60. See benches/results/NOTES.md.
    #[cfg(feature = "tsc")]
    #[derive(Debug, Clone)]
    pub(crate) struct SampleClock(quanta::Clock);

    #[cfg(feature = "tsc")]
    impl SampleClock {
        /// The first one in the process calibrates the counter against the OS clock
        /// (quanta: under a millisecond typically, at most 200 ms, once per process).
        pub(crate) fn new() -> Self {
            SampleClock(quanta::Clock::new())
        }

        /// Now, in ticks (not nanoseconds; only differences mean anything).
        #[inline]
        pub(crate) fn raw(&self) -> u64 {
            self.0.raw()
        }

        /// `ticks` as nanoseconds.
        #[inline]
        pub(crate) fn nanos(&self, ticks: u64) -> u64 {
            self.0.delta_as_nanos(0, ticks)
        }

        /// `nanos` as ticks (rounded down; at least 1 for a positive `nanos`).
        pub(crate) fn ticks(&self, nanos: u64) -> u64 {
            // 2^32 ticks measured in nanoseconds gives the ratio with 32 bits to spare.
            let per = u128::from(self.nanos(1 << 32)).max(1);
            let ticks = (u128::from(nanos) << 32) / per;
            u64::try_from(ticks).unwrap_or(u64::MAX).max(u64::from(nanos > 0))
        }
    }

    /// The adaptive limits' clock without the feature `tsc`: nanoseconds since the clock was
    /// made, from `std::time::Instant` (no dependency; a read costs `Instant::elapsed`,
    /// about 90 instructions, where the TSC costs about 9).
    #[cfg(not(feature = "tsc"))]
    #[derive(Debug, Clone)]
    pub(crate) struct SampleClock(Instant);

    #[cfg(not(feature = "tsc"))]
    impl SampleClock {
        pub(crate) fn new() -> Self {
            SampleClock(Instant::now())
        }

        /// Now, in nanoseconds since the clock was made (saturating after 584 years).
        #[inline]
        pub(crate) fn raw(&self) -> u64 {
            u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
        }

        /// Ticks are nanoseconds.
        #[inline]
        pub(crate) fn nanos(&self, ticks: u64) -> u64 {
            ticks
        }

        /// Ticks are nanoseconds.
        pub(crate) fn ticks(&self, nanos: u64) -> u64 {
            nanos
        }
    }

    /// The real clock. A zero-sized type: nothing to store, nothing to share.
    #[derive(Debug, Default, Clone, Copy)]
    pub(crate) struct Clock;

    /// A point in time as the engine sees it.
    pub(crate) type Instant = std::time::Instant;

    impl Clock {
        pub(crate) const fn new() -> Self {
            Clock
        }

        #[inline]
        pub(crate) fn now(&self) -> Instant {
            Instant::now()
        }

        /// `start + wait`, or `None` when the sum does not fit in an `Instant` (an unbounded
        /// wait): absurd durations never overflow.
        #[inline]
        pub(crate) fn deadline(
            &self,
            start: Instant,
            wait: core::time::Duration,
        ) -> Option<Instant> {
            start.checked_add(wait)
        }

        /// Parks the current thread until it is unparked, `deadline` passes, or a spurious
        /// wake-up happens. Callers re-check their condition in a loop.
        #[inline]
        pub(crate) fn park_until(&self, deadline: Option<Instant>) {
            match deadline {
                None => std::thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if deadline > now {
                        std::thread::park_timeout(deadline - now);
                    }
                }
            }
        }

        /// Time elapsed since `start`.
        #[inline]
        pub(crate) fn since(&self, start: Instant) -> core::time::Duration {
            start.elapsed()
        }

        /// Nothing to do: real time passes by itself, and a task without a timer checks its
        /// deadline whenever it is polled. (The model clock's twin wakes such tasks.)
        #[inline]
        pub(crate) fn wake_at_deadline(&self, _waker: &std::task::Waker) {}

        /// The time from `start` to `end` (zero if `end` is earlier).
        #[inline]
        pub(crate) fn between(&self, start: Instant, end: Instant) -> core::time::Duration {
            end.saturating_duration_since(start)
        }
    }

    /// A small number unique to the calling thread among live threads: the index of its
    /// single-writer counter cells (`src/observe/mod.rs`). Slots are handed out lowest first
    /// and given back when the thread exits, so they stay dense however many short-lived
    /// threads come and go (the scheme of the `thread_local` crate's thread ids).
    ///
    /// The fast path is one read of a const-initialized thread-local (no lazy-init check,
    /// no destructor). A thread that asks while its thread-locals are being destroyed gets
    /// [`NO_SLOT`](super::NO_SLOT).
    #[inline]
    pub(crate) fn thread_slot() -> usize {
        let slot = cached_thread_slot();
        if slot != super::NO_SLOT {
            return slot;
        }
        take_slot()
    }

    /// This thread's slot if it has taken one, else `NO_SLOT` (without taking one): the
    /// hot path's single thread-local read.
    #[inline]
    pub(crate) fn cached_thread_slot() -> usize {
        SLOT.with(Cell::get)
    }

    use std::cell::Cell;

    thread_local! {
        /// This thread's slot, `NO_SLOT` until taken and again once given back.
        static SLOT: Cell<usize> = const { Cell::new(super::NO_SLOT) };
        /// Owns the slot; its destructor gives the slot back when the thread exits.
        static OWNER: SlotOwner = SlotOwner::take();
    }

    /// Slots given back by exited threads, and the next never-used one.
    struct SlotPool {
        next: usize,
        free: Vec<usize>,
    }

    static POOL: parking_lot::Mutex<SlotPool> =
        parking_lot::const_mutex(SlotPool { next: 0, free: Vec::new() });

    #[cold]
    #[inline(never)]
    fn take_slot() -> usize {
        // Fails only while this thread's thread-locals are being destroyed.
        OWNER.try_with(|owner| owner.0).unwrap_or(super::NO_SLOT)
    }

    struct SlotOwner(usize);

    impl SlotOwner {
        fn take() -> SlotOwner {
            let mut pool = POOL.lock();
            // The lowest free slot keeps the slots dense.
            let slot = match pool.free.iter().enumerate().min_by_key(|&(_, &slot)| slot) {
                Some((i, _)) => pool.free.swap_remove(i),
                None => {
                    let slot = pool.next;
                    pool.next += 1;
                    slot
                }
            };
            drop(pool);
            SLOT.with(|cell| cell.set(slot));
            SlotOwner(slot)
        }
    }

    impl Drop for SlotOwner {
        fn drop(&mut self) {
            // From now on this thread counts through the shared cells: a later destructor
            // that drops a permit must not write cells the slot's next owner writes.
            SLOT.with(|cell| cell.set(super::NO_SLOT));
            // Ordering: the pool's mutex — our last write to the slot's cells is
            // sequenced before this unlock, and the next owner locks before its first
            // write, so its load + store starts from our final values: no update is lost.
            POOL.lock().free.push(self.0);
        }
    }
}

#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
mod imp {
    #[cfg(bulkhead_loom)]
    pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize};
    #[cfg(bulkhead_loom)]
    pub(crate) use parker::{current_thread, park, Thread};
    #[cfg(bulkhead_shuttle)]
    pub(crate) use shuttle::{
        sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize},
        thread::{current as current_thread, park, Thread},
    };

    /// Thread parking for loom, built on a per-thread `loom::sync::Notify`.
    ///
    /// loom 0.7's `Thread::unpark` resumes its target whatever it is blocked on, a mutex
    /// included (loom issue #249), and the model then aborts with "expected to be able to
    /// acquire lock": a drain that unparks a waiter blocked on the clock's or the queue's
    /// lock is a false failure. A `Notify` wakes its thread only if it waits on that
    /// notify, with the same token semantics as `park`/`unpark`.
    #[cfg(bulkhead_loom)]
    mod parker {
        use loom::sync::{Arc, Notify};

        loom::thread_local! {
            static PARKER: Arc<Notify> = Arc::new(Notify::new());
        }

        /// A handle that unparks one thread.
        #[derive(Clone, Debug)]
        pub(crate) struct Thread(Arc<Notify>);

        impl Thread {
            pub(crate) fn unpark(&self) {
                self.0.notify();
            }
        }

        pub(crate) fn current_thread() -> Thread {
            Thread(PARKER.with(Arc::clone))
        }

        /// Blocks until this thread's token is available (or spuriously), then consumes it.
        pub(crate) fn park() {
            let parker = PARKER.with(Arc::clone);
            parker.wait();
        }
    }

    #[cfg(bulkhead_loom)]
    type InnerMutex<T> = loom::sync::Mutex<T>;
    #[cfg(bulkhead_shuttle)]
    type InnerMutex<T> = shuttle::sync::Mutex<T>;
    #[cfg(bulkhead_loom)]
    type InnerGuard<'a, T> = loom::sync::MutexGuard<'a, T>;
    #[cfg(bulkhead_shuttle)]
    type InnerGuard<'a, T> = shuttle::sync::MutexGuard<'a, T>;
    /// The guard of [`Mutex`].
    pub(crate) type MutexGuard<'a, T> = InnerGuard<'a, T>;

    /// The model checker's mutex with poisoning adapted away, as on the std side.
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(InnerMutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(InnerMutex::new(value))
        }

        pub(crate) fn lock(&self) -> InnerGuard<'_, T> {
            match self.0.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            }
        }
    }

    /// The adaptive limits' clock on the model clock: a tick is a nanosecond of model time,
    /// so a scenario sets a call's latency with `model::advance`.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct SampleClock;

    impl SampleClock {
        pub(crate) fn new() -> Self {
            let _ = model_clock();
            SampleClock
        }

        pub(crate) fn raw(&self) -> u64 {
            model_clock().now()
        }

        pub(crate) fn nanos(&self, ticks: u64) -> u64 {
            ticks
        }

        pub(crate) fn ticks(&self, nanos: u64) -> u64 {
            nanos
        }
    }

    /// In a model, the slot is taken on first use here too (no fast path to keep small).
    pub(crate) fn cached_thread_slot() -> usize {
        thread_slot()
    }

    /// A slot per model thread, numbered in order of first use within one execution (the
    /// counter is a per-execution static). Slots are not reused in a model: no model thread
    /// outlives the execution.
    pub(crate) fn thread_slot() -> usize {
        SLOT.with(|slot| match slot.get() {
            super::NO_SLOT => {
                // Ordering: SeqCst; model-only.
                let taken = NEXT_SLOT.fetch_add(1, super::Ordering::SeqCst);
                slot.set(taken);
                taken
            }
            taken => taken,
        })
    }

    #[cfg(bulkhead_loom)]
    loom::thread_local! {
        static SLOT: std::cell::Cell<usize> = std::cell::Cell::new(super::NO_SLOT);
    }
    #[cfg(bulkhead_loom)]
    loom::lazy_static! {
        static ref NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
    }
    #[cfg(bulkhead_shuttle)]
    shuttle::thread_local! {
        static SLOT: std::cell::Cell<usize> = std::cell::Cell::new(super::NO_SLOT);
    }
    #[cfg(bulkhead_shuttle)]
    shuttle::lazy_static! {
        static ref NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
    }

    /// `std::sync::OnceLock` as the model checkers see it. The value lives in a real
    /// `OnceLock` (set under a model mutex, so at most one thread initializes it); whether
    /// it is published is a model atomic, stored Release after the value and loaded Acquire
    /// by `get`. So the checker explores a reader that does not see the value yet, and a
    /// reader that sees it also sees what the writer did before (std's `OnceLock` gives the
    /// same guarantee with the same orderings).
    pub(crate) struct OnceLock<T> {
        value: std::sync::OnceLock<T>,
        published: AtomicBool,
        setting: Mutex<()>,
    }

    impl<T> OnceLock<T> {
        pub(crate) fn new() -> Self {
            OnceLock {
                value: std::sync::OnceLock::new(),
                published: AtomicBool::new(false),
                setting: Mutex::new(()),
            }
        }

        pub(crate) fn get(&self) -> Option<&T> {
            // Ordering: Acquire; pairs with the Release store in `set`/`get_or_init`.
            if self.published.load(super::Ordering::Acquire) {
                self.value.get()
            } else {
                None
            }
        }

        pub(crate) fn set(&self, value: T) -> Result<(), T> {
            let _setting = self.setting.lock();
            self.value.set(value)?;
            // Ordering: Release; pairs with the Acquire load in `get`.
            self.published.store(true, super::Ordering::Release);
            Ok(())
        }

        pub(crate) fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
            if let Some(value) = self.get() {
                return value;
            }
            let _setting = self.setting.lock();
            let value = self.value.get_or_init(init);
            // Ordering: Release; pairs with the Acquire load in `get`.
            self.published.store(true, super::Ordering::Release);
            value
        }

        pub(crate) fn take(&mut self) -> Option<T> {
            self.value.take()
        }
    }

    impl<T: core::fmt::Debug> core::fmt::Debug for OnceLock<T> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_tuple("OnceLock").field(&self.get()).finish()
        }
    }

    /// A model instant: nanoseconds of model time since the execution started.
    pub(crate) type Instant = u64;

    /// The model clock of one execution. Time stands still until a test advances it, which
    /// wakes every thread parked on a deadline and every task queued for a permit, so "the
    /// deadline passed" is a choice the model checker explores like any other interleaving.
    #[derive(Debug)]
    pub(crate) struct ModelClock {
        now: AtomicU64,
        sleepers: Mutex<Sleepers>,
    }

    /// Who to wake when the clock moves. Emptied by every `advance`.
    #[derive(Debug, Default)]
    struct Sleepers {
        /// Threads parked on a deadline (a thread may appear more than once).
        threads: Vec<Thread>,
        /// Tasks that registered a waker since the last advance, one entry per task.
        tasks: Vec<std::task::Waker>,
        /// Deadlines the engine's timer was asked to fire (`crate::engine::timer::schedule`): the
        /// model clock is the timer, so an advance past one runs the same expiry as the
        /// timer thread does.
        timers: Vec<(Instant, std::sync::Weak<dyn super::Expire>)>,
    }

    // One clock per execution: both checkers reset their lazy statics between executions
    // (loom's are dropped and re-created on first use; shuttle drops them at the end of each
    // execution), so every execution starts at time zero.
    #[cfg(bulkhead_loom)]
    loom::lazy_static! {
        static ref MODEL_CLOCK: ModelClock = ModelClock::new();
    }
    #[cfg(bulkhead_shuttle)]
    shuttle::lazy_static! {
        static ref MODEL_CLOCK: ModelClock = ModelClock::new();
    }

    /// The running execution's model clock. Panics outside a model execution (as every
    /// checker primitive does).
    pub(crate) fn model_clock() -> &'static ModelClock {
        &MODEL_CLOCK
    }

    impl ModelClock {
        fn new() -> Self {
            ModelClock { now: AtomicU64::new(0), sleepers: Mutex::new(Sleepers::default()) }
        }

        pub(crate) fn now(&self) -> Instant {
            // Ordering: SeqCst — pairs with the `fetch_max` in `advance_to` (model-only); a
            // sleeper reads after registering under `sleepers`, so it cannot miss an advance.
            self.now.load(super::Ordering::SeqCst)
        }

        /// Remembers `waker` until the next advance; a task already remembered is not added
        /// again. The clone is made, and a redundant one dropped, outside the lock.
        pub(crate) fn register_task(&self, waker: &std::task::Waker) {
            let sleepers = self.sleepers.lock();
            if sleepers.tasks.iter().any(|known| known.will_wake(waker)) {
                return;
            }
            drop(sleepers);
            let clone = waker.clone();
            let mut sleepers = self.sleepers.lock();
            let redundant = if sleepers.tasks.iter().any(|known| known.will_wake(waker)) {
                Some(clone)
            } else {
                sleepers.tasks.push(clone);
                None
            };
            drop(sleepers);
            drop(redundant);
        }

        /// The engine's timer: fire `list`'s expiry once the clock reaches `at`.
        /// A deadline the clock already passed fires at once, on the caller's thread (which
        /// holds no lock of ours: the engine schedules after unlocking), as the timer
        /// thread would fire it at once.
        pub(crate) fn schedule(&self, at: Instant, list: std::sync::Weak<dyn super::Expire>) {
            let mut sleepers = self.sleepers.lock();
            let now = self.now();
            if at > now {
                sleepers.timers.push((at, list));
                return;
            }
            drop(sleepers);
            if let Some(list) = list.upgrade() {
                super::Expire::expire(&*list, at, now);
            }
        }

        /// Parks the current thread until it is unparked or the clock reaches `deadline`.
        fn park_until(&self, deadline: Option<Instant>) {
            if let Some(deadline) = deadline {
                // Check and register under one lock, so an `advance` cannot slip between.
                let mut sleepers = self.sleepers.lock();
                if self.now() >= deadline {
                    return;
                }
                sleepers.threads.push(current_thread());
            }
            park();
        }

        /// Moves the clock to `to` (never backwards) and wakes every sleeper.
        pub(crate) fn advance_to(&self, to: Instant) {
            let mut sleepers = self.sleepers.lock();
            // Ordering: SeqCst — pairs with the load in `now`; the store happens under the
            // `sleepers` lock, so a sleeper that registers after this advance sees the new time.
            self.now.fetch_max(to, super::Ordering::SeqCst);
            for thread in sleepers.threads.drain(..) {
                thread.unpark();
            }
            let tasks = core::mem::take(&mut sleepers.tasks);
            let now = self.now();
            let (due, later) = core::mem::take(&mut sleepers.timers)
                .into_iter()
                .partition::<Vec<_>, _>(|(at, _)| *at <= now);
            sleepers.timers = later;
            drop(sleepers);
            // Outside the lock: a woken task may run at once and register again, and an
            // expiry may arm the timer again.
            for waker in tasks {
                crate::engine::foreign::wake_task(waker);
            }
            for (at, list) in due {
                if let Some(list) = list.upgrade() {
                    super::Expire::expire(&*list, at, now);
                }
            }
        }
    }

    /// The engine's handle on the model clock of the running execution: zero-sized, as on
    /// the std side, so every bulkhead of one execution shares one clock.
    #[derive(Debug, Default, Clone, Copy)]
    pub(crate) struct Clock;

    impl Clock {
        /// Touches the execution's clock now, so it is created by whoever creates the first
        /// bulkhead (normally the test's main thread, before it spawns anything): loom's lazy
        /// static makes later readers synchronize with its creator, and a creator that
        /// already spawned the other threads adds no happens-before edge that could hide a
        /// missing one in the engine.
        pub(crate) fn new() -> Self {
            let _ = model_clock();
            Clock
        }

        pub(crate) fn now(&self) -> Instant {
            model_clock().now()
        }

        /// One model tick is one nanosecond of wait, saturating: `Duration::MAX` never fires
        /// unless the test advances the clock that far.
        pub(crate) fn deadline(
            &self,
            start: Instant,
            wait: core::time::Duration,
        ) -> Option<Instant> {
            let ticks = u64::try_from(wait.as_nanos()).ok()?;
            start.checked_add(ticks)
        }

        pub(crate) fn park_until(&self, deadline: Option<Instant>) {
            model_clock().park_until(deadline);
        }

        pub(crate) fn since(&self, start: Instant) -> core::time::Duration {
            core::time::Duration::from_nanos(self.now().saturating_sub(start))
        }

        /// The time from `start` to `end` (zero if `end` is earlier).
        pub(crate) fn between(&self, start: Instant, end: Instant) -> core::time::Duration {
            core::time::Duration::from_nanos(end.saturating_sub(start))
        }

        /// Moves the execution's model clock to `to` and wakes every sleeper.
        pub(crate) fn advance(&self, to: Instant) {
            model_clock().advance_to(to);
        }

        /// A task waiting for a deadline without a timer: the next advance wakes `waker`, so
        /// the task re-checks its deadline as a timer would have made it do. Call it before
        /// reading the clock (register, then check).
        pub(crate) fn wake_at_deadline(&self, waker: &std::task::Waker) {
            model_clock().register_task(waker);
        }
    }
}

pub(crate) use imp::*;

/// What the timer fires: a queue that withdraws the waits whose deadline passed. The timer
/// (and the model clock) need only this, not the queue's type.
/// Defined beside the clock, which fires it under the model checkers, so that the clock and
/// the timer (`timer.rs`) name it without naming each other.
pub(crate) trait Expire: Send + Sync {
    /// The timer fired at `fired` (an instant this queue asked for); `now` is the clock's
    /// reading. Withdraws and wakes every wait due by `now`, serves the queue as the
    /// waiters' own withdrawals would, and asks for the next fire. Takes its own locks; the
    /// caller holds none of the crate's.
    fn expire(&self, fired: Instant, now: Instant);
}

#[cfg(test)]
mod tests {
    /// `ci/cfg-loom.sh` runs this with `--nocapture` to see that a user's `--cfg loom` really
    /// reached this crate (and then that everything else behaves as in a normal build).
    #[test]
    fn reports_whether_cfg_loom_is_set() {
        println!("cfg(loom) is {}", if cfg!(loom) { "set" } else { "not set" });
    }
}
