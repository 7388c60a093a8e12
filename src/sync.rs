//! The synchronisation shim: the only module that names `std::sync`, loom or shuttle.
//!
//! Every atomic, lock, thread park and clock read in the engine goes through here, so the
//! model checkers can replace them without touching the engine. Three exclusive branches:
//!
//! | cfg                | atomics, mutex, park           | clock                              |
//! |--------------------|--------------------------------|------------------------------------|
//! | (none)             | `core`, `parking_lot`, `std`   | `std::time::Instant`               |
//! | `bulkhead_loom`    | `loom`                         | [`Clock`]: a model clock           |
//! | `bulkhead_shuttle` | `shuttle`                      | [`Clock`]: a model clock           |
//!
//! Inside a model checker wall-clock time does not exist, so a deadline is an input the model
//! controls: the model clock only moves when a test calls `crate::model::advance` (or
//! `advance_to`), and that call wakes every thread parked on a deadline and every task queued
//! for a permit, exactly as the passage of time would. There is one model clock per model
//! execution, shared by every bulkhead in it (a per-execution lazy static of the checker);
//! [`Clock`] is a zero-sized handle on it.

#[cfg(all(bulkhead_loom, bulkhead_shuttle))]
compile_error!("`bulkhead_loom` and `bulkhead_shuttle` are mutually exclusive");

// The checker crate itself, re-exported by `crate::model` so users pair with our version.
#[cfg(bulkhead_loom)]
pub use ::loom;
#[cfg(bulkhead_shuttle)]
pub use ::shuttle;

// `Ordering` is the same type in every branch (loom and shuttle re-export core's).
pub(crate) use core::sync::atomic::Ordering;

#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
mod imp {
    pub(crate) use core::sync::atomic::{AtomicU64, AtomicUsize};
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
}

#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
mod imp {
    #[cfg(bulkhead_loom)]
    pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize};
    #[cfg(bulkhead_loom)]
    pub(crate) use parker::{current_thread, park, Thread};
    #[cfg(bulkhead_shuttle)]
    pub(crate) use shuttle::{
        sync::atomic::{AtomicU64, AtomicUsize},
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
        /// again.
        pub(crate) fn register_task(&self, waker: &std::task::Waker) {
            let mut sleepers = self.sleepers.lock();
            if !sleepers.tasks.iter().any(|known| known.will_wake(waker)) {
                sleepers.tasks.push(waker.clone());
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
            drop(sleepers);
            // Outside the lock: a woken task may run at once and register again.
            for waker in tasks {
                waker.wake();
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

#[cfg(test)]
mod tests {
    /// `ci/cfg-loom.sh` runs this with `--nocapture` to see that a user's `--cfg loom` really
    /// reached this crate (and then that everything else behaves as in a normal build).
    #[test]
    fn reports_whether_cfg_loom_is_set() {
        println!("cfg(loom) is {}", if cfg!(loom) { "set" } else { "not set" });
    }
}
