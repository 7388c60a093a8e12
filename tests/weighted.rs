//! Weighted permits: `try_acquire_many`, `acquire_many`, `acquire_many_async`, the owned
//! forms, and `num_permits` / `split` / `merge` on permits.
//!
//! Ports tokio's multi-permit tests (`tests/sync_semaphore.rs`, `sync_semaphore_owned.rs`,
//! `src/sync/tests/semaphore_batch.rs`), rewritten in our API and for our semantics: a
//! waiter is granted its whole request at once (tokio assigns permits to the head waiter
//! one release at a time), so free permits too few for the head stay `available`. Also the
//! two wake bugs that sank kotlinx.coroutines PR #1553 (a release of many must wake every
//! waiter it satisfies; a waiter for 2 must not wake on 1) and async-lock #24 (fairness needs
//! the head's request checked).

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, Permit, RejectReason};
use common::*;

type Pending<'a> = Pin<Box<dyn Future<Output = Result<Permit<'a>, BulkheadFull>> + 'a>>;

/// An async acquire of `n`, polled by hand with its own counting waker.
struct Waiter<'a> {
    fut: Pending<'a>,
    counter: Arc<CountingWaker>,
    waker: Waker,
}

impl<'a> Waiter<'a> {
    /// Queues an acquire of `n`: its first poll must be pending.
    #[track_caller]
    fn queue(bulkhead: &'a Bulkhead, n: u32) -> Self {
        let mut waiter = Self::new(bulkhead, n);
        assert!(waiter.poll().is_pending(), "an acquire of {n} should have queued");
        waiter
    }

    fn new(bulkhead: &'a Bulkhead, n: u32) -> Self {
        let (counter, waker) = CountingWaker::new();
        Waiter { fut: Box::pin(bulkhead.acquire_many_async(n)), counter, waker }
    }

    fn poll(&mut self) -> Poll<Result<Permit<'a>, BulkheadFull>> {
        poll_once(&mut self.fut, &self.waker)
    }

    fn woken(&self) -> bool {
        self.counter.wakes() > 0
    }

    /// Woken and granted: returns the permit.
    #[track_caller]
    fn granted(mut self) -> Permit<'a> {
        assert!(self.woken(), "a granted waiter must have been woken");
        match self.poll() {
            Poll::Ready(Ok(permit)) => permit,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    /// Woken and refused with `reason`.
    #[track_caller]
    fn refused(mut self, reason: RejectReason) {
        assert!(self.woken(), "a refused waiter must have been woken");
        match self.poll() {
            Poll::Ready(Err(err)) => assert_eq!(err.reason(), reason, "{err}"),
            other => panic!("expected a {reason:?} refusal, got {other:?}"),
        }
    }
}

fn waiting(limit: usize) -> Bulkhead {
    Bulkhead::new("weighted", limit_wait(limit, LONG_WAIT))
}

fn available(bulkhead: &Bulkhead) -> usize {
    bulkhead.metrics().available_concurrent_calls()
}

// ---- tokio: try_acquire / poll_acquire, many available and unavailable -------------------

#[test]
fn try_acquire_many_takes_n_when_available() {
    let bulkhead = Bulkhead::new("weighted", limit(100));
    let a = bulkhead.try_acquire_many(5).unwrap();
    assert_eq!(available(&bulkhead), 95);
    let b = bulkhead.try_acquire_many(5).unwrap();
    assert_eq!(available(&bulkhead), 90);
    assert_eq!((a.num_permits(), b.num_permits()), (5, 5));
    assert_eq!(bulkhead.metrics().in_flight_calls(), 10);
    drop((a, b));
    assert_quiescent(&bulkhead, 100);
}

#[test]
fn try_acquire_many_when_too_few_free_takes_nothing() {
    let bulkhead = Bulkhead::new("weighted", limit(5));
    let one = bulkhead.try_acquire().unwrap();
    assert_eq!(bulkhead.try_acquire_many(5).unwrap_err().reason(), RejectReason::Full);
    assert_eq!(available(&bulkhead), 4, "a refused request takes nothing");
    drop(one);
    let all = bulkhead.try_acquire_many(5).unwrap();
    assert_eq!(available(&bulkhead), 0);
    drop(all);
    assert_quiescent(&bulkhead, 5);
}

#[test]
fn owned_try_acquire_many_fills_exactly_the_limit() {
    let bulkhead = shared("weighted", limit(42));
    {
        let p1 = bulkhead.try_acquire_many_owned(42).unwrap();
        assert_eq!(p1.num_permits(), 42);
        assert!(bulkhead.try_acquire_owned().is_err());
    }
    let _p3 = bulkhead.try_acquire_many_owned(32).unwrap();
    let _p4 = bulkhead.try_acquire_many_owned(10).unwrap();
    assert!(bulkhead.try_acquire_owned().is_err());
}

#[test]
fn poll_acquire_many_available_is_ready_at_once() {
    let bulkhead = waiting(100);
    let (_, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_many_async(5));
    let Poll::Ready(Ok(permit)) = poll_once(&mut fut, &waker) else { panic!("not ready") };
    assert_eq!((permit.num_permits(), available(&bulkhead)), (5, 95));
}

/// tokio's `poll_acquire_many_unavailable`, with whole grants: the head for 5 waits while 4
/// are free, the waiter for 3 behind it is not woken until 3 are free after the head's grant.
#[test]
fn poll_acquire_many_unavailable_grants_in_order() {
    let bulkhead = waiting(5);
    let one = bulkhead.try_acquire().unwrap();
    let five = Waiter::queue(&bulkhead, 5);
    let three = Waiter::queue(&bulkhead, 3);
    assert_metrics(bulkhead.metrics(), 4, 5, 1, 2);
    drop(one);
    let mut five = five.granted();
    assert!(!three.woken());
    assert_metrics(bulkhead.metrics(), 0, 5, 5, 1);
    drop(five.split(1).unwrap());
    assert!(!three.woken(), "1 free: not enough for 3");
    drop(five.split(1).unwrap());
    assert!(!three.woken(), "2 free: not enough for 3");
    drop(five.split(1).unwrap());
    let three = three.granted();
    assert_eq!(three.num_permits(), 3);
    assert_metrics(bulkhead.metrics(), 0, 5, 5, 0);
    drop((five, three));
    assert_quiescent(&bulkhead, 5);
}

/// A limit of 0 pauses the bulkhead: a request for 1 (the plain acquire) waits for growth,
/// as it always did; a request for more is above the limit and refused.
#[test]
fn poll_acquire_one_on_zero_permits_waits_for_growth() {
    let bulkhead = waiting(0);
    let waiter = Waiter::queue(&bulkhead, 1);
    let mut two = Waiter::new(&bulkhead, 2);
    let Poll::Ready(Err(err)) = two.poll() else { panic!("a request for 2 queued at limit 0") };
    assert_eq!(err.reason(), RejectReason::ExceedsLimit);
    bulkhead.change_config(limit_wait(1, LONG_WAIT));
    drop(waiter.granted());
    assert_quiescent(&bulkhead, 1);
}

// ---- FIFO: head-of-line blocking, no barging ---------------------------------------------

#[test]
fn head_waiter_for_three_holds_back_later_waiter_for_one() {
    let bulkhead = waiting(3);
    let one = bulkhead.try_acquire().unwrap();
    let three = Waiter::queue(&bulkhead, 3);
    let small = Waiter::queue(&bulkhead, 1);
    assert_eq!(available(&bulkhead), 2, "2 free, reserved for the head");
    assert!(!small.woken(), "the waiter for 1 must not overtake the head");
    // No fast path barges past the head either, whatever it asks for.
    assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.try_acquire_many(1).unwrap_err().reason(), RejectReason::Full);
    assert_eq!(bulkhead.try_acquire_many(2).unwrap_err().reason(), RejectReason::Full);
    drop(one);
    let three = three.granted();
    assert!(!small.woken());
    drop(three);
    drop(small.granted());
    assert_quiescent(&bulkhead, 3);
}

#[test]
fn sync_weighted_waiter_keeps_its_place_ahead_of_async_one() {
    with_hang_guard(|| {
        let bulkhead = shared("weighted", limit_wait(3, LONG_WAIT));
        let one = bulkhead.try_acquire_owned().unwrap();
        let bh = Arc::clone(&bulkhead);
        let sync = thread::spawn(move || bh.acquire_many(3).map(|p| p.num_permits()));
        wait_for_waiters(&bulkhead, 1);
        let small = Waiter::queue(&bulkhead, 1);
        drop(one);
        assert_eq!(join_guarded(sync).unwrap(), 3, "the head is granted its 3");
        drop(small.granted());
        assert_quiescent(&bulkhead, 3);
    });
}

// ---- kotlinx.coroutines PR #1553: wake exactly the satisfiable waiters -------------------

#[test]
fn release_of_many_wakes_every_waiter_it_satisfies_in_order() {
    let bulkhead = waiting(4);
    let all = bulkhead.try_acquire_many(4).unwrap();
    let a = Waiter::queue(&bulkhead, 1);
    let b = Waiter::queue(&bulkhead, 2);
    let c = Waiter::queue(&bulkhead, 1);
    let d = Waiter::queue(&bulkhead, 2);
    let e = Waiter::queue(&bulkhead, 1);
    drop(all);
    let (a, b, c) = (a.granted(), b.granted(), c.granted());
    assert!(!d.woken(), "0 left for the waiter for 2");
    assert!(!e.woken(), "behind the waiter for 2: FIFO");
    assert_metrics(bulkhead.metrics(), 0, 4, 4, 2);
    drop(b);
    let d = d.granted();
    assert!(!e.woken());
    drop(a);
    let e = e.granted();
    drop((c, d, e));
    assert_quiescent(&bulkhead, 4);
}

#[test]
fn waiter_for_two_is_not_woken_by_one() {
    let bulkhead = waiting(2);
    let first = bulkhead.try_acquire().unwrap();
    let second = bulkhead.try_acquire().unwrap();
    let two = Waiter::queue(&bulkhead, 2);
    drop(first);
    assert!(!two.woken(), "one free permit must not wake a waiter for 2");
    assert_eq!(available(&bulkhead), 1);
    drop(second);
    assert_eq!(two.granted().num_permits(), 2);
    assert_quiescent(&bulkhead, 2);
}

// ---- cancellation, deadlines, close: nothing lost -----------------------------------------

#[test]
fn cancelled_weighted_acquire_returns_everything() {
    let bulkhead = waiting(10);
    let four = bulkhead.try_acquire_many(4).unwrap();
    let eight = Waiter::queue(&bulkhead, 8);
    assert_eq!(available(&bulkhead), 6, "nothing is handed to a waiter piecemeal");
    drop(eight);
    assert_metrics(bulkhead.metrics(), 6, 10, 4, 0);
    let six = bulkhead.try_acquire_many(6).unwrap();
    drop((four, six));
    assert_quiescent(&bulkhead, 10);
}

#[test]
fn cancelled_weighted_head_lets_the_waiters_behind_it_in() {
    let bulkhead = waiting(3);
    let one = bulkhead.try_acquire().unwrap();
    let three = Waiter::queue(&bulkhead, 3);
    let small = Waiter::queue(&bulkhead, 1);
    let other = Waiter::queue(&bulkhead, 1);
    drop(three);
    let (small, other) = (small.granted(), other.granted());
    assert_metrics(bulkhead.metrics(), 0, 3, 3, 0);
    drop((one, small, other));
    assert_quiescent(&bulkhead, 3);
}

#[test]
fn granted_weighted_acquire_dropped_unpolled_returns_every_permit() {
    let bulkhead = waiting(3);
    let all = bulkhead.try_acquire_many(3).unwrap();
    let three = Waiter::queue(&bulkhead, 3);
    let behind = Waiter::queue(&bulkhead, 2);
    drop(all);
    assert!(three.woken());
    drop(three); // granted, never polled: its 3 permits pass on
    drop(behind.granted());
    assert_quiescent(&bulkhead, 3);
}

#[test]
fn weighted_head_timed_out_by_the_timer_serves_the_waiters_behind() {
    with_hang_guard(|| {
        let bulkhead = Bulkhead::new("weighted", limit_wait(3, Duration::from_millis(20)));
        let one = bulkhead.try_acquire().unwrap();
        let mut three = Waiter::queue(&bulkhead, 3);
        // A new max wait applies to waits that start afterwards: the waiter behind outlasts
        // the head.
        bulkhead.change_config(limit_wait(3, LONG_WAIT));
        let small = Waiter::queue(&bulkhead, 1);
        wait_until("the timer to withdraw the head", || three.woken());
        match three.poll() {
            Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::WaitTimedOut),
            other => panic!("expected a timeout, got {other:?}"),
        }
        // The head's poll ran the drain the timer owed: the waiter for 1 is in.
        let small = small.granted();
        drop((one, small));
        assert_quiescent(&bulkhead, 3);
    });
}

#[test]
fn weighted_head_timed_out_then_dropped_unpolled_serves_the_waiters_behind() {
    with_hang_guard(|| {
        let bulkhead = Bulkhead::new("weighted", limit_wait(3, Duration::from_millis(20)));
        let one = bulkhead.try_acquire().unwrap();
        let three = Waiter::queue(&bulkhead, 3);
        bulkhead.change_config(limit_wait(3, LONG_WAIT));
        let small = Waiter::queue(&bulkhead, 1);
        wait_until("the timer to withdraw the head", || three.woken());
        drop(three);
        let small = small.granted();
        drop((one, small));
        assert_quiescent(&bulkhead, 3);
    });
}

#[test]
fn sync_weighted_wait_times_out_and_takes_nothing() {
    let config = limit_wait(3, Duration::from_millis(5));
    let bulkhead = Bulkhead::new("weighted", config);
    let one = bulkhead.try_acquire().unwrap();
    let err = bulkhead.acquire_many(3).unwrap_err();
    assert_eq!(err.reason(), RejectReason::WaitTimedOut);
    assert!(err.waited() >= Duration::from_millis(5));
    assert_metrics(bulkhead.metrics(), 2, 3, 1, 0);
    drop(one);
    assert_quiescent(&bulkhead, 3);
}

#[test]
fn close_refuses_weighted_waiters_and_loses_nothing() {
    let bulkhead = waiting(4);
    let one = bulkhead.try_acquire().unwrap();
    let four = Waiter::queue(&bulkhead, 4);
    let two = Waiter::queue(&bulkhead, 2);
    bulkhead.close();
    four.refused(RejectReason::Closed);
    two.refused(RejectReason::Closed);
    assert_eq!(bulkhead.try_acquire_many(1).unwrap_err().reason(), RejectReason::Closed);
    assert_eq!(bulkhead.try_acquire_many(0).unwrap_err().reason(), RejectReason::Closed);
    drop(one);
    assert!(bulkhead.wait_drained(Duration::ZERO));
    assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
}

// ---- above the limit ---------------------------------------------------------------------

#[test]
fn request_above_the_limit_is_refused_at_once_by_every_form() {
    let bulkhead = shared("weighted", limit_wait(3, LONG_WAIT));
    for n in [4, 1 << 30, u32::MAX] {
        let err = bulkhead.try_acquire_many(n).unwrap_err();
        assert_eq!((err.reason(), err.waited()), (RejectReason::ExceedsLimit, Duration::ZERO));
        assert_eq!(err.max_concurrent_calls(), 3);
        assert!(err.to_string().contains("exceeds the limit"), "{err}");
        let err = bulkhead.acquire_many(n).unwrap_err();
        assert_eq!((err.reason(), err.waited()), (RejectReason::ExceedsLimit, Duration::ZERO));
        assert_eq!(
            bulkhead.try_acquire_many_owned(n).unwrap_err().reason(),
            RejectReason::ExceedsLimit
        );
        let mut waiter = Waiter::new(&bulkhead, n);
        match waiter.poll() {
            Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::ExceedsLimit),
            other => panic!("expected a refusal on the first poll, got {other:?}"),
        }
        let (_, waker) = CountingWaker::new();
        let mut owned = Box::pin(bulkhead.acquire_many_owned_async(n));
        let Poll::Ready(Err(err)) = poll_once(&mut owned, &waker) else { panic!("queued") };
        assert_eq!(err.reason(), RejectReason::ExceedsLimit);
    }
    // Even while full and with waiters queued: the reason says what is wrong.
    let all = bulkhead.try_acquire_many(3).unwrap();
    let queued = Waiter::queue(&bulkhead, 1);
    assert_eq!(bulkhead.try_acquire_many(4).unwrap_err().reason(), RejectReason::ExceedsLimit);
    drop(all);
    drop(queued.granted());
    assert_quiescent(&bulkhead, 3);
}

#[test]
fn shrink_below_the_heads_request_refuses_it_and_serves_the_rest() {
    let bulkhead = waiting(4);
    let all = bulkhead.try_acquire_many(4).unwrap();
    let three = Waiter::queue(&bulkhead, 3);
    let one = Waiter::queue(&bulkhead, 1);
    bulkhead.change_config(limit_wait(2, LONG_WAIT));
    three.refused(RejectReason::ExceedsLimit);
    assert!(!one.woken(), "4 in flight, limit 2: the debt comes first");
    assert_metrics(bulkhead.metrics(), 0, 2, 4, 1);
    drop(all);
    drop(one.granted());
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn shrink_refuses_a_waiting_sync_head_above_the_new_limit() {
    with_hang_guard(|| {
        let bulkhead = shared("weighted", limit_wait(4, LONG_WAIT));
        let held = bulkhead.try_acquire_owned().unwrap();
        let bh = Arc::clone(&bulkhead);
        let sync = thread::spawn(move || bh.acquire_many(4).map(|p| p.num_permits()));
        wait_for_waiters(&bulkhead, 1);
        bulkhead.change_config(limit_wait(3, LONG_WAIT));
        assert_eq!(join_guarded(sync).unwrap_err().reason(), RejectReason::ExceedsLimit);
        drop(held);
        assert_quiescent(&bulkhead, 3);
    });
}

#[test]
fn a_waiter_deeper_than_the_head_that_a_shrink_leaves_unable_to_fit_is_refused_at_once() {
    // Issue 29 (work conservation): a request that can never be granted under the current
    // limit is refused as soon as the limit moves, wherever it stands in the queue; it used
    // to wait until it reached the head. Growth later admits new requests, not it.
    let bulkhead = waiting(4);
    let all = bulkhead.try_acquire_many(4).unwrap();
    let one = Waiter::queue(&bulkhead, 1);
    let three = Waiter::queue(&bulkhead, 3);
    bulkhead.change_config(limit_wait(2, LONG_WAIT));
    three.refused(RejectReason::ExceedsLimit);
    assert!(!one.woken(), "the head for 1 fits the new limit: it waits");
    bulkhead.change_config(limit_wait(8, LONG_WAIT));
    let one = one.granted();
    drop((all, one));
    assert_quiescent(&bulkhead, 8);
}

#[test]
fn growth_serves_weighted_waiters_in_order() {
    let bulkhead = waiting(3);
    let all = bulkhead.try_acquire_many(3).unwrap();
    let three = Waiter::queue(&bulkhead, 3);
    let two = Waiter::queue(&bulkhead, 2);
    bulkhead.change_config(limit_wait(5, LONG_WAIT));
    assert!(!three.woken() && !two.woken(), "2 new permits: too few for the head");
    bulkhead.change_config(limit_wait(8, LONG_WAIT));
    let (three, two) = (three.granted(), two.granted());
    drop((all, three, two));
    assert_quiescent(&bulkhead, 8);
}

// ---- n == 0 ------------------------------------------------------------------------------

#[test]
fn zero_permits_are_granted_at_once_even_when_full_or_queued() {
    let bulkhead = shared("weighted", limit_wait(1, LONG_WAIT));
    let all = bulkhead.try_acquire().unwrap();
    let queued = Waiter::queue(&bulkhead, 1);
    let empty = bulkhead.try_acquire_many(0).unwrap();
    assert_eq!(empty.num_permits(), 0);
    let blocking = bulkhead.acquire_many(0).unwrap();
    let owned = bulkhead.try_acquire_many_owned(0).unwrap();
    let mut fut = Waiter::new(&bulkhead, 0);
    let Poll::Ready(Ok(async_empty)) = fut.poll() else { panic!("an empty acquire queued") };
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 1);
    drop((empty, blocking, owned, async_empty));
    assert!(!queued.woken(), "an empty permit releases nothing");
    drop(all);
    drop(queued.granted());
    assert_quiescent(&bulkhead, 1);
}

// ---- split and merge (tokio's merge / split tests) ---------------------------------------

#[test]
fn merge_keeps_the_slots_until_the_merged_permit_drops() {
    let bulkhead = Bulkhead::new("weighted", limit(3));
    {
        let mut p1 = bulkhead.try_acquire().unwrap();
        assert_eq!(available(&bulkhead), 2);
        let p2 = bulkhead.try_acquire_many(2).unwrap();
        assert_eq!(available(&bulkhead), 0);
        p1.merge(p2);
        assert_eq!((available(&bulkhead), p1.num_permits()), (0, 3));
    }
    assert_quiescent(&bulkhead, 3);
}

#[test]
#[should_panic(expected = "merging permits of two bulkheads")]
fn merge_unrelated_permits_panics() {
    let a = Bulkhead::new("a", limit(3));
    let b = Bulkhead::new("b", limit(3));
    let mut p1 = a.try_acquire().unwrap();
    p1.merge(b.try_acquire().unwrap());
}

#[test]
fn merge_unrelated_permits_panics_and_loses_nothing() {
    let a = Bulkhead::new("a", limit(3));
    let b = Bulkhead::new("b", limit(3));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut p1 = a.try_acquire_many(2).unwrap();
        p1.merge(b.try_acquire_many(3).unwrap());
    }));
    assert!(caught.is_err());
    assert_quiescent(&a, 3);
    assert_quiescent(&b, 3);
}

#[test]
fn split_moves_slots_between_guards() {
    let bulkhead = Bulkhead::new("weighted", limit(5));
    let mut p1 = bulkhead.try_acquire_many(3).unwrap();
    assert_eq!((available(&bulkhead), p1.num_permits()), (2, 3));
    let mut p2 = p1.split(1).unwrap();
    assert_eq!(available(&bulkhead), 2);
    assert_eq!((p1.num_permits(), p2.num_permits()), (2, 1));
    let p3 = p1.split(0).unwrap();
    assert_eq!(p3.num_permits(), 0);
    drop(p1);
    assert_eq!(available(&bulkhead), 4);
    let p4 = p2.split(1).unwrap();
    assert_eq!((p2.num_permits(), p4.num_permits()), (0, 1));
    assert!(p2.split(1).is_none());
    assert_eq!(p2.num_permits(), 0, "a failed split changes nothing");
    drop(p2);
    assert_eq!(available(&bulkhead), 4);
    drop(p3);
    assert_eq!(available(&bulkhead), 4);
    drop(p4);
    assert_quiescent(&bulkhead, 5);
}

#[test]
fn owned_split_and_merge_cross_threads() {
    let bulkhead = shared("weighted", limit(5));
    let mut p1 = bulkhead.try_acquire_many_owned(3).unwrap();
    let p2 = p1.split(2).unwrap();
    assert_eq!((p1.num_permits(), p2.num_permits()), (1, 2));
    let p2 = thread::spawn(move || p2).join().unwrap();
    p1.merge(p2);
    assert_eq!((p1.num_permits(), available(&bulkhead)), (3, 2));
    assert!(p1.split(4).is_none());
    let all = p1.split(3).unwrap();
    assert_eq!(p1.num_permits(), 0);
    drop(p1);
    assert_eq!(available(&bulkhead), 2);
    drop(all);
    assert_quiescent(&bulkhead, 5);
}

#[test]
#[should_panic(expected = "merging permits of two bulkheads")]
fn owned_merge_unrelated_permits_panics() {
    let a = shared("a", limit(3));
    let b = shared("b", limit(3));
    let mut p1 = a.try_acquire_owned().unwrap();
    p1.merge(b.try_acquire_owned().unwrap());
}

#[test]
fn counters_count_guards_through_split_and_merge() {
    let bulkhead = Bulkhead::new("weighted", limit(4));
    bulkhead.enable_counters();
    let mut batch = bulkhead.try_acquire_many(3).unwrap();
    let part = batch.split(1).unwrap();
    batch.merge(part);
    assert_eq!(bulkhead.try_acquire_many(5).unwrap_err().reason(), RejectReason::ExceedsLimit);
    let m = bulkhead.metrics();
    assert_eq!((m.calls_permitted(), m.calls_finished()), (2, 1));
    assert_eq!(m.calls_rejected(RejectReason::ExceedsLimit), 1);
    drop(batch);
    let m = bulkhead.metrics();
    assert_eq!((m.calls_permitted(), m.calls_finished()), (2, 2));
}

// ---- tokio: acquire_many (owned, async) and a threaded stress ----------------------------

#[tokio::test]
async fn owned_acquire_many_async_waits_for_the_released_batch() {
    let bulkhead = shared("weighted", limit_wait(42, LONG_WAIT));
    let permit32 = bulkhead.try_acquire_many_owned(32).unwrap();
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let bh = Arc::clone(&bulkhead);
    let task = tokio::spawn(async move {
        let _permit10 = bh.acquire_many_owned_async(10).await.unwrap();
        sender.send(()).unwrap();
        let _permit32 = bh.acquire_many_owned_async(32).await.unwrap();
    });
    receiver.await.unwrap();
    drop(permit32);
    tokio::time::timeout(HANG_GUARD, task).await.expect("hang guard").unwrap();
    assert_quiescent(&bulkhead, 42);
}

#[test]
fn threads_acquiring_random_weights_never_exceed_the_limit() {
    with_hang_guard(|| {
        const LIMIT: usize = 6;
        let bulkhead = shared("weighted", limit_wait(LIMIT, LONG_WAIT));
        let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..4u64)
            .map(|seed| {
                let bulkhead = Arc::clone(&bulkhead);
                let inside = Arc::clone(&inside);
                thread::spawn(move || {
                    use std::sync::atomic::Ordering::SeqCst;
                    let mut rng = XorShift::new(seed + 1);
                    for _ in 0..300 {
                        let n = rng.below(LIMIT as u64 + 1) as u32;
                        let permit = bulkhead.acquire_many(n).expect("unbounded wait");
                        let now = inside.fetch_add(n as usize, SeqCst) + n as usize;
                        assert!(now <= LIMIT, "{now} slots in use, limit {LIMIT}");
                        thread::yield_now();
                        inside.fetch_sub(n as usize, SeqCst);
                        drop(permit);
                    }
                })
            })
            .collect();
        for thread in threads {
            join_guarded(thread);
        }
        assert_quiescent(&bulkhead, LIMIT);
    });
}

/// A config with a limit, for the `BulkheadConfig` import.
#[test]
fn default_config_admits_a_batch_of_its_whole_limit() {
    let bulkhead = Bulkhead::new("weighted", BulkheadConfig::default());
    let all = bulkhead.try_acquire_many(BulkheadConfig::DEFAULT_MAX_CONCURRENT_CALLS as u32);
    assert_eq!(all.unwrap().num_permits(), 25);
}

/// Found by the ops fuzzer's model: a head for 1 at a limit shrunk to 0 (it waits for
/// growth) with a waiter for 3 behind it. When the head leaves, the waiter for 3 is at the
/// head above the limit with nothing in flight: no release will ever come, so the head's
/// withdrawal must refuse it at once.
#[test]
fn a_shrink_to_zero_refuses_weighted_waiters_and_pauses_the_rest() {
    // A limit of 0 pauses: a waiter for 1 waits for growth; a waiter for 3 can never be
    // granted under it and is refused at once (issue 29: it used to wait for the head to
    // leave), whether it stood behind the head or not.
    let bulkhead = waiting(3);
    let all = bulkhead.try_acquire_many(3).unwrap();
    let one = Waiter::queue(&bulkhead, 1);
    let three = Waiter::queue(&bulkhead, 3);
    bulkhead.change_config(limit_wait(0, LONG_WAIT));
    three.refused(RejectReason::ExceedsLimit);
    drop(all);
    assert!(!one.woken(), "limit 0: the head for 1 waits for growth");
    drop(one);
    assert_quiescent(&bulkhead, 0);
}

/// The weighted request rides in the acquire futures without growing them: they stay at
/// 56 bytes on 64-bit targets (docs/performance.md's waiting path quotes the figure).
#[test]
#[cfg(target_pointer_width = "64")]
fn acquire_futures_keep_their_size() {
    assert_eq!(std::mem::size_of::<bulkhead::Acquire<'static>>(), 56);
    assert_eq!(std::mem::size_of::<bulkhead::AcquireOwned>(), 56);
}
