//! The sync slow path: queue, park until granted or the deadline passes, withdraw.

use core::time::Duration;

use crate::state::{Enqueued, Waiter};
use crate::{Bulkhead, RejectReason};

impl Bulkhead {
    /// Queues the calling thread and parks it until it is granted a permit or `wait` has
    /// passed. The permit, when granted, is owned by the caller (no guard yet).
    #[cold]
    #[inline(never)]
    pub(crate) fn wait_blocking(&self, wait: Duration) -> Result<(), crate::BulkheadFull> {
        let sem = self.sem();
        let clock = &sem.clock;
        let start = clock.now();
        let deadline = sem.deadline(start, wait);
        let waiter = Waiter::thread();
        match sem.enqueue(&waiter, self.max_waiting()) {
            Enqueued::Acquired => {
                self.permitted_after(sem.load(), start);
                return Ok(());
            }
            Enqueued::TooManyWaiting => {
                return Err(self.reject(sem.load(), RejectReason::TooManyWaiting, Duration::ZERO));
            }
            Enqueued::Queued => {}
        }
        loop {
            if waiter.is_granted() {
                self.permitted_after(sem.load(), start);
                return Ok(());
            }
            if let Some(deadline) = deadline {
                if clock.now() >= deadline {
                    // The grant and the withdrawal are decided under the queue lock: exactly
                    // one happens. A grant that won keeps the permit: the caller succeeds.
                    if sem.withdraw(&waiter) {
                        self.permitted_after(sem.load(), start);
                        return Ok(());
                    }
                    let waited = clock.since(start).max(wait);
                    return Err(self.reject(sem.load(), RejectReason::WaitTimedOut, waited));
                }
            }
            // May return spuriously; the loop re-checks both conditions.
            clock.park_until(deadline);
        }
    }
}
