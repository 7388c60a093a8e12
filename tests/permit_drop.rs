//! Permits are guards: dropping one releases its slot exactly once, wherever it is dropped.

mod common;

use std::sync::{mpsc, Arc};
use std::thread;

use bulkhead::Bulkhead;
use common::*;

#[test]
fn permit_drop_releases_exactly_once() {
    let bulkhead = Bulkhead::new("drop-once", limit(3));
    let a = bulkhead.try_acquire().unwrap();
    let b = bulkhead.try_acquire().unwrap();
    assert_metrics(bulkhead.metrics(), 1, 3, 2, 0);
    drop(a);
    assert_metrics(bulkhead.metrics(), 2, 3, 1, 0);
    drop(b);
    assert_quiescent(&bulkhead, 3);
}

#[test]
fn permit_scope_end_releases() {
    let bulkhead = Bulkhead::new("drop-scope", limit(1));
    {
        let _permit = bulkhead.try_acquire().unwrap();
        assert!(bulkhead.try_acquire().is_err());
    }
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn permit_bulkhead_names_its_bulkhead() {
    let bulkhead = Bulkhead::new("drop-names", limit(1));
    let permit = bulkhead.try_acquire().unwrap();
    assert!(std::ptr::eq(permit.bulkhead(), &bulkhead));
    assert!(format!("{permit:?}").contains("drop-names"));
}

#[test]
fn permit_moved_to_scoped_thread_releases_there() {
    let bulkhead = Bulkhead::new("drop-scoped-thread", limit(2));
    let permit = bulkhead.try_acquire().unwrap();
    thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(permit.bulkhead().metrics().in_flight_calls(), 1);
            drop(permit);
        });
    });
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn permits_dropped_in_any_order_all_come_back() {
    let bulkhead = Bulkhead::new("drop-order", limit(16));
    let mut rng = XorShift::new(0xd20b);
    for _ in 0..50 {
        let mut permits: Vec<_> = (0..16).map(|_| bulkhead.try_acquire().unwrap()).collect();
        assert!(bulkhead.try_acquire().is_err());
        while !permits.is_empty() {
            let i = rng.below(permits.len() as u64) as usize;
            drop(permits.swap_remove(i));
            assert_eq!(bulkhead.metrics().in_flight_calls(), permits.len());
        }
        assert_quiescent(&bulkhead, 16);
    }
}

#[test]
fn owned_permit_drop_releases_exactly_once() {
    let bulkhead = shared("drop-owned", limit(2));
    let a = bulkhead.try_acquire_owned().unwrap();
    let b = bulkhead.acquire_owned().unwrap();
    assert_metrics(bulkhead.metrics(), 0, 2, 2, 0);
    drop(a);
    assert_metrics(bulkhead.metrics(), 1, 2, 1, 0);
    drop(b);
    assert_quiescent(&bulkhead, 2);
}

#[test]
fn owned_permit_keeps_bulkhead_alive() {
    let bulkhead = shared("drop-owned-alive", limit(1));
    let permit = bulkhead.try_acquire_owned().unwrap();
    let weak = Arc::downgrade(&bulkhead);
    drop(bulkhead);
    let alive = weak.upgrade().expect("the permit keeps the bulkhead alive");
    assert_eq!(alive.metrics().in_flight_calls(), 1);
    drop(alive);
    drop(permit);
    assert!(weak.upgrade().is_none(), "the last permit released the bulkhead");
}

#[test]
fn owned_permit_dropped_on_another_thread_releases() {
    let bulkhead = shared("drop-owned-thread", limit(4));
    let permits: Vec<_> = (0..4).map(|_| bulkhead.try_acquire_owned().unwrap()).collect();
    let workers: Vec<_> = permits.into_iter().map(|p| thread::spawn(move || drop(p))).collect();
    for worker in workers {
        join_guarded(worker);
    }
    assert_quiescent(&bulkhead, 4);
}

#[test]
fn owned_permit_debug_names_its_bulkhead() {
    let bulkhead = shared("drop-owned-debug", limit(1));
    let permit = bulkhead.try_acquire_owned().unwrap();
    assert!(format!("{permit:?}").contains("drop-owned-debug"));
}

#[test]
fn permit_drop_with_waiter_queued_hands_slot_over() {
    with_hang_guard(|| {
        let bulkhead = shared("drop-hand-over", limit_wait(1, LONG_WAIT));
        let held = bulkhead.try_acquire().unwrap();
        let (granted_tx, granted_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let waiter = {
            let bulkhead = Arc::clone(&bulkhead);
            thread::spawn(move || {
                let permit = bulkhead.acquire().expect("granted");
                granted_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                drop(permit);
            })
        };
        wait_for_waiters(&bulkhead, 1);
        drop(held);
        // The slot went to the waiter, not back to the pool: nothing is free until it is done.
        assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
        assert!(bulkhead.try_acquire().is_err());
        granted_rx.recv_timeout(HANG_GUARD).expect("waiter granted");
        assert_metrics(bulkhead.metrics(), 0, 1, 1, 0);
        release_tx.send(()).unwrap();
        join_guarded(waiter);
        assert_quiescent(&bulkhead, 1);
    });
}

#[test]
fn permit_drop_during_unwind_releases() {
    let bulkhead = Bulkhead::new("drop-unwind", limit(1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _permit = bulkhead.try_acquire().unwrap();
        panic!("boom");
    }));
    assert!(result.is_err());
    assert_quiescent(&bulkhead, 1);
}
