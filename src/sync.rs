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
//! controls: the model clock only moves when a scenario calls `Clock::advance`, and that call
//! wakes every thread parked on a deadline, exactly as the passage of time would.

#[cfg(all(bulkhead_loom, bulkhead_shuttle))]
compile_error!("`bulkhead_loom` and `bulkhead_shuttle` are mutually exclusive");

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

    /// A model instant: ticks of the model clock.
    pub(crate) type Instant = u64;

    /// A model clock. Time stands still until a scenario calls [`Clock::advance`], which
    /// wakes every thread parked on a deadline, so "the deadline passed" is a choice the
    /// model checker explores like any other interleaving.
    #[derive(Debug)]
    pub(crate) struct Clock {
        now: AtomicU64,
        parked: Mutex<Vec<Thread>>,
    }

    impl Clock {
        pub(crate) fn new() -> Self {
            Clock { now: AtomicU64::new(0), parked: Mutex::new(Vec::new()) }
        }

        pub(crate) fn now(&self) -> Instant {
            // Ordering: SeqCst; model-only, the checker should see every interleaving.
            self.now.load(super::Ordering::SeqCst)
        }

        /// One model tick is one nanosecond of wait, saturating: `Duration::MAX` never fires
        /// unless the scenario advances the clock that far.
        pub(crate) fn deadline(
            &self,
            start: Instant,
            wait: core::time::Duration,
        ) -> Option<Instant> {
            let ticks = u64::try_from(wait.as_nanos()).ok()?;
            start.checked_add(ticks)
        }

        pub(crate) fn park_until(&self, deadline: Option<Instant>) {
            if let Some(deadline) = deadline {
                // Check and register under one lock, so an `advance` cannot slip between.
                let mut parked = self.parked.lock();
                if self.now() >= deadline {
                    return;
                }
                parked.push(current_thread());
            }
            park();
        }

        pub(crate) fn since(&self, start: Instant) -> core::time::Duration {
            core::time::Duration::from_nanos(self.now().saturating_sub(start))
        }

        /// The time from `start` to `end` (zero if `end` is earlier).
        pub(crate) fn between(&self, start: Instant, end: Instant) -> core::time::Duration {
            core::time::Duration::from_nanos(end.saturating_sub(start))
        }

        /// Moves the model clock to `to` (never backwards) and wakes every timed waiter.
        pub(crate) fn advance(&self, to: Instant) {
            let mut parked = self.parked.lock();
            // Ordering: SeqCst; model-only.
            self.now.fetch_max(to, super::Ordering::SeqCst);
            for thread in parked.drain(..) {
                thread.unpark();
            }
        }
    }
}

pub(crate) use imp::*;
