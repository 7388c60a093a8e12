//! Weighted permits under the model checkers: requests for `n` permits queued behind a held
//! batch, racing releases of several permits, cancellation, the deadline timer, a shrink of
//! the limit and hostile wakers. The semantics they hold the engine to (see `src/state.rs`,
//! "Weighted requests"): a waiter is granted its whole request at once or nothing; strict
//! FIFO (a head waiting for 3 holds back a waiter for 1); a release of k permits grants
//! every waiter it satisfies, in order, and wakes exactly those; a waiter that leaves (its
//! future dropped, its deadline passed) holds nothing and lets the waiters behind it in;
//! a head above a shrunk limit is refused with `ExceedsLimit`.
//!
//! Shared by `verification/loom.rs` and `verification/shuttle.rs` (the `rt` adapter);
//! filter with `weighted::`.

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::Ordering::SeqCst;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::Arc;

use bulkhead::{Bulkhead, BulkheadFull, Permit, RejectReason};

use crate::hostile_waker::{hostile_waker, reentrant_hook};
use crate::rt::{self, AtomicBool};
use crate::scenarios::{assert_quiescent, config};

fn bulkhead(name: &str, limit: usize, wait: Duration) -> Arc<Bulkhead> {
    crate::scenarios::bulkhead(name, limit, wait, None)
}

fn join<T>(handle: rt::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Counts wakes; plain std atomics: read only after the threads that wake it were joined.
#[derive(Default)]
struct Counter(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

type Pending<'a> = Pin<Box<dyn Future<Output = Result<Permit<'a>, BulkheadFull>> + Send + 'a>>;

/// A weighted async acquire polled by hand from the calling thread, so queue order is call
/// order, with a waker that counts its wakes.
struct Waiter<'a> {
    fut: Pending<'a>,
    wakes: Arc<Counter>,
    waker: Waker,
}

impl<'a> Waiter<'a> {
    fn queue(bulkhead: &'a Bulkhead, n: u32) -> Waiter<'a> {
        let wakes = Arc::new(Counter::default());
        let waker = Waker::from(Arc::clone(&wakes));
        let mut waiter = Waiter { fut: Box::pin(bulkhead.acquire_many_async(n)), wakes, waker };
        assert!(waiter.poll().is_pending(), "a request for {n} should have queued");
        waiter
    }

    fn poll(&mut self) -> Poll<Result<Permit<'a>, BulkheadFull>> {
        self.fut.as_mut().poll(&mut Context::from_waker(&self.waker))
    }

    fn woken(&self) -> bool {
        self.wakes.0.load(SeqCst) > 0
    }

    /// Woken (by whoever granted it) and granted its whole request.
    fn granted(mut self, n: u32) -> Permit<'a> {
        assert!(self.woken(), "a waiter for {n} was granted without a wake");
        match self.poll() {
            Poll::Ready(Ok(permit)) => {
                assert_eq!(permit.num_permits(), n);
                permit
            }
            other => panic!("the waiter for {n} was not granted: {other:?}"),
        }
    }
}

/// A queued async request at the head is dropped (cancelled) while a sync waiter for 2
/// queues behind it. With `racing_release`: a bulkhead of 2, both permits held as one batch
/// and released by another thread, racing the drop, so the head may be granted its 2 first
/// and must then give both back. Without: a bulkhead of 3 with one permit held for the whole
/// scenario and a head asking for 3, never grantable: only the head's leaving (the drain its
/// withdrawal runs) can admit the waiter for 2 behind it. Either way the waiter for 2 is
/// granted and every permit comes back.
pub fn weighted_cancel_returns_everything(racing_release: bool) {
    let (limit, head) = if racing_release { (2, 2) } else { (3, 3) };
    let bulkhead = bulkhead("weighted_cancel", limit, Duration::MAX);
    let held = bulkhead.try_acquire_many_owned(if racing_release { 2 } else { 1 }).expect("free");
    let cancelled = Waiter::queue(&bulkhead, head);
    let behind = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            let permit = bulkhead.acquire_many(2).expect("an unbounded wait is granted");
            assert_eq!(permit.num_permits(), 2);
        })
    };
    if racing_release {
        let releaser = rt::spawn(move || drop(held));
        drop(cancelled);
        join(behind);
        join(releaser);
    } else {
        drop(cancelled);
        join(behind);
        drop(held);
    }
    assert_quiescent(&bulkhead, limit);
}

/// Batches of 1 and 2 held, waiters for 2, 1 and 2 queued (in that order). Freeing 1 wakes
/// nobody (the head needs 2: kotlinx PR #1553's second bug). Then the batch of 2 is released
/// by another thread while a third tries to barge in: the release of 2 (3 free) grants the
/// waiters for 2 and 1, in order, and wakes both (PR #1553's first bug: a release of many
/// must wake every waiter it satisfies); the last waiter for 2 is neither granted nor woken,
/// and no newcomer takes a permit while it waits.
pub fn release_of_k_wakes_exactly_the_satisfiable_waiters() {
    let bulkhead = bulkhead("weighted_release_k", 3, Duration::MAX);
    let one = bulkhead.try_acquire_many_owned(1).expect("free");
    let two = bulkhead.try_acquire_many_owned(2).expect("free");
    let a = Waiter::queue(&bulkhead, 2);
    let b = Waiter::queue(&bulkhead, 1);
    let c = Waiter::queue(&bulkhead, 2);
    drop(one);
    assert!(!a.woken() && !b.woken() && !c.woken(), "1 free: nobody's request is satisfied");
    let releaser = rt::spawn(move || drop(two));
    let barger = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || {
            assert!(bulkhead.try_acquire_many(1).is_err(), "a newcomer barged past the queue");
        })
    };
    join(releaser);
    join(barger);
    let (a, b) = (a.granted(2), b.granted(1));
    assert!(!c.woken(), "the waiter for 2 was woken with no permit free");
    let mut c = c;
    assert!(c.poll().is_pending());
    assert_eq!(bulkhead.metrics().in_flight_calls(), 3);
    drop(a);
    let c = c.granted(2);
    drop((b, c));
    assert_quiescent(&bulkhead, 3);
}

/// Head-of-line blocking: a waiter for 3 at the head (one permit of 3 held, so 2 free)
/// holds back a later sync waiter for 1 and a barging `try_acquire_many(1)`; once the held
/// permit is released the head is granted first, and the waiter for 1 only after it.
pub fn head_of_line_blocks_smaller_requests() {
    let bulkhead = bulkhead("weighted_head_of_line", 3, Duration::MAX);
    let held = bulkhead.try_acquire_many_owned(1).expect("free");
    let head = Waiter::queue(&bulkhead, 3);
    let entered = Arc::new(AtomicBool::new(false));
    let small = {
        let (bulkhead, entered) = (Arc::clone(&bulkhead), Arc::clone(&entered));
        rt::spawn(move || {
            let permit = bulkhead.acquire_many(1).expect("an unbounded wait is granted");
            entered.store(true, SeqCst);
            drop(permit);
        })
    };
    let barger = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || bulkhead.try_acquire_many(1).is_ok())
    };
    assert!(!entered.load(SeqCst), "the waiter for 1 overtook the head waiting for 3");
    let barged = join(barger);
    assert!(!barged, "a newcomer took a permit reserved for the head");
    drop(held);
    let head = head.granted(3);
    assert!(!entered.load(SeqCst), "the waiter for 1 got in beside the head's 3");
    drop(head);
    join(small);
    assert!(entered.load(SeqCst));
    assert_quiescent(&bulkhead, 3);
}

/// A shrink below the head's request: limit 2 with one permit held, a waiter for 2 at the
/// head; another thread shrinks the limit to 1. Without `racing_release` the held permit is
/// released only after the head is done, so only the shrink can end its wait: it must be
/// refused with `ExceedsLimit` (a head left waiting is never woken: a deadlock). With
/// `racing_release` a third thread releases the held permit meanwhile: the head is granted
/// its 2 (the release came first) or refused, never both, never stranded, nothing lost.
pub fn shrink_below_the_heads_request_refuses_it(racing_release: bool) {
    let bulkhead = bulkhead("weighted_shrink", 2, Duration::MAX);
    let held = bulkhead.try_acquire_many_owned(1).expect("free");
    let mut head = Box::pin(bulkhead.acquire_many_async(2));
    let noop = futures::task::noop_waker();
    assert!(head.as_mut().poll(&mut Context::from_waker(&noop)).is_pending(), "queued");
    let resizer = {
        let bulkhead = Arc::clone(&bulkhead);
        rt::spawn(move || bulkhead.change_config(config(1, Duration::MAX)))
    };
    let (held, releaser) = if racing_release {
        (None, Some(rt::spawn(move || drop(held))))
    } else {
        (Some(held), None)
    };
    match rt::block_on(head) {
        Ok(permit) => {
            assert!(racing_release, "granted 2 while only 1 was free");
            assert_eq!(permit.num_permits(), 2);
        }
        Err(err) => assert_eq!(err.reason(), RejectReason::ExceedsLimit, "{err}"),
    }
    join(resizer);
    drop(held);
    if let Some(releaser) = releaser {
        join(releaser);
    }
    assert_quiescent(&bulkhead, 1);
}

/// The deadline timer (the model clock) withdraws a weighted head (3 of 3 asked, 2 free):
/// the timer cannot reach the state word, so the drain it owes runs when the head finds
/// `TimedOut`; it grants the waiter for 2 behind it. The held permit is released only at
/// the end, so nothing else serves the waiter. With `hostile`, that waiter's waker re-enters
/// the bulkhead from its `clone`, `wake` and `drop`: it must be woken after the lock is
/// released, never under it. (Its re-entries queue acquires of their own, whose enqueue
/// drains too, so only the plain variant shows a drain the head failed to run.)
pub fn weighted_head_timed_out_serves_waiter_behind(hostile: bool) {
    const WAIT: u64 = 10;
    let bulkhead = bulkhead("weighted_timed_out_head", 3, Duration::from_nanos(WAIT));
    let held = bulkhead.try_acquire_many_owned(1).expect("free");
    let mut head = Box::pin(bulkhead.acquire_many_async(3));
    let noop = futures::task::noop_waker();
    assert!(head.as_mut().poll(&mut Context::from_waker(&noop)).is_pending(), "queued");
    // A new max wait applies to waits that start afterwards: the waiter behind outlasts it.
    bulkhead.change_config(config(3, Duration::MAX));
    let mut behind = Box::pin(bulkhead.acquire_many_async(2));
    if hostile {
        let waker = hostile_waker(reentrant_hook(&bulkhead, None, None), None);
        assert!(behind.as_mut().poll(&mut Context::from_waker(&waker)).is_pending(), "queued");
    } else {
        assert!(behind.as_mut().poll(&mut Context::from_waker(&noop)).is_pending(), "queued");
    }
    let clock = rt::spawn(|| bulkhead::model::advance_to(Duration::from_nanos(WAIT)));
    let err = rt::block_on(head).expect_err("2 free: a request for 3 is never granted");
    assert_eq!(err.reason(), RejectReason::WaitTimedOut, "{err}");
    let granted = if hostile {
        crate::scenarios_reentrant::block_on_hostile(&bulkhead, None, behind)
    } else {
        rt::block_on(behind)
    };
    let permit = granted.expect("the head's leaving lets the waiter for 2 in");
    assert_eq!(permit.num_permits(), 2);
    drop(permit);
    join(clock);
    drop(held);
    assert_quiescent(&bulkhead, 3);
}
