//! The sync slow path: queue, park until granted or the deadline passes, withdraw. Also the
//! blocking drain wait, and the check that refuses to block an async runtime's thread.

use core::time::Duration;

use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::Mark;
use crate::bulkhead::Bulkhead;
use crate::engine::policy::Criticality;
use crate::engine::state::{Enqueued, Outcome, WaitKey, Wake};
use crate::observe::reason::RejectReason;

impl Bulkhead {
    /// Queues the calling thread and parks it until it is granted `permits` (≥ 1) or `wait`
    /// has passed. The permits, when granted, are owned by the caller (no guard yet).
    #[cold]
    #[inline(never)]
    pub(crate) fn wait_blocking(
        &self,
        wait: Duration,
        permits: u32,
        class: Criticality,
    ) -> Result<Mark, BulkheadFull> {
        refuse_in_async_context(self.name(), "acquire", wait);
        let sem = self.sem();
        let clock = &sem.clock;
        let start = clock.now();
        let deadline = clock.deadline(start, wait);
        let key = match sem.enqueue(Wake::thread(), self.max_waiting(), None, permits, class) {
            Enqueued::Queued(key) => key,
            Enqueued::Acquired => {
                return Ok(self.permitted_after(sem.load(), Some(start)));
            }
            Enqueued::TooManyWaiting => {
                return Err(self.reject(sem.load(), RejectReason::TooManyWaiting, Duration::ZERO));
            }
            Enqueued::Closed => return Err(self.refuse(sem.load())),
            // Above the limit, or (sheddable) above the limit less the headroom.
            Enqueued::ExceedsLimit => {
                return Err(self.reject(sem.load(), RejectReason::ExceedsLimit, Duration::ZERO));
            }
        };
        let outcome = self.park_on(key, deadline);
        match outcome {
            Some(Outcome::Granted) => Ok(self.permitted_after(sem.load(), Some(start))),
            Some(Outcome::Closed) => {
                Err(self.reject(sem.load(), RejectReason::Closed, Duration::ZERO))
            }
            Some(Outcome::ExceedsLimit) => {
                Err(self.reject(sem.load(), RejectReason::ExceedsLimit, Duration::ZERO))
            }
            Some(Outcome::Evicted) => {
                Err(self.reject(sem.load(), RejectReason::Evicted, clock.since(start)))
            }
            Some(Outcome::Drained) => unreachable!("an acquire is not a drain wait"),
            // A thread keeps its own deadline: the timer never withdraws it.
            None | Some(Outcome::TimedOut) => {
                let waited = clock.since(start).max(wait);
                Err(self.reject(sem.load(), RejectReason::WaitTimedOut, waited))
            }
        }
    }

    /// Parks on a queued wait until it ends or `deadline` passes (then withdraws it). `None`
    /// means the deadline passed and the wait was withdrawn; a grant that raced the deadline
    /// wins, decided under the queue lock.
    fn park_on(
        &self,
        key: WaitKey,
        deadline: Option<crate::engine::sync::Instant>,
    ) -> Option<Outcome> {
        let sem = self.sem();
        let clock = &sem.clock;
        loop {
            // Look before parking, the first time too: the wakes our own enqueue called after
            // unlocking (a waiter it evicted or granted) are foreign code, which may have
            // ended our wait *and* parked this very thread (a blocking acquire of its own),
            // consuming the unpark meant for us. May return spuriously; the loop re-checks.
            if let Some(outcome) = sem.poll_wait(key, None) {
                return Some(outcome);
            }
            clock.park_until(deadline);
            if deadline.is_some_and(|deadline| clock.now() >= deadline) {
                return sem.withdraw(key);
            }
        }
    }

    /// Blocks until the bulkhead is closed and no call is in flight, or `timeout` passes.
    pub(crate) fn wait_drained_blocking(&self, timeout: Duration) -> bool {
        let sem = self.sem();
        let Some(key) = sem.wait_drained(Wake::thread()) else { return true };
        if timeout.is_zero() {
            // A wait of zero never blocks, so it is never refused in an async context; its
            // drain wait leaves the queue at once (drained meanwhile: it says so).
            return sem.withdraw(key) == Some(Outcome::Drained);
        }
        {
            // The check panics in an async context: the drain wait leaves the queue first,
            // instead of holding its slot for good (issue 29).
            let leave = WithdrawOnUnwind { bulkhead: self, key };
            refuse_in_async_context(self.name(), "wait_drained", timeout);
            core::mem::forget(leave);
        }
        let clock = &sem.clock;
        let deadline = clock.deadline(clock.now(), timeout);
        self.park_on(key, deadline) == Some(Outcome::Drained)
    }
}

/// Withdraws a queued wait if dropped: armed around a call that may panic after the wait
/// queued, disarmed (forgotten) once it returned.
struct WithdrawOnUnwind<'a> {
    bulkhead: &'a Bulkhead,
    key: WaitKey,
}

impl Drop for WithdrawOnUnwind<'_> {
    fn drop(&mut self) {
        let _ = self.bulkhead.sem().withdraw(self.key);
    }
}

/// Panics, as tokio's own blocking calls do, when the calling thread drives async tasks:
/// blocking it would stall every task on it for up to `wait`.
#[cfg(feature = "tokio")]
#[track_caller]
fn refuse_in_async_context(name: &str, what: &str, wait: Duration) {
    if runs_async_tasks() {
        panic!(
            "Bulkhead '{name}': `{what}` would block a thread that drives async tasks for up to \
             {wait:?}, stalling every task on it; use `acquire_async`, `call_async` or `drained` \
             in async code, or move the blocking call to `tokio::task::spawn_blocking`"
        );
    }
}

#[cfg(not(feature = "tokio"))]
fn refuse_in_async_context(_name: &str, _what: &str, _wait: Duration) {}

/// Whether the calling thread is polling a tokio task or a `block_on` future right now.
///
/// tokio does not say so publicly, but it gives every such poll a cooperative budget (128
/// units), and none to `spawn_blocking` closures or to threads that merely entered a
/// runtime: there, `poll_proceed` never says "yield". So this takes budget until tokio asks
/// to yield (a budgeted poll) or 129 units were granted (no budget), then gives every unit
/// back in reverse order, leaving the budget exactly as it was. Costs a few thousand
/// instructions, only inside a runtime and only on a path that is about to park.
#[cfg(feature = "tokio")]
pub(crate) fn runs_async_tasks() -> bool {
    use core::task::{Context, Poll};
    use std::sync::OnceLock;
    use std::task::{Wake, Waker};
    use tokio::task::coop::{poll_proceed, RestoreOnPending};

    struct Noop;
    impl Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    /// More than tokio's initial budget of 128.
    const PROBE: usize = 129;

    if tokio::runtime::Handle::try_current().is_err() {
        return false;
    }
    static NOOP: OnceLock<Waker> = OnceLock::new();
    let waker = NOOP.get_or_init(|| Waker::from(std::sync::Arc::new(Noop)));
    let mut cx = Context::from_waker(waker);
    let mut taken: [Option<RestoreOnPending>; PROBE] = std::array::from_fn(|_| None);
    let mut budgeted = false;
    for slot in taken.iter_mut() {
        match poll_proceed(&mut cx) {
            Poll::Ready(restore) => *slot = Some(restore),
            Poll::Pending => {
                budgeted = true;
                break;
            }
        }
    }
    // Each guard restores the budget it found; the first one taken restores the original.
    for slot in taken.iter_mut().rev() {
        drop(slot.take());
    }
    budgeted
}
