//! `max_waiting_calls`: `Some(0)` lets nobody wait; with `Some(k)` the caller that would be
//! waiter k+1 is rejected at once with `TooManyWaiting` while the k waiters keep waiting.

mod common;

use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, RejectReason};
use common::*;

#[test]
fn max_waiting_zero_on_full_bulkhead_rejects_at_once() {
    with_hang_guard(|| {
        let bulkhead = shared("mw-zero", limit_wait_cap(1, LONG_WAIT, 0));
        let _held = bulkhead.try_acquire().unwrap();
        for err in [
            bulkhead.acquire().unwrap_err(),
            bulkhead.acquire_timeout(LONG_WAIT).unwrap_err(),
            bulkhead.acquire_owned().unwrap_err(),
            bulkhead.call(|| unreachable!("not run")).unwrap_err(),
        ] {
            assert_eq!(err.reason(), RejectReason::TooManyWaiting);
            assert_eq!(err.waited(), Duration::ZERO);
            assert_eq!(err.max_concurrent_calls(), 1);
            assert_eq!(
                err.to_string(),
                "Bulkhead 'mw-zero' is full and already has as many callers waiting as it allows \
                 (too many waiting; max concurrent calls 1)"
            );
        }
        assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
    });
}

#[test]
fn max_waiting_zero_with_free_permit_still_grants() {
    let bulkhead = Bulkhead::new("mw-zero-free", limit_wait_cap(2, LONG_WAIT, 0));
    let a = bulkhead.acquire().unwrap();
    let b = bulkhead.acquire().unwrap();
    assert_metrics(bulkhead.metrics(), 0, 2, 2, 0);
    drop((a, b));
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn max_waiting_zero_async_rejects_at_once() {
    let bulkhead = Bulkhead::new("mw-zero-async", limit_wait_cap(1, LONG_WAIT, 0));
    let _held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut fut = Box::pin(bulkhead.acquire_async());
    match poll_once(&mut fut, &waker) {
        Poll::Ready(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::TooManyWaiting);
            assert_eq!(err.waited(), Duration::ZERO);
        }
        Poll::Ready(Ok(_)) => panic!("granted on a full bulkhead"),
        Poll::Pending => panic!("queued although nobody may wait"),
    }
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

/// With k = 3: three callers wait, the fourth is refused at once, and the three are then
/// served.
#[test]
fn max_waiting_k_rejects_waiter_k_plus_one_at_once() {
    with_hang_guard(|| {
        let k = 3;
        let bulkhead = shared("mw-k", limit_wait_cap(1, LONG_WAIT, k));
        let held = bulkhead.try_acquire().unwrap();
        let waiters: Vec<_> = (0..k)
            .map(|i| {
                let bh = Arc::clone(&bulkhead);
                let waiter = thread::spawn(move || bh.acquire().map(drop));
                wait_for_waiters(&bulkhead, i + 1);
                waiter
            })
            .collect();
        let err = bulkhead.acquire().unwrap_err();
        assert_eq!(err.reason(), RejectReason::TooManyWaiting);
        assert_eq!(err.waited(), Duration::ZERO);
        let err = bulkhead.acquire_timeout(LONG_WAIT).unwrap_err();
        assert_eq!(err.reason(), RejectReason::TooManyWaiting);
        // The k waiters are untouched.
        assert_metrics(bulkhead.metrics(), 0, 1, 1, k);
        assert!(waiters.iter().all(|w| !w.is_finished()));
        drop(held);
        for waiter in waiters {
            join_guarded(waiter).expect("a capped waiter is served");
        }
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn max_waiting_k_counts_async_and_sync_waiters_together() {
    with_hang_guard(|| {
        let bulkhead = shared("mw-mixed", limit_wait_cap(1, LONG_WAIT, 2));
        let held = bulkhead.try_acquire().unwrap();
        let (_counter, waker) = CountingWaker::new();
        let mut queued = Box::pin(bulkhead.acquire_owned_async());
        assert!(poll_once(&mut queued, &waker).is_pending());
        let sync_waiter = {
            let bh = Arc::clone(&bulkhead);
            thread::spawn(move || bh.acquire().map(drop))
        };
        wait_for_waiters(&bulkhead, 2);
        // A third waiter of either kind is refused.
        let mut third = Box::pin(bulkhead.acquire_async());
        match poll_once(&mut third, &waker) {
            Poll::Ready(Err(err)) => assert_eq!(err.reason(), RejectReason::TooManyWaiting),
            other => panic!("third async waiter not refused: {:?}", other.map(|r| r.is_ok())),
        }
        assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::TooManyWaiting);
        drop(held);
        let permit = match poll_once(&mut queued, &waker) {
            Poll::Ready(result) => result.expect("the oldest waiter is granted"),
            Poll::Pending => panic!("the oldest waiter was not granted"),
        };
        drop(permit);
        join_guarded(sync_waiter).expect("granted");
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn max_waiting_k_frees_a_place_when_a_waiter_times_out() {
    with_hang_guard(|| {
        let bulkhead = shared("mw-place", limit_wait_cap(1, LONG_WAIT, 1));
        let held = bulkhead.try_acquire().unwrap();
        // The only place is taken by a short waiter, which gives up.
        let err = bulkhead.acquire_timeout(Duration::from_millis(2)).unwrap_err();
        assert_eq!(err.reason(), RejectReason::WaitTimedOut);
        // The place is free again.
        let waiter = {
            let bh = Arc::clone(&bulkhead);
            thread::spawn(move || bh.acquire().map(drop))
        };
        wait_for_waiters(&bulkhead, 1);
        assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::TooManyWaiting);
        drop(held);
        join_guarded(waiter).expect("granted");
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn max_waiting_k_frees_a_place_when_a_future_is_dropped() {
    let bulkhead = Bulkhead::new("mw-place-async", limit_wait_cap(1, LONG_WAIT, 1));
    let held = bulkhead.try_acquire().unwrap();
    let (_counter, waker) = CountingWaker::new();
    let mut first = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut first, &waker).is_pending());
    let mut refused = Box::pin(bulkhead.acquire_async());
    assert!(matches!(poll_once(&mut refused, &waker), Poll::Ready(Err(_))));
    drop(first);
    let mut second = Box::pin(bulkhead.acquire_async());
    assert!(poll_once(&mut second, &waker).is_pending(), "the freed place is taken");
    drop(held);
    assert!(matches!(poll_once(&mut second, &waker), Poll::Ready(Ok(_))));
}

#[test]
fn max_waiting_unset_lets_many_wait() {
    with_hang_guard(|| {
        let bulkhead = shared("mw-unbounded", limit_wait(1, LONG_WAIT));
        assert_eq!(bulkhead.config().max_waiting_calls(), None);
        let held = bulkhead.try_acquire().unwrap();
        let waiters: Vec<_> = (0..16)
            .map(|_| {
                let bh = Arc::clone(&bulkhead);
                thread::spawn(move || bh.acquire().map(drop))
            })
            .collect();
        wait_for_waiters(&bulkhead, 16);
        drop(held);
        for waiter in waiters {
            join_guarded(waiter).expect("granted");
        }
        assert_quiescent(&bulkhead, 1);
    });
}
