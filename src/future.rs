//! The async slow path: futures that queue, wait for a grant or a timer, and withdraw on
//! drop.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc as StdArc;

use crate::state::{Enqueued, Waiter};
use crate::sync::{Arc, Instant};
use crate::{Bulkhead, BulkheadFull, OwnedPermit, Permit, RejectReason};

#[cfg(feature = "tokio")]
type DefaultSleep = tokio::time::Sleep;
#[cfg(not(feature = "tokio"))]
type DefaultSleep = core::future::Pending<()>;

/// The timer `acquire_async` uses: tokio's, when polled inside a tokio runtime.
#[cfg(feature = "tokio")]
fn default_sleep(wait: Duration) -> Option<DefaultSleep> {
    tokio::runtime::Handle::try_current().ok()?;
    Some(tokio::time::sleep(wait))
}

/// Without a timer, the deadline is checked whenever the future is polled.
#[cfg(not(feature = "tokio"))]
fn default_sleep(_wait: Duration) -> Option<DefaultSleep> {
    None
}

/// The state machine every acquire future shares: first poll tries the fast path, then
/// queues; later polls check the grant, then the timer; drop withdraws.
struct Core<S> {
    waiter: Option<Arc<Waiter>>,
    start: Option<Instant>,
    deadline: Option<Instant>,
    wait: Duration,
    sleep: Option<Pin<Box<S>>>,
    done: bool,
}

impl<S> Core<S> {
    fn new() -> Self {
        Core {
            waiter: None,
            start: None,
            deadline: None,
            wait: Duration::ZERO,
            sleep: None,
            done: false,
        }
    }

    /// Called on drop: a queued future leaves the queue; a permit granted to it but never
    /// returned is released, which hands it to the next waiter.
    fn cancel(&mut self, bulkhead: &Bulkhead) {
        if let Some(waiter) = self.waiter.take() {
            if bulkhead.sem().withdraw(&waiter) {
                // Never handed to the caller, so no `CallPermitted`/`CallFinished` pair.
                bulkhead.sem().release();
            }
        }
    }
}

impl<S: Future<Output = ()>> Core<S> {
    fn poll(
        &mut self,
        bulkhead: &Bulkhead,
        cx: &mut Context<'_>,
        arm: impl FnOnce(Duration) -> Option<S>,
    ) -> Poll<Result<(), BulkheadFull>> {
        assert!(!self.done, "a bulkhead acquire future was polled after it completed");
        let sem = bulkhead.sem();
        match &self.waiter {
            Some(waiter) => {
                // Register first, then look: a grant after the look wakes the new waker.
                waiter.register(cx.waker());
                if waiter.is_granted() {
                    self.waiter = None;
                    let start = self.start.unwrap_or_else(|| sem.clock.now());
                    bulkhead.permitted_after(sem.load(), start);
                    return self.finish(bulkhead, Ok(()));
                }
            }
            None => {
                let word = match sem.try_acquire() {
                    Ok(word) => {
                        bulkhead.permitted(word);
                        return self.finish(bulkhead, Ok(()));
                    }
                    Err(word) => word,
                };
                if bulkhead.max_wait_is_zero() {
                    let err = bulkhead.reject(word, RejectReason::Full, Duration::ZERO);
                    return self.finish(bulkhead, Err(err));
                }
                let wait = bulkhead.max_wait();
                if wait.is_zero() {
                    // The max wait was set to zero by a concurrent `change_config`.
                    let err = bulkhead.reject(word, RejectReason::Full, Duration::ZERO);
                    return self.finish(bulkhead, Err(err));
                }
                let start = sem.clock.now();
                let waiter = Waiter::task(cx.waker());
                match sem.enqueue(&waiter, bulkhead.max_waiting()) {
                    Enqueued::Acquired => {
                        bulkhead.permitted_after(sem.load(), start);
                        return self.finish(bulkhead, Ok(()));
                    }
                    Enqueued::TooManyWaiting => {
                        let reason = RejectReason::TooManyWaiting;
                        let err = bulkhead.reject(sem.load(), reason, Duration::ZERO);
                        return self.finish(bulkhead, Err(err));
                    }
                    Enqueued::Queued => {}
                }
                self.start = Some(start);
                self.wait = wait;
                self.deadline = sem.deadline(start, wait);
                if self.deadline.is_some() {
                    self.sleep = arm(wait).map(Box::pin);
                }
                self.waiter = Some(waiter);
            }
        }
        let fired = self.sleep.as_mut().is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready())
            || self.deadline.is_some_and(|deadline| sem.clock.now() >= deadline);
        if !fired {
            return Poll::Pending;
        }
        let Some(waiter) = self.waiter.take() else {
            unreachable!("a queued future has a waiter");
        };
        // The grant and the withdrawal are decided under the queue lock: exactly one happens.
        let start = self.start.unwrap_or_else(|| sem.clock.now());
        if sem.withdraw(&waiter) {
            bulkhead.permitted_after(sem.load(), start);
            return self.finish(bulkhead, Ok(()));
        }
        let waited = sem.clock.since(start).max(self.wait);
        let err = bulkhead.reject(sem.load(), RejectReason::WaitTimedOut, waited);
        self.finish(bulkhead, Err(err))
    }

    fn finish(
        &mut self,
        _bulkhead: &Bulkhead,
        result: Result<(), BulkheadFull>,
    ) -> Poll<Result<(), BulkheadFull>> {
        self.done = true;
        if self.sleep.is_some() {
            self.sleep = None;
        }
        Poll::Ready(result)
    }
}

impl<S> fmt::Debug for Core<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("queued", &self.waiter.is_some())
            .field("done", &self.done)
            .finish()
    }
}

/// The future returned by [`Bulkhead::acquire_async`].
///
/// # Cancel safety
///
/// Dropping it at any point loses nothing: see [`Bulkhead::acquire_async`].
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    bulkhead: &'a Bulkhead,
    core: Core<DefaultSleep>,
}

impl<'a> Acquire<'a> {
    pub(crate) fn new(bulkhead: &'a Bulkhead) -> Self {
        Acquire { bulkhead, core: Core::new() }
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let bulkhead = this.bulkhead;
        this.core.poll(bulkhead, cx, default_sleep).map(|r| r.map(|()| Permit::new(bulkhead)))
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        self.core.cancel(self.bulkhead);
    }
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

/// The future returned by [`Bulkhead::acquire_async_with_sleep`].
///
/// # Cancel safety
///
/// Dropping it at any point loses nothing: see [`Bulkhead::acquire_async`].
#[must_use = "futures do nothing unless polled"]
pub struct AcquireWithSleep<'a, M, S> {
    bulkhead: &'a Bulkhead,
    make_sleep: Option<M>,
    core: Core<S>,
}

// The sleep is boxed before it is ever polled and `make_sleep` is moved out before it is
// called, so nothing in this future is structurally pinned.
impl<M, S> Unpin for AcquireWithSleep<'_, M, S> {}

impl<'a, M, S> AcquireWithSleep<'a, M, S>
where
    M: FnOnce(Duration) -> S,
    S: Future<Output = ()>,
{
    pub(crate) fn new(bulkhead: &'a Bulkhead, make_sleep: M) -> Self {
        AcquireWithSleep { bulkhead, make_sleep: Some(make_sleep), core: Core::new() }
    }
}

impl<'a, M, S> Future for AcquireWithSleep<'a, M, S>
where
    M: FnOnce(Duration) -> S,
    S: Future<Output = ()>,
{
    type Output = Result<Permit<'a>, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let bulkhead = this.bulkhead;
        let make_sleep = &mut this.make_sleep;
        let arm = |wait| make_sleep.take().map(|make| make(wait));
        this.core.poll(bulkhead, cx, arm).map(|r| r.map(|()| Permit::new(bulkhead)))
    }
}

impl<M, S> Drop for AcquireWithSleep<'_, M, S> {
    fn drop(&mut self) {
        self.core.cancel(self.bulkhead);
    }
}

impl<M, S> fmt::Debug for AcquireWithSleep<'_, M, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

/// The future returned by [`Bulkhead::acquire_owned_async`]: `Send + 'static`.
///
/// # Cancel safety
///
/// Dropping it at any point loses nothing: see [`Bulkhead::acquire_async`].
#[must_use = "futures do nothing unless polled"]
pub struct AcquireOwned {
    bulkhead: StdArc<Bulkhead>,
    core: Core<DefaultSleep>,
}

impl AcquireOwned {
    pub(crate) fn new(bulkhead: StdArc<Bulkhead>) -> Self {
        AcquireOwned { bulkhead, core: Core::new() }
    }
}

impl Future for AcquireOwned {
    type Output = Result<OwnedPermit, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let bulkhead = &this.bulkhead;
        this.core
            .poll(bulkhead, cx, default_sleep)
            .map(|r| r.map(|()| OwnedPermit::from_acquired(StdArc::clone(bulkhead))))
    }
}

impl Drop for AcquireOwned {
    fn drop(&mut self) {
        self.core.cancel(&self.bulkhead);
    }
}

impl fmt::Debug for AcquireOwned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}
