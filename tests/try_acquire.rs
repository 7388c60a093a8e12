//! `try_acquire` and `try_acquire_owned`: never wait, reject with `Full`, never barge past a
//! queued waiter.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, RejectReason};
use common::*;

#[test]
fn try_acquire_when_free_grants_until_limit() {
    let bulkhead = Bulkhead::new("try-free", limit(5));
    let permits: Vec<_> = (0..5)
        .map(|i| bulkhead.try_acquire().unwrap_or_else(|e| panic!("permit {i} refused: {e}")))
        .collect();
    assert_metrics(bulkhead.metrics(), 0, 5, 5, 0);
    let err = bulkhead.try_acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full);
    drop(permits);
    assert_quiescent(&bulkhead, 5);
}

#[test]
fn try_acquire_when_full_rejects_full_with_zero_wait() {
    let bulkhead = Bulkhead::new("try-full", limit(1));
    let _held = bulkhead.try_acquire().unwrap();
    let err = bulkhead.try_acquire().unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(err.waited(), Duration::ZERO);
    assert_eq!(err.bulkhead_name(), "try-full");
    assert_eq!(err.max_concurrent_calls(), 1);
    assert!(
        err.to_string()
            .starts_with("Bulkhead 'try-full' is full and does not permit further calls"),
        "{err}"
    );
    // The rejection changed nothing.
    assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
}

#[test]
fn try_acquire_when_closed_rejects_full() {
    let bulkhead = Bulkhead::new("try-closed", limit(0));
    for _ in 0..3 {
        let err = bulkhead.try_acquire().unwrap_err();
        assert_eq!(err.reason(), RejectReason::Full);
        assert_eq!(err.waited(), Duration::ZERO);
        assert_eq!(err.max_concurrent_calls(), 0);
    }
    assert_quiescent(&bulkhead, 0);
}

#[test]
fn try_acquire_with_max_wait_configured_still_never_waits() {
    with_hang_guard(|| {
        let bulkhead = Bulkhead::new("try-never-waits", limit_wait(1, LONG_WAIT));
        let _held = bulkhead.try_acquire().unwrap();
        let err = bulkhead.try_acquire().unwrap_err();
        assert_eq!(err.reason(), RejectReason::Full);
        assert_eq!(err.waited(), Duration::ZERO);
        assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    });
}

#[test]
fn try_acquire_after_release_grants_again() {
    let bulkhead = Bulkhead::new("try-again", limit(1));
    for _ in 0..100 {
        let permit = bulkhead.try_acquire().unwrap();
        assert!(bulkhead.try_acquire().is_err());
        drop(permit);
    }
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn try_acquire_while_waiter_queued_rejects_after_release_to_waiter() {
    with_hang_guard(|| {
        let bulkhead = shared("try-no-barging", limit(1));
        let held = bulkhead.try_acquire().unwrap();
        let (granted_tx, granted_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let waiter = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || {
                let permit = bulkhead.acquire_timeout(LONG_WAIT).expect("waiter is granted");
                granted_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                drop(permit);
            })
        };
        wait_for_waiters(&bulkhead, 1);
        // Queued behind nobody but the waiter: a newcomer must not overtake it.
        assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
        drop(held); // hands the permit straight to the waiter
        assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
        granted_rx.recv_timeout(HANG_GUARD).expect("waiter granted");
        assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
        assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
        release_tx.send(()).unwrap();
        join_guarded(waiter);
        assert!(bulkhead.try_acquire().is_ok());
        assert_quiescent(&bulkhead, 1);
    });
}

/// A spinning `try_acquire` racing a release that hands the permit to a queued waiter must
/// never win: the released permit belongs to the waiter.
#[test]
fn try_acquire_racing_release_to_waiter_never_barges() {
    with_hang_guard(|| {
        let bulkhead = shared("try-race-barging", limit(1));
        for round in 0..100 {
            let held = bulkhead.try_acquire().unwrap();
            let waiter_granted = Arc::new(AtomicBool::new(false));
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let waiter = {
                let bulkhead = Arc::clone(&bulkhead);
                let granted = Arc::clone(&waiter_granted);
                thread::spawn(move || {
                    let permit = bulkhead.acquire_timeout(LONG_WAIT).expect("waiter is granted");
                    granted.store(true, Ordering::SeqCst);
                    release_rx.recv().unwrap();
                    drop(permit);
                })
            };
            wait_for_waiters(&bulkhead, 1);
            let barged = Arc::new(AtomicUsize::new(0));
            let spinning = Arc::new(AtomicBool::new(false));
            let spinner = {
                let bulkhead = Arc::clone(&bulkhead);
                let granted = Arc::clone(&waiter_granted);
                let barged = Arc::clone(&barged);
                let spinning = Arc::clone(&spinning);
                thread::spawn(move || {
                    spinning.store(true, Ordering::SeqCst);
                    // Spin until the waiter has its permit, then a little longer.
                    let mut after = 0;
                    while after < 1_000 {
                        if granted.load(Ordering::SeqCst) {
                            after += 1;
                        }
                        if let Ok(permit) = bulkhead.try_acquire() {
                            barged.fetch_add(1, Ordering::SeqCst);
                            drop(permit);
                        }
                    }
                })
            };
            wait_until("spinner started", || spinning.load(Ordering::SeqCst));
            drop(held);
            join_guarded(spinner);
            assert_eq!(barged.load(Ordering::SeqCst), 0, "round {round}: try_acquire barged");
            release_tx.send(()).unwrap();
            join_guarded(waiter);
            assert_quiescent(&bulkhead, 1);
        }
    });
}

#[test]
fn try_acquire_while_waiter_cap_reached_rejects_full() {
    with_hang_guard(|| {
        let bulkhead = shared("try-capped", limit_wait_cap(1, LONG_WAIT, 1));
        let held = bulkhead.try_acquire().unwrap();
        let waiter = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || bulkhead.acquire().map(drop).map_err(|e| e.reason()))
        };
        wait_for_waiters(&bulkhead, 1);
        let err = bulkhead.try_acquire().unwrap_err();
        assert_eq!(err.reason(), RejectReason::Full);
        assert_eq!(err.waited(), Duration::ZERO);
        drop(held);
        assert_eq!(join_guarded(waiter), Ok(()));
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn try_acquire_owned_when_free_moves_to_another_thread() {
    let bulkhead = shared("try-owned", limit(2));
    let permit = bulkhead.try_acquire_owned().unwrap();
    assert!(Arc::ptr_eq(permit.bulkhead(), &bulkhead));
    assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    let worker = thread::spawn(move || drop(permit));
    join_guarded(worker);
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn try_acquire_owned_when_full_rejects_full() {
    let bulkhead = shared("try-owned-full", limit(1));
    let _held = bulkhead.try_acquire_owned().unwrap();
    let err = bulkhead.try_acquire_owned().unwrap_err();
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(err.waited(), Duration::ZERO);
    assert_eq!(err.bulkhead_name(), "try-owned-full");
    let closed = shared("try-owned-closed", limit(0));
    assert_eq!(closed.try_acquire_owned().unwrap_err().reason(), RejectReason::Full);
}

#[test]
fn try_acquire_under_contention_fails_only_when_no_permit_is_free() {
    // Two threads share a limit of 2, each holding at most one permit at a time: a permit is
    // always free for each of them, so no attempt may fail (a failed CAS must retry, not
    // reject).
    with_hang_guard(|| {
        let bulkhead = shared("try-contention", limit(2));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let bulkhead = Arc::clone(&bulkhead);
                thread::spawn(move || {
                    for i in 0..50_000 {
                        let permit = bulkhead
                            .try_acquire()
                            .unwrap_or_else(|e| panic!("attempt {i} refused: {e}"));
                        drop(permit);
                    }
                })
            })
            .collect();
        for worker in workers {
            join_guarded(worker);
        }
        assert_quiescent(&bulkhead, 2);
    });
}
