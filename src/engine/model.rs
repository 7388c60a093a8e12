//! Model-check your own code: a bulkhead inside your loom or shuttle tests.
//!
//! This module exists only when the crate is built with `--cfg bulkhead_loom` or
//! `--cfg bulkhead_shuttle` (set them in `RUSTFLAGS`; they are mutually exclusive). A normal
//! build has no `bulkhead::model`, and its public API is unchanged.
//!
//! # What each cfg replaces, and what stays real
//!
//! | | `bulkhead_loom` | `bulkhead_shuttle` |
//! |---|---|---|
//! | the permit word, waiter flags, queue lock | `loom::sync` atomics and `Mutex` | `shuttle::sync` atomics and `Mutex` |
//! | parking a sync waiter | a per-thread `loom::sync::Notify` | `shuttle::thread::park` |
//! | waking an async waiter | the task's `Waker`, stored in its queue slot under the checker's `Mutex` | the same, under shuttle's `Mutex` |
//! | time: `max_wait_duration`, `acquire_timeout`, `waited()` | the model clock of this module | the model clock of this module |
//!
//! Everything else stays real: configuration, names, errors, events and their listeners
//! (listeners run on the thread that triggers them and are called, not modelled), metrics,
//! the registry. The bulkhead's own deadline timer (`bulkhead::timer`) starts no thread under a
//! model: the model clock is the timer, and an advance past a queued `acquire_async`'s
//! deadline runs the same expiry the timer thread runs (withdraw, then wake).
//!
//! Every operation on a bulkhead must then run inside a model execution (`loom::model`,
//! `shuttle::check_*` or a `shuttle::Runner`), like any other checker primitive: outside one,
//! the checker panics.
//!
//! # The model clock
//!
//! Time does not pass inside a model. Each execution has **one** model clock, shared by every
//! bulkhead in it, that starts at zero and only moves when your test calls [`advance`] or
//! [`advance_to`]. A deadline is therefore an input of the model: spawn a thread that
//! advances the clock, and the checker explores the deadline passing before, during and after
//! everything else your threads do. An advance wakes every thread parked on a deadline and
//! every task queued for a permit; each re-checks its own deadline, exactly as if the time
//! had really passed. A wait the clock never reaches (the clock never moved far enough) is a
//! wait without a deadline: if nobody releases a permit either, the checker reports a
//! deadlock.
//!
//! The clock is a lazy static of the checker (`loom::lazy_static!`, `shuttle::lazy_static!`),
//! which both reset between executions. It is created by the first bulkhead (or the first
//! call into this module) of an execution; create your bulkheads before spawning threads, so
//! that loom's lazy-static synchronization adds no happens-before edge between your threads.
//!
//! One model nanosecond is one nanosecond of `Duration`: a bulkhead with a 100 ms max wait
//! times a waiter out once the clock has moved 100 ms past the moment it queued.
//!
//! # Async acquires
//!
//! The async methods work under both checkers with the checker's own executor:
//!
//! - loom: `loom::future::block_on(bulkhead.acquire_async())` on a `loom::thread`. The waker
//!   it passes unblocks that thread; a grant wakes it through that waker, which the queue
//!   keeps in the task's slot.
//! - shuttle: `shuttle::future::block_on`, or `shuttle::future::spawn` for a task that the
//!   scheduler interleaves with threads and other tasks. Its wakers make the task runnable.
//!
//! In both, a queued task's deadline is armed on the model clock, so an [`advance`] past it
//! withdraws the task and wakes it, and it times out with `RejectReason::WaitTimedOut`.
//! Dropping the future withdraws it, as in a normal build. [`sleep`] is a model-clock timer
//! for your own code, and for [`Bulkhead::acquire_async_with_sleep`](crate::Bulkhead::acquire_async_with_sleep).
//!
//! # Versions
//!
//! This crate pairs with loom **0.7** and shuttle **0.9**, re-exported here as
//! `bulkhead::model::loom` and `bulkhead::model::shuttle`. Use the re-export (or the same
//! major version) in your tests: a second copy of a checker in one build is a second,
//! separate runtime, and the bulkhead's primitives are invisible to the one driving your
//! test. `docs/model-checking.md` ("Model-check your own code") shows the exact panics a
//! mismatch gives.
//!
//! # Examples
//!
//! A waiter whose deadline races a release: it ends either granted or timed out, never both,
//! and no permit is lost.
//!
//! ```
//! # #[cfg(bulkhead_loom)]
//! # {
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use bulkhead::model::{self, loom};
//! use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
//!
//! loom::model(|| {
//!     let config = BulkheadConfig::builder()
//!         .max_concurrent_calls(1)
//!         .max_wait_duration(Duration::from_millis(100))
//!         .build()
//!         .unwrap();
//!     let bank = Arc::new(Bulkhead::new("bank", config));
//!     let held = bank.try_acquire_owned().unwrap();
//!     let waiter = {
//!         let bank = Arc::clone(&bank);
//!         loom::thread::spawn(move || match loom::future::block_on(bank.acquire_async()) {
//!             Ok(_permit) => {}
//!             Err(err) => assert_eq!(err.reason(), RejectReason::WaitTimedOut),
//!         })
//!     };
//!     let clock = loom::thread::spawn(|| model::advance(Duration::from_millis(100)));
//!     drop(held);
//!     waiter.join().unwrap();
//!     clock.join().unwrap();
//!     assert_eq!(bank.metrics().available_concurrent_calls(), 1);
//! });
//! # }
//! ```
//!
//! The same under shuttle, with the waiter as a shuttle task:
//!
//! ```
//! # #[cfg(bulkhead_shuttle)]
//! # {
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use bulkhead::model::{self, shuttle};
//! use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
//!
//! shuttle::check_random(
//!     || {
//!         let config = BulkheadConfig::builder()
//!             .max_concurrent_calls(1)
//!             .max_wait_duration(Duration::from_millis(100))
//!             .build()
//!             .unwrap();
//!         let bank = Arc::new(Bulkhead::new("bank", config));
//!         let held = bank.try_acquire_owned().unwrap();
//!         let waiter = shuttle::future::spawn({
//!             let bank = Arc::clone(&bank);
//!             async move {
//!                 match bank.acquire_async().await {
//!                     Ok(_permit) => {}
//!                     Err(err) => assert_eq!(err.reason(), RejectReason::WaitTimedOut),
//!                 }
//!             }
//!         });
//!         let clock = shuttle::thread::spawn(|| model::advance(Duration::from_millis(100)));
//!         drop(held);
//!         shuttle::future::block_on(waiter).unwrap();
//!         clock.join().unwrap();
//!         assert_eq!(bank.metrics().available_concurrent_calls(), 1);
//!     },
//!     1000,
//! );
//! # }
//! ```

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::engine::sync::model_clock;

/// The loom crate this build of `bulkhead` uses (0.7): write your models with it, so your
/// test and the bulkhead share one loom runtime.
///
/// # Examples
///
/// ```
/// # #[cfg(bulkhead_loom)]
/// bulkhead::model::loom::model(|| {
///     let bulkhead = bulkhead::Bulkhead::new("db", bulkhead::BulkheadConfig::default());
///     assert!(bulkhead.try_acquire().is_ok());
/// });
/// ```
#[cfg(bulkhead_loom)]
pub use crate::engine::sync::loom;

/// The shuttle crate this build of `bulkhead` uses (0.9): write your tests with it, so your
/// test and the bulkhead share one shuttle scheduler.
///
/// # Examples
///
/// ```
/// # #[cfg(bulkhead_shuttle)]
/// bulkhead::model::shuttle::check_random(
///     || {
///         let bulkhead = bulkhead::Bulkhead::new("db", bulkhead::BulkheadConfig::default());
///         assert!(bulkhead.try_acquire().is_ok());
///     },
///     10,
/// );
/// ```
#[cfg(bulkhead_shuttle)]
pub use crate::engine::sync::shuttle;

pub use crate::engine::foreign::ContainedPanic;

/// Model time elapsed since the execution started: zero until the test advances the clock.
///
/// # Examples
///
/// ```
/// # #[cfg(bulkhead_loom)]
/// # bulkhead::model::loom::model(|| {
/// use std::time::Duration;
///
/// assert_eq!(bulkhead::model::now(), Duration::ZERO);
/// bulkhead::model::advance(Duration::from_millis(5));
/// assert_eq!(bulkhead::model::now(), Duration::from_millis(5));
/// # });
/// ```
pub fn now() -> Duration {
    Duration::from_nanos(model_clock().now())
}

/// Moves the model clock forward by `by` and wakes every waiter whose deadline may have
/// passed. Saturates at `u64::MAX` nanoseconds (about 584 years).
///
/// Two threads advancing at once both move it: the clock ends `by₁ + by₂` later, in the
/// order the checker picks. Use [`advance_to`] when the end point must not depend on that.
///
/// # Examples
///
/// ```
/// # #[cfg(bulkhead_loom)]
/// # bulkhead::model::loom::model(|| {
/// use std::time::Duration;
///
/// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
///
/// let config = BulkheadConfig::builder().max_concurrent_calls(0).build().unwrap();
/// let closed = Bulkhead::new("closed", config);
/// // Nobody can release: only the clock ends this wait.
/// let clock = bulkhead::model::loom::thread::spawn(|| {
///     bulkhead::model::advance(Duration::from_millis(100));
/// });
/// let err = closed.acquire_timeout(Duration::from_millis(100)).unwrap_err();
/// assert_eq!(err.reason(), RejectReason::WaitTimedOut);
/// assert!(err.waited() >= Duration::from_millis(100));
/// clock.join().unwrap();
/// # });
/// ```
pub fn advance(by: Duration) {
    let clock = model_clock();
    let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
    clock.advance_to(clock.now().saturating_add(by));
}

/// Moves the model clock to `to` after the start of the execution (never backwards: an
/// earlier `to` changes nothing) and wakes every waiter whose deadline may have passed.
///
/// # Examples
///
/// ```
/// # #[cfg(bulkhead_loom)]
/// # bulkhead::model::loom::model(|| {
/// use std::time::Duration;
///
/// bulkhead::model::advance_to(Duration::from_millis(7));
/// bulkhead::model::advance_to(Duration::from_millis(3));
/// assert_eq!(bulkhead::model::now(), Duration::from_millis(7));
/// # });
/// ```
pub fn advance_to(to: Duration) {
    model_clock().advance_to(u64::try_from(to.as_nanos()).unwrap_or(u64::MAX));
}

/// A future that completes once the model clock has moved `duration` past the moment it
/// was created: the model's stand-in for `tokio::time::sleep`.
///
/// Use it as the timer of [`Bulkhead::acquire_async_with_sleep`](crate::Bulkhead::acquire_async_with_sleep)
/// or in your own code's timeouts.
///
/// # Examples
///
/// ```
/// # #[cfg(bulkhead_loom)]
/// # bulkhead::model::loom::model(|| {
/// use std::time::Duration;
///
/// use bulkhead::model::{self, loom};
///
/// // Its deadline is fixed when it is created: one second after now, time zero.
/// let sleep = model::sleep(Duration::from_secs(1));
/// let sleeper = loom::thread::spawn(move || loom::future::block_on(sleep));
/// model::advance(Duration::from_secs(1));
/// sleeper.join().unwrap();
/// assert_eq!(model::now(), Duration::from_secs(1));
/// # });
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    let clock = model_clock();
    let ticks = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    Sleep { deadline: clock.now().saturating_add(ticks) }
}

/// The future returned by [`sleep`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    deadline: u64,
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let clock = model_clock();
        // Register first, then look: an advance after the look wakes this task.
        clock.register_task(cx.waker());
        if clock.now() >= self.deadline {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
